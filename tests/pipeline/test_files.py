"""Reading walked files through the real CLI: hostile names, FIFOs, swapped directories, stale
content and deep trees cost exactly the file concerned, with a reason, and never hang a run."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pipeline.survey
from pipeline import db
from pipeline.globs import Globs
from pipeline.walker import EXTENSIONS, MAX_FILE_BYTES, Found, WalkResult, stream_root
from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]
FTS_TABLES = ("chunks_fts", "chunks_fts_exact")


def _indexed(workdir: Path, word: str) -> dict[str, int]:
    """Documents, chunks and rows of every FTS table that still hold word."""
    conn = db.connect_readonly(workdir / "knowledge/default/knowledge.db")
    try:
        counts = {"documents": conn.execute("SELECT count(*) FROM documents").fetchone()[0],
                  "chunks": conn.execute("SELECT count(*) FROM chunks WHERE body LIKE ?", (f"%{word}%",)).fetchone()[0]}
        for table in FTS_TABLES:
            counts[table] = conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (word,)).fetchone()[0]
        return counts
    finally:
        conn.close()


@pytest.fixture
def after_walk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], None]], None]]:
    """Run a change to the tree once, right after the walk and before any file is read."""
    changes: list[Callable[[], None]] = []

    def walk_then_change(root: str, store_dir: Path | None = None, globs: Globs | None = None,
                         extensions: frozenset[str] = EXTENSIONS) -> tuple[WalkResult, Iterator[Found]]:
        result, files = stream_root(root, store_dir, globs, extensions)
        walked = list(files)
        while changes:
            changes.pop()()
        return result, iter(walked)

    monkeypatch.setattr(pipeline.survey, "stream_root", walk_then_change)
    yield changes.append


def test_a_file_name_that_is_not_utf8_costs_that_file_alone_at_once(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha text\n"})
    with open(os.fsencode(workdir / "docs") + b"/bad\xffname.md", "wb") as handle:
        handle.write(b"# x\n")
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    assert "added=1 " in out and "failed=0" in out
    assert "skipped: docs/bad\\xffname.md: file name is not valid UTF-8" in out
    assert "retries" not in out + err


def test_a_fifo_in_the_tree_is_reported_skipped(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n"})
    os.mkfifo(workdir / "docs/pipe.md")
    code, out, _ = run_cli("index", "docs")
    assert code == 0 and "added=1 " in out
    assert "skipped: docs/pipe.md: not a regular file (a FIFO)" in out


@pytest.mark.timeout(60)
def test_a_file_swapped_for_a_fifo_after_the_walk_never_hangs_the_run(
    workdir: Path, run_cli: RunCli, after_walk: Callable[[Callable[[], None]], None]
) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n"})
    fifo = workdir / "docs/b.md"

    def swap() -> None:
        fifo.unlink()
        os.mkfifo(fifo)

    after_walk(swap)
    # Should the read block after all, a writer opening the FIFO later unblocks it and the
    # assertions below fail instead of the test hanging.
    valve = threading.Timer(20, lambda: os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)))
    valve.daemon = True
    valve.start()
    try:
        code, out, _ = run_cli("index", "docs")
    finally:
        valve.cancel()
    assert code == 0 and "added=1 " in out
    assert "skipped: docs/b.md: not a regular file (a FIFO)" in out


def test_a_directory_swapped_for_a_symlink_during_a_run_is_never_followed(
    workdir: Path, run_cli: RunCli, after_walk: Callable[[Callable[[], None]], None]
) -> None:
    write_tree(workdir, {"docs/sub/notes.md": "# Notes\n\npublic words\n",
                         "private/notes.md": "# Secret\n\nconfidential payroll\n"})

    def swap() -> None:
        (workdir / "docs/sub").rename(workdir / "docs.old")
        (workdir / "docs/sub").symlink_to(workdir / "private", target_is_directory=True)

    after_walk(swap)
    code, out, _ = run_cli("index", "docs")
    assert "skipped: docs/sub/notes.md: symlink refused" in out
    assert "added=0 " in out and code == 0
    assert _indexed(workdir, "payroll") == {"documents": 0, "chunks": 0, "chunks_fts": 0, "chunks_fts_exact": 0}
    assert "payroll" not in run_cli("search", "confidential payroll")[1]


@pytest.mark.parametrize(("change", "reason"), [
    (b"# A\n\nalpha \x00\x01 binary\n", "binary file (contains NUL bytes)"),
    (b"# A\n\nalpha \xff\xfe latin\n", "not UTF-8 (invalid byte at offset 11)"),
    (b"alpha " * (MAX_FILE_BYTES // 6 + 1), "too large"),
])
@pytest.mark.parametrize("reindex", [False, True])
def test_a_file_that_can_no_longer_be_indexed_leaves_the_index(
    workdir: Path, run_cli: RunCli, change: bytes, reason: str, reindex: bool
) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha words\n", "docs/b.md": "# B\n\nbeta words\n"})
    assert run_cli("index", "docs")[0] == 0
    assert _indexed(workdir, "alpha")["chunks_fts"] == 1
    (workdir / "docs/a.md").write_bytes(change)
    code, out, _ = run_cli("index", "docs", *(["--reindex"] if reindex else []))
    assert code == 0, out
    assert f"skipped: docs/a.md: {reason}" in out
    assert _indexed(workdir, "alpha") == {"documents": 1, "chunks": 0, "chunks_fts": 0, "chunks_fts_exact": 0}
    assert "docs/a.md" not in run_cli("sources")[1]
    assert run_cli("search", "alpha")[1].count("docs/a.md") == 0


def test_a_tree_a_thousand_directories_deep_is_indexed(workdir: Path, run_cli: RunCli) -> None:
    levels = [workdir / "docs"]
    for _ in range(1000):  # one level at a time: Path.mkdir(parents=True) and rmtree recurse
        levels.append(levels[-1] / "d")
    for level in levels:
        level.mkdir()
    (levels[-1] / "bottom.md").write_text("# Bottom\n\nabyssal\n", encoding="utf-8")
    write_tree(workdir, {"docs/top.md": "# Top\n\nsurface\n"})
    try:
        code, out, err = run_cli("index", "docs")
        assert code == 0, out + err
        assert "added=2 " in out
        assert _indexed(workdir, "abyssal")["chunks_fts"] == 1
    finally:
        (levels[-1] / "bottom.md").unlink()
        for level in reversed(levels[1:]):
            level.rmdir()


def test_a_file_turned_into_a_symlink_or_fifo_leaves_the_index_but_a_dot_file_named_once_stays(
    workdir: Path, run_cli: RunCli
) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n", "docs/.c.md": "# C\n\ngamma\n",
                         "elsewhere.md": "# E\n\nalpha elsewhere\n"})
    assert run_cli("index", "docs")[0] == 0
    assert run_cli("index", "docs/.c.md")[0] == 0  # a dot file indexed by name
    (workdir / "docs/a.md").unlink()
    (workdir / "docs/a.md").symlink_to(workdir / "elsewhere.md")
    (workdir / "docs/b.md").unlink()
    os.mkfifo(workdir / "docs/b.md")
    code, out, _ = run_cli("index", "docs", "docs", "docs/.c.md")  # overlapping roots: the run still finishes
    assert code == 0, out
    assert "skipped: docs/a.md: symlink refused" in out and "skipped: docs/b.md: not a regular file (a FIFO)" in out
    sources = run_cli("sources")[1]
    assert "docs/a.md" not in sources and "docs/b.md" not in sources and "docs/.c.md" in sources
    assert _indexed(workdir, "alpha")["chunks_fts"] == 0 and _indexed(workdir, "beta")["chunks_fts"] == 0
