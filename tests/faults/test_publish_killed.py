"""A real `knowledge publish` process killed with SIGKILL at several points leaves no generation a replica would
serve that is not whole; the next publish succeeds and prunes the leftovers. And the primary's writer commits
while a publish copies the store: VACUUM INTO reads, it never holds the write lock."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from config.loader import settings_from_mapping
from pipeline import publish as pub
from pipeline.chunker import chunk_text
from pipeline.models import Document
from pipeline.store import Store
from query.replica import SnapshotIndex

KNOWLEDGE = Path(sys.executable).with_name("knowledge")
KILL_AT = (0.05, 0.3, 0.6, 0.85, 0.95, 0.99)  # fractions of a whole publish's time, start-up included
PUBLISH_TIMEOUT_S = 120.0

pytestmark = pytest.mark.slow


def _env(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    env["KNOWLEDGE_STORE_DIR"] = str(base)
    return env


def _publish(base: Path, snaps: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([str(KNOWLEDGE), "publish", "--to", str(snaps), "--keep", "2", "--json"], cwd=base,
                            env=_env(base), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def primary(big_corpus_store: Path, tmp_path: Path) -> Path:
    """A copy of the 3,000-file store of the suite (its base directory), so a publish takes a while."""
    base = tmp_path / "primary"
    shutil.copytree(big_corpus_store / "knowledge", base / "knowledge")
    return base


def _serveable(snaps: Path) -> list[int]:
    """The generations a replica would serve: every one with a manifest, each verified (raises when one is not)."""
    numbers = pub.generations(snaps)
    for number in numbers:
        pub.verify(snaps, number)
    return numbers


def test_a_publish_killed_at_any_point_leaves_nothing_half_made_to_serve(primary: Path, tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    first = _publish(primary, snaps)
    out, err = first.communicate(timeout=PUBLISH_TIMEOUT_S)
    assert first.returncode == 0, err
    whole = time.monotonic()
    second = _publish(primary, snaps)  # a second one to time the whole process, start-up included
    assert second.wait(timeout=PUBLISH_TIMEOUT_S) == 0
    span = time.monotonic() - whole
    points = [span * fraction for fraction in KILL_AT]  # from start-up to the manifest's rename
    left_by_kill: list[list[str]] = []
    for delay in points:
        victim = _publish(primary, snaps)
        time.sleep(delay)
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=30)
        served = _serveable(snaps)  # each manifest names a whole, verified file
        whole_names = {f"g{n:06d}{suffix}" for n in served for suffix in ("", ".json")}
        left_by_kill.append(sorted(p.name for p in snaps.iterdir() if p.name not in whole_names))
        replica = SnapshotIndex(settings_from_mapping({}, store_base=tmp_path / "replica-host"), snaps)
        try:
            assert replica.poll() == served[0]  # the replica takes the newest complete generation, nothing else
        finally:
            replica.close()
    print(f"killed {len(points)} publishes at {[round(p, 2) for p in points]} s; each left {left_by_kill}")

    last = _publish(primary, snaps)
    out, err = last.communicate(timeout=PUBLISH_TIMEOUT_S)
    assert last.returncode == 0, err
    newest = json.loads(out)["generation"]
    served = _serveable(snaps)
    assert served[0] == newest and len(served) == 2  # --keep 2
    left = sorted(p.name for p in snaps.iterdir())
    assert left == sorted(f"g{n:06d}{suffix}" for n in served for suffix in ("", ".json")), left  # leftovers gone
    assert pub.verify(snaps, newest).documents == 3000


def _doc(n: int) -> Document:
    text = f"# Note {n}\n\nA note written while a publish runs, number {n}.\n"
    chunked = chunk_text(text)
    return Document(path=f"notes/{n}.md", root="notes", sha256=f"{n:064x}", size=len(text), mtime_ns=n,
                    title=chunked.title, chunks=chunked.chunks)


def test_the_writer_commits_while_a_publish_copies_the_store(primary: Path, tmp_path: Path) -> None:
    db_path = primary / "knowledge" / "default" / "knowledge.db"
    snaps = tmp_path / "snaps"
    store = Store(db_path)
    during = 0
    try:
        publisher = _publish(primary, snaps)
        deadline = time.monotonic() + PUBLISH_TIMEOUT_S
        n = 0
        while publisher.poll() is None and time.monotonic() < deadline:
            copying = any(p.name.startswith(pub.TEMP_PREFIX) for p in snaps.iterdir()) if snaps.is_dir() else False
            store.apply(_doc(n))  # BEGIN IMMEDIATE ... COMMIT on the primary's one write connection
            n += 1
            still = any(p.name.startswith(pub.TEMP_PREFIX) for p in snaps.iterdir()) if snaps.is_dir() else False
            during += int(copying and still and publisher.poll() is None)  # began and ended inside the copy
        out, err = publisher.communicate(timeout=30)
    finally:
        store.close()
    assert publisher.returncode == 0, err
    assert during >= 1, f"no commit landed while the publish was copying ({n} commits in all)"
    published = json.loads(out)
    assert 3000 <= published["documents"] <= 3000 + n  # one consistent moment of the store, as of its copy
    print(f"{during} of {n} commits landed while the publish copied the store")
