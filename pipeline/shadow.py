"""The shadow vector build: switch the embedding model while the serving vectors keep answering.

`embeddings_next` names the new model. The build embeds every section with it into chunks_vec_next
(its DDL and the `next_*` identity meta keys are pipeline/schema.py's) in small transactions, beside
chunks_vec, which keeps serving hybrid search under the pinned identity. Progress is the table
itself: the sections without a shadow vector are the work left, so a build stopped by a crash, a
limit or a failing server resumes where it was on the next run, and sections an index run adds or
changes meanwhile are simply embedded then (the delete trigger drops a removed section's shadow
vector). When no section lacks one, one transaction replaces chunks_vec with the shadow rows, pins
the new identity, drops the shadow and rebuilds the quantised companions: a reader sees the old
tier or the new one, never a mix (query/search.py re-embeds a query that straddles the swap).

The caller holds the write lock for the whole build, so it is the store's only writer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from config.errors import PipelineError
from pipeline import schema, vector_codes
from pipeline.db import Connection
from pipeline.embeddings import document_text
from pipeline.store import Store
from pipeline.vectors import VectorIdentity, pinned_identity, to_blob

Embed = Callable[[list[str]], list[list[float]]]


@dataclass(frozen=True)
class Progress:
    """Where a switch stands: sections with a shadow vector, all sections, and whether it swapped."""

    identity: VectorIdentity
    embedded: int
    total: int
    swapped: bool = False

    @property
    def left(self) -> int:
        """Sections still lacking a shadow vector."""
        return self.total - self.embedded


def next_identity(meta: Mapping[str, str]) -> VectorIdentity | None:
    """The identity of the shadow build under way, or None when there is none."""
    prefix = schema.NEXT_KEY_PREFIX
    return pinned_identity({key[len(prefix):]: value for key, value in meta.items() if key.startswith(prefix)})


def start(conn: Connection, identity: VectorIdentity) -> bool:
    """Create the shadow table for identity (in the caller's transaction); True when it was (re)created.

    A shadow of the same identity is kept (its rows are the progress so far); one of another
    identity (the target changed mid-way) is dropped and started over.
    """
    if schema.exists(conn, schema.NEXT_VECTORS) and next_identity(schema.read_meta(conn)) == identity:
        return False
    schema.drop_next_vectors(conn)
    schema.create_next_vectors(conn, identity.dimension)
    schema.write_meta(conn, {schema.NEXT_KEY_PREFIX + k: v for k, v in identity.to_meta().items()})
    return True


def abandon(conn: Connection) -> None:
    """Drop a shadow build (in the caller's transaction); the serving vectors are untouched."""
    schema.drop_next_vectors(conn)


def progress(conn: Connection, identity: VectorIdentity) -> Progress:
    """How many sections have a shadow vector, of how many."""
    row = conn.execute(
        f"SELECT (SELECT count(*) FROM chunks), (SELECT count(*) FROM chunks"
        f" WHERE id IN (SELECT chunk_id FROM {schema.NEXT_VECTORS}))"
    ).fetchone()
    return Progress(identity, int(row[1]), int(row[0]))


def pending(conn: Connection, identity: VectorIdentity, limit: int) -> list[tuple[int, str]]:
    """Up to limit (chunk id, text as embedded) of the sections without a shadow vector, in id order."""
    rows = conn.execute(
        f"SELECT id, body, heading_path FROM chunks WHERE id NOT IN (SELECT chunk_id FROM {schema.NEXT_VECTORS})"
        " ORDER BY id LIMIT ?",
        (int(limit),),
    )
    return [(int(cid), document_text(str(body), str(heading), identity.document_prefix)) for cid, body, heading in rows]


def store_vectors(conn: Connection, ids: Sequence[int], vectors: Sequence[Sequence[float]]) -> int:
    """Insert the shadow vectors of sections still present (in the caller's transaction); return the count."""
    if len(ids) != len(vectors):
        raise PipelineError(f"{len(ids)} sections but {len(vectors)} vectors")
    present = {int(r[0]) for r in conn.execute(
        "SELECT id FROM chunks WHERE id IN (SELECT value FROM json_each(?))", (_json_ids(ids),))}
    rows = [(cid, to_blob(v)) for cid, v in zip(ids, vectors) if cid in present]
    conn.executemany(f"INSERT INTO {schema.NEXT_VECTORS}(chunk_id, embedding) VALUES (?, ?)", rows)
    return len(rows)


def swap(conn: Connection, identity: VectorIdentity) -> None:
    """Pin identity and serve the shadow vectors (in the caller's transaction); PipelineError if any is missing."""
    if next_identity(schema.read_meta(conn)) != identity:
        raise PipelineError("the shadow vectors were built for another identity; run the switch again")
    done = progress(conn, identity)
    if done.left:
        raise PipelineError(f"{done.left} sections still lack a vector of {identity.model!r}; the switch goes on")
    schema.promote_next_vectors(conn, identity.dimension)
    schema.write_meta(conn, identity.to_meta())
    vector_codes.install(conn, identity.dimension)


def run(store: Store, identity: VectorIdentity, embed: Embed, batch_size: int, limit: int | None = None,
        on_batch: Callable[[Progress], None] | None = None) -> Progress:
    """Embed the sections lacking a shadow vector (at most limit), then swap when none is left.

    Each batch is embedded outside any transaction and written in its own, so readers and a crash
    lose at most one batch of work. An embedding error propagates with the progress kept.
    """
    with store.transaction() as conn:
        start(conn, identity)
    budget = limit
    while budget is None or budget > 0:
        size = batch_size if budget is None else min(batch_size, budget)
        work = pending(store.conn, identity, size)
        if not work:
            break
        vectors = embed([text for _, text in work])
        with store.transaction() as conn:
            store_vectors(conn, [cid for cid, _ in work], vectors)
            done = progress(conn, identity)
        if budget is not None:
            budget -= len(work)
        if on_batch is not None:
            on_batch(done)
    with store.transaction() as conn:
        done = progress(conn, identity)
        if done.left:
            return done
        swap(conn, identity)
    return Progress(identity, done.embedded, done.total, swapped=True)


def _json_ids(ids: Sequence[int]) -> str:
    return "[" + ",".join(str(int(i)) for i in ids) + "]"
