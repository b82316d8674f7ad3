"""Make indexed text safe to print: strip terminal control sequences and control characters."""

from __future__ import annotations

import re

from pipeline.text import without_controls

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte ESC sequences, 8-bit C1 CSI/OSC;
# then pipeline.text removes any remaining C0/C1 control character except newline and tab.
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


# Markup a reader of a preview does not want: HTML tags (`<abbr title=..>`), mkdocs/snippet includes
# (`{!> ../x.py !}`, `--8<-- "x"`), and entities, decoded (`&amp;` -> `&`).
_TAGS = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_INCLUDES = re.compile(r"\{!.*?!\}|--8<--\s*\"[^\"]*\"")


def preview_text(text: str) -> str:
    """text without tags, include directives and entities, as a preview shows it."""
    import html  # its entity table only when a preview is drawn (not for --json)

    return html.unescape(_INCLUDES.sub(" ", _TAGS.sub("", text)))


def preview(text: str, width: int = 100) -> str:
    """A section's one-line preview: markup stripped, then one_line."""
    return one_line(preview_text(text), width)


def one_line(text: str, width: int = 100) -> str:
    """text cleaned onto a single line of at most width characters, cut at a word when one is near."""
    flat = " ".join(clean(text).split())
    if len(flat) <= width:
        return flat
    cut = flat[: width - 3]
    space = cut.rfind(" ")
    if space >= width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "..."
