"""`knowledge index` over web pages served by a loopback server: index, search, show, re-runs, failures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import db
from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.webserver import Page, WebSite, web_site  # noqa: F401 - the fixture
from tests.workers.cluster import Cluster
from tests.workers.conftest import REDIS_URL, delete_namespace, require_redis
from tests.workers.helpers import index

Cli = Callable[..., tuple[int, str, str]]

GUIDE = """<!doctype html><html><head><title>Team Guide</title><style>p{}</style></head><body>
<nav><a href="/">Home</a></nav>
<h1>Guide</h1><p>Install the zebra tool with one command.</p>
<h2>Budgets</h2><p>Limit the giraffe spending per run.</p>
<pre><code class="language-sh">make install
</code></pre></body></html>"""
NOTES = b"# Field notes\n\nThe okapi lives in the forest.\n"


def _serve(site: WebSite) -> tuple[str, str]:
    site.html("/guide.html", GUIDE, last_modified=1_700_000_000)
    site.pages["/notes.md"] = Page(NOTES, "text/markdown")
    return site.url("/guide.html"), site.url("/notes.md")


def _json(out: str) -> dict:
    return json.loads(out)


def _search(run_cli: Cli, query: str) -> list[dict]:
    code, out, _ = run_cli("search", query, "--json")
    assert code == 0
    return _json(out)["results"]


def test_pages_named_on_the_command_line_are_indexed_searched_and_shown(run_cli: Cli, web_site: WebSite) -> None:
    guide, notes = _serve(web_site)
    code, out, err = run_cli("index", guide, notes, "--json")
    assert code == 0, out + err
    summary = _json(out)
    assert (summary["added"], summary["failed"], summary["files"]) == (2, 0, 2)

    hits = _search(run_cli, "giraffe")
    assert [h["citation"] for h in hits] == [f"{guide}#1"]
    assert hits[0]["section"] == "Guide > Budgets"
    assert _search(run_cli, "okapi")[0]["citation"] == f"{notes}#0"
    assert _search(run_cli, "Home") == []  # navigation is not indexed

    code, out, _ = run_cli("show", f"{guide}#1")
    assert code == 0 and "Section: Guide > Budgets" in out and "giraffe" in out and "```sh\nmake install" in out

    code, out, _ = run_cli("sources", "--json")
    rows = {r["path"]: r for r in _json(out)["documents"]}
    assert rows[guide]["title"] == "Team Guide" and rows[notes]["title"] == "Field notes"


def test_a_second_run_is_unchanged_and_a_changed_page_is_updated(run_cli: Cli, web_site: WebSite) -> None:
    guide, notes = _serve(web_site)
    assert run_cli("index", guide, notes)[0] == 0
    code, out, _ = run_cli("index", guide, notes, "--json")
    assert code == 0 and (_json(out)["unchanged"], _json(out)["updated"]) == (2, 0)
    assert "if-modified-since" in [h for p, h in web_site.requests if p == "/guide.html"][-1]

    web_site.html("/guide.html", GUIDE.replace("giraffe", "pelican"), last_modified=1_700_000_100)
    code, out, _ = run_cli("index", guide, notes, "--json")
    assert code == 0 and (_json(out)["updated"], _json(out)["unchanged"]) == (1, 1)
    assert _search(run_cli, "giraffe") == [] and _search(run_cli, "pelican")[0]["citation"] == f"{guide}#1"


def test_a_page_that_fails_is_reported_exits_1_and_keeps_its_previous_version(run_cli: Cli, web_site: WebSite) -> None:
    guide, _ = _serve(web_site)
    assert run_cli("index", guide)[0] == 0
    del web_site.pages["/guide.html"]
    code, out, _ = run_cli("index", guide)
    assert code == 1
    assert f"failed: {guide}: HTTP 404 Not Found" in out
    assert _search(run_cli, "giraffe")[0]["citation"] == f"{guide}#1"


def test_redirects_are_followed_and_cited_by_the_url_given(run_cli: Cli, web_site: WebSite) -> None:
    _serve(web_site)
    old = web_site.redirect("/old-guide", "/guide.html", 301)
    code, out, _ = run_cli("index", f"{old}#section", "--json")
    assert code == 0 and _json(out)["added"] == 1
    assert _search(run_cli, "zebra")[0]["citation"] == f"{old}#0"


def test_oversized_and_non_text_pages_are_skipped_with_their_reason(run_cli: Cli, web_site: WebSite) -> None:
    big = web_site.html("/big.html", "<p>" + "word " * 120_000 + "</p>")
    web_site.pages["/logo.png"] = Page(b"\x89PNG\r\n", "image/png")
    code, out, _ = run_cli("index", big, web_site.url("/logo.png"))
    assert code == 0, out
    assert f"skipped: {big}: too large" in out
    assert f"skipped: {web_site.url('/logo.png')}: not HTML or text (Content-Type: image/png)" in out


def test_a_file_url_is_a_usage_error_on_the_command_line_and_in_the_config(run_cli: Cli, workdir: Path) -> None:
    code, _, err = run_cli("index", "file:///etc/passwd")
    assert code == 2 and "only http:// and https:// URLs are indexed, not file:" in err
    (workdir / "knowledge.yaml").write_text("knowledge:\n  urls: [http://127.0.0.1:9/a, 'ftp://h/x']\n")
    code, _, err = run_cli("index")
    assert code == 2 and "knowledge.urls[1]" in err
    assert not (workdir / "knowledge").exists()


def test_configured_urls_and_paths_never_prune_each_other(run_cli: Cli, web_site: WebSite, workdir: Path) -> None:
    guide, notes = _serve(web_site)
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha file\n", "docs/b.md": "# B\n\nbeta file\n"})
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  paths: [docs]\n  urls: [{guide}, {notes}]\n")
    code, out, _ = run_cli("index", "--json")
    assert code == 0 and _json(out)["added"] == 4

    (workdir / "docs/b.md").unlink()
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  paths: [docs]\n  urls: [{guide}]\n")
    code, out, _ = run_cli("index", "--json")
    assert code == 0 and (_json(out)["removed"], _json(out)["unchanged"]) == (1, 2)
    code, out, _ = run_cli("sources", "--json")
    assert sorted(r["path"] for r in _json(out)["documents"]) == sorted(["docs/a.md", guide, notes])
    code, out, _ = run_cli("rm", notes)
    assert code == 0 and f"removed: {notes}" in out


def test_pages_get_vectors_like_files_and_an_unchanged_page_needs_no_new_ones(
        make_settings: Callable[..., Settings], web_site: WebSite) -> None:
    guide, notes = _serve(web_site)
    with EmbedServer(dim=8) as server:
        settings = make_settings(urls=[guide, notes], embeddings={"base_url": server.base_url, "model": "m"})
        first = index(settings)
        assert (first.counts.get("added"), first.counts.get("failed", 0)) == (2, 0)
        conn = db.connect_readonly(settings.db_path)
        try:
            vectors, chunks = conn.execute("SELECT (SELECT count(*) FROM chunks_vec), count(*) FROM chunks").fetchone()
        finally:
            conn.close()
        assert vectors == chunks == 3
        requests = len(server.requests)
        again = index(settings)
        assert again.counts.get("unchanged") == 2 and len(server.requests) == requests + 1  # the probe only


@pytest.mark.redis
@pytest.mark.slow
def test_a_worker_process_fetches_pages_in_the_distributed_shape(tmp_path: Path, web_site: WebSite) -> None:
    client = require_redis()
    cluster = Cluster(tmp_path / "store", REDIS_URL)
    delete_namespace(client, cluster.namespace)
    try:
        guide, notes = _serve(web_site)
        cluster.start(workers=1, threads=2)
        result = cluster.knowledge("index", guide, notes, web_site.url("/gone.html"), "--json", timeout=90)
        assert result.returncode == 1, result.stderr + cluster.logs()
        summary = json.loads(result.stdout)
        assert (summary["added"], summary["failed"]) == (2, 1)
        search = cluster.knowledge("search", "giraffe", "--json", timeout=30)
        assert json.loads(search.stdout)["results"][0]["citation"] == f"{guide}#1"
    finally:
        cluster.stop()
        delete_namespace(client, cluster.namespace)
        client.close()


def test_a_page_whose_conversion_overruns_the_bound_is_skipped_and_the_others_land(run_cli: Cli, workdir: Path,
                                                                                  web_site: WebSite) -> None:
    guide, notes = _serve(web_site)
    parts = "".join(f"<h2>Part {i}</h2><p>Some <b>bold</b> text and <a href='x'>a link</a>.</p>" for i in range(6000))
    web_site.html("/heavy.html", f"<html><head><title>Heavy</title></head><body>{parts}</body></html>")
    # 470 KB of HTML is ~0.4 s of CPU to convert and chunk: far past a 20 ms deadline
    (workdir / "knowledge.yaml").write_text("knowledge:\n  extraction:\n    timeout: 20ms\n    timeout_per_mib: 0\n",
                                            encoding="utf-8")
    code, out, err = run_cli("index", guide, notes, web_site.url("/heavy.html"), "--json")
    assert code == 0, out + err
    summary = _json(out)
    assert summary["skipped"] == [{"path": web_site.url("/heavy.html"),
                                   "reason": "took longer than 0.02 s to read (knowledge.extraction.timeout)"}]
    assert summary["added"] == 2
    assert [hit["path"] for hit in _search(run_cli, "zebra")] == [guide]
