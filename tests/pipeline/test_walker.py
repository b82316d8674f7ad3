"""The walker: eligible extensions, and every skip reported with its reason."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import pipeline.walker
from pipeline.formats import extensions_of
from pipeline.walker import MAX_FILE_BYTES, walk_root
from tests.conftest import write_tree


def test_with_markdown_and_text_on_only_they_are_walked_with_forward_slash_paths(workdir: Path) -> None:
    write_tree(workdir, {"docs/a.md": "a", "docs/b.markdown": "b", "docs/c.txt": "c", "docs/d.text": "d",
                         "docs/e.rst": "e", "docs/sub/f.MD": "f"})
    result = walk_root("./docs/", extensions=extensions_of(("markdown", "text")))
    assert result.root == "docs"
    assert [f.path for f in result.files] == ["docs/a.md", "docs/b.markdown", "docs/c.txt", "docs/d.text",
                                              "docs/sub/f.MD"]
    assert result.complete


def test_dot_directories_memory_and_the_store_are_skipped_with_reasons(workdir: Path) -> None:
    write_tree(workdir, {"docs/.git/x.md": "x", "docs/memory/m.md": "m", "docs/knowledge/default/k.md": "k",
                         "docs/ok.md": "ok", "docs/.hidden.md": "h"})
    result = walk_root("docs", store_dir=workdir / "docs/knowledge/default")
    assert [f.path for f in result.files] == ["docs/ok.md"]
    reasons = {s.path: s.reason for s in result.skipped}
    assert reasons == {
        "docs/.git/": "dot directory",
        "docs/memory/": "memory directory",
        "docs/knowledge/default/": "the store's own directory",
        "docs/.hidden.md": "dot file",
    }


def test_symlinks_and_large_files_are_skipped_with_reasons(workdir: Path) -> None:
    write_tree(workdir, {"docs/real.md": "r", "docs/big.md": "x" * (MAX_FILE_BYTES + 1)})
    os.symlink(workdir / "docs/real.md", workdir / "docs/link.md")
    os.symlink(workdir / "docs", workdir / "docs/loop")
    result = walk_root("docs")
    assert [f.path for f in result.files] == ["docs/real.md"]
    reasons = {s.path: s.reason for s in result.skipped}
    assert reasons["docs/link.md"] == "symlink refused"
    assert reasons["docs/loop"] == "symlink refused"
    assert reasons["docs/big.md"].startswith("too large")


def test_a_missing_root_is_a_walk_error_so_nothing_is_pruned(workdir: Path) -> None:
    result = walk_root("nowhere")
    assert not result.complete
    assert result.errors[0].reason.startswith("cannot read")


def test_a_single_file_root_keeps_its_path_as_typed(workdir: Path) -> None:
    write_tree(workdir, {"docs/x.md": "x"})
    result = walk_root("./docs/x.md")
    assert [f.path for f in result.files] == ["./docs/x.md"]


def test_special_files_and_names_that_are_not_utf8_are_skipped_with_reasons(workdir: Path) -> None:
    write_tree(workdir, {"docs/ok.md": "ok"})
    os.mkfifo(workdir / "docs/pipe.md")
    docs = os.fsencode(workdir / "docs")
    with open(docs + b"/bad\xff.md", "wb") as handle:
        handle.write(b"x")
    os.mkdir(docs + b"/dir\xfe")
    result = walk_root("docs")
    assert [f.path for f in result.files] == ["docs/ok.md"]
    assert {s.path: s.reason for s in result.skipped} == {
        "docs/bad\\xff.md": "file name is not valid UTF-8",
        "docs/dir\\xfe/": "file name is not valid UTF-8",
        "docs/pipe.md": "not a regular file (a FIFO)",
    }
    assert result.complete


def test_a_directory_swapped_for_a_symlink_while_the_walk_runs_is_not_followed(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(workdir, {"docs/a/one.md": "1", "docs/b/two.md": "2", "private/b/secret.md": "s"})
    listed = pipeline.walker._list_dir

    def swap_b_first(directory: str, expected: os.stat_result) -> Any:
        if directory == "docs/b" and not (workdir / "docs/b").is_symlink():
            (workdir / "docs/b").rename(workdir / "b.old")
            (workdir / "docs/b").symlink_to(workdir / "private/b", target_is_directory=True)
        return listed(directory, expected)

    monkeypatch.setattr(pipeline.walker, "_list_dir", swap_b_first)
    result = walk_root("docs")
    assert [f.path for f in result.files] == ["docs/a/one.md"]
    assert {s.path: s.reason for s in result.skipped} == {"docs/b/": "symlink refused"}


def test_a_directory_replaced_by_another_while_the_walk_runs_makes_the_walk_incomplete(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tree(workdir, {"docs/b/two.md": "2", "other/three.md": "3"})
    listed = pipeline.walker._list_dir

    def replace_b(directory: str, expected: os.stat_result) -> Any:
        if directory == "docs/b" and (workdir / "other").exists():
            (workdir / "docs/b").rename(workdir / "b.old")
            (workdir / "other").rename(workdir / "docs/b")
        return listed(directory, expected)

    monkeypatch.setattr(pipeline.walker, "_list_dir", replace_b)
    result = walk_root("docs")
    assert result.files == [] and not result.complete
    assert result.errors[0].reason == "cannot list directory: replaced while the walk ran"


def test_a_tree_a_thousand_directories_deep_is_walked_without_recursion(workdir: Path) -> None:
    level = workdir / "docs"
    level.mkdir()
    for _ in range(1000):
        level = level / "d"
        level.mkdir()
    (level / "deep.md").write_text("x", encoding="utf-8")
    result = walk_root("docs")
    assert [f.path for f in result.files] == ["docs/" + "d/" * 1000 + "deep.md"]
    (level / "deep.md").unlink()
    while level != workdir / "docs":
        level.rmdir()
        level = level.parent
