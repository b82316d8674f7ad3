"""Each small file that cost a format reader super-linear time or memory (issue 33) is read in linear time,
and what it holds is still read right. Before the fixes each case ran for minutes to hours (the figures
are in bench/RESULTS.md, "Issue 33: hostile format files"); each test is bounded well under that."""

from __future__ import annotations

import io
import zipfile

import pytest

from config.errors import FileSkipped
from pipeline.chunker import chunk_text
from pipeline.formats import BY_NAME
from pipeline.html_text import html_to_text
from tests.faults import hostile_files as hostile


def _sections(name: str, data: bytes) -> dict[str, str]:
    """Breadcrumb -> joined bodies of the chunks the format's extraction gives."""
    out: dict[str, str] = {}
    for chunk in chunk_text(BY_NAME[name].extract(data).text).chunks:
        out[chunk.heading_path] = out.get(chunk.heading_path, "") + chunk.body
    return out


@pytest.mark.timeout(20)
def test_an_asciidoc_heading_padded_with_4000_spaces_is_read_at_once() -> None:
    extracted = BY_NAME["asciidoc"].extract(hostile.adoc_heading(4000))
    assert extracted.title == "x y"
    assert "adocnormal" in _sections("asciidoc", hostile.adoc_heading(4000))["x y"]


@pytest.mark.timeout(20)
def test_an_asciidoc_anchor_line_that_never_closes_is_a_paragraph_read_at_once() -> None:
    assert "[#aaaa" in BY_NAME["asciidoc"].extract(b"[#" + b"a" * 200_000 + b"\n").text


@pytest.mark.timeout(20)
def test_a_page_of_400_kb_of_unclosed_start_tags_is_its_text() -> None:
    page = html_to_text(hostile.html_open_tags(200_000).decode())
    assert page.text.startswith("htmlbefore words\n\n<a<a<a")
    assert page.text.count("<a") == 200_000


@pytest.mark.timeout(20)
def test_a_local_html_file_of_unclosed_start_tags_is_read_at_once() -> None:
    assert "htmlbefore" in BY_NAME["html"].extract(hostile.html_open_tags(200_000)).text


@pytest.mark.timeout(20)
def test_comments_that_never_close_are_the_text_html_parser_reported_for_them() -> None:
    page = html_to_text("<p>t</p>" + "<!--x>" * 60_000)
    assert page.text == "t\n\n" + "<!--x>" * 60_000 + "\n"


def test_a_marked_section_html_parser_has_no_rule_for_is_dropped_to_its_end_not_a_crash() -> None:
    assert html_to_text("<p>a<![foo[ x ]]> b</p>").text == "a b\n"
    assert html_to_text("<p>a <![ x</p><p>next</p>").text == "a\n\nnext\n"


def test_markup_after_a_raw_text_element_is_untouched_and_an_unclosed_one_inside_it_stays_inside() -> None:
    page = html_to_text("<script><!-- x </script><p>after &lt;b&gt;</p><a")
    assert page.text == "after <b>\n\n<a\n"


@pytest.mark.timeout(20)
def test_an_org_file_of_250000_drawers_never_closed_is_read_at_once() -> None:
    sections = _sections("org", hostile.org_drawers(250_000))
    assert sections == {"Notes": "orgbefore words"}


@pytest.mark.timeout(20)
def test_an_org_heading_of_64000_spaces_is_read_at_once() -> None:
    sections = _sections("org", hostile.org_heading(64_000))
    assert sections == {"x y": "orgafter words"}


def test_org_heading_tags_keywords_and_priorities_are_dropped_as_before() -> None:
    text = BY_NAME["org"].extract(b"* TODO [#A] Plan  :work:home:\n*  :tag:\n* a :b: :c:\n** TODO \n").text
    assert text == "# Plan\n\n# :tag:\n\n# a :b:\n\n** TODO\n"


@pytest.mark.timeout(20)
def test_an_mdx_file_of_174000_code_spans_keeps_them_all_at_once() -> None:
    text = BY_NAME["mdx"].extract(hostile.mdx_code_spans(174_000)).text
    assert text.count("`a`") == 174_000


