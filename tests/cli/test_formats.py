"""A mixed tree of every format through `knowledge index`: each file added or reported, each word under its heading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.settings import FORMAT_NAMES
from tests.conftest import write_tree
from tests.pipeline import format_samples as samples

# A word of each file, and the section (breadcrumb) it sits under.
WORDS = {
    "mdword": ("docs/readme.md", "Readme > Usage"),
    "txtword": ("docs/notes.txt", ""),
    "htmlbrass": ("docs/wiki.html", "Exported Wiki > Deploying"),
    "mdxcopper": ("docs/guide.mdx", "Astro Guide > Installing"),
    "rstzinc": ("docs/sphinx.rst", "Sphinx Guide > Configuration"),
    "adoctin": ("docs/ops.adoc", "Ops Handbook > Runbook"),
    "orgiron": ("docs/journal.org", "Planning"),
    "nbgold": ("docs/analysis.ipynb", "Analysis Notebook > Loading"),
    "nbstreamword": ("docs/analysis.ipynb", "Analysis Notebook > Loading"),
    "pdfjasper": ("docs/manual.pdf", "Page 2"),
    "docxonyx": ("docs/memo.docx", "Budget > Staffing"),
    "docxtablerow": ("docs/memo.docx", "Budget > Staffing"),
}
NEVER = ("scriptword", "stylesecret", "navsecret", "footersecret", "jsxpropsecret", "jsxlabelsecret", "imagesecret")


def _hits(run_cli, word: str) -> list[dict[str, str]]:
    code, out, err = run_cli("search", word, "--json")
    assert code == 0, out + err
    results: list[dict[str, str]] = json.loads(out)["results"]
    return results


@pytest.fixture
def mixed(workdir: Path, run_cli) -> str:
    """The mixed tree indexed; the run's output."""
    write_tree(workdir, samples.mixed_tree())
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    return out


def test_a_mixed_tree_indexes_every_file_or_reports_it_with_a_reason(mixed: str, run_cli) -> None:
    assert "indexed: added=10 updated=0 unchanged=0 removed=0 failed=0; store: 10 files" in mixed
    assert "  skipped: docs/: 2 .png, 1 .svg: not an indexed format" in mixed.splitlines()
    code, out, _ = run_cli("sources", "--json")
    assert code == 0
    paths = {d["path"] for d in json.loads(out)["documents"]}
    assert paths == {p for p, _ in WORDS.values()}


def test_each_files_words_are_found_under_their_heading_and_dropped_text_never(mixed: str, run_cli) -> None:
    for word, (path, section) in WORDS.items():
        hits = _hits(run_cli, word)
        assert [(h["path"], h["section"]) for h in hits] == [(path, section)], word
    for word in NEVER:
        assert _hits(run_cli, word) == [], word


def test_rst_html_and_pdf_citations_resolve_through_show(mixed: str, run_cli) -> None:
    for word in ("rstzinc", "htmlbrass", "pdfjasper"):
        hit = _hits(run_cli, word)[0]
        code, out, err = run_cli("show", hit["index_ref"])
        assert code == 0, out + err
        assert f"Section: {hit['section']}" in out and word in out
    code, out, _ = run_cli("show", _hits(run_cli, "rstnickel")[0]["index_ref"], "--section", "--json")
    assert code == 0 and "rstcobalt = 1" in out


def test_a_citation_rule_maps_a_pdf_page_to_its_page_fragment(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/manual.pdf": samples.PDF, "docs/sphinx.rst": samples.RST})
    (workdir / "knowledge.yaml").write_text(
        "knowledge:\n  paths: [docs]\n  citations:\n"
        "    - pattern: '^docs/(.+\\.pdf)$'\n      replace: 'https://files.example.net/$1#${anchor}'\n"
        "    - pattern: '^docs/(.+)\\.rst$'\n      replace: 'https://docs.example.net/$1.html#${anchor}'\n",
        encoding="utf-8")
    assert run_cli("index")[0] == 0
    assert _hits(run_cli, "pdfjasper")[0]["citation"] == "https://files.example.net/manual.pdf#page=2"
    assert _hits(run_cli, "rstzinc")[0]["citation"] == "https://docs.example.net/sphinx.html#configuration"


def test_unreadable_files_are_skips_with_reasons_and_the_rest_of_the_run_lands(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/ok.md": "# Ok\n\nokword\n", "docs/locked.pdf": samples.encrypted_pdf(),
                         "docs/scan.pdf": samples.scanned_pdf(), "docs/bomb.docx": samples.zip_bomb_docx(),
                         "docs/broken.ipynb": b"{not json", "docs/deep.rst": samples.deep_rst(400)})
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    assert "indexed: added=1 " in out
    lines = out.splitlines()
    for path, reason in (("docs/locked.pdf", "encrypted PDF"), ("docs/scan.pdf", "no text layer"),
                         ("docs/bomb.docx", "a zip bomb"), ("docs/broken.ipynb", "not a notebook"),
                         ("docs/deep.rst", "nested too deeply")):
        assert any(line.startswith(f"  skipped: {path}: ") and reason in line for line in lines), (path, out)
    assert _hits(run_cli, "okword")[0]["path"] == "docs/ok.md"


