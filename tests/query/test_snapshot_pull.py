"""Generations over HTTP: the primary's /v1/snapshots routes and a Puller fetching, resuming and verifying them."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from config.errors import ConfigError
from config.settings import Settings
from pipeline import publish as pub
from pipeline.pull import PULL_PREFIX, Puller
from pipeline.pull_errors import PullError, PullRefused, checked_url
from query.replica import SnapshotIndex
from query.requests import SearchRequest
from query.serve.http_api import build_app
from query.service import QueryService
from tests.cutting_proxy import Faults, cutting_proxy
from tests.query.stores import DOCS, build_store, free_port, store_settings
from tests.query.test_http_api import Running

TOKEN = "pull-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Primary:
    """A store, its published directory and a real loopback `serve` app over them."""

    settings: Settings
    url: str
    port: int

    def publish(self, word: str) -> pub.Published:
        """Add a document holding word to the store and publish a generation."""
        build_store(self.settings, {f"docs/{word}.md": f"# {word}\n\nThe {word} procedure.\n"})
        return pub.publish(self.settings.db_path, self.settings.publish_dir, keep=3)


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[Primary]:
    settings = build_store(store_settings(tmp_path / "primary", expose={"mcp": {"builtins": ["knowledge_search"]}}),
                           DOCS)
    running = Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None))
    with running as url:
        yield Primary(settings, url, running.port)


def _puller(url: str, directory: Path, **kw: object) -> Puller:
    return Puller(url, directory, 2, kw.pop("token", TOKEN), **kw)  # type: ignore[arg-type]


def _found(directory: Path, settings: Settings, word: str) -> int | None:
    """The generation a fresh replica over directory answers a search for word from, when it finds it."""
    index = SnapshotIndex(settings, directory)
    try:
        generation = index.poll()
        hits = QueryService(settings, index).search(SearchRequest(word, 5)).to_json()["results"]
        return generation if hits else None
    finally:
        index.close()


def test_latest_is_a_soft_not_found_before_a_publish_then_the_newest_manifest(primary: Primary) -> None:
    before = httpx.get(primary.url + "/v1/snapshots/latest", headers=AUTH, timeout=10)
    assert before.status_code == 404 and before.json()["status"] == "not_found"
    assert "knowledge publish" in before.json()["note"]
    primary.publish("alpha")
    second = primary.publish("beta")
    latest = httpx.get(primary.url + "/v1/snapshots/latest", headers=AUTH, timeout=10).json()
    assert latest["status"] == "ok" and latest["generation"] == 2
    assert latest["manifest"] == second.manifest.to_json()
    assert latest["file"] == "/v1/snapshots/2/knowledge.db"


def test_the_file_streams_whole_or_from_a_range_and_only_complete_generations(primary: Primary) -> None:
    published = primary.publish("alpha")
    data = published.path.read_bytes()
    whole = httpx.get(primary.url + "/v1/snapshots/1/knowledge.db", headers=AUTH, timeout=10)
    assert whole.status_code == 200 and whole.content == data
    assert whole.headers["x-knowledge-sha256"] == published.manifest.sha256
    tail = httpx.get(primary.url + "/v1/snapshots/1/knowledge.db", headers={**AUTH, "Range": "bytes=1000-"},
                     timeout=10)
    assert tail.status_code == 206 and tail.content == data[1000:]
    assert tail.headers["content-range"] == f"bytes 1000-{len(data) - 1}/{len(data)}"
    pub.generation_dir(primary.settings.publish_dir, 2).mkdir()  # a publish still writing: no manifest yet
    (pub.generation_dir(primary.settings.publish_dir, 2) / pub.DB_NAME).write_bytes(data)
    for number in (2, 7):
        missing = httpx.get(primary.url + f"/v1/snapshots/{number}/knowledge.db", headers=AUTH, timeout=10)
        assert missing.status_code == 404 and missing.json()["status"] == "not_found"


def test_the_snapshot_routes_pass_the_token_host_and_origin_checks(primary: Primary) -> None:
    primary.publish("alpha")
    for path in ("/v1/snapshots/latest", "/v1/snapshots/1/knowledge.db"):
        assert httpx.get(primary.url + path, timeout=10).status_code == 401
        assert httpx.get(primary.url + path, headers={"Authorization": "Bearer nope"}, timeout=10).status_code == 401
        assert httpx.get(primary.url + path, headers={**AUTH, "Host": "evil.example"}, timeout=10).status_code == 421
        assert httpx.get(primary.url + path, headers={**AUTH, "Origin": "https://evil.example"},
                         timeout=10).status_code == 403


def test_a_puller_installs_the_newest_generation_in_the_publish_layout_and_prunes_beyond_keep(
        primary: Primary, tmp_path: Path) -> None:
    other = tmp_path / "replica"
    puller = _puller(primary.url, other)
    try:
        assert puller.pull() is None  # nothing published yet: quiet
        primary.publish("alpha")
        assert puller.pull() == 1 and puller.pull() is None
        manifest = pub.verify(other, 1)
        assert manifest == pub.read_manifest(primary.settings.publish_dir, 1)
        assert stat.S_IMODE(os.stat(pub.generation_dir(other, 1) / pub.DB_NAME).st_mode) == 0o444
        for word in ("beta", "gamma"):
            primary.publish(word)
        assert puller.pull() == 3  # the newest only: 2 is never fetched
        assert pub.generations(other) == [3, 1]
        primary.publish("delta")
        assert puller.pull() == 4 and pub.generations(other) == [4, 3]
        assert not list(other.glob(f"{PULL_PREFIX}*"))
    finally:
        puller.close()
    assert _found(other, primary.settings, "delta") == 4


def test_a_download_cut_mid_file_resumes_from_where_it_ended_and_verifies(primary: Primary, tmp_path: Path) -> None:
    published = primary.publish("alpha")
    half = published.manifest.bytes // 2
    faults = Faults(cut_after=half, cuts=1)
    with cutting_proxy(primary.port, faults) as url:
        puller = _puller(url, tmp_path / "replica")
        try:
            assert puller.pull() == 1
        finally:
            puller.close()
    ranges = [seen.get("range") for seen in faults.seen if seen["path"].endswith(pub.DB_NAME)]
    assert ranges == [None, f"bytes={half}-"]
    assert pub.verify(tmp_path / "replica", 1).sha256 == published.manifest.sha256
    assert _found(tmp_path / "replica", primary.settings, "alpha") == 1


def test_a_download_cut_every_time_gives_up_after_its_attempts_and_the_next_poll_goes_on(
        primary: Primary, tmp_path: Path) -> None:
    published = primary.publish("alpha")
    faults = Faults(cut_after=published.manifest.bytes // 5, cuts=-1)  # every response cut after a fifth
    other = tmp_path / "replica"
    with cutting_proxy(primary.port, faults) as url:
        puller = _puller(url, other, attempts=2)
        try:
            with pytest.raises(PullError, match=r"gave up on generation 1 .* after 2 attempts"):
                puller.pull()
            assert pub.generations(other) == []  # nothing served while partial
            installed = None
            for _ in range(5):  # bounded: each poll resumes two fifths further
                try:
                    installed = puller.pull()
                    break
                except PullError:
                    continue
        finally:
            puller.close()
    assert installed == 1 and pub.verify(other, 1).sha256 == published.manifest.sha256


def test_a_download_tampered_in_transit_is_refused_removed_and_not_tried_again(
        primary: Primary, tmp_path: Path) -> None:
    primary.publish("alpha")
    other = tmp_path / "replica"
    with cutting_proxy(primary.port, Faults(flip_at=5000)) as url:
        puller = _puller(url, other)
        try:
            with pytest.raises(PullRefused, match=r"generation 1 .* does not match its manifest"):
                puller.pull()
            assert puller.pull() is None  # refused once, never fetched again
        finally:
            puller.close()
    assert pub.generations(other) == [] and not list(other.iterdir())
    assert _found(other, primary.settings, "alpha") is None


def test_a_wrong_token_a_refused_host_a_dead_port_and_a_bad_url_are_named_with_their_fix(
        primary: Primary, tmp_path: Path) -> None:
    wrong = _puller(primary.url, tmp_path / "a", token="nope", token_env="REPLICA_TOKEN")
    none = _puller(primary.url, tmp_path / "b", token=None)
    dead = _puller(f"http://127.0.0.1:{free_port()}", tmp_path / "c")
    try:
        with pytest.raises(PullError, match=r"refused the token in \$REPLICA_TOKEN \(401\)"):
            wrong.latest()
        with pytest.raises(PullError, match=r"requires a bearer token \(401\); name the variable .*token_env"):
            none.latest()
        with pytest.raises(PullError, match=r"connection refused.*fix --pull-from"):
            dead.latest()
    finally:
        for puller in (wrong, none, dead):
            puller.close()
    with cutting_proxy(primary.port, Faults(host="replica-facing.example")) as url:
        rehosted = _puller(url, tmp_path / "d")
        try:
            with pytest.raises(PullError, match=r"\(421\); add it to the primary's knowledge.expose.mcp.allowed_hosts"):
                rehosted.latest()
        finally:
            rehosted.close()
    for bad in ("ftp://primary", "primary:8080", "http://", "http://primary:8080/?x=1"):
        with pytest.raises(ConfigError, match=r"--pull-from .* is not an http"):
            checked_url(bad)


def test_serve_refuses_pull_from_without_snapshots_and_a_primary_refusing_its_token(
        primary: Primary, tmp_path: Path, run_cli: Callable[..., tuple[int, str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = run_cli("serve", "--pull-from", primary.url)
    assert code == 2 and "--pull-from needs --snapshots DIR" in err
    config = tmp_path / "replica.yaml"
    config.write_text("knowledge:\n  expose:\n    mcp:\n      token_env: REPLICA_TOKEN\n")
    monkeypatch.setenv("REPLICA_TOKEN", "not-the-primary-s")
    code, _, err = run_cli("--config", str(config), "serve", "--port", str(free_port()), "--snapshots",
                           str(tmp_path / "snaps"), "--pull-from", primary.url)
    assert code == 2 and "refused the token in $REPLICA_TOKEN (401)" in err
    assert "not-the-primary-s" not in err


def test_a_partial_download_of_a_generation_pruned_meanwhile_is_dropped_when_the_newest_is_installed(
        primary: Primary, tmp_path: Path) -> None:
    primary.publish("alpha")
    other = tmp_path / "replica"
    with cutting_proxy(primary.port, Faults(cut_after=30_000, cuts=1)) as url:
        puller = _puller(url, other, attempts=1)
        try:
            with pytest.raises(PullError, match="gave up on generation 1"):
                puller.pull()
            assert (other / f"{PULL_PREFIX}g000001" / pub.DB_NAME).stat().st_size == 30_000
            for word in ("beta", "gamma", "delta"):  # keep 3: generation 1 leaves the primary
                primary.publish(word)
            assert pub.generations(primary.settings.publish_dir) == [4, 3, 2]
            assert puller.pull() == 4
        finally:
            puller.close()
    assert sorted(p.name for p in other.iterdir()) == ["g000004", "g000004.json"]
    assert _found(other, primary.settings, "delta") == 4
