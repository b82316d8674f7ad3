"""A file whose reader runs past the extraction bound among ordinary files: the run ends on time, the
file is skipped naming the setting, everything else lands, and the store keeps the fault suite's
invariants; with the bound raised, the next run reads the file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench.lib.corpus import generate
from tests.faults.conftest import Project
from tests.workers.cluster import owned

_PARAGRAPH = "Some *emphasis* and ``literal`` text with a `link <http://example.org>`_ in it.\n\n"
# ~590 KB of reStructuredText: about 3 s of CPU in docutils on this machine, ten times the bound below
HEAVY_RST = "Heavy\n=====\n\n" + "".join(f"Part {i}\n----------\n\n" + _PARAGRAPH * 5 for i in range(1500))
TIGHT = "knowledge:\n  extraction:\n    timeout: 300ms\n    timeout_per_mib: 0\n"


@pytest.mark.timeout(240)
def test_a_file_past_the_deadline_is_skipped_and_the_rest_of_the_run_lands(project: Project) -> None:
    generate(project.cwd / "docs", 30, seed=5)
    (project.cwd / "docs/manual").mkdir()
    (project.cwd / "docs/manual/heavy.rst").write_text(HEAVY_RST, encoding="utf-8")
    (project.cwd / "knowledge.yaml").write_text(TIGHT, encoding="utf-8")

    started = time.monotonic()
    code, out, err = project.knowledge("index", "docs", "--json")
    elapsed = time.monotonic() - started
    summary = json.loads(out)
    assert code == 0, err
    reasons = {s["path"]: s["reason"] for s in summary["skipped"]}
    assert reasons["docs/manual/heavy.rst"] == "took longer than 0.3 s to read (knowledge.extraction.timeout)"
    assert summary["added"] == 30 and summary["failed"] == 0
    assert elapsed < 60  # the reader alone would take seconds; the run did not wait for it

    project.invariants().assert_recovered()

    (project.cwd / "knowledge.yaml").write_text("knowledge: {}\n", encoding="utf-8")
    code, out, err = project.knowledge("index", "docs", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["added"] == 1 and again["skipped"] == []
    code, out, _ = project.knowledge("search", "emphasis", "literal", "--json")
    assert any(hit["path"] == "docs/manual/heavy.rst" for hit in json.loads(out)["results"])


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_in_the_distributed_shape_a_worker_skips_the_file_and_goes_on(tmp_path: Path) -> None:
    def prepare(made) -> None:
        (made.base / "knowledge.yaml").write_text(TIGHT, encoding="utf-8")

    corpus = tmp_path / "docs"
    generate(corpus, 20, seed=8)
    (corpus / "heavy.rst").write_text(HEAVY_RST, encoding="utf-8")
    with owned(tmp_path / "store", prepare) as cluster:
        cluster.start(workers=1, threads=1)  # one ingest thread: a stalled reader would hold every file after it
        started = time.monotonic()
        result = cluster.knowledge("index", str(corpus), "--json", timeout=120)
        assert result.returncode == 0, result.stderr + cluster.logs()
        assert time.monotonic() - started < 90
        summary = json.loads(result.stdout)
        reasons = {Path(s["path"]).name: s["reason"] for s in summary["skipped"]}
        assert reasons["heavy.rst"] == "took longer than 0.3 s to read (knowledge.extraction.timeout)"
        assert (summary["added"], summary["failed"]) == (20, 0), json.dumps(summary)
