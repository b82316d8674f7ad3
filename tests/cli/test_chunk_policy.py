"""The chunk policy pinned in the store: `knowledge index` re-chunks the documents of a format whose
extractor (or the chunker) changed, even when their files are unchanged, and says so."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pipeline import chunker, db, formats
from tests.conftest import write_tree
from tests.pipeline import format_samples as samples

TREE: dict[str, str | bytes] = {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbravo\n", "docs/c.rst": samples.RST,
        "docs/notes.txt": "plain words\n"}


def _policies(workdir: Path) -> dict[str, str]:
    conn = db.connect_readonly(workdir / "knowledge" / "default" / "knowledge.db")
    try:
        return dict(conn.execute("SELECT path, policy FROM documents").fetchall())
    finally:
        conn.close()


def _bump(monkeypatch: pytest.MonkeyPatch, name: str, version: str) -> None:
    """Give one format of the registry a newer extractor version, as a release that changed it would."""
    newer = dataclasses.replace(formats.BY_NAME[name], version=version)
    monkeypatch.setitem(formats.BY_NAME, name, newer)
    for ext in newer.extensions:
        monkeypatch.setitem(formats.BY_EXTENSION, ext, newer)


def test_each_document_records_the_policy_of_its_format_extractor_and_chunker(workdir: Path, run_cli) -> None:
    write_tree(workdir, TREE)
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    chunk = f"+chunk:{chunker.VERSION}"
    assert _policies(workdir) == {"docs/a.md": f"markdown:1{chunk}", "docs/b.md": f"markdown:1{chunk}",
                                  "docs/c.rst": f"rst:2{chunk}", "docs/notes.txt": f"text:1{chunk}"}
    assert "re-chunked" not in out


def test_a_newer_extractor_re_chunks_only_its_formats_unchanged_files(
    workdir: Path, run_cli, monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_tree(workdir, TREE)
    assert run_cli("index", "docs")[0] == 0
    _bump(monkeypatch, "markdown", "2")
    code, out, err = run_cli("index", "docs", "--dry-run", "--json")
    assert code == 0, out + err
    preview = json.loads(out)
    assert preview["rechunked"] == ["docs/a.md", "docs/b.md"] and preview["updated"] == ["docs/a.md", "docs/b.md"]
    code, out, err = run_cli("index", "docs", "--dry-run")
    assert code == 0 and "re-chunked: 2 (newer extractor or chunker)" in out.splitlines()
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    assert "indexed: added=0 updated=2 unchanged=2 " in out
    assert "re-chunked: 2 (newer extractor or chunker)" in out.splitlines()
    policies = _policies(workdir)
    assert policies["docs/a.md"].startswith("markdown:2+") and policies["docs/b.md"].startswith("markdown:2+")
    assert policies["docs/c.rst"].startswith("rst:2+") and policies["docs/notes.txt"].startswith("text:1+")
    _bump(monkeypatch, "rst", "3")
    code, out, err = run_cli("index", "docs/a.md", "--json")  # a run over one file re-chunks (and counts) none else
    assert code == 0 and json.loads(out)["rechunked"] == 0
    code, out, err = run_cli("index", "docs")
    assert code == 0 and "indexed: added=0 updated=1 unchanged=3 " in out
    assert "re-chunked: 1 (newer extractor or chunker)" in out.splitlines()
    assert _policies(workdir)["docs/c.rst"].startswith("rst:3+")
    code, out, err = run_cli("index", "docs")  # pinned again: nothing more to do
    assert code == 0 and "indexed: added=0 updated=0 unchanged=4 " in out and "re-chunked" not in out


def test_a_newer_chunker_re_chunks_every_document(workdir: Path, run_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(workdir, TREE)
    assert run_cli("index", "docs")[0] == 0
    newer = str(int(chunker.VERSION) + 1)
    monkeypatch.setattr(chunker, "VERSION", newer)
    code, out, err = run_cli("index", "docs", "--json")
    assert code == 0, out + err
    summary = json.loads(out)
    assert (summary["updated"], summary["unchanged"], summary["rechunked"]) == (4, 0, 4)
    assert all(p.endswith(f"+chunk:{newer}") for p in _policies(workdir).values())
    code, out, err = run_cli("index", "docs", "--reindex")  # a reindex reads everything: nothing to call out
    assert code == 0 and "re-chunked" not in out
