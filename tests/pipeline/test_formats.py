"""The format registry and each extractor: words under their headings, what is dropped, what is refused."""

from __future__ import annotations

import base64
import tracemalloc
from pathlib import Path

import pytest

from config.errors import FileSkipped
from config.settings import FORMAT_NAMES
from pipeline import formats
from pipeline.chunker import chunk_text
from pipeline.files import ingest_file
from pipeline.formats import BY_NAME, page_anchor
from pipeline.models import Document, FileJob
from pipeline.walker import walk_root
from tests.conftest import write_tree
from tests.pipeline import format_samples as samples


def _sections(name: str, data: bytes) -> dict[str, str]:
    """Breadcrumb -> joined bodies of what the format's extractor gives the chunker."""
    chunked = chunk_text(BY_NAME[name].extract(data).text)
    out: dict[str, str] = {}
    for chunk in chunked.chunks:
        out[chunk.heading_path] = out.get(chunk.heading_path, "") + chunk.body
    return out


def _ingest(workdir: Path, name: str, data: bytes) -> Document | str:
    write_tree(workdir, {name: data})
    size = len(data)
    return ingest_file(FileJob(name, name, size, 0))


def test_the_registry_and_the_config_name_the_same_formats_and_no_extension_twice() -> None:
    assert tuple(BY_NAME) == FORMAT_NAMES
    listed = [ext for f in formats.FORMATS for ext in f.extensions]
    assert len(listed) == len(set(listed)) == len(formats.EXTENSIONS)
    assert {".md", ".markdown", ".txt", ".text", ".html", ".htm", ".mdx", ".rst", ".ipynb", ".adoc", ".asciidoc",
            ".org", ".pdf", ".docx"} <= formats.EXTENSIONS


def test_markdown_chunks_and_text_hashes_are_those_of_the_markdown_path(workdir: Path) -> None:
    text = "---\ntitle: T\n---\n# Head\n\nBody words.\n\n## Sub\n\nMore.\n"
    doc = _ingest(workdir, "a.md", text.encode())
    assert isinstance(doc, Document)
    assert [(c.heading_path, c.body) for c in doc.chunks] == [("Head", "Body words."), ("Head > Sub", "More.")]
    # pinned from the code before the registry: a changed hash would re-embed every markdown section
    assert [c.text_hash for c in doc.chunks] == ["382529b79ffafa76d53d7f922c92a3de", "4d7ab60e82d60c96d5f98bd9c8e1ec7c"]
    assert doc.title == "T" and doc.fields == {"title": "T"}


def test_html_keeps_headings_and_their_ids_and_drops_script_style_nav_and_footer() -> None:
    sections = _sections("html", samples.HTML)
    assert "htmlbrass" in sections["Exported Wiki > Deploying"]
    everything = " ".join(sections.values())
    for dropped in ("scriptword", "scriptsecret", "stylesecret", "navsecret", "footersecret"):
        assert dropped not in everything
    extracted = BY_NAME["html"].extract(samples.HTML)
    assert extracted.title == "Wiki Export"
    assert ("Deploying", "deploy-steps") in extracted.anchors


def test_mdx_drops_imports_exports_and_jsx_props_and_keeps_text_children_and_front_matter() -> None:
    extracted = BY_NAME["mdx"].extract(samples.MDX)
    assert extracted.fields == {"title": "Astro Guide", "tags": ["astro"]}
    sections = _sections("mdx", samples.MDX)
    assert "mdxcopper" in sections["Astro Guide > Installing"]
    everything = " ".join(sections.values())
    for dropped in ("import", "@theme", "jsxpropsecret", "jsxlabelsecret", "TabItem", "draft"):
        assert dropped not in everything


def test_mdx_keeps_jsx_inside_code_fences_and_code_spans() -> None:
    body = b"# T\n\nUse `<Tabs>` here.\n\n```jsx\n<Tabs label=\"x\">kept</Tabs>\n```\n"
    text = BY_NAME["mdx"].extract(body).text
    assert "`<Tabs>`" in text and '<Tabs label="x">kept</Tabs>' in text


def test_rst_sections_are_headings_with_their_ids_and_directive_text_and_roles_are_kept() -> None:
    extracted = BY_NAME["rst"].extract(samples.RST)
    assert extracted.title == "Sphinx Guide" and extracted.warnings == 0
    assert ("Configuration", "configuration") in extracted.anchors
    section = _sections("rst", samples.RST)["Sphinx Guide > Configuration"]
    assert "rstnickel" in section and "rstzinc" in section and "rstcobalt = 1" in section
    assert "the index" in section and ":ref:" not in section


