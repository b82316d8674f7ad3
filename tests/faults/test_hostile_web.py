"""Hostile web servers against `knowledge index URL`: the whole fetch keeps its deadline on the clock."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import write_tree
from tests.faults.conftest import Project
from tests.webserver import WebSite, web_site  # noqa: F401 - the fixture, requested by name

DOCS = {"docs/a.md": "# Alpha\n\nThe quick brown fox jumps.\n", "docs/b.md": "# Beta\n\nA lazy sleeping dog.\n"}
PAGE = "<html><head><title>Drip</title></head><body><p>" + "slowly arriving paragraph " * 40 + "</p></body></html>"


@pytest.mark.parametrize("headers_too", [False, True], ids=["body-drips", "headers-drip"])
def test_a_slow_drip_server_fails_its_page_at_the_deadline_and_frees_the_run(
        project: Project, web_site: WebSite, headers_too: bool) -> None:
    write_tree(project.cwd, DOCS)
    (project.cwd / "knowledge.yaml").write_text("knowledge:\n  fetch_timeout: 1s\n", encoding="utf-8")
    url = web_site.html("/drip.html", PAGE, drip=0.2, drip_headers=headers_too)  # ~200 s to send it all

    started = time.monotonic()
    code, out, err = project.knowledge("index", "docs", url, "--json", timeout=60)
    elapsed = time.monotonic() - started

    assert "Traceback" not in err, err
    assert elapsed < 15, f"the run took {elapsed:.1f} s for a 1 s fetch deadline"
    summary = json.loads(out)
    assert code == 1 and summary["failed"] == 1, (code, summary)
    assert summary["added"] == len(DOCS), summary
    assert [f["path"] for f in summary["failures"]] == [url], summary["failures"]
    assert "took longer than 1 s" in summary["failures"][0]["reason"], summary["failures"]

    # The run lock is free at once: the re-runs of the invariants start, and the store is the tree.
    project.invariants().assert_recovered()
    web_site.html("/drip.html", PAGE)  # the server healed: the page is indexed by the next run
    code, out, err = project.knowledge("index", "docs", url, "--json", timeout=60)
    assert code == 0 and json.loads(out)["added"] == 1, (code, out, err)
