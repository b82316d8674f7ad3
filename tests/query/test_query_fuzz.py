"""No query text raises from search, match or words (match may only refuse with QueryError)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.errors import QueryError
from query.tools import knowledge_enumerate, knowledge_search
from tests.lent import enumerate_documents, list_words, search
from tests.query.stores import DOCS, build_store, store_settings

SYNTAX = ['"', "-", "*", ":", "heading:", "body:", "title:", "OR", "AND", "NOT", "NEAR", "NEAR(", "(", ")", "^",
          "{", "}", "+", "'", "\\", "\x00", "\x1b[31m", "\ud800", "数据库", "库", "ガイド", "검색", " ", "  ",
          "retention", "policy", "deprecated", "a", "é", "_", "[", "]", "|", "?", ".*", "$", "\n", "\t"]
texts = st.one_of(
    st.text(st.characters(codec=None, categories=None), max_size=60),
    st.lists(st.sampled_from(SYNTAX), max_size=12).map("".join),
    st.lists(st.sampled_from(SYNTAX), max_size=12).map(" ".join),
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    zh = {"zh/a.md": "# 数据库\n\n数据库的索引结构。\n"}
    return build_store(store_settings(tmp_path_factory.mktemp("fuzz")), {**DOCS, **zh})


@FUZZ
@given(text=texts)
def test_search_never_raises(built, text: str) -> None:
    assert search(built, text).status == "ok"
    json.dumps(knowledge_search(built, text), ensure_ascii=False).encode("utf-8")


@FUZZ
@given(text=texts)
def test_match_answers_or_refuses_with_query_error_only(built, text: str) -> None:
    try:
        result = enumerate_documents(built, text)
    except QueryError as exc:
        assert str(exc)
    else:
        assert result.status in ("ok", "query_empty") and result.note
        assert result.matched >= len(result.documents)
    data = knowledge_enumerate(built, text)
    assert data["status"] in ("ok", "query_empty", "query_error") and data["note"]
    json.dumps(data, ensure_ascii=False).encode("utf-8")


@FUZZ
@given(text=texts)
def test_words_never_raises(built, text: str) -> None:
    result = list_words(built, text, counts=False)
    assert result.status in ("ok", "pattern_invalid")