def test_malformed_rst_indexes_what_docutils_recovers_and_counts_its_warnings() -> None:
    broken = b"Title\n===\n\nText with `unclosed and *emphasis.\n\n.. unknowndirective:: x\n\nrecovered words\n"
    extracted = BY_NAME["rst"].extract(broken)
    assert extracted.warnings >= 2
    note = f"docutils reported {extracted.warnings} warning(s); indexed what it recovered"
    assert extracted.front_matter_error == note
    assert "recovered words" in extracted.text


def test_asciidoc_headings_anchors_listings_and_dropped_attributes() -> None:
    extracted = BY_NAME["asciidoc"].extract(samples.ADOC)
    assert extracted.title == "Ops Handbook"
    assert ("Runbook", "run-book") in extracted.anchors
    section = _sections("asciidoc", samples.ADOC)["Ops Handbook > Runbook"]
    assert "adoctin" in section and "```bash\nsystemctl restart adocchrome\n```" in section
    assert ":toc:" not in extracted.text


def test_org_title_headings_without_keywords_or_tags_and_src_blocks() -> None:
    extracted = BY_NAME["org"].extract(samples.ORG)
    assert extracted.title == "Org Journal"
    sections = _sections("org", samples.ORG)
    assert "orgiron" in sections["Planning"]
    assert "orgsilver = 2" in sections["Planning > Details"]


def test_a_notebook_keeps_markdown_code_and_short_text_output_never_an_image() -> None:
    sections = _sections("ipynb", samples.notebook())
    loading = sections["Analysis Notebook > Loading"]
    assert "nbgold" in loading and "nbplatinum = load()" in loading and "nbstreamword" in loading
    assert "imagesecret" not in " ".join(sections.values())
    assert samples.PNG_BASE64[:20] not in " ".join(sections.values())


def test_a_pdf_is_one_section_per_page_titled_from_its_metadata_and_cited_by_page() -> None:
    extracted = BY_NAME["pdf"].extract(samples.PDF)
    assert extracted.title == "Field Manual"
    sections = _sections("pdf", samples.PDF)
    assert "pdfamber" in sections["Page 1"] and "pdfjasper" in sections["Page 2"]
    assert ("Page 2", "page=2") in extracted.anchors
    assert page_anchor("docs/manual.pdf", "Page 2") == "page=2"
    assert page_anchor("docs/manual.md", "Page 2") is None


