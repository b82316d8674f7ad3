"""`knowledge index` rough edges: a root that does not exist, and a run that only fills in missing vectors."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import write_tree
from tests.embedserver import EmbedServer

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=16) as srv:
        yield srv


def test_index_refuses_a_root_that_does_not_exist_before_creating_a_store(workdir: Path, run_cli: RunCli) -> None:
    code, _, err = run_cli("index", "nonexistent-dir")
    assert code == 2
    assert "nonexistent-dir" in err and "no such file or directory" in err
    assert not (workdir / "knowledge").exists()


def test_index_names_which_of_several_roots_do_not_exist(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n"})
    code, _, err = run_cli("index", "docs", "gone-one", "gone-two")
    assert code == 2
    assert "gone-one, gone-two" in err and "2 of the 3 roots" in err
    assert "docs" not in err.split("cannot index", 1)[1].split(":", 1)[0]
    assert not (workdir / "knowledge").exists()


def test_filling_in_missing_vectors_reports_vectors_added_not_updated(workdir: Path, run_cli: RunCli,
                                                                      server: EmbedServer) -> None:
    write_tree(workdir, {f"docs/n{i}.md": f"# Note {i}\n\nnote {i} about topic{i % 3}\n" for i in range(5)})
    write_tree(workdir, {"docs/changed.md": "# Changed\n\nbefore\n"})
    (workdir / "knowledge.yaml").write_text("knowledge:\n  paths: [docs]\n", encoding="utf-8")
    assert run_cli("index")[0] == 0
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {server.base_url}\n    model: bow\n"
        "    timeout: 2\n", encoding="utf-8")
    (workdir / "docs/changed.md").write_text("# Changed\n\nafter, longer text\n", encoding="utf-8")
    code, out, _ = run_cli("index", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["vectors_added"] == 5 and data["updated"] == 1 and data["added"] == 0
    code, out, _ = run_cli("index")
    assert code == 0 and "vectors added" not in out and "unchanged=6" in out


def test_the_summary_line_says_vectors_added(workdir: Path, run_cli: RunCli, server: EmbedServer) -> None:
    write_tree(workdir, {f"docs/n{i}.md": f"# Note {i}\n\nnote {i}\n" for i in range(3)})
    (workdir / "knowledge.yaml").write_text("knowledge:\n  paths: [docs]\n", encoding="utf-8")
    assert run_cli("index")[0] == 0
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {server.base_url}\n    model: bow\n"
        "    timeout: 2\n", encoding="utf-8")
    code, out, _ = run_cli("index")
    assert code == 0
    assert "updated=0" in out and "vectors added: 3" in out
