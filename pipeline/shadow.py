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

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from config.errors import PipelineError
from pipeline import schema, vector_codes
from pipeline.db import Connection
from pipeline.store import Store
from pipeline.vectors import VectorIdentity, pinned_identity, to_blob

Embed = Callable[[list[str]], list[list[float]]]
ROUNDS = 5  # embed-then-swap attempts of one run while index runs keep adding sections


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


def under_way(conn: Connection) -> Progress | None:
    """The shadow build under way and its progress, or None."""
    if not schema.exists(conn, schema.NEXT_VECTORS):
        return None
    current = next_identity(schema.read_meta(conn))
    return None if current is None else progress(conn, current)


def refuse_odd_dimension(current: Progress, identity: VectorIdentity) -> None:
    """PipelineError when identity is the build under way but for its dimension: a probe not to trust.

    A server restarting, or a load balancer routing one request to another model, answers one probe
    with another dimension; dropping the shadow for it would throw away every vector built so far.
    """
    if current.identity != identity and replace(current.identity, dimension=identity.dimension) == identity:
        raise PipelineError(
            f"the embeddings server answered {identity.dimension}-dimensional vectors for {identity.model!r}, but "
            f"the switch under way pinned {current.identity.dimension} ({current.embedded} of {current.total} "
            "sections embedded); nothing was dropped. Run `knowledge vectors switch` again once the server answers "
            "as before, or `knowledge vectors switch --abandon` first to start over with the new dimension"
        )


def target(conn: Connection, identity_of: Callable[[], VectorIdentity], attempts: int = 3,
           wait: Callable[[], None] = lambda: None) -> tuple[VectorIdentity, str | None]:
    """(the identity to build, a note of a shadow it drops): a probe at odds with the build under way is
    asked again up to `attempts` times, and refused (refuse_odd_dimension) when every answer disagrees."""
    current = under_way(conn)
    identity = identity_of()
    for _ in range(attempts - 1):
        if current is None or current.identity == identity \
                or replace(current.identity, dimension=identity.dimension) != identity:
            break
        wait()
        identity = identity_of()
    if current is not None:
        refuse_odd_dimension(current, identity)
        if current.identity != identity:
            return identity, (f"the shadow build of {current.identity.model!r} ({current.embedded} of "
                              f"{current.total} sections) is dropped: embeddings_next now names {identity.model!r}")
    return identity, None


def start(conn: Connection, identity: VectorIdentity) -> bool:
    """Create the shadow table for identity (in the caller's transaction); True when it was (re)created.

    A shadow of the same identity is kept (its rows are the progress so far); one of another model
    or prefix (the target changed mid-way) is dropped and started over; one differing only in its
    dimension is refused (refuse_odd_dimension), never dropped.
    """
    current = under_way(conn)
    if current is not None and current.identity == identity:
        return False
    if current is not None:
        refuse_odd_dimension(current, identity)
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
    return [(int(cid), identity.document_text(str(body), str(heading))) for cid, body, heading in rows]


def digest(text: str) -> str:
    """A short fingerprint of a section's text as embedded: the writer checks it before storing a vector."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def store_vectors(conn: Connection, identity: VectorIdentity, ids: Sequence[int], vectors: Sequence[bytes],
                  digests: Sequence[str]) -> int:
    """Insert the shadow vectors of sections whose text is still the one embedded (in the caller's transaction).

    A section removed or rewritten since it was read (by an index run in between) is skipped: the
    next pass embeds it as it is now. Returns the vectors stored.
    """
    if not len(ids) == len(vectors) == len(digests):
        raise PipelineError(f"{len(ids)} sections but {len(vectors)} vectors and {len(digests)} digests")
    if next_identity(schema.read_meta(conn)) != identity:
        raise PipelineError("the shadow vectors are being built for another identity; run the switch again")
    now = {int(cid): digest(identity.document_text(str(body), str(heading)))
           for cid, body, heading in conn.execute(
               f"SELECT id, body, heading_path FROM chunks WHERE id IN (SELECT value FROM json_each(?))"
               f" AND id NOT IN (SELECT chunk_id FROM {schema.NEXT_VECTORS})", (_json_ids(ids),))}
    rows = [(cid, blob) for cid, blob, fp in zip(ids, vectors, digests) if now.get(cid) == fp]
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


class ShadowWriter(Protocol):
    """The writer's side of a switch: the store's only writer applies each step in its own transaction."""

    def start(self, identity: VectorIdentity) -> None:
        """Create (or keep) the shadow table for identity."""

    def store(self, identity: VectorIdentity, ids: list[int], vectors: list[bytes], digests: list[str]) -> None:
        """Write one batch of shadow vectors."""

    def finish(self, identity: VectorIdentity) -> Progress:
        """Swap when no section lacks a shadow vector; the progress either way."""

    def abandon(self) -> None:
        """Drop the shadow build, if any."""


class LocalWriter:
    """ShadowWriter over a Store this process holds the write lock of."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def start(self, identity: VectorIdentity) -> None:
        with self._store.transaction() as conn:
            start(conn, identity)

    def store(self, identity: VectorIdentity, ids: list[int], vectors: list[bytes], digests: list[str]) -> None:
        with self._store.transaction() as conn:
            store_vectors(conn, identity, ids, vectors, digests)

    def finish(self, identity: VectorIdentity) -> Progress:
        with self._store.transaction() as conn:
            return finish(conn, identity)

    def abandon(self) -> None:
        with self._store.transaction() as conn:
            abandon(conn)


def finish(conn: Connection, identity: VectorIdentity) -> Progress:
    """swap() when no section lacks a shadow vector (in the caller's transaction); the progress either way."""
    done = progress(conn, identity)
    if done.left:
        return done
    swap(conn, identity)
    return Progress(identity, done.embedded, done.total, swapped=True)


def run(writer: ShadowWriter, reader: Connection, identity: VectorIdentity, embed: Embed, batch_size: int,
        limit: int | None = None, on_batch: Callable[[Progress], None] | None = None) -> Progress:
    """Embed the sections lacking a shadow vector (at most limit), then let the writer swap when none is left.

    `reader` (the writer's own connection, or a read-only one) names the work; each batch is
    embedded outside any transaction and written by `writer` in one, so a crash loses at most one
    batch. An embedding error propagates with the progress kept.
    """
    writer.start(identity)
    budget = limit
    for _ in range(ROUNDS):
        while budget is None or budget > 0:
            size = batch_size if budget is None else min(batch_size, budget)
            work = pending(reader, identity, size)
            if not work:
                break
            vectors = embed([text for _, text in work])
            writer.store(identity, [cid for cid, _ in work], [to_blob(v) for v in vectors],
                         [digest(text) for _, text in work])
            if budget is not None:
                budget -= len(work)
            if on_batch is not None:
                on_batch(progress(reader, identity))
        done = writer.finish(identity)
        if done.swapped or not done.left or budget is not None:
            return done
        # an index run added or rewrote sections while the swap waited for it: embed those too
    return done


def _json_ids(ids: Sequence[int]) -> str:
    return "[" + ",".join(str(int(i)) for i in ids) + "]"
