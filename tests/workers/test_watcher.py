"""`knowledge watch` in-process: real file events on a temporary tree, applied by one InProcessEngine."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from watchfiles._rust_notify import RustNotify, WatchfilesRustInternalError

from config.errors import RunInProgress
from config.settings import Settings
from pipeline.store import Store
from tests.conftest import write_tree
from workers import watcher as watcher_module
from workers.engine import InProcessEngine
from workers.ledger import RunSummary
from workers.run import RunRequest, Targets
from workers.watcher import EngineApply, Watcher

WAIT_S = 20.0  # the bound on every wait; a healthy run takes well under a second


@dataclass
class Running:
    """A Watcher on its own thread, and what it reported."""

    settings: Settings
    events: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def report(self, event: str, fields: dict[str, object]) -> None:
        with self.lock:
            self.events.append((event, fields))

    def runs(self) -> list[dict[str, object]]:
        with self.lock:
            return [f for e, f in self.events if e == "run"]

    def named(self, event: str) -> int:
        with self.lock:
            return sum(1 for e, _ in self.events if e == event)


def wait_until(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    """Poll predicate (at most timeout seconds, at most 2,000 looks); AssertionError when it never holds."""
    deadline = time.monotonic() + timeout
    for _ in range(2_000):
        if predicate():
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def documents(settings: Settings) -> dict[str, str]:
    """Each stored document with its chunks' text joined."""
    if not settings.db_path.exists():
        return {}
    store = Store(settings.db_path)
    try:
        rows = store.conn.execute("SELECT d.path, group_concat(c.body, ' ') FROM documents d "
                                  "LEFT JOIN chunks c ON c.document_id = d.id GROUP BY d.path").fetchall()
        return {path: text or "" for path, text in rows}
    finally:
        store.close()


@contextmanager
def started(settings: Settings, check_ms: int = 500) -> Iterator[Running]:
    """A watcher over settings' paths on its own thread, once it watches (after its first full run);
    stopped and waited for on leaving."""
    running = Running(settings)
    with InProcessEngine(settings) as engine:
        watcher = Watcher(settings, EngineApply(engine), running.report, running.stop, debounce_ms=200,
                          check_ms=check_ms)
        thread = threading.Thread(target=watcher.run, daemon=True)
        thread.start()
        try:
            wait_until(lambda: running.named("watching") or running.named("root-unreadable"),
                       "the watcher to start")
            yield running
        finally:
            running.stop.set()
            thread.join(timeout=WAIT_S)
    assert not thread.is_alive()


@pytest.fixture
def watching(make_settings: Callable[..., Settings]) -> Iterator[Callable[..., Running]]:
    """Start a watcher over workdir/docs; it stops when the test ends."""
    with ExitStack() as stack:
        yield lambda **block: stack.enter_context(started(make_settings(paths=["docs"], **block)))


def test_an_edit_becomes_searchable_and_a_new_file_is_added(workdir: Path, watching: Callable[..., Running]) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nthe first text\n"})
    running = watching()
    assert "first" in documents(running.settings)["docs/a.md"]
    (workdir / "docs" / "a.md").write_text("# A\n\na zeppelin text\n", encoding="utf-8")
    write_tree(workdir, {"docs/sub/new.md": "# New\n\nbrand new\n"})
    wait_until(lambda: "zeppelin" in documents(running.settings).get("docs/a.md", "")
               and "docs/sub/new.md" in documents(running.settings), "the edit and the new file")


def test_a_delete_leaves_the_index_and_a_delete_then_recreate_is_an_update(
        workdir: Path, watching: Callable[..., Running]) -> None:
    write_tree(workdir, {"docs/gone.md": "# Gone\n\nbye\n", "docs/back.md": "# Back\n\nold words\n",
                         "docs/keep.md": "# Keep\n\nstays\n"})
    running = watching()
    (workdir / "docs" / "gone.md").unlink()
    back = workdir / "docs" / "back.md"
    back.unlink()
    back.write_text("# Back\n\nreturned words\n", encoding="utf-8")
    wait_until(lambda: "docs/gone.md" not in documents(running.settings)
               and "returned" in documents(running.settings).get("docs/back.md", ""), "the delete and the update")
    assert set(documents(running.settings)) == {"docs/back.md", "docs/keep.md"}
    assert all(r.get("failed") == 0 for r in running.runs())


def test_a_deleted_directory_takes_its_documents_with_it(workdir: Path, watching: Callable[..., Running]) -> None:
    write_tree(workdir, {"docs/old/a.md": "a", "docs/old/deep/b.md": "b", "docs/keep.md": "keep"})
    running = watching()
    for path in ("docs/old/deep/b.md", "docs/old/a.md"):
        (workdir / path).unlink()
    (workdir / "docs" / "old" / "deep").rmdir()
    (workdir / "docs" / "old").rmdir()
    wait_until(lambda: set(documents(running.settings)) == {"docs/keep.md"}, "the directory's documents removed")


