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


def clean(text: str) -> str:
    """text without escape sequences or control characters (newlines and tabs kept)."""
    return without_controls(_SEQUENCES.sub("", text))


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
