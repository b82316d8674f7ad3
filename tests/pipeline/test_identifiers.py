"""What counts as an identifier, and the exact table's view holding a section's words then its identifiers."""

from __future__ import annotations

from pipeline import db, schema
from pipeline.identifiers import identifiers, words, written_form

TEXT = ("Use model_validator. The end... config.yaml and --workers, see e.g. foo-bar- x.\n"
        "(v1.2.3) a -- b |---| __init__ .env don't model_validator's")


def test_identifiers_are_runs_with_an_inner_mark_without_the_dot_or_dash_that_ends_them() -> None:
    assert identifiers(TEXT).split() == ["model_validator", "config.yaml", "--workers", "e.g", "foo-bar", "v1.2.3",
                                         "__init__", ".env"]
    assert identifiers("The end. A plain sentence - with a dash.") == ""


def test_a_query_term_is_whole_when_it_is_one_identifier_and_its_words_otherwise() -> None:
    assert written_form("model_validator.") == "model_validator"
    assert written_form("model") == "model"
    assert written_form("use model_validator", phrase=True) == "use model validator"
    assert written_form("docs/a_b") == "docs/a b"  # not one identifier: by its words, as FTS5 cuts them


def test_the_exact_view_holds_the_words_then_the_identifiers_the_writer_keeps() -> None:
    conn = db.memory_connection()
    schema.ensure(conn)
    conn.execute("INSERT INTO documents(id, path, root, sha256, size, mtime_ns, chunk_count, indexed_at, indexed_ns)"
                 " VALUES (1, 'a.md', '.', '', 0, 0, 1, '', 0)")
    conn.execute("INSERT INTO chunks(document_id, ordinal, heading_path, body, text_hash, body_identifiers,"
                 " heading_identifiers) VALUES (1, 0, 'API > kube-proxy', ?, '', ?, 'kube-proxy')",
                 (TEXT, identifiers(TEXT)))
    body, heading = conn.execute("SELECT body, heading_path FROM chunks_exact").fetchone()
    assert body == f"{words(TEXT)} {identifiers(TEXT)}" and heading == "API > kube proxy kube-proxy"
    terms = {t for (t,) in conn.execute("SELECT term FROM chunks_vocab")}
    assert {"model_validator", "model", "validator", "kube-proxy", "kube", "end"} <= terms
    assert not {t for t in terms if t.endswith((".", "-"))}
    conn.execute("INSERT INTO chunks_fts_exact(chunks_fts_exact, rank) VALUES ('integrity-check', 1)")
