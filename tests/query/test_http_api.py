"""`knowledge serve`'s HTTP surface on a real loopback server: token, Host and Origin rules, /v1 routes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from config.errors import ConfigError
from config.loader import read_secret
from query.serve.http_api import Guard, build_app, host_name
from tests.query.stores import DOCS, build_store, free_port, store_settings

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RULES = [{"pattern": r"^docs/(.+)\.md$", "replace": "https://docs.example.net/$1/"}]


class Running:
    """A uvicorn server in a thread, stopped on exit (bounded waits)."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "server did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("http")
    settings = build_store(
        store_settings(
            base,
            citations=RULES,
            expose={"mcp": {
                "builtins": ["knowledge_search", "knowledge_enumerate"],
                "allowed_hosts": ["docs.internal"],
                "allowed_origins": ["https://dash.example"],
            }},
        ),
        DOCS,
    )
    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        yield url


def get(url: str, path: str, headers: dict[str, str] | None = None, **params: Any) -> httpx.Response:
    return httpx.get(url + path, headers=headers, params=params, timeout=10)


def test_every_route_but_healthz_needs_the_bearer_token(served: str) -> None:
    assert get(served, "/healthz").status_code == 200
    for path in ("/v1/search", "/v1/match", "/v1/sources", "/v1/stats"):
        refused = get(served, path, q="retention")
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert get(served, path, {"Authorization": "Bearer wrong"}, q="retention").status_code == 401
        assert get(served, path, {"Authorization": TOKEN}, q="retention").status_code == 401
        assert get(served, path, AUTH, q="retention").status_code == 200
    assert httpx.post(served + "/mcp", json={}, timeout=10).status_code == 401


@pytest.mark.parametrize(
    ("host", "code"),
    [
        ("127.0.0.1", 200), ("localhost:8080", 200), ("[::1]:9", 200), ("docs.internal", 200),
        ("docs.internal:443", 200), ("evil.example", 421), ("127.0.0.1.evil.example", 421),
        ("localhost.evil.example:80", 421), ("", 421), ("[::1]", 200), ("[::1]evil.example", 421),
        ("[::1]:9evil.example", 421), ("[::1].evil.example:80", 421), ("[::1", 421),
    ],
)
def test_the_host_header_must_name_this_server(served: str, host: str, code: int) -> None:
    response = get(served, "/v1/stats", {**AUTH, "Host": host})
    assert response.status_code == code
    if code != 200:
        assert response.json()["status"] == "host_refused"


def test_the_mcp_endpoint_checks_host_and_origin_too(served: str) -> None:
    bad_host = httpx.post(served + "/mcp", json={}, headers={**AUTH, "Host": "evil.example"}, timeout=10)
    assert bad_host.status_code == 421
    bad_origin = httpx.post(served + "/mcp", json={}, headers={**AUTH, "Origin": "http://localhost:3000"}, timeout=10)
    assert bad_origin.status_code == 403


@pytest.mark.parametrize(
    ("origin", "code"),
    [(None, 200), ("https://dash.example", 200), ("https://dash.example/", 200),
     ("http://localhost:3000", 403), ("https://evil.example", 403), ("null", 403)],
)
def test_browser_origins_are_refused_unless_listed(served: str, origin: str | None, code: int) -> None:
    headers = dict(AUTH) if origin is None else {**AUTH, "Origin": origin}
    assert get(served, "/healthz", headers).status_code == code


def test_v1_search_and_match_answer_in_the_tool_and_match_json_shapes(served: str) -> None:
    search = get(served, "/v1/search", AUTH, q="deprecated", top_k=2).json()
    assert search["status"] == "ok" and search["returned"] <= 2 and search["note"]
    assert search["results"][0]["citation"] == "https://docs.example.net/api/"
    match = get(served, "/v1/match", AUTH, q="retention", limit=1).json()
    assert (match["status"], match["matched"], match["returned"]) == ("ok", 3, 1)
    assert get(served, "/v1/match", AUTH, q="retention", all=1).json()["returned"] == 3
    refused = get(served, "/v1/match", AUTH, q="a OR b")
    assert refused.status_code == 400 and refused.json()["status"] == "query_error"
    assert get(served, "/v1/search", AUTH).status_code == 400
    assert get(served, "/v1/search", AUTH, q="x", top_k="many").status_code == 400


