"""A file whose reader runs past the extraction bound among ordinary files: the run ends on time, the
file is skipped naming the setting, everything else lands, and the store keeps the fault suite's
invariants; with the bound raised, the next run reads the file."""

from __future__ import annotations

import json
import time

import pytest

from bench.lib.corpus import generate
from tests.faults.conftest import Project

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