def test_a_burst_of_500_files_coalesces_into_few_runs(workdir: Path, watching: Callable[..., Running]) -> None:
    write_tree(workdir, {"docs/seed.md": "seed"})
    running = watching()
    before = len(running.runs())
    write_tree(workdir, {f"docs/burst/{i // 50}/f{i}.md": f"# F{i}\n\nburst file {i}\n" for i in range(500)})
    wait_until(lambda: len(documents(running.settings)) == 501, "all 500 files indexed")
    assert len(running.runs()) - before <= 5


def test_the_store_directory_and_dot_directories_trigger_nothing(
        workdir: Path, watching: Callable[..., Running]) -> None:
    write_tree(workdir, {"docs/a.md": "a"})
    running = watching(directory="docs/knowledge-store")  # the store lies inside the watched root
    assert len(running.runs()) == 1  # the start
    write_tree(workdir, {"docs/.git/index.md": "dot", "docs/knowledge-store/extra.md": "store"})
    write_tree(workdir, {"docs/sub/marker.md": "marker"})
    wait_until(lambda: len(running.runs()) >= 2, "a second run")
    # the dot directory and the store were written first: had they woken anything, that run would be
    # this one; it is the marker's alone
    second = running.runs()[1]
    assert (second.get("full"), second.get("changed"), second.get("added")) == (None, 1, 1), second
    assert set(documents(running.settings)) == {"docs/a.md", "docs/sub/marker.md"}


def test_a_failing_file_watcher_falls_back_to_a_full_run(
        workdir: Path, watching: Callable[..., Running], monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(workdir, {"docs/a.md": "a"})
    original = RustNotify.watch
    failures = iter([True])

    class Failing:
        """RustNotify whose first watch fails as an overflowing queue would (a fault injected)."""

        def __init__(self, *args: object) -> None:
            self.inner = RustNotify(*args)  # type: ignore[arg-type]

        def __enter__(self) -> Failing:
            return self

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

        def watch(self, *args: object) -> object:
            if next(failures, False):
                raise WatchfilesRustInternalError("error in underlying watcher: event queue overflow")
            return original(self.inner, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(watcher_module, "RustNotify", Failing)
    running = watching()
    wait_until(lambda: running.named("watcher-error") == 1 and len(running.runs()) >= 2, "the fallback run")
    assert "failed" in str(running.runs()[1].get("full"))


def test_an_unreadable_root_is_retried_and_becomes_a_full_run(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(paths=["docs"])
    with started(settings, check_ms=200) as running:
        wait_until(lambda: running.named("root-unreadable"), "the missing root reported")
        write_tree(workdir, {"docs/late.md": "# Late\n\narrived later\n"})
        wait_until(lambda: any("readable again" in str(r.get("full")) for r in running.runs()), "a full run")
        assert "docs/late.md" in documents(settings)


def test_a_batch_refused_by_a_busy_store_is_applied_later(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nold\n"})
    settings = make_settings(paths=["docs"])
    running = Running(settings)
    with InProcessEngine(settings) as engine:
        real = EngineApply(engine)
        refusals = iter([True])

        def busy_once(request: RunRequest, targets: Targets) -> RunSummary:
            """Another run holds the store the first time a change is applied (a fault injected)."""
            first_refusal: bool = bool(request.paths) and next(refusals, False)
            if first_refusal:
                raise RunInProgress("run X is in progress for the store")
            return real(request, targets)

        watcher = Watcher(settings, busy_once, running.report, running.stop, debounce_ms=200, check_ms=500)
        thread = threading.Thread(target=watcher.run, daemon=True)
        thread.start()
        try:
            wait_until(lambda: running.named("watching"), "the watcher to start")
            (workdir / "docs" / "a.md").write_text("# A\n\nnewer words\n", encoding="utf-8")
            wait_until(lambda: len(running.runs()) >= 2, "the retried run")
            assert running.named("busy") == 1
            assert "newer" in documents(settings)["docs/a.md"]
        finally:
            running.stop.set()
            thread.join(timeout=WAIT_S)
    assert not thread.is_alive()


def test_the_directory_of_a_name_watchfiles_cannot_decode_is_its_printable_prefix() -> None:
    from workers.watcher import undecodable_dir

    assert undecodable_dir('Unable to decode path "/srv/docs/sub/caf\\xE9.md" to string') == "/srv/docs/sub"
    assert undecodable_dir('Unable to decode path "/srv/docs/caf\\xE9/deep/a.md" to string') == "/srv/docs"
    assert undecodable_dir("error in underlying watcher: event queue overflow") is None