@pytest.mark.parametrize(("make", "reason"), [
    (samples.encrypted_pdf, "encrypted PDF"),
    (samples.scanned_pdf, "no text layer"),
    (lambda: b"%PDF-1.4\n1 0 obj <<\n", "damaged PDF"),
    (lambda: samples.PDF[: len(samples.PDF) // 3], "damaged PDF"),
], ids=["encrypted", "scanned", "garbage", "truncated"])
def test_an_unreadable_pdf_is_a_skip_with_its_reason(make, reason: str) -> None:
    with pytest.raises(FileSkipped, match=reason):
        BY_NAME["pdf"].extract(make())


def test_a_docx_keeps_heading_styles_and_table_rows_and_its_title() -> None:
    data = samples.docx()
    assert BY_NAME["docx"].extract(data).title == "Quarterly Memo"
    sections = _sections("docx", data)
    assert "docxquartz" in sections["Budget"]
    assert "docxonyx" in sections["Budget > Staffing"]
    assert "docxtablerow | 4" in sections["Budget > Staffing"]


# Bad input: each bounded, a skip with its reason, memory flat.

def test_a_zip_bomb_named_docx_is_refused_before_anything_is_expanded() -> None:
    bomb = samples.zip_bomb_docx()
    assert len(bomb) < 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(FileSkipped, match="zip bomb"):
            BY_NAME["docx"].extract(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def test_a_file_that_is_not_a_zip_named_docx_is_a_damaged_docx() -> None:
    with pytest.raises(FileSkipped, match="damaged DOCX"):
        BY_NAME["docx"].extract(b"PK\x03\x04 not really")


def test_a_notebook_over_its_size_limit_is_a_skip_and_a_large_image_inside_it_is_never_text(workdir: Path) -> None:
    image = base64.b64encode(b"\x89PNG" + b"\x01" * (3 * 1024 * 1024)).decode()
    sections = _sections("ipynb", samples.notebook(image))
    assert all(image[:40] not in body for body in sections.values())
    huge = samples.notebook("A" * (BY_NAME["ipynb"].max_bytes + 1))
    with pytest.raises(FileSkipped, match="too large"):
        _ingest(workdir, "big.ipynb", huge)


def test_an_html_file_with_a_10_mb_inline_script_is_a_skip_and_a_walk_reports_it(workdir: Path) -> None:
    page = b"<html><body><h1>Big</h1><script>" + b"x" * (10 * 1024 * 1024) + b"</script></body></html>"
    write_tree(workdir, {"docs/big.html": page, "docs/ok.html": samples.HTML})
    result = walk_root("docs")
    assert [f.path for f in result.files] == ["docs/ok.html"]
    assert [(s.path, s.reason.split(" (")[0]) for s in result.skipped] == [("docs/big.html", "too large")]
    with pytest.raises(FileSkipped, match="too large"):
        _ingest(workdir, "docs/big.html", page)


def test_deeply_nested_rst_is_a_skip_never_a_crash() -> None:
    with pytest.raises(FileSkipped, match="nested too deeply"):
        BY_NAME["rst"].extract(samples.deep_rst(400))
    shallow = BY_NAME["rst"].extract(samples.deep_rst(30))
    assert "level 29 deepword" in shallow.text


def test_a_document_that_extracts_to_too_much_text_is_a_skip() -> None:
    org = ("* Heading\n" + "word " * 200 + "\n") * 5000
    with pytest.raises(FileSkipped, match="too much text"):
        BY_NAME["org"].extract(org.encode())


def test_a_format_file_with_no_text_is_a_skip_not_an_empty_document(workdir: Path) -> None:
    with pytest.raises(FileSkipped, match="no text found"):
        _ingest(workdir, "empty.org", b"#+TITLE: Nothing\n")


# The walk: one owner of the extensions, the others counted.

def test_a_walk_counts_the_files_of_no_indexed_format_in_one_line_by_extension(workdir: Path) -> None:
    write_tree(workdir, {"docs/a.md": "a", "docs/b.png": b"p", "docs/c.png": b"p", "docs/sub/d.png": b"p",
                         "docs/e.svg": "s", "docs/Makefile": "m", "docs/f.rst": "f"})
    result = walk_root("docs")
    assert [f.path for f in result.files] == ["docs/a.md", "docs/f.rst"]
    assert [(s.path, s.reason) for s in result.skipped] == [
        ("docs/", "3 .png, 1 (no extension), 1 .svg: not an indexed format")]


def test_a_format_turned_off_is_counted_in_a_walk_and_named_when_given_as_a_file(workdir: Path) -> None:
    write_tree(workdir, {"docs/a.md": "a", "docs/b.pdf": samples.PDF})
    on = formats.extensions_of(n for n in FORMAT_NAMES if n != "pdf")
    result = walk_root("docs", extensions=on)
    assert [f.path for f in result.files] == ["docs/a.md"]
    assert [s.reason for s in result.skipped] == ["1 .pdf: not an indexed format"]
    single = walk_root("docs/b.pdf", extensions=on)
    assert [s.reason for s in single.skipped] == ["the pdf format is turned off (knowledge.formats)"]
    other = walk_root("docs/a.md", extensions=formats.extensions_of(["rst"]))
    assert [s.reason for s in other.skipped] == ["the markdown format is turned off (knowledge.formats)"]


def test_a_file_of_each_format_is_walked_under_its_own_size_limit(workdir: Path) -> None:
    write_tree(workdir, {"docs/big.md": "x" * (600 * 1024), "docs/big.pdf": samples.PDF + b" " * (600 * 1024)})
    result = walk_root("docs")
    assert [f.path for f in result.files] == ["docs/big.pdf"]
    assert [s.path for s in result.skipped] == ["docs/big.md"]


def test_text_that_reads_as_markdown_structure_stays_text_in_every_extracted_format() -> None:
    pdf = samples.pdf(["# not a heading", "``` not a fence"])
    assert list(_sections("pdf", pdf)) == ["Page 1", "Page 2"]
    adoc = b"= Doc\n\n# hash line stays\n\n```\n"
    sections = _sections("asciidoc", adoc)
    assert list(sections) == ["Doc"] and "# hash line stays" in sections["Doc"]


@pytest.mark.parametrize(("reason", "klass"), [
    ("212 .png, 14 .svg: not an indexed format", "extension"),
    ("the pdf format is turned off (knowledge.formats)", "extension"),
    ("encrypted PDF (a password is needed to read it)", "encrypted"),
    ("damaged PDF (Stream has ended unexpectedly)", "damaged"),
    ("no text layer (a scanned PDF, or images only)", "no_text"),
    ("DOCX expands to 83886080 bytes (> 67108864): a zip bomb or a huge file", "too_large"),
    ("nested too deeply (a line indented over 240 columns)", "too_large"),
])
def test_the_format_skip_reasons_have_bounded_metric_classes(reason: str, klass: str) -> None:
    from config.instruments import reason_class

    assert reason_class(reason) == klass
