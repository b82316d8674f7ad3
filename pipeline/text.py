"""Text primitives both sides share: the CJK character class and the cleaners of what is printed.

The chunker stores a chunk's CJK runs for the trigram table, and the query side finds the runs of
a query with the same class, so the two can never disagree about what a CJK character is.
"""

from __future__ import annotations

import functools
import re

# Chinese, Japanese and Korean: radicals, kana, bopomofo, hangul (jamo and syllables), CJK
# unified ideographs with extension A and the supplementary planes, compatibility ideographs and
# half-width katakana.
CJK_CHARACTER = (
    "[\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3131-\u318f\u31a0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)

# C0 controls but tab and newline, DEL, and the C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@functools.cache
def cjk_run() -> re.Pattern[str]:
    """A run of CJK characters (compiled on first use: ASCII text never needs it, and start-up skips it)."""
    return re.compile(CJK_CHARACTER + "+")


def is_cjk(text: str) -> bool:
    """Whether text contains a Chinese, Japanese or Korean character."""
    return not text.isascii() and cjk_run().search(text) is not None


def cjk_runs(text: str) -> list[str]:
    """The runs of Chinese, Japanese and Korean characters in text, in order."""
    return [] if text.isascii() else cjk_run().findall(text)


def without_controls(text: str) -> str:
    """text without control characters (C0 but tab and newline, DEL, C1)."""
    return _CONTROL.sub("", text)


# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte ESC sequences, 8-bit C1 CSI/OSC;
# then without_controls removes any remaining C0/C1 control character except newline and tab.
_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
)


# Bidirectional controls reorder what a terminal shows (a name ending `\u202egnp.exe` reads as
# `exe.png`): shown escaped, as the code point, wherever text is printed.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile("[\n\r\t\x0b\x0c\x85\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\u{ord(char):04x}")


def clean(text: str) -> str:
    """text without escape sequences or control characters (newlines and tabs kept), bidi controls escaped."""
    return _BIDI.sub(_escaped, without_controls(_SEQUENCES.sub("", text)))


def name(text: str) -> str:
    """A path or other name cleaned onto one line: line breaks and tabs escaped (`\\n`), so a file name
    can never forge a line of output (`failed: ...`), bidi controls escaped (`\\u202e`)."""
    return clean(_LINE_BREAKS.sub(_escaped, text))
