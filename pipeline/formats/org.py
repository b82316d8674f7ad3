"""An Org file read line by line: `*` headings, `#+TITLE`, src and example blocks fenced.

A heading's TODO keyword, priority cookie and trailing `:tags:` are dropped; other `#+KEY:` lines,
`# comments`, property drawers and `#+BEGIN_COMMENT` blocks are dropped; `#+BEGIN_SRC lang` and
`#+BEGIN_EXAMPLE` blocks become fenced code; other blocks (quote, center, verse) keep their text.
"""

from __future__ import annotations

import re

from pipeline.formats.decoding import decode
from pipeline.formats.outline import Extracted, Outline

_HEADING = re.compile(r"^(\*+)\s+(?:(?:TODO|DONE|NEXT|WAITING|CANCELLED)\s+)?(?:\[#[A-Z0-9]\]\s+)?(.*)$")
_TAGS = re.compile(r":[\w@#%:]+:")
_KEYWORD = re.compile(r"^\s*#\+(\w+):\s*(.*)$", re.IGNORECASE)
_BEGIN = re.compile(r"^\s*#\+begin_(\w+)\s*(\S*)", re.IGNORECASE)
_DRAWER = re.compile(r"^\s*:[\w-]+:\s*$")


def extract(data: bytes) -> Extracted:
    """The outline of an Org file under the rules in the module docstring."""
    lines = decode(data).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out = Outline()
    para: list[str] = []
    title: str | None = None

    def flush() -> None:
        _flush(para, out)

    drawers = _Drawers(lines)
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        heading = _HEADING.match(line)
        begin = _BEGIN.match(line)
        keyword = _KEYWORD.match(line)
        text = _heading_text(heading.group(2)) if heading else ""
        if text:
            flush()
            out.heading(len(heading.group(1)), text)  # type: ignore[union-attr]  # text: a heading matched
        elif begin:
            flush()
            i = _block(lines, i, begin, out)
        elif keyword:
            flush()
            if keyword.group(1).lower() == "title" and title is None:
                title = keyword.group(2)
        elif _DRAWER.match(line):
            flush()
            i = drawers.after(i, line)
        elif line.lstrip().startswith("# ") or line.strip() == "#" or not line.strip():
            flush()
        else:
            para.append(line)
    flush()
    return out.result(title)


def _block(lines: list[str], i: int, begin: re.Match[str], out: Outline) -> int:
    """Add the #+begin_ block opened above line i to out; the index of the line after its end."""
    kind = begin.group(1).lower()
    end = next((j for j in range(i, len(lines)) if re.match(rf"^\s*#\+end_{kind}\b", lines[j], re.I)),
               len(lines))
    if kind in ("src", "example"):
        out.code("\n".join(lines[i:end]), begin.group(2) if kind == "src" else "")
    elif kind != "comment":
        out.para("\n".join(lines[i:end]))
    return end + 1


def _heading_text(rest: str) -> str:
    """A heading's text without its trailing `:tags:` and spaces: the shortest text the old pattern's
    lazy `(.*?)(?:\\s+:tags:)?\\s*$` took, without backtracking over every split (quadratic)."""
    text = rest.rstrip()
    parts = text.rsplit(None, 1)
    if len(parts) == 2 and _TAGS.fullmatch(parts[1]):
        return parts[0]
    return text


class _Drawers:
    """Where each drawer ends: the next `:END:` line of each line, found in one pass from the end."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines
        self._next_end: list[int] | None = None

    def after(self, i: int, line: str) -> int:
        """The index of the line after the drawer that line (just above line i) opens; i for an :END:
        line or a drawer never closed (its line alone is dropped)."""
        if line.strip().lower() == ":end:":
            return i
        if self._next_end is None:
            self._next_end = [0] * (len(self._lines) + 1)
            following = len(self._lines)
            for j in range(len(self._lines) - 1, -1, -1):
                if self._lines[j].strip().lower() == ":end:":
                    following = j
                self._next_end[j] = following
            self._next_end[len(self._lines)] = following
        end = self._next_end[i] if i < len(self._lines) else len(self._lines)
        return i if end == len(self._lines) else end + 1


def _flush(para: list[str], out: Outline) -> None:
    """Add the lines gathered in para to out as one paragraph, and empty para."""
    if para:
        out.para("\n".join(para))
        para.clear()
