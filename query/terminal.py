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


def one_line(text: str, width: int = 100) -> str:
    """A cleaned, single-line preview of at most width characters."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."