def test_a_malformed_rst_file_is_indexed_with_its_warnings_counted_in_the_summary(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/bad.rst": "Title\n===\n\nText with `unclosed.\n\nrecoveredword here\n"})
    code, out, _ = run_cli("index", "docs")
    assert code == 0 and "added=1" in out
    assert any(line.startswith("  skipped: docs/bad.rst: docutils reported") for line in out.splitlines())
    assert _hits(run_cli, "recoveredword")[0]["path"] == "docs/bad.rst"


def test_dry_run_lists_every_format_and_counts_the_rest(mixed: str, run_cli, workdir: Path) -> None:
    (workdir / "docs/new.adoc").write_text("= New\n\nnewword\n", encoding="utf-8")
    code, out, _ = run_cli("index", "docs", "--dry-run")
    assert code == 0
    assert "  add: docs/new.adoc" in out.splitlines()
    assert "  skipped: docs/: 2 .png, 1 .svg: not an indexed format" in out.splitlines()


def test_knowledge_formats_turns_formats_off_and_an_unknown_name_lists_the_known(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n", "docs/b.pdf": samples.PDF, "docs/c.rst": samples.RST})
    (workdir / "knowledge.yaml").write_text("knowledge:\n  formats: [markdown, rst]\n", encoding="utf-8")
    code, out, _ = run_cli("index", "docs")
    assert code == 0 and "added=2" in out
    assert "  skipped: docs/: 1 .pdf: not an indexed format" in out.splitlines()
    code, out, _ = run_cli("doctor")
    assert "markdown, rst (docutils " in out and "off: text, html" in out
    (workdir / "knowledge.yaml").write_text("knowledge:\n  formats: [markdown, rst, pdf]\n", encoding="utf-8")
    code, out, _ = run_cli("index", "docs")  # a format turned on is picked up without --reindex
    assert code == 0 and "added=1 updated=0 unchanged=2" in out
    assert _hits(run_cli, "pdfjasper")[0]["path"] == "docs/b.pdf"
    (workdir / "knowledge.yaml").write_text("knowledge:\n  formats: [markdown, word]\n", encoding="utf-8")
    code, out, err = run_cli("index", "docs")
    assert code == 2 and "Traceback" not in out + err
    assert f"knowledge.formats names 'word', which is not a format knowledge reads (known: {', '.join(FORMAT_NAMES)})" \
        in err


def test_doctor_lists_every_format_and_its_library_version(workdir: Path, run_cli) -> None:
    code, out, _ = run_cli("doctor")
    assert code == 0, out
    line = next(line for line in out.splitlines() if line.split()[1:2] == ["formats"])
    assert line.split()[0] == "ok"
    for name in FORMAT_NAMES:
        assert name in line
    assert "pdf (pypdf " in line and "rst (docutils " in line
    assert "docx" in line and "python-docx" not in line  # read with the stdlib's expat since issue 33


def test_doctor_starts_a_bounded_reader_and_names_its_limits(workdir: Path, run_cli) -> None:
    (workdir / "knowledge.yaml").write_text("knowledge:\n  extraction:\n    timeout: 20s\n    memory: 512\n",
                                            encoding="utf-8")
    code, out, _ = run_cli("doctor")
    assert code == 0, out
    line = next(line for line in out.splitlines() if line.split()[1:2] == ["extraction"])
    assert line.split()[0] == "ok"
    assert "20 s of CPU (+4 s a MiB), 512 MiB" in line and "a reader started and answered in" in line


def test_an_extraction_bound_out_of_range_is_a_config_error_naming_the_key(workdir: Path, run_cli) -> None:
    (workdir / "knowledge.yaml").write_text("knowledge:\n  extraction:\n    memory: 64\n", encoding="utf-8")
    code, out, err = run_cli("index", "docs")
    assert code == 2 and "Traceback" not in out + err
    assert "knowledge.extraction.timeout must be more than 0 s, timeout_per_mib at least 0 s and memory at least " \
           "128 (MiB), got 10, 4 and 64" in err