def test_v1_sources_and_stats(served: str) -> None:
    sources = get(served, "/v1/sources", AUTH).json()
    mapped = {d["path"]: d["mapped"] for d in sources["documents"]}
    assert mapped["docs/api.md"] == "https://docs.example.net/api/" and mapped["notes.md"] is None
    stats = get(served, "/v1/stats", AUTH).json()
    assert (stats["status"], stats["documents"]) == ("ok", 5) and stats["tier"].startswith("tier:")


def test_an_unbuilt_index_answers_with_its_status(tmp_path: Path) -> None:
    settings = store_settings(tmp_path, expose={"mcp": {"builtins": ["knowledge_search"]}})
    with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None)) as url:
        assert get(url, "/v1/stats").json()["status"] == "index_not_built"
        assert get(url, "/v1/search", q="x").json()["status"] == "index_not_built"
        unlisted = get(url, "/v1/match", q="x")
        assert unlisted.status_code == 404 and unlisted.json()["status"] == "not_served"


def test_host_names_are_parsed_without_port_or_brackets() -> None:
    assert host_name("LocalHost:80") == "localhost"
    assert host_name("[::1]:8080") == "::1"
    assert host_name("::1") == "::1"
    assert host_name("example.com") == "example.com"
    guard = Guard(app=None, bind_host="10.0.0.5")  # type: ignore[arg-type]
    assert guard.host_allowed("10.0.0.5:8080") and not guard.host_allowed("10.0.0.6")
    assert not Guard(app=None, bind_host="0.0.0.0").host_allowed("0.0.0.0")  # type: ignore[arg-type]


def test_the_token_comes_from_the_named_variable_and_an_unset_one_refuses_to_start(tmp_path: Path, run_cli) -> None:
    assert read_secret(None, environ={}) is None
    assert read_secret("TOK", environ={"TOK": " abc "}) == "abc"
    with pytest.raises(ConfigError, match=r"names \$TOK, which is unset or empty"):
        read_secret("TOK", environ={"TOK": ""})
    config = tmp_path / "knowledge.yaml"
    config.write_text("knowledge:\n  expose:\n    mcp:\n      token_env: KQ_SURELY_UNSET_TOKEN\n")
    code, _, err = run_cli("--config", str(config), "serve", "--port", "1")
    assert code == 2 and "KQ_SURELY_UNSET_TOKEN" in err


def test_a_match_limit_under_one_is_refused_alike_on_http_and_the_cli(served: str, run_cli) -> None:
    for limit in ("0", "-1"):
        answer = get(served, "/v1/match", AUTH, q="retention", limit=limit)
        assert answer.status_code == 400 and "limit must be at least 1" in answer.json()["note"]
        code, _, err = run_cli("match", "retention", "--limit", limit)
        assert code == 2 and "limit must be at least 1" in err


@pytest.mark.parametrize(("path", "params"), [
    ("/v1/search", {"q": "retention", "where": "novalue"}),
    ("/v1/search", {"q": "retention", "top_k": "-5"}),
    ("/v1/match", {"q": "retention", "where": "novalue"}),
    ("/v1/match", {"q": "retention", "min_matches": "0"}),
    ("/v1/match", {"q": "retention", "sort": "sideways"}),
])
def test_every_v1_route_answers_400_for_a_query_error(served: str, path: str, params: dict[str, str]) -> None:
    answer = httpx.get(served + path, headers=AUTH, params=params, timeout=10)
    assert answer.status_code == 400, answer.text
    assert answer.json()["status"] == "query_error" and answer.json()["note"]
