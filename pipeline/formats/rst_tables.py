"""rst tables too long for docutils' table parser, handed to it as literal blocks instead.

docutils parses a table into a grid of cells and nested-parses every cell: about 0.3 ms and several
KB a row, so a 150,000-row simple table (600 KB) took 41 s and 870 MB. A simple (`===  ===`) or grid
(`+---+`) table of more than MAX_TABLE_LINES source lines is written as a literal block at its own
indentation (a `::` line, then its lines indented): its text is indexed as code, in linear time.
"""

from __future__ import annotations

import re

MAX_TABLE_LINES = 2000
_SIMPLE_BORDER = re.compile(r"=+(?: +=+)+ *")  # docutils' simple_table_top_pat (two columns or more)
_GRID_BORDER = re.compile(r"\+-[-+]+-\+ *")  # docutils' grid_table_top_pat


def _simple_end(lines: list[str], start: int) -> int:
    """The index after a simple table whose top border is line start: past the border that a blank
    line or the end follows (the end of the text when none does)."""
    for j in range(start + 1, len(lines)):
        if _SIMPLE_BORDER.fullmatch(lines[j].strip()) and (j + 1 == len(lines) or not lines[j + 1].strip()):
            return j + 1
    return len(lines)


def _grid_end(lines: list[str], start: int) -> int:
    """The index after a grid table whose top border is line start: its run of `+`/`|` lines."""
    j = start + 1
    while j < len(lines) and lines[j].lstrip()[:1] in ("+", "|"):
        j += 1
    return j


def bound_tables(text: str) -> str:
    """text with each table over MAX_TABLE_LINES lines written as a literal block (text otherwise as given)."""
    if len(text) < MAX_TABLE_LINES:  # fewer characters than the lines a long table needs
        return text
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        end = i
        if _SIMPLE_BORDER.fullmatch(stripped):
            end = _simple_end(lines, i)
        elif _GRID_BORDER.fullmatch(stripped):
            end = _grid_end(lines, i)
        if end == i:
            out.append(line)
            i += 1
            continue
        if end - i <= MAX_TABLE_LINES:  # a table docutils reads; its own borders are not looked at again
            out.extend(lines[i:end])
            i = end
            continue
        indent = line[:len(line) - len(line.lstrip())]
        out.extend(["", indent + "::", ""])
        out.extend(indent + "    " + row if row.strip() else "" for row in lines[i:end])
        out.append("")
        i = end
    return "\n".join(out)
