"""Language-aware ranking on a tree in three languages: each question gets its own language's page first, and a
translated page shows once with its translations listed, through the CLI, /v1 and the MCP tool alike."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from config.loader import settings_from_mapping
from query.serve.http_api import build_app
from tests.conftest import write_tree
from tests.query.test_http_api import AUTH, TOKEN, Running
from tests.query.test_mcp import over_stdio, payload, write_config

RunCli = Callable[..., tuple[int, str, str]]

TREE = {
    "docs/en/guide/upload.md": "# Uploading files\n\nTo upload a file, send it as multipart form data. The server "
                               "stores the file and returns its id.\n",
    "docs/de/guide/upload.md": "# Dateien hochladen\n\nUm eine Datei hochzuladen, senden Sie die Datei als multipart "
                               "Formular. Der Server speichert die Datei und gibt ihre ID zurück.\n",
    "docs/ja/guide/upload.md": "# ファイルのアップロード\n\nファイルをアップロードするには、multipart "
                               "フォームデータとして送信します。サーバーはファイルを保存し、その ID を返します。\n",
    "docs/en/guide/tokens.md": "# Tokens\n\nTokens expire after an hour. Rotate a token when it is leaked.\n",
    "docs/de/guide/tokens.md": "# Token\n\nToken laufen nach einer Stunde ab. Erneuern Sie ein Token, wenn es "
                               "bekannt wurde.\n",
    "docs/ja/guide/tokens.md": "# トークン\n\nトークンは一時間で期限切れになります。漏れたらトークンを更新します。\n",
    "docs/en/guide/install.md": "# Install\n\nInstall the server with pip and start it.\n",
    "docs/de/guide/datenschutz.md": "# Datenschutz\n\nDiese Seite gibt es nur auf Deutsch: der Server schützt die "
                                    "Daten.\n",
}
ENGLISH, GERMAN, JAPANESE = "how do I upload a file", "wie lade ich eine Datei hoch", "ファイルをアップロードする方法"
UPLOADS = {f"docs/{lang}/guide/upload.md" for lang in ("en", "de", "ja")}


def _indexed(workdir: Path, run_cli: RunCli) -> Path:
    write_tree(workdir, TREE)
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    return workdir / "knowledge" / "default"


def _search(run_cli: RunCli, *args: str) -> dict[str, Any]:
    code, out, err = run_cli("search", "--json", *args)
    assert code == 0, out + err
    return dict(json.loads(out))


def _first(found: dict[str, Any]) -> tuple[str, list[str]]:
    first = found["results"][0]
    return first["path"], [t["lang"] for t in first["translations"]]


def _uploads_shown(found: dict[str, Any]) -> list[str]:
    return [r["path"] for r in found["results"] if r["path"] in UPLOADS]


def test_each_language_gets_its_own_page_first_and_the_group_once_through_the_cli(workdir: Path,
                                                                                 run_cli: RunCli) -> None:
    _indexed(workdir, run_cli)
    for question, lang, others in ((ENGLISH, "en", ["de", "ja"]), (GERMAN, "de", ["en", "ja"]),
                                   (JAPANESE, "ja", ["de", "en"])):
        found = _search(run_cli, question)
        assert found["query_lang"] == lang
        assert _first(found) == (f"docs/{lang}/guide/upload.md", others)
        assert _uploads_shown(found) == [f"docs/{lang}/guide/upload.md"]  # the group once
        cited = found["results"][0]["translations"][0]
        assert cited["citation"] == cited["index_ref"] == f"docs/{others[0]}/guide/upload.md#0"
    code, out, _ = run_cli("search", ENGLISH)
    assert code == 0 and "\n      also in: de, ja\n" in out


def test_a_page_in_one_language_is_still_found_after_the_hits_in_the_querys_language(workdir: Path,
                                                                                     run_cli: RunCli) -> None:
    _indexed(workdir, run_cli)
    found = _search(run_cli, "server", "--explain")  # one word: too short to tell, the tree's default (en)
    assert found["query_lang"] == "en"
    langs = [r["lang"] for r in found["results"]]
    assert "docs/de/guide/datenschutz.md" in [r["path"] for r in found["results"]]
    assert langs == sorted(langs, key=lambda lang: lang != "en") and langs[-1] == "de"
    assert _uploads_shown(found) == ["docs/en/guide/upload.md"]
    moved = next(r for r in found["results"] if r["path"] == "docs/de/guide/datenschutz.md")
    assert moved["explain"]["stages"]["language"] == "de (query en, default); after the en hits"


def test_lang_any_turns_the_stage_off_and_lang_names_the_answers_language(workdir: Path, run_cli: RunCli) -> None:
    _indexed(workdir, run_cli)
    every = _search(run_cli, "multipart", "--lang", "any")
    assert sorted(_uploads_shown(every)) == sorted(UPLOADS) and "query_lang" not in every
    assert all("translations" not in r for r in every["results"])
    german = _search(run_cli, "server", "--lang", "de")
    assert {r["lang"] for r in german["results"]} == {"de"} and german["query_lang"] == "de"
    assert _first(_search(run_cli, "multipart", "--lang", "ja")) == ("docs/ja/guide/upload.md", ["de", "en"])
    code, _, err = run_cli("search", "server", "--lang", "not a code!")
    assert code == 2 and "is not a language tag" in err


def test_match_stays_complete_shows_each_documents_language_and_takes_the_filter(workdir: Path,
                                                                                 run_cli: RunCli) -> None:
    _indexed(workdir, run_cli)
    code, out, err = run_cli("match", "server", "--json")
    assert code == 0, out + err
    assert {d["path"]: d["lang"] for d in json.loads(out)["documents"]} == {
        "docs/en/guide/upload.md": "en", "docs/de/guide/upload.md": "de", "docs/en/guide/install.md": "en",
        "docs/de/guide/datenschutz.md": "de"}
    code, out, _ = run_cli("match", "server", "--lang", "de", "--paths-only", "--sort", "path")
    assert out.split() == ["docs/de/guide/datenschutz.md", "docs/de/guide/upload.md"]


def test_v1_search_answers_in_the_querys_language_with_translations(workdir: Path, run_cli: RunCli) -> None:
    _indexed(workdir, run_cli)
    settings = settings_from_mapping({"expose": {"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate"]}}},
                                     store_base=workdir)
    with Running(build_app(settings, "127.0.0.1", TOKEN, warn=lambda m: None)) as url:
        def get(**params: str) -> dict[str, Any]:
            response = httpx.get(f"{url}/v1/search", headers=AUTH, params=params, timeout=10)
            assert response.status_code == 200, response.text
            return dict(response.json())

        assert _first(get(q=GERMAN)) == ("docs/de/guide/upload.md", ["en", "ja"])
        assert _first(get(q=ENGLISH)) == ("docs/en/guide/upload.md", ["de", "ja"])
        assert _first(get(q="multipart", lang="ja")) == ("docs/ja/guide/upload.md", ["de", "en"])
        only = get(q="server", lang="de")
        assert {r["lang"] for r in only["results"]} == {"de"} and only["filters"]["lang"] == ["de"]
        refused = httpx.get(f"{url}/v1/search", headers=AUTH, params={"q": "x", "lang": "??"}, timeout=10)
        assert refused.status_code == 400 and "language tag" in refused.json()["note"]


def test_the_mcp_search_tool_answers_in_the_querys_language_with_translations(workdir: Path,
                                                                             run_cli: RunCli) -> None:
    store = _indexed(workdir, run_cli)
    (workdir / "mcp").mkdir()
    config = write_config(workdir / "mcp", store, expose={"mcp": {"builtins": ["knowledge_search"]}})

    async def body(client: Client) -> list[dict[str, Any]]:
        return [payload(await client.call_tool("knowledge_search", arguments)) for arguments in (
            {"query": JAPANESE}, {"query": GERMAN}, {"query": "server", "lang": "de"},
            {"query": "multipart", "lang": "any"})]

    japanese, german, only, every = over_stdio(config, body, workdir / "stderr.txt")
    assert _first(japanese) == ("docs/ja/guide/upload.md", ["de", "en"])
    assert _first(german) == ("docs/de/guide/upload.md", ["en", "ja"])
    assert {r["lang"] for r in only["results"]} == {"de"}
    assert sorted(_uploads_shown(every)) == sorted(UPLOADS)


def test_the_search_page_links_each_translation_and_takes_a_language(workdir: Path, run_cli: RunCli) -> None:
    _indexed(workdir, run_cli)
    settings = settings_from_mapping({"expose": {"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate"]}}},
                                     store_base=workdir)
    with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None)) as url:
        def page(**params: str) -> str:
            response = httpx.get(url + "/", params=params, timeout=10)
            assert response.status_code == 200, response.text
            return response.text

        german = page(q=GERMAN)
        start = german.index('<li class="hit">')
        first = german[start:german.index("</li>", start)]
        assert "docs/de/guide/upload.md" in first and "Also in: " in first
        assert '<a href="/show/docs/en/guide/upload.md%230" hreflang="en">en</a>' in first
        assert 'hreflang="ja">ja</a>' in first
        every = page(q="multipart", lang="any")
        assert "Also in:" not in every and all(p in every for p in UPLOADS)
