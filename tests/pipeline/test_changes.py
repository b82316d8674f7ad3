"""Which file events matter, and how a batch of them becomes one run (pipeline/changes.py)."""

from __future__ import annotations

from pathlib import Path

from pipeline.changes import Batch, Pending, Scope, decide
from tests.conftest import write_tree


def _scope(tmp_path: Path, **globs: list[str]) -> Scope:
    return Scope.of([str(tmp_path / "docs")], tmp_path / "docs" / "store", globs.get("include", ()),
                    globs.get("exclude", ()))


def test_the_store_dot_directories_memory_and_outside_paths_never_matter(tmp_path: Path) -> None:
    scope = _scope(tmp_path)
    docs = tmp_path / "docs"
    assert scope.relevant(str(docs / "a.md"))
    assert scope.relevant(str(docs / "sub"))  # a directory (or a file decide() will drop by its stat)
    assert not scope.relevant(str(docs / "store" / "knowledge.db-wal"))
    assert not scope.relevant(str(docs / "store"))
    assert not scope.relevant(str(docs / ".git" / "index"))
    assert not scope.relevant(str(docs / "sub" / ".a.md.swp"))
    assert not scope.relevant(str(docs / "memory" / "a.md"))
    assert not scope.relevant(str(tmp_path / "elsewhere.md"))


def test_exclude_and_include_globs_judge_events_as_the_walker_does(tmp_path: Path) -> None:
    scope = _scope(tmp_path, exclude=["build/", "*.draft.md"], include=["guides/**"])
    docs = tmp_path / "docs"
    assert not scope.relevant(str(docs / "build" / "out.md"))
    assert not scope.relevant(str(docs / "guides" / "x.draft.md"))
    assert not scope.relevant(str(docs / "notes" / "a.md"))  # not included
    assert scope.relevant(str(docs / "guides" / "a.md"))


def test_a_path_that_exists_is_an_update_and_a_deleted_one_is_confirmed_gone(tmp_path: Path) -> None:
    write_tree(tmp_path, {"docs/a.md": "a", "docs/recreated.md": "new text", "docs/image.png": "x"})
    docs = tmp_path / "docs"
    events = [str(docs / "a.md"), str(docs / "recreated.md"), str(docs / "deleted.md"), str(docs / "image.png")]
    batch = decide(events, _scope(tmp_path))
    assert batch == Batch(changed=(str(docs / "a.md"), str(docs / "recreated.md")), gone=(str(docs / "deleted.md"),))


def test_a_changed_directory_covers_the_files_inside_it(tmp_path: Path) -> None:
    write_tree(tmp_path, {"docs/sub/a.md": "a", "docs/sub/b.md": "b"})
    docs = tmp_path / "docs"
    batch = decide([str(docs / "sub"), str(docs / "sub" / "a.md"), str(docs / "sub" / "b.md")], _scope(tmp_path))
    assert batch.changed == (str(docs / "sub"),)


def test_a_large_batch_a_root_event_or_lost_events_become_a_full_run(tmp_path: Path) -> None:
    write_tree(tmp_path, {f"docs/f{i}.md": "x" for i in range(20)})
    docs = tmp_path / "docs"
    scope = _scope(tmp_path)
    assert decide([str(docs / f"f{i}.md") for i in range(20)], scope, full_over=10).full is not None
    assert decide([str(docs)], scope).full is not None
    assert decide([], scope, "the watcher overflowed").full == "the watcher overflowed"
    assert not decide([], scope)


def test_pending_coalesces_repeats_and_empties_when_taken() -> None:
    pending = Pending()
    pending.add(["/d/a.md", "/d/a.md", "/d//b.md"])
    pending.need_full("first")
    pending.need_full("second")
    assert pending
    assert pending.take() == ({"/d/a.md", "/d/b.md"}, "first")
    assert not pending
