"""Formats hand over an Outline (issue 31): sections with heading path, level, anchor and blocks, packed into
exactly the chunks the markdown round trip gave, with the anchors each format knows kept on its sections."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.lib.corpus import generate
from pipeline import files
from pipeline.chunker import chunk_text, pack
from pipeline.formats import BY_NAME, decoding
from pipeline.front_matter import split as split_front_matter
from pipeline.markdown_sections import sections
from pipeline.outline import Block, Section
from tests.pipeline import format_samples as samples

SAMPLES: dict[str, bytes] = {
    "html": samples.HTML, "rst": samples.RST, "asciidoc": samples.ADOC,
    "org": samples.ORG, "mdx": samples.MDX, "pdf": samples.PDF, "docx": samples.docx(),
    "ipynb": samples.notebook(),
}


def test_markdown_reads_into_sections_with_their_breadcrumbs_levels_and_blocks() -> None:
    text = "intro line\n\n# Guide\n\nbody one\n\n```py\nx = 1\n```\n\n## Install\n\nstep\n\n# Other ##\n"
    assert sections(text) == (
        Section("", 0, (), "", (Block("para", "intro line"),)),
        Section("Guide", 1, ("Guide",), "", (Block("para", "body one"), Block("code", "```py\nx = 1\n```"))),
        Section("Install", 2, ("Guide", "Install"), "", (Block("para", "step"),)),
        Section("Other", 1, ("Other",), "", ()),
    )


def test_packing_the_sections_of_a_generated_tree_gives_the_chunks_chunk_text_gave(tmp_path: Path) -> None:
    generate(tmp_path, 60, seed=3)
    for path in sorted(tmp_path.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        assert pack(sections(text)) == chunk_text(text), path


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_format_s_outline_packs_into_the_chunks_of_its_extracted_text(name: str) -> None:
    fmt = BY_NAME[name]
    outline = fmt.outline(SAMPLES[name])
    assert pack(outline.sections) == chunk_text(fmt.extract(SAMPLES[name]).text)
    assert outline.title == fmt.extract(SAMPLES[name]).title


@pytest.mark.parametrize(("name", "heading", "anchor"), [
    ("html", "Deploying", "deploy-steps"), ("rst", "Configuration", "configuration"),
    ("asciidoc", "Runbook", "run-book"), ("pdf", "Page 2", "page=2"),
])
def test_the_anchor_a_format_knows_is_on_its_section(name: str, heading: str, anchor: str) -> None:
    found = {s.heading: s.anchor for s in BY_NAME[name].outline(SAMPLES[name]).sections}
    assert found[heading] == anchor


@pytest.mark.parametrize("name", ["markdown", "text"])
def test_markdown_and_text_are_extractors_giving_the_front_matter_and_the_chunks_as_before(name: str) -> None:
    data = b"---\ntitle: Front Title\ntags: [a, b]\n---\n# Heading\n\nplainword body\n"
    matter = split_front_matter(data.decode())
    outline = BY_NAME[name].outline(data)
    assert (outline.title, outline.fields, outline.notes) == ("Front Title", matter.fields, ())
    assert pack(outline.sections) == chunk_text(matter.body)


def test_a_front_matter_problem_is_a_note_of_the_outline() -> None:
    outline = BY_NAME["markdown"].outline(b"---\ntitle: [unclosed\n---\nbody words\n")
    assert len(outline.notes) == 1 and outline.notes[0]


def test_decode_lives_in_formats_and_pipeline_files_still_offers_it() -> None:
    assert files.decode is decoding.decode
    assert decoding.decode("\ufeffhé".encode()) == "hé"


def test_a_markdown_heading_s_attribute_list_id_is_its_section_s_anchor_and_not_its_text() -> None:
    found = sections("## WebSockets { #websockets }\n\nbody\n\n## Plain\n\nmore\n\n## Styled {.wide #w-1 key=v}\n")
    assert [(s.heading, s.anchor) for s in found] == [("WebSockets", "websockets"), ("Plain", ""),
                                                      ("Styled", "w-1")]
