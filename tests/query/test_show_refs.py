"""A hit's 6-character ref and hostile file names, taken back wherever a citation is: CLI show, the read
tool, /v1/read and the page's /show/ links."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from query.reader import Hit, short_ref
from query.serve.http_api import build_app
from query.serve.page import section_href
from query.tools import knowledge_read
from tests.query.stores import DOCS, build_store, store_settings
from tests.query.test_http_api import Running

ODD_NAMES = ["docs/new\nline.md", "docs/100%.md", "docs/a#b.md", "docs/why?.md", "docs/evil\u202egnp.md",
             "docs/sp ace+plus.md"]
EXPOSED = {"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate", "knowledge_read"]}}


def _docs() -> dict[str, str]:
    odd = {name: f"# Odd {i}\n\nZebrafish number {i} lives here.\n" for i, name in enumerate(ODD_NAMES)}
    return {**DOCS, **odd}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("refs")
    build_store(store_settings(path, expose=EXPOSED), _docs())
    return path


@pytest.fixture(scope="module")
def site(base: Path) -> Iterator[str]:
    with Running(build_app(store_settings(base, expose=EXPOSED), "127.0.0.1", None, warn=lambda m: None)) as url:
        yield url


def _ref(token: str) -> str:
    path, _, ordinal = token.rpartition("#")
    return Hit(0, path, int(ordinal), "", "").short_ref


def test_show_takes_the_short_ref_a_hit_carries(base: Path, run_cli) -> None:
    code, out, _ = run_cli("--store-dir", str(base), "search", "deprecated", "--json")
    assert code == 0
    hit = json.loads(out)["results"][0]
    code, out, err = run_cli("--store-dir", str(base), "show", hit["ref"])
    assert code == 0, err
    assert hit["index_ref"] in out and hit["content"].split()[0] in out
    code, out, err = run_cli("--store-dir", str(base), "show", hit["ref"], "--json")
    assert code == 0 and [r["index_ref"] for r in json.loads(out)["results"]] == [hit["index_ref"]]
    code, out, err = run_cli("--store-dir", str(base), "show", hit["ref"], "--after", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["index_ref"] == hit["index_ref"]


def test_a_short_ref_naming_no_section_is_not_found(base: Path, run_cli) -> None:
    code, _, err = run_cli("--store-dir", str(base), "show", "zzzzzz")
    assert code == 1 and "zzzzzz" in err


def test_the_read_tool_and_v1_read_take_the_short_ref(base: Path, site: str) -> None:
    settings = store_settings(base, expose=EXPOSED)
    ref = _ref("docs/api.md#1")
    answer = knowledge_read(settings, ref, before=1)
    assert answer["status"] == "ok" and answer["index_ref"] == "docs/api.md#1"
    assert [r["index_ref"] for r in answer["results"]] == ["docs/api.md#0", "docs/api.md#1"]
    over_http = httpx.get(site + "/v1/read", params={"citation": ref}, timeout=10)
    assert over_http.status_code == 200 and over_http.json()["index_ref"] == "docs/api.md#1"
    assert httpx.get(site + "/v1/read", params={"citation": "zzzzzz"}, timeout=10).status_code == 404
    shown = httpx.get(site + "/show/" + ref, timeout=10)
    assert shown.status_code == 200 and "deprecate one endpoint" in shown.text


def test_an_ambiguous_short_ref_is_refused_naming_its_candidates(tmp_path: Path, run_cli) -> None:
    seen: dict[str, str] = {}
    pair: tuple[str, str] | None = None
    for i in range(200_000):  # two tokens sharing a 6-character ref: about 2**15 tries on average
        token = f"d/{i}.md#0"
        got = seen.setdefault(short_ref(token), token)
        if got != token:
            pair = (got, token)
            break
    assert pair is not None
    docs = {token.rpartition("#")[0]: f"# Doc\n\nText of {token}.\n" for token in pair}
    build_store(store_settings(tmp_path, expose=EXPOSED), docs)
    ref = short_ref(pair[0])
    code, _, err = run_cli("--store-dir", str(tmp_path), "show", ref)
    assert code == 2 and pair[0] in err and pair[1] in err and "ambiguous" in err
    answer = knowledge_read(store_settings(tmp_path, expose=EXPOSED), ref)
    assert answer["status"] == "query_error" and pair[0] in answer["note"] and pair[1] in answer["note"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_show_links_work_for_file_names_with_newlines_percent_hash_question_marks_and_bidi(
        site: str, name: str) -> None:
    number = ODD_NAMES.index(name)
    for ref in (f"{name}#0", name):
        href = section_href(ref)
        assert re.fullmatch(r"/show/[A-Za-z0-9/%._~-]+", href), href
        answer = httpx.get(site + href, timeout=10)
        assert answer.status_code == 200, (href, answer.text[:300])
        assert f"Zebrafish number {number} lives here" in answer.text
    listed = httpx.get(site + "/", params={"q": "zebrafish", "mode": "search", "top_k": 20}, timeout=10).text
    assert section_href(f"{name}#0").replace("&", "&amp;") in listed
