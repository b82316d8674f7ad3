"""An AsciiDoc file read line by line: `=` headings, `[[id]]`/`[#id]` anchors, blocks by delimiter.

`= Title` is the document title and a level-1 heading, `== Section` level 2 and so on. Attribute
entries (`:toc:`), block attribute lines (`[source,python]`, `[NOTE]`), line comments and comment
blocks are dropped; listing and literal blocks (`----`, `....`) become fenced code (its language
from `[source,x]`); example, sidebar, quote and open blocks keep their text; a `|===` table
becomes one `a | b` line per source line; passthrough blocks and `include::` lines are dropped.
"""

from __future__ import annotations

import re

from pipeline.files import decode
from pipeline.formats.outline import Extracted, Outline

_HEADING = re.compile(r"^(={1,6})\s+(\S.*?)\s*=*\s*$")
_ANCHOR = re.compile(r"^\[\[([^\],]+)(?:,[^\]]*)?\]\]\s*$|^\[#([\w:.-]+)[^\]]*\]\s*$")
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

    def flush() -> None:
        if para:
            out.para("\n".join(para))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        stripped = line.strip()
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            title = title or (heading.group(2) if level == 1 else None)
            out.heading(level, heading.group(2), anchor)
            anchor = ""
        elif (found := _ANCHOR.match(stripped)) is not None:
            flush()
            anchor = found.group(1) or found.group(2) or ""
        elif stripped.startswith("//") and not stripped.startswith("////"):
            continue
        elif _ATTRIBUTE_ENTRY.match(line) or stripped.startswith("include::"):
            flush()
        elif _BLOCK_ATTRIBUTES.match(stripped):
            flush()
            source = _SOURCE.match(stripped)
            language = source.group(1) if source else ""
        elif (delimiter := _CODE_DELIMITERS.match(stripped) or _DROPPED_DELIMITERS.match(stripped)) is not None:
            flush()
            end = _block_end(lines, i, delimiter.group(1))
            if _CODE_DELIMITERS.match(stripped):
                out.code("\n".join(lines[i:end]), language)
            i, language = end + 1, ""
        elif _TABLE.match(stripped):
            flush()
            end = _block_end(lines, i, stripped)
            rows = [[c.strip() for c in row.split("|") if c.strip()] for row in lines[i:end]]
            out.para("\n".join(" | ".join(cells) for cells in rows if cells))
            i = end + 1
        elif _TEXT_DELIMITERS.match(stripped) or not stripped:
            flush()
        elif stripped.startswith(".") and len(stripped) > 1 and not stripped.startswith(".."):
            flush()
            para.append(stripped[1:])  # a block title
            flush()
        else:
            para.append(line)
    flush()
    return out.result(title)


def _block_end(lines: list[str], start: int, delimiter: str) -> int:
    """The index of the line closing the block opened by delimiter (the end when unclosed)."""
    for j in range(start, len(lines)):
        if lines[j].strip() == delimiter:
            return j
    return len(lines)
