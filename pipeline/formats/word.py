"""A Word document (.docx) through python-docx: Heading 1-6 styles as headings, tables as rows.

A .docx is a zip: its members' declared sizes are checked before python-docx opens it, so a zip
bomb is a skip, never expanded. The title is the document's core Title property, else the Title
style paragraph, else the first heading.
"""

from __future__ import annotations

import io
import re
import zipfile

from docx import Document
from docx.table import Table

from config.errors import FileSkipped
from pipeline.formats.outline import Extracted, Outline, one_line

MAX_EXPANDED_BYTES = 64 * 1024 * 1024
MAX_MEMBERS = 5000
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def check_zip(data: bytes) -> None:
    """Raise FileSkipped unless data is a zip with word/document.xml that expands within bounds."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise FileSkipped(f"damaged DOCX (not a zip: {exc})") from exc
    if len(members) > MAX_MEMBERS:
        raise FileSkipped(f"DOCX with too many parts ({len(members)} > {MAX_MEMBERS})")
    expanded = sum(m.file_size for m in members)
    if expanded > MAX_EXPANDED_BYTES:
        raise FileSkipped(f"DOCX expands to {expanded} bytes (> {MAX_EXPANDED_BYTES}): a zip bomb or a huge file")
    if "word/document.xml" not in {m.filename for m in members}:
        raise FileSkipped("not a Word document (no word/document.xml)")


def extract(data: bytes) -> Extracted:
    """The outline of a .docx under the rules in the module docstring."""
    check_zip(data)
    try:
        document = Document(io.BytesIO(data))
        blocks = list(document.iter_inner_content())
        core_title = document.core_properties.title
    except Exception as exc:  # python-docx on an untrusted file: any failure to open it is this file's skip
        raise FileSkipped(f"damaged DOCX ({one_line(str(exc))[:160] or type(exc).__name__})") from exc
    out = Outline()
    styled_title: str | None = None
    for block in blocks:
        if isinstance(block, Table):
            rows = [" | ".join(one_line(cell.text) for cell in row.cells) for row in block.rows]
            out.para("\n".join(row for row in rows if row.strip(" |")))
            continue
        style = (block.style.name if block.style is not None else "") or ""
        heading = _HEADING_STYLE.match(style)
        if heading:
            out.heading(min(int(heading.group(1)), 6), block.text)
        elif style.lower() == "title" and styled_title is None and block.text.strip():
            styled_title = block.text
        else:
            out.para(block.text)
    return out.result(core_title or styled_title)
