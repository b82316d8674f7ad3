"""rm, rebuild, vacuum and reset behave the same with a `knowledge writer` running as without one.

Three stores indexed from one tree: in-process (no broker), a broker with no writer running (the
command takes the write lock itself), and a broker with the writer (and a worker) running (the
command hands the operation to the writer). Every command gives the same exit code and the same
output (paths and sizes aside) and leaves the same store; after the reset the writer still writes.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.lib.corpus import generate
from config.loader import settings_from_mapping
from tests.conftest import damage_store
from tests.workers.cluster import clean_env, knowledge_bin, owned, store_rows

pytestmark = [pytest.mark.redis, pytest.mark.slow]

Knowledge = Callable[..., subprocess.CompletedProcess[str]]
FILES = 40


def in_process(base: Path) -> Knowledge:
    """`knowledge ARGS` on base's store with no broker configured."""
    base.mkdir(parents=True, exist_ok=True)
    env = clean_env(KNOWLEDGE_STORE_DIR=str(base))

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*knowledge_bin(), *args], cwd=base, env=env, capture_output=True, text=True,
                              timeout=timeout)

    return run


def session(knowledge: Knowledge, db_path: Path, docs: Path) -> list[tuple[int, str, str]]:
    """rm (one indexed, one not), rebuild of a dropped FTS table, vacuum, reset --force: each command's
    exit code, its output with this store's paths and sizes blanked, and its stderr (for a failure)."""
    documents, _ = store_rows(db_path)
    victim = documents[0][0]
    steps: list[tuple[str, ...]] = [("rm", victim, "docs/never-indexed.md"), ("rebuild",), ("vacuum",),
                                    ("reset", "--force")]
    out: list[tuple[int, str, str]] = []
    for args in steps:
        if args[0] == "rebuild":
            damage_store(db_path, "DROP TABLE chunks_fts_cjk")
        result = knowledge(*args, timeout=120)
        text = result.stdout.replace(str(db_path), "<store>").replace(str(docs), "<docs>")
        out.append((result.returncode, re.sub(r"\d+\.\d MB", "N MB", text), result.stderr))
    return out


def test_rm_rebuild_vacuum_and_reset_answer_the_same_with_a_writer_running_as_without(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    generate(docs, FILES, seed=4)
    alone = in_process(tmp_path / "alone")
    alone_db = settings_from_mapping({}, store_base=tmp_path / "alone").db_path
    assert alone("index", str(docs), timeout=120).returncode == 0
    with owned(tmp_path / "idle") as idle, owned(tmp_path / "served") as served:
        assert in_process(idle.base)("index", str(docs), timeout=120).returncode == 0  # built, then no writer
        served.start(workers=1, threads=1)
        indexed = served.knowledge("index", str(docs), timeout=120)
        assert indexed.returncode == 0, indexed.stderr + served.logs()
        assert store_rows(served.settings.db_path) == store_rows(idle.settings.db_path)
        holder = (served.settings.store_dir / "write.lock").read_text()
        assert holder.startswith("knowledge writer pid="), holder  # so each command below asks the writer

        expected = session(alone, alone_db, docs)
        codes = [code for code, _, _ in expected]
        assert codes == [1, 0, 0, 0], expected  # rm: one of the two was not indexed
        assert "removed: " in expected[0][1] and "not indexed: docs/never-indexed.md" in expected[0][1]
        assert "rebuild: done; `knowledge check` passes" in expected[1][1]
        assert "vacuum: N MB -> N MB (<store>)" in expected[2][1]
        assert f"reset: removed {FILES - 1} documents" in expected[3][1]
        for cluster in (idle, served):
            got = session(cluster.knowledge, cluster.settings.db_path, docs)
            assert [(c, o) for c, o, _ in got] == [(c, o) for c, o, _ in expected], (got, cluster.logs())
            assert store_rows(cluster.settings.db_path) == ([], [])
        assert served.knowledge("check", timeout=60).returncode == 75  # the writer still holds the store

        again = served.knowledge("index", str(docs), "--json", timeout=120)  # the writer writes into the new file
        assert again.returncode == 0, again.stderr + served.logs()
        served.stop()
        alone_again = alone("index", str(docs), timeout=120)
        assert alone_again.returncode == 0
        assert store_rows(served.settings.db_path) == store_rows(alone_db)
