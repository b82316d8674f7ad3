"""The shadow vector build: resumable progress, fingerprint-checked writes, one swap, and a query across it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.errors import PipelineError
from config.loader import settings_from_mapping
from pipeline import schema, shadow, vector_codes, vectors
from pipeline.chunker import chunk_text
from pipeline.embedding_input import document_text
from pipeline.models import Document
from pipeline.store import Store
from query.reader import Reader
from tests.embedserver import EmbedServer, hashed_vector
from tests.lent import search

OLD = vectors.VectorIdentity("old-bow", 4)
NEW = vectors.VectorIdentity("new-bow", 6, "q: ", "d: ")


def _doc(path: str, text: str) -> Document:
    chunked = chunk_text(text)
    doc = Document(path, "docs", "0" * 64, len(text), 1, chunked.title, chunked.chunks)
    doc.vectors = {c.ordinal: vectors.to_blob([1.0, float(c.ordinal), 0.0, 0.5]) for c in doc.chunks}
    return doc


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "store" / "knowledge.db")
    with opened.transaction() as conn:
        vectors.install(conn, OLD)
    opened.vector_hook = vectors.VectorWriter(reuse=True)
    for i in range(5):
        opened.apply(_doc(f"docs/d{i}.md", f"# D{i}\n\nalpha {i}\n\n## More\n\nbeta {i}\n"))
    yield opened
    opened.close()


def embed(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 1.0, 0.0, 0.0, 0.0, float(i)] for i, t in enumerate(texts)]


def test_a_limited_run_keeps_serving_the_old_vectors_and_the_next_run_resumes(store: Store) -> None:
    writer = shadow.LocalWriter(store)
    total = store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    seen: list[int] = []
    done = shadow.run(writer, store.conn, NEW, embed, batch_size=3, limit=4, on_batch=lambda p: seen.append(p.embedded))
    assert (done.swapped, done.embedded, done.total, seen) == (False, 4, total, [3, 4])
    meta = schema.read_meta(store.conn)
    assert vectors.pinned_identity(meta) == OLD and shadow.next_identity(meta) == NEW
    done = shadow.run(writer, store.conn, NEW, embed, batch_size=3)
    assert done.swapped and done.embedded == total
    meta = schema.read_meta(store.conn)
    assert vectors.pinned_identity(meta) == NEW and shadow.next_identity(meta) is None
    assert not schema.exists(store.conn, schema.NEXT_VECTORS) and vector_codes.ready(store.conn)
    dims = {len(vectors.from_blob(b)) for (b,) in store.conn.execute(f"SELECT embedding FROM {schema.VECTORS}")}
    assert dims == {6} and len(vector_codes.filed_ids(store.conn)) == total


def test_a_section_rewritten_after_it_was_read_is_not_stored_and_is_embedded_again(store: Store) -> None:
    with store.transaction() as conn:
        shadow.start(conn, NEW)
    work = shadow.pending(store.conn, NEW, 100)
    store.apply(_doc("docs/d0.md", "# D0\n\nrewritten\n"))  # an index run in between
    with store.transaction() as conn:
        stored = shadow.store_vectors(conn, NEW, [c for c, _ in work], [vectors.to_blob(v) for v in
                                      embed([t for _, t in work])], [shadow.digest(t) for _, t in work])
    left = shadow.pending(store.conn, NEW, 100)
    assert stored == len(work) - 2 and [t for _, t in left] == [document_text("rewritten", "D0", "d: ")]


def test_a_deleted_section_drops_its_shadow_vector_and_a_new_target_starts_over(store: Store) -> None:
    done = shadow.run(shadow.LocalWriter(store), store.conn, NEW, embed, batch_size=50, limit=9)
    assert not done.swapped and done.left == 1
    store.remove(["docs/d1.md"])
    orphans = store.conn.execute(f"SELECT count(*) FROM {schema.NEXT_VECTORS}"
                                 " WHERE chunk_id NOT IN (SELECT id FROM chunks)").fetchone()[0]
    assert orphans == 0 and shadow.progress(store.conn, NEW).embedded == 7
    other = vectors.VectorIdentity("other", 3)
    with store.transaction() as conn:
        assert shadow.start(conn, other) is True
        assert shadow.progress(conn, other).embedded == 0


def test_the_swap_refuses_while_a_section_lacks_a_shadow_vector(store: Store) -> None:
    with store.transaction() as conn:
        shadow.start(conn, NEW)
    with pytest.raises(PipelineError, match="still lack a vector"), store.transaction() as conn:
        shadow.swap(conn, NEW)
    assert vectors.pinned_identity(schema.read_meta(store.conn)) == OLD


def test_a_query_embedded_just_before_the_swap_is_embedded_again_with_the_new_model(tmp_path: Path) -> None:
    with EmbedServer(dim=8) as old, EmbedServer(dim=12) as new:
        settings = settings_from_mapping({
            "embeddings": {"base_url": old.base_url, "model": "old-bow"},
            "embeddings_next": {"base_url": new.base_url, "model": "new-bow"},
        }, store_base=tmp_path)
        opened = Store(settings.db_path)
        try:
            old_identity = vectors.VectorIdentity("old-bow", 8)
            with opened.transaction() as conn:
                vectors.install(conn, old_identity)
            opened.vector_hook = vectors.VectorWriter(reuse=False)
            doc = _doc("docs/a.md", "# Budgets\n\nbudget cap for a run\n")
            doc.vectors = {c.ordinal: vectors.to_blob(hashed_vector(c.body, 8)) for c in doc.chunks}
            opened.apply(doc)
            with Reader(settings) as reader:  # reads the old identity, then the store swaps
                new_identity = vectors.VectorIdentity("new-bow", 12)
                shadow.run(shadow.LocalWriter(opened), opened.conn, new_identity,
                           lambda texts: [hashed_vector(t, 12) for t in texts], batch_size=8)
                response = search(settings, "budget cap", reader=reader)
        finally:
            opened.close()
        assert response.degraded is None and [h.path for h in response.hits] == ["docs/a.md"]
        assert response.tier.endswith("model=new-bow dim=12")
        assert len(old.requests) == 1 and len(new.requests) == 1  # the old query vector was never compared


def test_one_odd_probe_is_asked_again_and_the_build_under_way_is_kept(store: Store) -> None:
    shadow.run(shadow.LocalWriter(store), store.conn, NEW, embed, batch_size=50, limit=4)
    answers = iter([dataclasses.replace(NEW, dimension=NEW.dimension + 1), NEW])
    identity, dropped = shadow.target(store.conn, lambda: next(answers))
    assert identity == NEW and dropped is None
    odd = dataclasses.replace(NEW, dimension=NEW.dimension + 1)
    with pytest.raises(PipelineError, match="nothing was dropped"):
        shadow.target(store.conn, lambda: odd)
    with store.transaction() as conn, pytest.raises(PipelineError, match="nothing was dropped"):
        shadow.start(conn, odd)
    assert shadow.progress(store.conn, NEW).embedded == 4
