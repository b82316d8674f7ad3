"""Values kept across readers: reused while the store is unchanged, never served after a write or a reset."""

from __future__ import annotations

import shutil
from pathlib import Path

from config.settings import Settings
from query.enumerate import EnumerateResult
from query.generation import Generation, Generations
from query.read_index import ReadIndex
from tests.lent import enumerate_documents
from tests.query.stores import build_store, store_settings


def _store(base: Path, docs: dict[str, str]) -> Settings:
    return build_store(store_settings(base), docs)


def _document_queries(index: ReadIndex, text: str) -> int:
    """How many FTS statements a match of text runs on a new Reader of index (SQLite's own trace of it)."""
    statements: list[str] = []
    reader = index.open()
    assert reader is not None
    with reader:
        reader.conn.set_trace_callback(statements.append)
        enumerate_documents(index.settings, text, reader=reader)
    return sum(1 for s in statements if "GROUP BY c.document_id" in s)


def _match(index: ReadIndex, text: str) -> EnumerateResult:
    """A match of text on a Reader the index lends (the values kept hang on the index, across Readers)."""
    with index.reader() as reader:
        assert reader is not None
        return enumerate_documents(index.settings, text, reader=reader)


def test_a_match_reuses_a_terms_documents_while_the_store_is_unchanged(tmp_path: Path) -> None:
    settings = _store(tmp_path, {"docs/a.md": "# A\n\nalpha beta\n", "docs/b.md": "# B\n\nalpha gamma\n"})
    index = ReadIndex(settings)
    try:
        assert _document_queries(index, "alpha beta") == 4  # body and heading, per term
        assert _document_queries(index, "alpha beta") == 0
        assert _document_queries(index, "alpha gamma") == 2  # only gamma is new
    finally:
        index.close()


def test_a_match_after_a_reindex_sees_the_new_text(tmp_path: Path) -> None:
    settings = _store(tmp_path, {"docs/a.md": "# A\n\nalpha beta\n", "docs/b.md": "# B\n\nalpha gamma\n"})
    index = ReadIndex(settings)
    try:
        assert [d.path for d in _match(index, "alpha").documents] == ["docs/a.md", "docs/b.md"]
        build_store(settings, {"docs/b.md": "# B\n\ngamma only\n",
                               "docs/c.md": "# C\n\nalpha alpha\n\n## alpha\n\nx\n"})
        found = _match(index, "alpha")
        assert [(d.path, d.body_matches, d.heading_matches) for d in found.documents] == [
            ("docs/c.md", 1, 1), ("docs/a.md", 1, 0)]
        assert found.terms[0].any_form == found.terms[0].as_written == 2
    finally:
        index.close()


def test_a_reset_store_at_the_same_path_is_never_answered_from_the_old_one(tmp_path: Path) -> None:
    settings = _store(tmp_path, {"docs/a.md": "# A\n\nalpha beta\n"})
    index = ReadIndex(settings)
    try:
        assert _match(index, "alpha").matched == 1
        shutil.rmtree(settings.db_path.parent)
        _store(tmp_path, {"docs/x.md": "# X\n\nalpha\n", "docs/y.md": "# Y\n\nalpha\n"})
        found = _match(index, "alpha")
        assert (found.matched, found.terms[0].any_form) == (2, 2)
    finally:
        index.close()


def test_a_value_computed_while_a_write_lands_is_not_kept(tmp_path: Path) -> None:
    settings = _store(tmp_path, {"docs/a.md": "# A\n\nalpha\n"})
    kept = Generations()
    try:
        first = Generation(kept, settings.db_path)

        def computed_during_a_write() -> str:
            build_store(settings, {"docs/b.md": "# B\n\nbeta\n"})
            return "old"

        assert first.get("key", computed_during_a_write) == "old"
        first.keep()
        assert Generation(kept, settings.db_path).get("key", lambda: "new") == "new"
        steady = Generation(kept, settings.db_path)
        steady.get("key", lambda: "kept")
        steady.keep()
        assert Generation(kept, settings.db_path).get("key", lambda: "recomputed") == "kept"
    finally:
        kept.close()
