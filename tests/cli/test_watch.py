"""`knowledge watch` as a real process: JSON lines off a terminal, SIGTERM exits 0, one watcher per store,
and the distributed shape (the watcher enqueues, a worker and the writer apply)."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from config.errors import EXIT_BUSY
from config.loader import settings_from_mapping
from tests.conftest import write_tree
from tests.workers.cluster import Cluster, clean_env, knowledge_bin, owned
from tests.workers.test_watcher import documents

WAIT_S = 30.0


class Watching:
    """A `knowledge watch` process and the JSON lines it writes on stderr (read on a thread)."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([*knowledge_bin(), "watch"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[dict[str, object]] = []
        self.raw: list[str] = []
        assert self.proc.stderr is not None
        threading.Thread(target=self._read, args=(self.proc.stderr,), daemon=True).start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.put(line)

    def wait_for(self, predicate: Callable[[dict[str, object]], bool], what: str) -> dict[str, object]:
        """The first line (seen before or arriving within WAIT_S) that predicate accepts."""
        for record in self.seen:
            if predicate(record):
                return record
        deadline = time.monotonic() + WAIT_S
        for _ in range(10_000):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                line = self.lines.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.raw.append(line)
            if line.startswith("{"):
                record = json.loads(line)
                self.seen.append(record)
                if predicate(record):
                    return record
        raise AssertionError(f"no {what} within {WAIT_S} s; stderr so far:\n{''.join(self.raw)}")

    def stop(self) -> int:
        """SIGTERM, and the exit code (bounded wait)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=WAIT_S)


def event(name: str) -> Callable[[dict[str, object]], bool]:
    return lambda record: record.get("event") == name


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], list[Watching]]]:
    """A config naming docs/, a docs tree, the environment to run in, and the watchers started (stopped after)."""
    write_tree(tmp_path, {"knowledge.yaml": "knowledge:\n  paths: [docs]\n", "docs/a.md": "# A\n\nfirst words\n"})
    started: list[Watching] = []
    yield tmp_path, clean_env(), started
    for watching in started:
        if watching.proc.poll() is None:
            watching.proc.kill()
            watching.proc.wait(timeout=WAIT_S)


def start_watching(base: Path, env: dict[str, str], started: list[Watching]) -> Watching:
    """A `knowledge watch` process on base, once it says it is watching (stopped by the tree fixture)."""
    watching = Watching(base, env)
    started.append(watching)
    watching.wait_for(event("watching"), "watching line")
    return watching


def test_sigterm_finishes_and_exits_0_and_a_second_watcher_is_refused_with_75(
        tree: tuple[Path, dict[str, str], list[Watching]]) -> None:
    base, env, started = tree
    first = start_watching(base, env, started)
    second = subprocess.run([*knowledge_bin(), "watch"], cwd=base, env=env, capture_output=True, text=True,
                            timeout=WAIT_S)
    assert second.returncode == EXIT_BUSY, second.stderr
    assert "another watcher holds" in second.stderr
    (base / "docs" / "a.md").write_text("# A\n\nsecond words\n", encoding="utf-8")
    run = first.wait_for(lambda r: r.get("event") == "run" and r.get("full") is None, "run line")
    assert (run["state"], run["updated"]) == ("complete", 1)
    assert first.stop() == 0
    first.wait_for(event("stopped"), "stopped line")
    settings = settings_from_mapping({}, store_base=base)
    assert "second" in documents(settings)["docs/a.md"]


def test_a_watcher_never_races_a_running_embedded_index_for_the_writer_lock(
        tree: tuple[Path, dict[str, str], list[Watching]]) -> None:
    base, env, started = tree
    first = start_watching(base, env, started)
    index = subprocess.run([*knowledge_bin(), "index"], cwd=base, env=env, capture_output=True, text=True,
                           timeout=WAIT_S)
    assert index.returncode == EXIT_BUSY, index.stderr  # the watcher's engine holds the writer lock
    assert first.stop() == 0


def test_an_index_refused_while_watching_names_the_watcher_and_its_pid(
        tree: tuple[Path, dict[str, str], list[Watching]]) -> None:
    base, env, started = tree
    watching = start_watching(base, env, started)
    index = subprocess.run([*knowledge_bin(), "index"], cwd=base, env=env, capture_output=True, text=True,
                           timeout=WAIT_S)
    assert index.returncode == EXIT_BUSY, index.stderr
    assert f"(knowledge watch (in-process) pid={watching.proc.pid})" in index.stderr, index.stderr
    assert "knowledge index" not in index.stderr, index.stderr
    assert watching.stop() == 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A store served by one worker and the writer on the tests' Redis; stopped and its keys deleted after."""
    with owned(tmp_path / "store") as made:
        yield made


