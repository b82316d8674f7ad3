"""Small files that cost a format reader super-linear time or memory (issue 33), built here.

Each builder takes its size so a test can use a size that took minutes before and a bench can use the
issue's own; the names match tests/faults/test_hostile_formats.py and bench/bench_hostile_formats.py.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from tests.pipeline import format_samples as samples


def adoc_heading(spaces: int = 4000) -> bytes:
    """An AsciiDoc heading `= x`, spaces, `y` (the heading pattern backtracked over every split)."""
    return b"= x" + b" " * spaces + b"y\n\nThe adocnormal paragraph after it.\n"


def html_open_tags(count: int = 200_000) -> bytes:
    """`<a<a<a...`: a start tag that never closes (html.parser rescans it at every `<`)."""
    return b"<p>htmlbefore words</p>" + b"<a" * count


def org_drawers(lines: int = 250_000) -> bytes:
    """`:a:` lines, drawers never closed by `:END:` (each one looked for its end to the end of the file)."""
    return b"* Notes\norgbefore words\n" + b":a:\n" * lines


def org_heading(spaces: int = 64_000) -> bytes:
    """An Org heading of spaces (the heading pattern's lazy text against the trailing whitespace)."""
    return b"* x" + b" " * spaces + b"y\n\norgafter words\n"


def mdx_code_spans(count: int = 174_000) -> bytes:
    """Code spans one after another (a slice of the rest of the file copied at each backtick)."""
    return b"mdxbefore words\n\n" + b"`a`" * count


def docx_paragraphs(count: int = 10_000_000, cells: int = 0) -> bytes:
    """A real .docx (python-docx's template) whose body holds count empty paragraphs and a table of
    cells empty cells (in rows of 100), then one paragraph with the word docxafterword."""
    with zipfile.ZipFile(io.BytesIO(samples.docx())) as source:
        parts = {info.filename: source.read(info) for info in source.infolist()}
    document = parts["word/document.xml"].decode()
    table = ""
    if cells:
        row = "<w:tr>" + "<w:tc><w:p/></w:tc>" * 100 + "</w:tr>"
        table = "<w:tbl>" + row * (cells // 100) + "</w:tbl>"
    tail = '<w:p><w:r><w:t>docxafterword</w:t></w:r></w:p>'
    head, body, rest = document.partition("<w:body>")
    parts["word/document.xml"] = (head + body + "<w:p/>" * count + table + tail + rest).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return out.getvalue()


def pdf_pages(count: int, stream: str = "", text_on_last: str = "") -> bytes:
    """A PDF of count pages that all share one content stream (stream, blank by default, Flate-compressed);
    the last page has its own stream showing text_on_last when given."""
    packed = zlib.compress(stream.encode("latin-1"), 9).decode("latin-1")
    own = f"BT /F1 12 Tf 72 720 Td ({text_on_last}) Tj ET" if text_on_last else ""
    first_page = 5
    kids = " ".join(f"{first_page + i} 0 R" for i in range(count))
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               f"<< /Length {len(packed)} /Filter /FlateDecode >>\nstream\n{packed}\nendstream"]
    resources = "/Resources << /Font << /F1 3 0 R >> >>"
    for i in range(count):
        contents = first_page + count if own and i == count - 1 else 4
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] {resources} /Contents {contents} 0 R >>")
    if own:
        objects.append(f"<< /Length {len(own)} >>\nstream\n{own}\nendstream")
    return samples.pdf_file(objects)


def blank_stream(operators: int = 20_000) -> str:
    """A content stream that draws and shows no text: what pypdf parses in full for each page using it."""
    return "q 1 0 0 1 0 0 cm 0 0 m 1 1 l S Q\n" * operators


def rst_table(rows: int = 150_000) -> bytes:
    """An rst simple table of rows one-letter rows (docutils builds a cell grid and nested-parses every
    cell), then a paragraph with the word rstafterword."""
    body = "".join(f"{chr(97 + i % 26)}  {chr(97 + i // 26 % 26)}\n" for i in range(rows))
    return ("Title\n=====\n\nrstbefore words\n\n=  =\nh  c\n=  =\n" + body + "=  =\n\nrstafterword\n").encode()


def rst_long_line(length: int = 20_000) -> bytes:
    """An rst paragraph with one line over docutils' default line_length_limit of 10,000."""
    return ("Guide\n=====\n\nrstlongstart " + "word " * (length // 5) + "rstlongend\n\nAfter it.\n").encode()


def markdown_heading(spaces: int = 500_000) -> bytes:
    """A markdown heading of spaces (the heading pattern's lazy text against its trailing whitespace, and
    the closing-hashes and attribute-list patterns tried from every space)."""
    return b"# x" + b" " * spaces + b"y {#id}\n\nmdafter words\n"
