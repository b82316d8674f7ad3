"""The search page's sign-in over real loopback HTTP: a session per sign-in, revoked by Sign out, guesses limited."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from query.serve.http_api import build_app
from query.serve.page_routes import COOKIE
from query.serve.page_sessions import FREE_FAILURES
from tests.query.stores import DOCS, build_store, store_settings
from tests.query.test_http_api import TOKEN, Running


def _site(base: Path, lifetime: float = 3600) -> Running:
    settings = build_store(store_settings(base, expose={"mcp": {"builtins": ["knowledge_search"],
                                                                "session_lifetime": lifetime}}), DOCS)
    return Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None))


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[str]:
    with _site(tmp_path) as url:
        yield url


def sign_in(url: str) -> httpx.Response:
    return httpx.post(url + "/login", data={"token": TOKEN}, timeout=10)


def home(url: str, cookie: str) -> int:
    return httpx.get(url + "/", params={"q": "retention"}, cookies={COOKIE: cookie}, timeout=10).status_code


def test_each_sign_in_gets_its_own_session_cookie_with_an_expiry(locked: str) -> None:
    first, second = sign_in(locked), sign_in(locked)
    assert first.status_code == second.status_code == 303
    assert first.cookies[COOKIE] != second.cookies[COOKIE]  # not one value for every browser
    assert "Max-Age=3600" in first.headers["set-cookie"]
    assert home(locked, first.cookies[COOKIE]) == home(locked, second.cookies[COOKIE]) == 200


def test_sign_out_revokes_the_session_on_the_server(locked: str) -> None:
    kept, other = sign_in(locked).cookies[COOKIE], sign_in(locked).cookies[COOKIE]
    out = httpx.post(locked + "/logout", cookies={COOKIE: kept}, timeout=10)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert home(locked, kept) == 401  # a copy of the old cookie no longer signs anybody in
    assert home(locked, other) == 200  # another browser's session is untouched


def test_a_session_past_its_lifetime_no_longer_signs_in(tmp_path: Path) -> None:
    with _site(tmp_path, lifetime=1) as url:
        cookie = sign_in(url).cookies[COOKIE]
        assert home(url, cookie) == 200
        time.sleep(1.3)
        assert home(url, cookie) == 401


def guess(url: str, token: str = "wrong") -> int:
    return httpx.post(url + "/login", data={"token": token}, timeout=10).status_code


def test_past_a_few_wrong_tokens_the_next_attempt_waits_even_with_the_right_token(locked: str) -> None:
    assert [guess(locked) for _ in range(FREE_FAILURES + 1)] == [401] * (FREE_FAILURES + 1)
    refused = httpx.post(locked + "/login", data={"token": TOKEN}, timeout=10)  # within the 1 s wait just set
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1" and "try again in" in refused.text
    time.sleep(1.2)
    assert sign_in(locked).status_code == 303  # after the wait the right token signs in and clears the count
    assert guess(locked) == 401


def test_a_burst_of_guesses_is_mostly_refused_unheard(locked: str) -> None:
    started = time.monotonic()
    codes = [guess(locked, f"guess-{i}") for i in range(30)]
    elapsed = time.monotonic() - started
    # after the free ones the waits are 1, 2, 4, 8 s: few guesses are heard however fast they come (~200/s before)
    heard = codes.count(401)
    assert heard <= FREE_FAILURES + 1 + elapsed.__ceil__().bit_length() and codes.count(429) == 30 - heard
