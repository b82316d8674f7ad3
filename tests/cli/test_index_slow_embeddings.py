"""A first hybrid index against a slow, serialising embeddings server: the progress line says so,
concurrency backs off, and the summary counts the timeouts and the inputs retried smaller."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline import db
from tests.conftest import write_tree
from tests.embedserver import EmbedServer

RunCli = Callable[..., tuple[int, str, str]]
FILES = 24
PER_INPUT = 0.15  # seconds: a batch of 4 takes 0.6 s alone, more than half the 1 s timeout


@pytest.fixture
def slow_server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=16) as srv:
        srv.faults.slow_per_input = PER_INPUT
        srv.faults.serialise = True
        yield srv


def test_a_slow_server_is_shown_backed_off_and_counted(workdir: Path, run_cli: RunCli, slow_server: EmbedServer
                                                       ) -> None:
    write_tree(workdir, {f"docs/n{i:02}.md": f"# Note {i}\n\nnote {i} about topic{i % 5}\n" for i in range(FILES)})
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {slow_server.base_url}\n    model: bow\n"
        "    timeout: 1\n    batch_size: 4\n    concurrency: 2\n", encoding="utf-8")
    started = time.monotonic()
    code, out, err = run_cli("index", "--json")
    elapsed = time.monotonic() - started
    assert code == 0, err
    data = json.loads(out)
    assert data["added"] == FILES and data["failed"] == 0
    health = data["embeddings"]
    assert health["embedded"] == FILES and health["queued"] == FILES
    assert health["ceiling"] == 2 and health["limit"] == 1, health  # backed off: one request at a time
    assert health["timeouts"] <= 1, health  # at most the second request of the first pair
    assert health["retried"] >= 2 * health["halvings"]  # a split batch holds two inputs or more
    progress = [line for line in err.splitlines() if line.startswith("progress:")]
    assert any("embeddings slow: 4 inputs in 1 s" in line for line in progress), err
    assert elapsed < 30
    conn = db.connect_readonly(workdir / "knowledge" / "default" / "knowledge.db")
    try:
        assert conn.execute("SELECT count(*) FROM chunks_vec").fetchone()[0] == FILES
    finally:
        conn.close()


def test_the_summary_line_counts_the_timeouts_and_the_inputs_retried_smaller(workdir: Path, run_cli: RunCli,
                                                                            slow_server: EmbedServer) -> None:
    write_tree(workdir, {f"docs/n{i:02}.md": f"# Note {i}\n\nnote {i}\n" for i in range(8)})
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {slow_server.base_url}\n    model: bow\n"
        "    timeout: 1\n    batch_size: 8\n    concurrency: 1\n", encoding="utf-8")  # 8 inputs: 1.2 s, a timeout
    code, out, err = run_cli("index")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("embeddings:"))
    assert "8 section(s)" in line and "1 timeout(s), 8 input(s) retried in smaller batches (1 halving(s))" in line, out
