"""Text primitives both sides share: the CJK character class and the control-character cleaner.

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
