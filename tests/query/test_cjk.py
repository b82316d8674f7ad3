"""Chinese, Japanese and Korean text is found by search and match; English ranking is untouched."""

from __future__ import annotations

import json

import pytest

from query.lexical import FANOUT, HEADING_WEIGHT, search_ids
from query.read_index import ReadIndex
from query.terms import build_query
from tests.lent import enumerate_documents, search
from tests.query.stores import DOCS, build_store, store_settings

CHINESE = {
    "zh/database.md": (
        "# 数据库设计\n\n本文介绍数据库的索引结构和查询优化。索引可以加快查询速度。\n\n"
        "## 备份\n\n每天凌晨备份一次数据库，备份文件保留七天。\n"
    ),
    "zh/network.md": "# 网络配置\n\n服务器的网络配置包括防火墙规则和端口映射。\n",
    "zh/mixed.md": "# Deployment 部署\n\n使用 Docker 部署服务，部署前请检查配置文件。\n",
    "zh/cache.md": "# 缓存\n\n缓存可以减少数据库的压力，但要注意缓存失效。库\n",
    "ja/guide.md": "# ガイド\n\nこのガイドではインデックスの作り方を説明します。\n",
    "ko/intro.md": "# 소개\n\n이 문서는 검색 색인을 설명합니다.\n",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    return build_store(store_settings(tmp_path_factory.mktemp("cjk")), {**CHINESE, **DOCS})


def found(settings, text: str) -> list[str]:
    return [h.path for h in search(settings, text).hits]


def test_a_chinese_word_of_three_or_more_characters_is_found_through_the_trigram_table(built) -> None:
    assert found(built, "数据库")[:2] == ["zh/database.md", "zh/database.md"]
    assert set(found(built, "数据库")) == {"zh/database.md", "zh/cache.md"}
    assert found(built, "防火墙规则") == ["zh/network.md"]


def test_one_and_two_character_chinese_queries_are_found_by_substring(built) -> None:
    assert set(found(built, "备份")) == {"zh/database.md"}
    assert set(found(built, "库")) == {"zh/database.md", "zh/cache.md"}


def test_a_chinese_sentence_query_ranks_the_document_holding_its_words(built) -> None:
    assert found(built, "怎么配置防火墙")[0] == "zh/network.md"
    assert found(built, "Docker 部署")[0] == "zh/mixed.md"


def test_japanese_and_korean_are_searchable(built) -> None:
    assert found(built, "インデックス") == ["ja/guide.md"]
    assert found(built, "검색") == ["ko/intro.md"]


def test_match_finds_chinese_terms_completely(built) -> None:
    result = enumerate_documents(built, "数据库")
    assert sorted(d.path for d in result.documents) == ["zh/cache.md", "zh/database.md"]
    assert result.terms[0].any_form == 2
    assert [d.path for d in enumerate_documents(built, "数据库 备份").documents] == ["zh/database.md"]
    assert [d.path for d in enumerate_documents(built, "数据库 -缓存").documents] == ["zh/database.md"]
    assert [d.path for d in enumerate_documents(built, "heading:缓存").documents] == ["zh/cache.md"]
    assert [d.path for d in enumerate_documents(built, "body:部署 docker").documents] == ["zh/mixed.md"]
    assert sorted(d.path for d in enumerate_documents(built, "库").documents) == ["zh/cache.md", "zh/database.md"]


def test_the_cli_matches_and_searches_chinese(built, run_cli) -> None:
    base = ["--store-dir", str(built.store_base)]
    code, out, _ = run_cli(*base, "match", "网络配置", "--paths-only")
    assert (code, out.split()) == (0, ["zh/network.md"])
    code, out, _ = run_cli(*base, "search", "网络", "--json")
    assert json.loads(out)["results"][0]["path"] == "zh/network.md"


@pytest.mark.parametrize("text", ["retention policy", "deprecated api endpoint", "the guide", "notes x y"])
def test_english_queries_take_exactly_the_porter_path(built, text: str) -> None:
    query = build_query(text)
    assert query.cjk == ()
    reader = ReadIndex(built).open()
    assert reader is not None
    with reader:
        direct = reader.conn.execute(
            f"SELECT rowid, bm25(chunks_fts, 1.0, {HEADING_WEIGHT}) AS score FROM chunks_fts"
            " WHERE chunks_fts MATCH ? ORDER BY score, rowid LIMIT ?",
            (query.expression, FANOUT),
        ).fetchall()
        assert search_ids(reader.conn, query) == [(int(r[0]), float(r[1])) for r in direct]


def test_a_single_cjk_character_is_not_dropped_as_too_short() -> None:
    query = build_query("库 a")
    assert query.terms == ("库",) and query.dropped == ("a",) and query.cjk == ("库",)
