"""Crafted files that send a format's reader down a super-linear path (issue 33's table), made in memory.

Each is small enough to pass its format's size limit; before the extraction bound and the readers'
fixes, each one stalled an index run for seconds to hours. bench/bench_stalls.py indexes them.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

_DOCX_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    "</Types>"
)
_DOCX_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="word/document.xml"/></Relationships>'
)
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx(body: str) -> bytes:
    """A minimal .docx whose document body is body (WordprocessingML), deflated."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _DOCX_TYPES)
        archive.writestr("_rels/.rels", _DOCX_RELS)
        archive.writestr("word/document.xml", f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                                              f'<w:document xmlns:w="{_W}"><w:body>{body}</w:body></w:document>')
    return out.getvalue()


def pdf(pages: int, content: bytes, shared: bool = True) -> bytes:
    """A PDF of pages pages whose content streams are content (one stream object shared by all when shared)."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    first_page = 3
    streams = 1 if shared else pages
    stream_base = first_page + pages
    kids = b" ".join(b"%d 0 R" % (first_page + i) for i in range(pages))
    objects[1] = b"<< /Type /Pages /Count %d /Kids [%s] >>" % (pages, kids)
    for i in range(pages):
        stream = stream_base + (0 if shared else i)
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>"
                       % stream)
    for _ in range(streams):
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def rst_table(rows: int) -> str:
    """A reStructuredText simple table of rows rows (two one-character columns: 4 bytes a row)."""
    return "Table\n=====\n\n= =\na b\n= =\n" + "x y\n" * rows + "= =\n"


# name -> (file name, bytes): the cases of issue 33's table, at the sizes it gives
CASES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "pdf-shared-blank-stream": ("shared.pdf", lambda: pdf(5000, b"BT /F1 12 Tf 0 0 Td ( ) Tj ET\n" * 12000)),
    "docx-10M-empty-paragraphs": ("paragraphs.docx", lambda: docx("<w:p/>" * 10_000_000)),
    "docx-3.3M-empty-cells": ("cells.docx", lambda: docx(
        "<w:tbl>" + ("<w:tr>" + "<w:tc><w:p/></w:tc>" * 100 + "</w:tr>") * 33_000 + "</w:tbl>")),
    "adoc-heading-4000-spaces": ("heading.adoc", lambda: ("= x" + " " * 4000 + "y\n").encode()),
    "html-unclosed-tags": ("tags.html", lambda: b"<a" * 200_000),
    "org-unclosed-drawers": ("drawers.org", lambda: b":a:\n" * 250_000),
    "org-heading-64000-spaces": ("heading.org", lambda: b"* " + b" " * 64_000 + b"x\n"),
    "mdx-174k-code-spans": ("spans.mdx", lambda: b"`a`" * 174_000),
    "rst-150k-row-table": ("table.rst", lambda: rst_table(150_000).encode()),
    "pdf-100k-pages": ("pages.pdf", lambda: pdf(100_000, b"", shared=True)),
}
