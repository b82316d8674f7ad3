"""The tree changes under a run: files edited, deleted, renamed, created and swapped (for a FIFO, for a
symlink, a directory for a symlink to a private one). The run finishes, nothing outside the tree is
indexed, and a re-run converges to exactly the files on disk."""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.lib.corpus import generate
from tests.conftest import write_tree
from tests.faults.conftest import Project
from tests.faults.invariants import Invariants
from tests.pipeline.test_files import after_walk  # noqa: F401 - the fixture, requested by name

RunCli = Callable[..., tuple[int, str, str]]
SECRET = "# Secret\n\nconfidential payroll figures\n"


def _private(workdir: Path) -> Path:
    write_tree(workdir, {"private/notes.md": SECRET})
    return workdir / "private"


def _assert_private_never_indexed(knowledge: Callable[..., tuple[int, str, str]]) -> None:
    code, out, _ = knowledge("match", "payroll", "--count")
    assert (code, out.strip()) == (0, "0")


def test_every_kind_of_change_after_the_walk_costs_only_those_files(
    workdir: Path, run_cli: RunCli, after_walk: Callable[[Callable[[], None]], None],
) -> None:
    docs = workdir / "docs"
    write_tree(workdir, {f"docs/{d}/f{i}.md": f"# {d} {i}\n\nsteady words {d}{i}\n" for d in "abc" for i in range(5)})
    private = _private(workdir)

    def change() -> None:
        (docs / "a/f0.md").write_text("# a 0\n\nedited after the walk\n", encoding="utf-8")
        (docs / "a/f1.md").unlink()
        (docs / "a/f2.md").rename(docs / "a/renamed.md")
        (docs / "a/f3.md").unlink()
        os.mkfifo(docs / "a/f3.md")
        (docs / "a/f4.md").unlink()
        (docs / "a/f4.md").symlink_to(private / "notes.md")
        (docs / "b").rename(workdir / "b.old")
        (docs / "b").symlink_to(private, target_is_directory=True)
        write_tree(docs, {"c/new.md": "# new\n\ncreated after the walk\n"})

    after_walk(change)
    code, out, err = run_cli("index", "docs")
    assert "Traceback" not in err, err
    # A file gone between the walk and its read is an ordinary edit: skipped with its reason, exit 0.
    assert code == 0 and "added=6 " in out and "failed=0" in out, out
    assert "skipped: docs/a/f1.md: vanished since the walk (deleted or renamed)" in out
    assert "skipped: docs/a/f2.md: vanished since the walk (deleted or renamed)" in out
    _assert_private_never_indexed(run_cli)

    summary = Invariants(run_cli, workdir, workdir / "knowledge/default/knowledge.db", ("docs",)).assert_recovered()
    assert summary["files"] == 2 + 6  # a: f0 and renamed.md; b is a symlink now; c: five and new.md
    _assert_private_never_indexed(run_cli)


def _mutate_once(kind: str, victim: Path, private: Path, n: int, swapped_dir: bool) -> bool:
    """Change the tree around victim by kind (the n-th change); whether a directory has been swapped for a link."""
    if kind == "edit":
        with open(victim, "a", encoding="utf-8") as handle:
            handle.write(f"\n\nedited during the run {n}\n")
    elif kind == "delete":
        victim.unlink()
    elif kind == "rename":
        victim.rename(victim.with_name(f"moved-{n}.md"))
    elif kind == "create":
        victim.with_name(f"created-{n}.md").write_text(f"# New {n}\n\nfresh text\n", encoding="utf-8")
    elif kind == "fifo":
        victim.unlink()
        os.mkfifo(victim)
    elif kind == "symlink":
        victim.unlink()
        victim.symlink_to(private / "notes.md")
    elif not swapped_dir:
        directory = victim.parent
        directory.rename(directory.with_name(directory.name + "-gone"))
        directory.symlink_to(private, target_is_directory=True)
        return True
    return swapped_dir


@pytest.mark.slow
def test_a_tree_mutated_throughout_a_real_run_converges(project: Project) -> None:
    docs = project.cwd / "docs"
    generate(docs, 400, seed=31)
    private = _private(project.cwd)
    rng = random.Random(7)
    stop = threading.Event()
    done: list[str] = []
    broken: list[BaseException] = []

    def files() -> list[Path]:
        return sorted(p for p in docs.rglob("*.md") if p.is_file() and not p.is_symlink())

    def mutate() -> None:
        swapped_dir = False
        try:
            while not stop.is_set() and len(done) < 400:
                present = files()
                victim = rng.choice(present)
                kind = rng.choice(["edit", "edit", "delete", "rename", "create", "fifo", "symlink", "directory"])
                swapped_dir = _mutate_once(kind, victim, private, len(done), swapped_dir)
                done.append(kind)
                stop.wait(0.005)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            broken.append(exc)

    run = project.popen("index", "docs", "--json")
    project.wait_for(lambda: project.documents() >= 20 or run.poll() is not None, 60, "the run to start writing")
    mutator = threading.Thread(target=mutate, daemon=True)
    mutator.start()
    try:
        out, err = run.communicate(timeout=120)
    finally:
        stop.set()
        mutator.join(timeout=30)
    assert not broken, broken
    assert "Traceback" not in err, err
    summary = json.loads(out)
    assert run.returncode == 0 and summary["failed"] == 0 and not summary["failures"], (err, summary)
    assert len(done) >= 20, f"only {len(done)} changes landed during the run"
    _assert_private_never_indexed(project.knowledge)

    project.invariants().assert_recovered()
    _assert_private_never_indexed(project.knowledge)
