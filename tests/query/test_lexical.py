"""Lexical search: safe FTS5 expressions from any text, BM25 with heading weight, honest statuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from query.terms import MAX_TERMS, build_query
from tests.conftest import write_tree
from tests.lent import search
from tests.workers.helpers import index

HOSTILE = [
    '"', '""', '"unbalanced', "NEAR(", "NEAR(a b, 2)", "body:", "heading:x", "*", "a*", "-", "-x", "OR", "a OR",
    "AND NOT", "((", "))", "(a", "^x", "x:y:z", "\x00\x1b[31m\x07", "🙂" * 50, "x" * 10_000, "word " * 2000,
    "'; DROP TABLE chunks; --", "{a b}", "a + b", "\u202e rtl", "c++ #include <stdio.h>", "NOT", "near", "_",
]


@pytest.fixture
def built(workdir: Path, make_settings):
    write_tree(workdir, {
        "docs/a.md": "# Budgets\n\nLimit what a run may cost.\n\n## Retention\n\nLogs are kept for a week.\n",
        "docs/b.md": "# Other\n\nThe word budgets appears in the body only.\n",
        "docs/c.md": "# Near\n\nNEAR and OR are ordinary words here, body: too.\n",
    })
    settings_ = make_settings(paths=["docs"])
    index(settings_)
    return settings_


def test_terms_are_split_on_non_alphanumerics_quoted_ored_and_capped() -> None:
    q = build_query('retention-policy "x" NEAR(a,b) body:logs')
    assert q.expression == '"retention" OR "policy" OR "NEAR" OR "body" OR "logs"'
    assert q.dropped == ("x", "a", "b")
    many = build_query(" ".join(f"w{i}" for i in range(100)))
    assert len(many.terms) == MAX_TERMS


def test_a_heading_match_outranks_a_body_match(built) -> None:
    hits = search(built, "budgets").hits
    assert [h.index_ref for h in hits] == ["docs/a.md#0", "docs/a.md#1", "docs/b.md#0"]


def test_results_cite_path_and_ordinal_with_the_section_breadcrumb(built) -> None:
    hit = search(built, "week").hits[0]
    assert (hit.index_ref, hit.section) == ("docs/a.md#1", "Budgets > Retention")


def test_porter_stemming_finds_other_forms(built) -> None:
    assert search(built, "limiting costs").hits[0].path == "docs/a.md"


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_query_text_never_raises(built, text: str) -> None:
    response = search(built, text)
    assert response.status == "ok"


def test_fts_operators_in_the_query_are_searched_as_words(built) -> None:
    assert search(built, "NEAR(").hits[0].path == "docs/c.md"
    assert search(built, "ordinary:* OR").hits[0].path == "docs/c.md"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300))
def test_no_text_raises_from_search(built, text: str) -> None:
    assert search(built, text).status == "ok"


def test_an_unbuilt_index_and_an_empty_index_have_their_own_statuses(workdir: Path, make_settings) -> None:
    settings_ = make_settings(paths=["empty"])
    response = search(settings_, "anything")
    assert response.status == "index_not_built" and "knowledge index" in (response.note or "")
    (workdir / "empty").mkdir()
    index(settings_)
    response = search(settings_, "anything")
    assert response.status == "index_empty" and response.hits == []


def test_top_k_defaults_to_the_setting_and_is_capped_at_20(workdir: Path, make_settings) -> None:
    write_tree(workdir, {f"docs/{i}.md": f"# T{i}\n\ncommon word\n" for i in range(30)})
    settings_ = make_settings(paths=["docs"], top_k=3)
    index(settings_)
    assert len(search(settings_, "common").hits) == 3
    assert len(search(settings_, "common", top_k=500).hits) == 20


def test_terms_in_half_the_chunks_are_left_out_without_changing_the_ranking(workdir: Path, make_settings) -> None:
    from query.lexical.frequency import common_terms, without_common
    from query.lexical.tier import top_k
    from query.reader import Reader

    docs = {f"docs/{i}.md": f"# Note {i}\n\nthe common words of the text {'rare' if i % 7 == 0 else ''}\n"
            for i in range(40)}
    write_tree(workdir, docs)
    settings_ = make_settings(paths=["docs"])
    index(settings_)
    with Reader(settings_) as reader:
        query = build_query("the rare text")
        assert common_terms(reader.conn, query.terms) == {"the", "text"}
        assert without_common(reader.conn, query, 5).expression == '"rare"'
        assert without_common(reader.conn, query, 50) == query  # "rare" alone cannot fill 50 results
        full = reader.conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts, 1.0, 2.0), rowid",
            (query.expression,)).fetchall()
        pruned = top_k(reader.conn, query, 5).rows
        assert [cid for cid, _ in pruned] == [r[0] for r in full][:5]
        only_common = build_query("the text")
        assert without_common(reader.conn, only_common, 1) == only_common


def test_a_dash_word_excludes_the_sections_holding_it_and_the_note_says_so(workdir: Path, make_settings) -> None:
    write_tree(workdir, {
        "docs/mw.md": "# Middleware\n\nmiddleware for cors headers\n",
        "docs/other.md": "# Other\n\nmiddleware for gzip compression\n",
    })
    settings = make_settings(paths=["docs"])
    index(settings)
    response = search(settings, "middleware -cors")
    assert [h.index_ref for h in response.hits] == ["docs/other.md#0"]
    assert response.note and "left out the sections holding cors" in response.note
    assert build_query("kube-proxy restart").excluded == ()
