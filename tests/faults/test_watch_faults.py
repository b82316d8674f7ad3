"""Faults under a running `knowledge watch` (a real process): a watched root replaced, an outage during a
pass, a file name that is not UTF-8. The watcher keeps indexing, and once it is stopped the store
holds exactly the tree (tests/faults/invariants.py)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import time
from collections.abc import Callable, Iterator

import pytest

from tests.cli.test_watch import WAIT_S, Watching, event
from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.faults.conftest import Project
from tests.faults.invariants import stored_hashes

Record = dict[str, object]


@pytest.fixture
def watched(project: Project) -> Iterator[Callable[[], Watching]]:
    """Start `knowledge watch` in the project (knowledge.paths: [docs]) once its tree is written; killed after."""
    started: list[Watching] = []

    def start() -> Watching:
        config = project.cwd / "knowledge.yaml"
        text = config.read_text(encoding="utf-8") if config.exists() else "knowledge:\n"
        config.write_text(text + "  paths: [docs]\n", encoding="utf-8")
        watching = Watching(project.cwd, project.env)
        started.append(watching)
        watching.wait_for(event("watching"), "watching line")
        return watching

    yield start
    for watching in started:
        if watching.proc.poll() is None:
            watching.proc.kill()
            watching.proc.wait(timeout=WAIT_S)


def indexed(project: Project, path: str, word: str) -> Callable[[], bool]:
    """True once the stored document at path (relative to the project) holds word in its chunks."""

    def check() -> bool:
        from pipeline import db

        try:
            conn = db.connect_readonly(project.db_path)
        except Exception:  # noqa: BLE001 - mid-creation
            return False
        try:
            row = conn.execute("SELECT group_concat(c.body, ' ') FROM documents d JOIN chunks c ON "
                               "c.document_id = d.id WHERE d.path = ?", (path,)).fetchone()
            return bool(row and row[0] and word in row[0])
        finally:
            conn.close()

    return check


def drain(watching: Watching) -> list[Record]:
    """Every JSON line the watcher wrote so far (without waiting)."""
    for _ in range(100_000):
        try:
            line = watching.lines.get_nowait()
        except queue.Empty:
            break
        watching.raw.append(line)
        if line.startswith("{"):
            watching.seen.append(json.loads(line))
    return watching.seen


def stop_and_check(project: Project, watching: Watching) -> None:
    """SIGTERM the watcher (exit 0), then every invariant on what it left."""
    assert watching.stop() == 0, "".join(watching.raw)
    project.invariants().assert_recovered(check_first=True)


@pytest.mark.parametrize("replace", ["mv", "rm-rf"])
def test_a_replaced_root_is_watched_again_and_later_edits_are_indexed(
        project: Project, watched: Callable[[], Watching], replace: str) -> None:
    write_tree(project.cwd, {"docs/a.md": "# A\n\nfirst words\n"})
    watching = watched()
    docs = project.cwd / "docs"
    if replace == "mv":  # a deploy script: build the new tree beside, move the old away, move the new in
        write_tree(project.cwd, {"new/b.md": "# B\n\nbaltic words\n"})
        docs.rename(project.cwd / "old")
        (project.cwd / "new").rename(docs)
    else:  # git clone into a fresh directory of the same name
        shutil.rmtree(docs)
        write_tree(project.cwd, {"docs/b.md": "# B\n\nbaltic words\n"})
    replaced = watching.wait_for(event("root-replaced"), "the replaced root reported")
    assert replaced["level"] == "warning" and str(replaced["root"]).endswith("/docs"), replaced
    project.wait_for(indexed(project, "docs/b.md", "baltic"), WAIT_S, "the new tree indexed")
    # the full run after the re-arm: the new root's watches were in place before it began
    watching.wait_for(lambda r: r.get("event") == "run" and str(r.get("full", "")).startswith("root replaced"),
                      "the full run of the new root")
    (docs / "c.md").write_text("# C\n\nzeppelin words\n", encoding="utf-8")
    project.wait_for(indexed(project, "docs/c.md", "zeppelin"), WAIT_S, "an edit after the replacement")
    stop_and_check(project, watching)


def test_a_pass_failing_in_an_outage_keeps_its_paths_and_retries_them_until_indexed(
        project: Project, server: EmbedServer, watched: Callable[[], Watching]) -> None:
    (project.cwd / "knowledge.yaml").write_text(
        f"knowledge:\n  embeddings:\n    base_url: {server.base_url}\n    model: hashed-bow\n    timeout: 2\n",
        encoding="utf-8")
    write_tree(project.cwd, {"docs/a.md": "# A\n\nfirst words\n", "docs/b.md": "# B\n\nsteady words\n"})
    watching = watched()
    server.stop()  # the embeddings server goes down
    (project.cwd / "docs" / "a.md").write_text("# A\n\nzeppelin words during the outage\n", encoding="utf-8")
    failed = watching.wait_for(lambda r: r.get("event") == "run" and r.get("full") is None
                               and ("error" in r or bool(r.get("failed"))), "the pass failing in the outage")
    time.sleep(1.5)
    server.start()  # back on the same port: the kept path is tried again, with no new edit
    project.wait_for(indexed(project, "docs/a.md", "zeppelin"), WAIT_S, "the kept path retried")
    assert failed["level"] == "error" and failed.get("pending") == 1 and float(str(failed["retry_s"])) >= 1, failed
    stop_and_check(project, watching)


def test_a_non_utf8_name_is_skipped_once_without_a_full_run(
        project: Project, watched: Callable[[], Watching]) -> None:
    write_tree(project.cwd, {"docs/a.md": "# A\n\nfirst words\n", "docs/sub/b.md": "# B\n\nsteady words\n"})
    watching = watched()
    bad = os.path.join(os.fsencode(project.cwd), b"docs", b"sub", b"caf\xe9.md")
    for edit in range(3):  # every event on the name, not just the first
        with open(bad, "ab") as handle:
            handle.write(b"# Cafe\n\nlatin-1 name %d\n" % edit)
        time.sleep(0.6)
    (project.cwd / "docs" / "sub" / "b.md").write_text("# B\n\nzeppelin words\n", encoding="utf-8")
    project.wait_for(indexed(project, "docs/sub/b.md", "zeppelin"), WAIT_S, "a later edit beside the name")
    time.sleep(0.5)
    seen = drain(watching)
    skipped = [r for r in seen if r.get("event") == "skipped"]
    assert len(skipped) == 1 and "not UTF-8" in str(skipped[0]["reason"]), watching.raw
    assert "\\xE9" in str(skipped[0]["path"]) or "\\xe9" in str(skipped[0]["path"]), skipped
    runs = [r for r in seen if r.get("event") == "run"]
    assert [r.get("full") for r in runs if r.get("full") is not None] == ["start"], runs
    assert not [r for r in seen if r.get("event") == "watcher-error"], watching.raw
    assert "docs/sub/b.md" in stored_hashes(project.db_path)
    stop_and_check(project, watching)