@pytest.mark.redis
@pytest.mark.slow
def test_distributed_the_watcher_enqueues_runs_for_the_worker_and_the_writer(cluster: Cluster) -> None:
    base = cluster.base
    write_tree(base, {"knowledge.yaml": "knowledge:\n  paths: [docs]\n", "docs/a.md": "# A\n\nfirst words\n",
                      "docs/b.md": "# B\n\nto be deleted\n"})
    cluster.start(workers=1, threads=2)
    watching = Watching(base, cluster.env)
    cluster.extra_procs.append(watching.proc)  # type: ignore[arg-type]
    start = watching.wait_for(lambda r: r.get("event") == "run" and r.get("full") == "start", "start run")
    assert start["added"] == 2, start
    watching.wait_for(event("watching"), "watching line")
    second = cluster.knowledge("watch", timeout=WAIT_S)
    assert second.returncode == EXIT_BUSY, second.stderr
    (base / "docs" / "a.md").write_text("# A\n\nzeppelin words\n", encoding="utf-8")
    (base / "docs" / "b.md").unlink()
    settings = cluster.settings
    deadline = time.monotonic() + WAIT_S
    for _ in range(3_000):
        docs = documents(settings)
        if "zeppelin" in docs.get("docs/a.md", "") and "docs/b.md" not in docs:
            break
        assert time.monotonic() < deadline, f"{docs}\n{''.join(watching.raw)}{cluster.logs()}"
        time.sleep(0.01)
    assert watching.stop() == 0
    runs = cluster.ledger().recent(10)
    assert all(r.state == "complete" for r in runs), [r.to_json() for r in runs]


def test_watcher_trouble_is_logged_as_a_warning_or_an_error_not_info(tree: tuple[Path, dict[str, str],
                                                                                  list[Watching]]) -> None:
    base, env, started = tree
    watching = start_watching(base, env, started)
    assert watching.wait_for(event("run"), "first run")["level"] == "info"
    shutil.rmtree(base / "docs")  # the root is gone: the watcher says so, and waits for it
    trouble = watching.wait_for(lambda r: r.get("event") in ("root-unreadable", "watcher-error"), "the lost root")
    assert trouble["level"] in ("warning", "error"), trouble
    assert watching.stop() == 0


def test_the_log_level_of_each_watcher_event() -> None:
    from cli.watch import Lines

    assert Lines.level("watcher-error", {"error": "inotify failed"}) == "error"
    assert Lines.level("run", {"changed": 1, "error": "the store is damaged"}) == "error"
    assert Lines.level("run", {"changed": 2, "state": "complete", "failed": 1}) == "warning"
    assert Lines.level("root-unreadable", {"root": "docs", "retry_s": 1}) == "warning"
    assert Lines.level("busy", {"retry_s": 2}) == "warning"
    assert Lines.level("run", {"changed": 1, "state": "complete", "failed": 0}) == "info"
    assert Lines.level("watching", {"roots": ["docs"]}) == "info"
    assert Lines.level("root-replaced", {"root": "docs"}) == "warning"
    assert Lines.level("skipped", {"path": "docs/caf\\xE9.md", "reason": "file name is not UTF-8"}) == "warning"


def test_terminal_lines_say_what_each_run_did() -> None:
    from cli.watch import Lines

    assert Lines.human("watching", {"roots": ["/srv/docs"]}) == "watching /srv/docs (Ctrl-C stops)"
    line = Lines.human("run", {"changed": 2, "gone": 1, "added": 0, "updated": 2, "removed": 1, "failed": 0,
                               "seconds": 0.02, "state": "complete"})
    assert line == "2 changed, 1 deleted path(s): added=0 updated=2 removed=1 failed=0 in 0.02 s"
    assert Lines.human("run", {"full": "start", "error": "store damaged", "seconds": 0.1}) == \
        "full run (start): failed: store damaged"
    assert Lines.human("run", {"changed": 1, "gone": 0, "error": "embeddings server down", "seconds": 0.1,
                               "pending": 1, "retry_s": 4.0}) == \
        "1 changed, 0 deleted path(s): failed: embeddings server down; 1 path(s) kept, retrying in 4.0 s"
    assert Lines.human("root-replaced", {"root": "/srv/docs"}) == \
        "/srv/docs was replaced (moved or re-created); watching the new one with a full run"
