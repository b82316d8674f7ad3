"""Values kept across readers: reused while the store is unchanged, never served after a write or a reset."""

from __future__ import annotations

import shutil
from pathlib import Path

from config.settings import Settings
from query import generation
from query.enumerate import enumerate_documents
from query.generation import Generation
from query.reader import Reader
from tests.query.stores import build_store, store_settings


def _store(base: Path, docs: dict[str, str]) -> Settings:
    return build_store(store_settings(base), docs)


def _document_queries(settings: Settings, text: str) -> int:
    """How many FTS statements a match of text runs on its reader (SQLite's own trace of the connection)."""
    statements: list[str] = []
    with Reader(settings) as reader:
        reader.conn.set_trace_callback(statements.append)
        enumerate_documents(settings, text, reader=reader)
    return sum(1 for s in statements if "GROUP BY c.document_id" in s)


def test_a_match_reuses_a_terms_documents_while_the_store_is_unchanged(tmp_path: Path) -> None:
    settings = _store(tmp_path, {"docs/a.md": "# A\n\nalpha beta\n", "docs/b.md": "# B\n\nalpha gamma\n"})
    try:
        assert _document_queries(settings, "alpha beta") == 4  # body and heading, per term
        assert _document_queries(settings, "alpha beta") == 0
        assert _document_queries(settings, "alpha gamma") == 2  # only gamma is new
    finally:
        generation.forget(settings.db_path)


def test_a_match_after_a_reindex_sees_the_new_text(tmp_path: Path) -> None:
    settings = _store(tmp_path, {"docs/a.md": "# A\n\nalpha beta\n", "docs/b.md": "# B\n\nalpha gamma\n"})
    try:
        assert [d.path for d in enumerate_documents(settings, "alpha").documents] == ["docs/a.md", "docs/b.md"]
        build_store(settings, {"docs/b.md": "# B\n\ngamma only\n",
                               "docs/c.md": "# C\n\nalpha alpha\n\n## alpha\n\nx\n"})
        found = enumerate_documents(settings, "alpha")
        assert [(d.path, d.body_matches, d.heading_matches) for d in found.documents] == [
            ("docs/c.md", 1, 1), ("docs/a.md", 1, 0)]
        assert found.terms[0].any_form == found.terms[0].as_written == 2
    finally:
        generation.forget(settings.db_path)


def test_a_reset_store_at_the_same_path_is_never_answered_from_the_old_one(tmp_path: Path) -> None:
    settings = _store(tmp_path, {"docs/a.md": "# A\n\nalpha beta\n"})
    try:
        assert enumerate_documents(settings, "alpha").matched == 1
        shutil.rmtree(settings.db_path.parent)
        _store(tmp_path, {"docs/x.md": "# X\n\nalpha\n", "docs/y.md": "# Y\n\nalpha\n"})
        found = enumerate_documents(settings, "alpha")
        assert (found.matched, found.terms[0].any_form) == (2, 2)
    finally:
        generation.forget(settings.db_path)


def test_a_value_computed_while_a_write_lands_is_not_kept(tmp_path: Path) -> None:
    settings = _store(tmp_path, {"docs/a.md": "# A\n\nalpha\n"})
    try:
        first = Generation(settings.db_path)

        def computed_during_a_write() -> str:
            build_store(settings, {"docs/b.md": "# B\n\nbeta\n"})
            return "old"

        assert first.get("key", computed_during_a_write) == "old"
        first.keep()
        assert Generation(settings.db_path).get("key", lambda: "new") == "new"
        steady = Generation(settings.db_path)
        steady.get("key", lambda: "kept")
        steady.keep()
        assert Generation(settings.db_path).get("key", lambda: "recomputed") == "kept"
    finally:
        generation.forget(settings.db_path)
