"""A distributed `knowledge index` with no worker alive says so at once, before the walk, and how to start one."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import workers.distributed
from config.errors import KnowledgeError
from config.loader import load_settings
from tests.conftest import write_tree
from tests.workers.conftest import REDIS_URL, delete_namespace, require_redis
from workers.broker import namespace

pytestmark = pytest.mark.redis
RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def broker_tree(workdir: Path) -> Iterator[Path]:
    client = require_redis()
    write_tree(workdir, {f"docs/n{i}.md": f"# Note {i}\n\nnote {i}\n" for i in range(3)})
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  paths: [docs]\n  broker:\n    url: {REDIS_URL}\n",
                                            encoding="utf-8")
    yield workdir
    delete_namespace(client, namespace(load_settings(str(workdir / "knowledge.yaml"))))
    client.close()


def test_index_with_no_worker_says_so_before_the_walk_and_how_to_start_one(broker_tree: Path, run_cli: RunCli,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def walk_stops(*args: Any, **kwargs: Any) -> Any:  # the walk is where a large tree spends its first minutes
        raise KnowledgeError("the walk stopped here")

    monkeypatch.setattr(workers.distributed, "plan_and_enqueue", walk_stops)
    started = time.monotonic()
    code, _, err = run_cli("index")
    assert code == 1 and "the walk stopped here" in err
    assert err.index("no `knowledge worker` and no `knowledge writer` is running") < err.index("the walk stopped")
    assert "start them with `knowledge worker` and `knowledge writer`" in err
    assert time.monotonic() - started < 10


def test_index_with_no_worker_notes_it_at_once_and_still_waits_as_documented(broker_tree: Path,
                                                                            run_cli: RunCli) -> None:
    started = time.monotonic()
    code, _, err = run_cli("index", "--timeout", "1.5")
    elapsed = time.monotonic() - started
    assert code == 1 and "did not finish within 1.5 s" in err and elapsed < 10
    note = err.splitlines()[0]
    assert "start them with `knowledge worker` and `knowledge writer`" in note
    assert "stops following after 30 s without progress" in note
