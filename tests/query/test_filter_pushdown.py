"""Filters pushed into candidate generation: the filtered ranking is the full ranking restricted to the allowed
documents, whether their chunks form one span (a directory) or are scattered (a name glob, a field)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline.globs import Glob
from pipeline.paths import under
from query.filters import Filter
from query.lexical import WEIGHTS, search_ids
from query.reader import Reader
from query.terms import build_query
from tests.lent import search
from tests.query.stores import build_store, store_settings

TOPICS = ("token rotation", "queue worker", "budget limit", "cache eviction")


def _docs() -> dict[str, str]:
    """Four directories written interleaved (so no directory but the last is one span of chunk ids), then one
    written whole; every document holds the common words, and the topic words in varying amounts."""
    docs: dict[str, str] = {}
    for i in range(24):
        area = ("api", "guide", "ops", "notes")[i % 4]
        topic = TOPICS[i % len(TOPICS)]
        tags = "security" if i % 3 == 0 else "general"
        body = f"the {topic} {'token ' * (i % 5)}and the cache are described here, number {i}."
        docs[f"docs/{area}/page-{i:02d}.md"] = f"---\ntags: {tags}\n---\n# Page {i}\n\n{body}\n\n## More\n\n{body}\n"
    for i in range(6):
        docs[f"docs/whole/w-{i}.md"] = f"# Whole {i}\n\nthe token and the cache, once more {i}.\n"
    return docs


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_store(store_settings(tmp_path_factory.mktemp("pushdown")), _docs())


def _reference(reader: Reader, text: str, allowed_docs: set[int], limit: int) -> list[tuple[int, float]]:
    """The full FTS5 ranking of the query, every row scored, restricted afterwards to the allowed documents."""
    rows = reader.conn.execute(
        f"SELECT f.rowid, bm25(chunks_fts, {WEIGHTS}) AS score, c.document_id FROM chunks_fts f"
        " JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH ? ORDER BY score, f.rowid",
        (build_query(text).expression,)).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows if int(r[2]) in allowed_docs][:limit]


def _documents(reader: Reader, keep: Callable[[str], bool]) -> set[int]:
    return {int(i) for i, p in reader.conn.execute("SELECT id, path FROM documents") if keep(str(p))}


@pytest.mark.parametrize(("paths", "keep"), [
    (["docs/whole"], lambda p: under(p, "docs/whole")),
    (["docs/api"], lambda p: under(p, "docs/api")),
    (["docs/ops/**"], Glob.compile("docs/ops/**").matches),
    (["page-0*"], Glob.compile("page-0*").matches),
    (["?age-1*.md", "w-?.*"], lambda p: Glob.compile("?age-1*.md").matches(p) or Glob.compile("w-?.*").matches(p)),
    (["docs/api", "docs/whole/w-1.md"], lambda p: under(p, "docs/api") or p == "docs/whole/w-1.md"),
])
def test_a_path_filtered_ranking_is_the_full_ranking_restricted_to_the_allowed_documents(
        settings: Settings, paths: list[str], keep: Callable[[str], bool]) -> None:
    with Reader(settings) as reader:
        allowed_docs = _documents(reader, keep)
        allowed = Filter.of(paths).allowed(reader.conn)
        assert allowed is not None and allowed.count == len(allowed_docs)
        for text in (*TOPICS, "token", "the cache"):
            for limit in (1, 3, 50):
                assert search_ids(reader.conn, build_query(text), limit, allowed) == \
                    _reference(reader, text, allowed_docs, limit), (paths, text, limit)


def test_a_directory_written_whole_is_one_span_and_an_interleaved_one_is_checked_row_by_row(settings: Settings) -> None:
    with Reader(settings) as reader:
        whole = Filter.of("docs/whole").allowed(reader.conn)
        interleaved = Filter.of("docs/api").allowed(reader.conn)
        assert whole is not None and whole.dense and whole.rows()[0] == " AND rowid BETWEEN ? AND ?"
        assert interleaved is not None and not interleaved.dense and "json_each" in interleaved.rows()[0]


def test_a_field_condition_and_a_path_narrow_together(settings: Settings) -> None:
    with Reader(settings) as reader:
        fields = {int(d) for (d,) in reader.conn.execute(
            "SELECT document_id FROM document_fields WHERE key = 'tags' AND value = 'security'")}
        allowed_docs = fields & _documents(reader, lambda p: under(p, "docs/guide"))
        allowed = Filter.of("docs/guide", where=["tags=security"]).allowed(reader.conn)
        assert allowed is not None and allowed.count == len(allowed_docs) > 0
        assert search_ids(reader.conn, build_query("token"), 10, allowed) == \
            _reference(reader, "token", allowed_docs, 10)


def test_a_filter_allowing_every_document_takes_the_unfiltered_path_and_still_says_it_filtered(
        settings: Settings) -> None:
    with Reader(settings) as reader:
        assert Filter.of("docs").allowed(reader.conn) is None
        assert Filter.of(roots="docs").allowed(reader.conn) is None
    for text in TOPICS:
        plain = search(settings, text, 10)
        everything = search(settings, text, 10, filters=Filter.of("docs"))
        assert [h.index_ref for h in everything.hits] == [h.index_ref for h in plain.hits]
        assert everything.note is not None and "filtered to path docs" in everything.note


def test_a_filter_that_matches_nothing_answers_no_hits_with_its_note(settings: Settings) -> None:
    for filters in (Filter.of("docs/nowhere"), Filter.of(where=["tags=absent"]), Filter.of("nothing-*")):
        found = search(settings, "token", 10, filters=filters)
        assert found.status == "ok" and found.hits == []
        assert found.note is not None and "filtered to" in found.note
    with Reader(settings) as reader:
        empty = Filter.of("docs/nowhere").allowed(reader.conn)
        assert empty is not None and empty.empty and empty.count == 0
        assert search_ids(reader.conn, build_query("token"), 10, empty) == []


def test_a_path_prefix_compares_text_so_like_wildcards_and_sibling_names_are_not_matched(tmp_path: Path) -> None:
    names = ["a_b/x.md", "axb/y.md", "a%/z.md", "ab/w.md", "a%b/v.md", "docs/in.md", "docs-old/out.md",
             "docs.md", "docs/sub/deep.md"]
    settings = build_store(store_settings(tmp_path), {n: f"# {n}\n\nthe token of {n}\n" for n in names})
    expected = {"a_b": {"a_b/x.md"}, "a%": {"a%/z.md"}, "docs": {"docs/in.md", "docs/sub/deep.md"},
                "docs/": {"docs/in.md", "docs/sub/deep.md"}, "docs.md": {"docs.md"}, "a%b/v.md": {"a%b/v.md"}}
    for given, paths in expected.items():
        found = search(settings, "token", 20, filters=Filter.of(given))
        assert {h.path for h in found.hits} == paths, given
        with Reader(settings) as reader:
            assert {p for (p,) in reader.conn.execute("SELECT path FROM documents")
                    if int(reader.conn.execute("SELECT id FROM documents WHERE path = ?", (p,)).fetchone()[0])
                    in Filter.of(given).documents(reader.conn)} == paths


def test_a_kept_filter_answer_follows_a_change_to_the_store(tmp_path: Path) -> None:
    settings = build_store(store_settings(tmp_path), {"docs/a/1.md": "# One\n\ntoken one\n",
                                                      "docs/b/2.md": "# Two\n\ntoken two\n"})
    filters = Filter.of("docs/a")
    assert {h.path for h in search(settings, "token", 10, filters=filters).hits} == {"docs/a/1.md"}
    assert {h.path for h in search(settings, "token", 10, filters=filters).hits} == {"docs/a/1.md"}  # kept
    build_store(settings, {"docs/a/3.md": "# Three\n\ntoken three\n"})
    assert {h.path for h in search(settings, "token", 10, filters=filters).hits} == {"docs/a/1.md", "docs/a/3.md"}