@pytest.mark.timeout(20)
def test_mdx_backtick_runs_that_never_close_are_kept_as_written_at_once() -> None:
    data = b"".join(b"`" * k + b"x " for k in range(1, 900))
    assert BY_NAME["mdx"].extract(data).text.strip() == data.decode().strip()


@pytest.mark.timeout(30)
def test_a_docx_of_a_million_empty_paragraphs_is_read_at_once_and_its_text_kept() -> None:
    assert "docxafterword" in BY_NAME["docx"].extract(hostile.docx_paragraphs(1_000_000)).text


@pytest.mark.timeout(30)
def test_a_docx_table_of_330000_empty_cells_is_read_at_once() -> None:
    text = BY_NAME["docx"].extract(hostile.docx_paragraphs(0, cells=330_000)).text
    assert "docxafterword" in text and "docxtablerow | 4" in text


def test_a_docx_declaring_entities_is_refused() -> None:
    with zipfile.ZipFile(io.BytesIO(hostile.docx_paragraphs(1))) as source:
        parts = {info.filename: source.read(info) for info in source.infolist()}
    xml = parts["word/document.xml"].decode()
    head, declaration, body = xml.partition("?>")
    parts["word/document.xml"] = (head + declaration + '<!DOCTYPE d [<!ENTITY e "inside">]>'
                                  + body.replace("docxafterword", "&e;")).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, part in parts.items():
            archive.writestr(name, part)
    with pytest.raises(FileSkipped, match="entities"):
        BY_NAME["docx"].extract(out.getvalue())


@pytest.mark.timeout(40)
def test_a_pdf_of_100000_pages_is_refused_before_its_pages_are_built() -> None:
    with pytest.raises(FileSkipped, match="too many pages"):
        BY_NAME["pdf"].extract(hostile.pdf_pages(100_000))


@pytest.mark.timeout(20)
def test_5000_pages_sharing_one_costly_blank_stream_parse_it_once() -> None:
    sections = _sections("pdf", hostile.pdf_pages(5000, hostile.blank_stream(20_000), "pdflast"))
    assert sections == {"Page 5000": "pdflast"}


@pytest.mark.timeout(20)
def test_pages_sharing_a_stream_with_text_each_keep_that_text() -> None:
    stream = "BT /F1 12 Tf 72 720 Td (pdfshared words) Tj ET"
    sections = _sections("pdf", hostile.pdf_pages(3, stream))
    assert sections == {f"Page {n}": "pdfshared words" for n in (1, 2, 3)}


@pytest.mark.timeout(20)
def test_an_rst_simple_table_of_150000_rows_is_read_as_a_literal_block_at_once() -> None:
    sections = _sections("rst", hostile.rst_table(150_000))
    assert "rstbefore words" in sections["Title"] and "rstafterword" in sections["Title"]
    assert "h  c" in sections["Title"] and sections["Title"].count("\n") > 150_000


def test_an_rst_table_within_the_bound_is_still_read_as_rows() -> None:
    text = BY_NAME["rst"].extract(hostile.rst_table(1000)).text
    assert "h | c\na | a\nb | a" in text and "```" not in text


def test_an_rst_line_of_20000_characters_is_indexed_with_the_rest_of_the_file() -> None:
    extracted = BY_NAME["rst"].extract(hostile.rst_long_line(20_000))
    assert extracted.warnings == 0
    sections = _sections("rst", hostile.rst_long_line(20_000))
    assert "rstlongend" in sections["Guide"] and "After it." in sections["Guide"]


@pytest.mark.timeout(20)
def test_a_markdown_heading_of_500000_spaces_is_read_at_once() -> None:
    chunked = chunk_text("# x" + " " * 500_000 + "y {#id}\n\nmdafter words\n")
    assert chunked.title == "x" + " " * 500_000 + "y"
    assert chunked.chunks[0].body == "mdafter words"


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("paragraphs", "cells"), [(10_000_000, 0), (0, 3_300_000)])
def test_a_docx_of_millions_of_empty_paragraphs_or_cells_is_refused_with_its_reason(paragraphs: int,
                                                                                    cells: int) -> None:
    with pytest.raises(FileSkipped, match="XML elements"):
        BY_NAME["docx"].extract(hostile.docx_paragraphs(paragraphs, cells=cells))
