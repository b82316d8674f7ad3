"""The walker: eligible extensions, and every skip reported with its reason."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.walker import MAX_FILE_BYTES, walk_root
from tests.conftest import write_tree


def test_only_markdown_and_text_files_are_walked_with_forward_slash_paths(workdir: Path) -> None:
    write_tree(workdir, {"docs/a.md": "a", "docs/b.markdown": "b", "docs/c.txt": "c", "docs/d.text": "d",
                         "docs/e.rst": "e", "docs/sub/f.MD": "f"})
    result = walk_root("./docs/")
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
