"""An AsciiDoc file read line by line: `=` headings, `[[id]]`/`[#id]` anchors, blocks by delimiter.

`= Title` is the document title and a level-1 heading, `== Section` level 2 and so on. Attribute
entries (`:toc:`), block attribute lines (`[source,python]`, `[NOTE]`), line comments and comment
blocks are dropped; listing and literal blocks (`----`, `....`) become fenced code (its language
from `[source,x]`); example, sidebar, quote and open blocks keep their text; a `|===` table
becomes one `a | b` line per source line; passthrough blocks and `include::` lines are dropped.
"""

from __future__ import annotations

import re

from pipeline.formats.decoding import decode
from pipeline.formats.outline import Extracted, Outline

_HEADING = re.compile(r"^(={1,6})\s+(\S.*)$")  # its trailing `=` and spaces are cut by _heading_text
_ANCHOR = re.compile(r"^\[\[([^\],]+)(?:,[^\]]*)?\]\]\s*$|^\[#([\w:.-]++)[^\]]*\]\s*$")
_ATTRIBUTE_ENTRY = re.compile(r"^:!?[\w-]+!?:")
_BLOCK_ATTRIBUTES = re.compile(r"^\[[^\]]*\]\s*$")
_SOURCE = re.compile(r"^\[(?:source)?,\s*([\w+#.-]+)")
_CODE_DELIMITERS = re.compile(r"^(-{4,}|\.{4,}|```+)\s*$")
_TEXT_DELIMITERS = re.compile(r"^(={4,}|\*{4,}|_{4,}|--)\s*$")
_DROPPED_DELIMITERS = re.compile(r"^(/{4,}|\+{4,})\s*$")
_TABLE = re.compile(r"^[|!,:]===\s*$")


def extract(data: bytes) -> Extracted:
    """The outline of an AsciiDoc file under the rules in the module docstring."""
    lines = decode(data).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out = Outline()
    para: list[str] = []
    anchor = language = ""
    title: str | None = None

    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        stripped = line.strip()
        heading = _HEADING.match(line)
        if heading:
            _flush(para, out)
            level = len(heading.group(1))
            text = _heading_text(heading.group(2))
            title = title or (text if level == 1 else None)
            out.heading(level, text, anchor)
            anchor = ""
        elif (found := _ANCHOR.match(stripped)) is not None:
            _flush(para, out)
            anchor = found.group(1) or found.group(2) or ""
        elif stripped.startswith("//") and not stripped.startswith("////"):
            continue
        elif _only_breaks(line, stripped):
            _flush(para, out)
        elif _BLOCK_ATTRIBUTES.match(stripped):
            _flush(para, out)
            source = _SOURCE.match(stripped)
            language = source.group(1) if source else ""
        elif (delimiter := _CODE_DELIMITERS.match(stripped) or _DROPPED_DELIMITERS.match(stripped)) is not None:
            _flush(para, out)
            i, language = _delimited(lines, i, stripped, delimiter.group(1), language, out), ""
        elif _TABLE.match(stripped):
            _flush(para, out)
            i = _table(lines, i, stripped, out)
        elif stripped.startswith(".") and len(stripped) > 1 and not stripped.startswith(".."):
            _flush(para, out)
            para.append(stripped[1:])  # a block title
            _flush(para, out)
        else:
            para.append(line)
    _flush(para, out)
    return out.result(title)


def _heading_text(rest: str) -> str:
    """A heading's text without its closing `=` run and spaces (`== Install ==` is Install), one
    character at least: what `(\\S.*?)\\s*=*\\s*$` matched, without its cubic backtracking."""
    text = rest.rstrip().rstrip("=").rstrip()
    return text or rest[:1]


def _only_breaks(line: str, stripped: str) -> bool:
    """Whether a line only ends the paragraph: an attribute entry, an include, a text block's delimiter, blank."""
    return (_ATTRIBUTE_ENTRY.match(line) is not None or stripped.startswith("include::")
            or _TEXT_DELIMITERS.match(stripped) is not None or not stripped)


def _delimited(lines: list[str], i: int, stripped: str, delimiter: str, language: str, out: Outline) -> int:
    """Add the delimited block opened above line i to out (code kept, others dropped); the line after it."""
    end = _block_end(lines, i, delimiter)
    if _CODE_DELIMITERS.match(stripped):
        out.code("\n".join(lines[i:end]), language)
    return end + 1


def _table(lines: list[str], i: int, stripped: str, out: Outline) -> int:
    """Add the table opened above line i to out as one paragraph of rows; the line after it."""
    end = _block_end(lines, i, stripped)
    rows = [[c.strip() for c in row.split("|") if c.strip()] for row in lines[i:end]]
    out.para("\n".join(" | ".join(cells) for cells in rows if cells))
    return end + 1


def _block_end(lines: list[str], start: int, delimiter: str) -> int:
    """The index of the line closing the block opened by delimiter (the end when unclosed)."""
    for j in range(start, len(lines)):
        if lines[j].strip() == delimiter:
            return j
    return len(lines)


def _flush(para: list[str], out: Outline) -> None:
    """Add the lines gathered in para to out as one paragraph, and empty para."""
    if para:
        out.para("\n".join(para))
        para.clear()
