"""One small file of each format the registry reads, built here (a PDF written by hand, a DOCX by python-docx)."""

from __future__ import annotations

import io
import json
import zipfile

HTML = b"""<!doctype html><html><head><title>Wiki Export</title>
<script>var scriptsecret = "scriptword";</script><style>.x { color: stylesecret }</style></head>
<body><nav>navsecret menu</nav>
<h1 id="top">Exported Wiki</h1><p>Intro of the wiki.</p>
<h2 id="deploy-steps">Deploying</h2><p>Deploy with the htmlbrass tool.</p>
<footer>footersecret copyright</footer></body></html>
"""

MDX = b"""---
title: Astro Guide
tags: [astro]
---
import Tabs from '@theme/Tabs';
export const meta = { draft: false };

# Astro Guide

## Installing

<Tabs groupId="jsxpropsecret" items={['npm', 'yarn']}>
  <TabItem value="npm" label="jsxlabelsecret">
    Run the mdxcopper installer.
  </TabItem>
</Tabs>
"""

RST = b"""============
Sphinx Guide
============

Intro paragraph.

Configuration
=============

Set the rstnickel option, see :ref:`the index <genindex>`.

.. note::

   A noted rstzinc fact.

.. code-block:: python

   rstcobalt = 1
"""

ADOC = b"""= Ops Handbook
:toc:

[[run-book]]
== Runbook

Restart the adoctin service.

[source,bash]
----
systemctl restart adocchrome
----
"""

ORG = b"""#+TITLE: Org Journal
* TODO Planning :work:
Plan the orgiron migration.
** Details
#+BEGIN_SRC python
orgsilver = 2
#+END_SRC
"""

PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGAimagesecretAAA="


def notebook(image: str = PNG_BASE64) -> bytes:
    """A notebook: a markdown heading, a code cell with a short text output and an image output."""
    cells = [
        {"cell_type": "markdown", "metadata": {},
         "source": ["# Analysis Notebook\n", "\n", "## Loading\n", "Load the nbgold data."]},
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": ["nbplatinum = load()\n", "nbplatinum"],
         "outputs": [
             {"output_type": "stream", "name": "stdout", "text": ["nbstreamword printed\n"]},
             {"output_type": "display_data", "metadata": {},
              "data": {"image/png": image, "text/plain": ["figure"]}},
         ]},
    ]
    return json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                       "nbformat": 4, "nbformat_minor": 5}).encode()


def _pdf_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf(pages: list[str], title: str = "Field Manual") -> bytes:
    """A PDF written by hand: one Helvetica text line per page, a Title in its Info dictionary."""
    objects: list[str] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append("<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({_pdf_text(text)}) Tj ET"
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append(f"<< /Title ({_pdf_text(title)}) >>")
    return pdf_file(objects, info=True)


def pdf_file(objects: list[str], info: bool = False) -> bytes:
    """A PDF of these objects (numbered from 1: the first the catalog, the last the Info dictionary when info),
    with its cross-reference table and trailer."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1"))
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    out.write("".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode())
    trailer = f"/Size {len(objects) + 1} /Root 1 0 R" + (f" /Info {len(objects)} 0 R" if info else "")
    out.write(f"trailer\n<< {trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


PDF = pdf(["Page one talks about pdfamber valves.", "Page two covers pdfjasper pumps."])


def encrypted_pdf() -> bytes:
    """PDF encrypted with a user password."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(PDF)))
    writer.encrypt("secret-password")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def scanned_pdf() -> bytes:
    """A PDF whose one page has no text (as a scan has none)."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx() -> bytes:
    """A Word memo: a title, two headings, a paragraph each and a table."""
    from docx import Document

    document = Document()
    document.core_properties.title = "Quarterly Memo"
    document.add_heading("Budget", level=1)
    document.add_paragraph("The docxquartz budget is approved.")
    document.add_heading("Staffing", level=2)
    document.add_paragraph("Hire docxonyx engineers.")
    table = document.add_table(rows=2, cols=2)
    for r, row in enumerate((("Team", "Headcount"), ("docxtablerow", "4"))):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def zip_bomb_docx(expanded: int = 80 * 1024 * 1024) -> bytes:
    """A .docx-named zip whose document.xml expands to `expanded` bytes of zeros."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            block = b"\0" * (1024 * 1024)
            for _ in range(expanded // len(block)):
                member.write(block)
    return out.getvalue()


def deep_rst(depth: int = 400) -> bytes:
    """reStructuredText of block quotes nested depth deep."""
    lines = [" " * (2 * level) + f"level {level} deepword" + "\n" for level in range(depth)]
    return "\n".join(lines).encode()


def mixed_tree() -> dict[str, str | bytes]:
    """One file of each format, and two files no format reads."""
    return {
        "docs/readme.md": "# Readme\n\n## Usage\n\nThe mdword usage.\n",
        "docs/notes.txt": "plain txtword notes\n",
        "docs/wiki.html": HTML, "docs/guide.mdx": MDX, "docs/sphinx.rst": RST, "docs/ops.adoc": ADOC,
        "docs/journal.org": ORG, "docs/analysis.ipynb": notebook(), "docs/manual.pdf": PDF,
        "docs/memo.docx": docx(), "docs/logo.png": b"\x89PNG\r\n", "docs/icon.png": b"\x89PNG\r\n",
        "docs/diagram.svg": "<svg/>",
    }
