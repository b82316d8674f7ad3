"""What a survey finds for a run to do, merged as the walk goes with the real store's fingerprints."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import db
from pipeline.paged_fingerprints import StoredFingerprints
from pipeline.store import Store
from pipeline.survey import Survey
from pipeline.walker import stream_root
from tests.conftest import write_tree

SHA = "0" * 64


def _store(db_path: Path, rows: dict[str, tuple[int, int]]) -> None:
    """A real store holding a document row per path, with the (size, mtime_ns) given and indexed
    long after that mtime (so a file with that stat is unchanged, not racy)."""
    store = Store(db_path)
    with store.conn:
        store.conn.executemany(
            "INSERT INTO documents(path, root, sha256, size, mtime_ns, chunk_count, indexed_at, indexed_ns) "
            "VALUES (?, '.', ?, ?, ?, 0, '2026-01-01 00:00:00', ?)",
            [(path, SHA, size, mtime, mtime + 10**11) for path, (size, mtime) in rows.items()])
    store.close()


def _stored(db_path: Path, *paths: str) -> None:
    _store(db_path, dict.fromkeys(paths, (1, 1)))


@contextmanager
def _fingerprints(db_path: Path, page: int = 2000) -> Iterator[StoredFingerprints]:
    conn = db.connect_readonly(db_path)
    try:
        yield StoredFingerprints(conn, page)
    finally:
        conn.close()


def _stat(workdir: Path, rel: str) -> tuple[int, int]:
    st = os.stat(workdir / rel)
    return st.st_size, st.st_mtime_ns


def _outcome(found: Survey) -> tuple[list[tuple[str, str | None, bool]], int, list[str]]:
    jobs = [(job.path, job.stored_sha256, known) for job, known in found.jobs()]
    return jobs, found.unchanged, found.removals()


def test_a_complete_walk_removes_only_the_stored_files_under_it_that_no_root_walked(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n", "docs/.b.md": "# B\n", "notes/c.md": "# C\n"})
    settings = make_settings()
    _stored(settings.db_path, "docs/a.md", "docs/.b.md", "docs/gone.md", "docs/sub/gone.md", "docs-2/x.md",
            "docs.md", "notes/c.md", "notes/gone.md", "https://example.org/docs/page")
    # docs walked as a tree (its dot file skipped there) and docs/.b.md named alone; notes not walked
    with _fingerprints(settings.db_path) as stored:
        found = Survey(settings, [str(workdir / "docs"), str(workdir / "docs/.b.md")], stored, False)
        jobs, _, removals = _outcome(found)
    assert removals == ["docs/gone.md", "docs/sub/gone.md"]
    assert sorted(path for path, _, _ in jobs) == ["docs/.b.md", "docs/a.md"]  # their stat differs: read


def test_a_walk_that_saw_nothing_removes_nothing(workdir: Path, make_settings: Callable[..., Settings]) -> None:
    (workdir / "docs").mkdir()
    settings = make_settings()
    _stored(settings.db_path, "docs/a.md")
    with _fingerprints(settings.db_path) as stored:
        assert _outcome(Survey(settings, [str(workdir / "docs")], stored, False)) == ([], 0, [])


def test_removals_are_known_only_once_the_walk_is_complete(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n"})
    settings = make_settings()
    _stored(settings.db_path, "docs/gone.md")
    with _fingerprints(settings.db_path) as stored:
        found = Survey(settings, [str(workdir / "docs")], stored, False)
        with pytest.raises(RuntimeError):
            found.removals()
        jobs = found.jobs()
        next(jobs)
        with pytest.raises(RuntimeError):
            found.removals()
        assert list(jobs) == []
        assert found.removals() == ["docs/gone.md"]


def test_a_directory_replaced_while_the_walk_runs_leaves_the_walk_incomplete_and_removes_nothing(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {"docs/a/one.md": "1\n", "docs/b/two.md": "2\n", "docs/c/three.md": "3\n"})
    settings = make_settings()
    _stored(settings.db_path, "docs/a/gone.md", "docs/c/three.md", "docs/d/gone.md")
    with _fingerprints(settings.db_path) as stored:
        found = Survey(settings, [str(workdir / "docs")], stored, False)
        jobs = found.jobs()
        assert next(jobs)[0].path == "docs/a/one.md"
        # docs/c was listed with docs and is not opened yet: swap it for another directory
        (workdir / "docs/c").rename(workdir / "docs/old-c")
        shutil.copytree(workdir / "docs/old-c", workdir / "docs/c")
        rest = [job.path for job, _ in jobs]
    assert "docs/c/three.md" not in rest
    assert [(f.path, f.reason.split(":")[0]) for f in found.failures] == [("docs/c", "cannot list directory")]
    assert found.removals() == []


def test_a_tree_larger_than_a_page_gives_what_one_page_gives(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    names = ["a.md", "a b.md", "a-b/x.md", "a/x.md", "a/y/z.md", "a0.md", "A.md", "é.md", "z/é/ü.md", "ab.md"]
    tree = {f"docs/d{i % 7}/{name}": f"# {i}\n" for i in range(40) for name in names}
    write_tree(workdir, tree)
    settings = make_settings()
    paths = sorted(tree)
    changed, unchanged = paths[::5], [p for i, p in enumerate(paths) if i % 5 and i % 3]
    gone = [f"docs/d{i}/{name}".replace(".md", "-gone.md") for i in range(3) for name in names]
    rows = {p: _stat(workdir, p) for p in unchanged}
    rows.update({p: (10**6, 1) for p in changed + gone})
    rows["notes/elsewhere.md"] = (1, 1)
    _store(settings.db_path, rows)
    outcomes = []
    for page in (3, 2000):
        with _fingerprints(settings.db_path, page) as stored:
            outcomes.append(_outcome(Survey(settings, [str(workdir / "docs")], stored, False)))
    assert outcomes[0] == outcomes[1]
    jobs, unchanged_count, removals = outcomes[0]
    new = set(paths) - set(changed) - set(unchanged)
    assert {(p, known) for p, _, known in jobs} == {(p, True) for p in changed} | {(p, False) for p in new}
    assert all(sha == SHA for p, sha, known in jobs if known)
    assert unchanged_count == len(unchanged)
    assert removals == sorted(gone)


def test_the_walk_yields_files_in_the_byte_order_of_their_paths(workdir: Path) -> None:
    names = ["a.md", "a b.md", "a-b/x.md", "a/x.md", "a/y/z.md", "a0.md", "A.md", "é.md", "z/é/ü.md", "a.b/c.md"]
    write_tree(workdir, {f"docs/{name}": "x\n" for name in names})
    _, files = stream_root(str(workdir / "docs"))
    walked = [f.path for f in files]
    assert walked == sorted(walked, key=lambda p: p.encode()) and len(walked) == len(names)


def test_nested_roots_read_each_file_once_and_remove_what_neither_walked(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {"docs/a.md": "a\n", "docs/api/b.md": "b\n", "docs/api/c.md": "c\n"})
    settings = make_settings(exclude=["api/c.md"])  # docs skips api/c.md, which docs/api walks
    _stored(settings.db_path, "docs/api/c.md", "docs/api/gone.md")
    with _fingerprints(settings.db_path) as stored:
        found = Survey(settings, [str(workdir / "docs"), str(workdir / "docs/api")], stored, False)
        jobs, _, removals = _outcome(found)
    assert [(path, known) for path, _, known in jobs] == [("docs/a.md", False), ("docs/api/b.md", False),
                                                         ("docs/api/c.md", True)]
    assert (found.files, removals) == (3, ["docs/api/gone.md"])


def test_a_base_inside_the_root_is_looked_up_file_by_file_and_never_pruned(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {"docs/a.md": "a\n", "docs/sub/b.md": "b\n"})
    settings = make_settings(root_directory="docs/sub")
    docs = str(workdir / "docs")
    _store(settings.db_path, {"b.md": _stat(workdir, "docs/sub/b.md"), "gone.md": (1, 1),
                              f"{docs}/gone.md": (1, 1)})
    with _fingerprints(settings.db_path) as stored:
        jobs, unchanged, removals = _outcome(Survey(settings, [docs], stored, False))
    assert ([path for path, _, _ in jobs], unchanged, removals) == ([f"{docs}/a.md"], 1, [f"{docs}/gone.md"])


def test_a_no_change_survey_of_a_large_tree_removes_nothing(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {f"docs/d{i % 10}/f{i}.md": "x\n" for i in range(2000)})
    settings = make_settings()
    _store(settings.db_path, {f"docs/d{i % 10}/f{i}.md": _stat(workdir, f"docs/d{i % 10}/f{i}.md")
                              for i in range(2000)})
    with _fingerprints(settings.db_path, page=64) as stored:
        found = Survey(settings, [str(workdir / "docs")], stored, False)
        assert _outcome(found) == ([], 2000, [])
    assert found.files == 2000


def test_files_lacking_vectors_are_read_again_whatever_their_stat(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {"docs/a.md": "a\n", "docs/b.md": "b\n", "docs/c.md": "c\n"})
    settings = make_settings()
    rows = {p: _stat(workdir, p) for p in ("docs/a.md", "docs/b.md")}
    rows["docs/c.md"] = (1, 1)
    _store(settings.db_path, rows)
    with _fingerprints(settings.db_path) as stored:
        found = Survey(settings, [str(workdir / "docs")], stored, False, backfill={"docs/a.md", "docs/c.md"})
        assert _outcome(found) == ([("docs/a.md", None, True), ("docs/c.md", None, True)], 1, [])
