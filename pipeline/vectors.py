"""The vector tier's store side: the pinned vector identity, the chunks_vec table, its writes and reuse.

The identity (model, dimension, normalized, query_prefix, document_prefix) is pinned in `meta` when
the first vector run writes; every later run and every query must match it, or `--reindex` rebuilds
the vectors. chunks_vec (sqlite-vec vec0, one float32 row per chunk, keyed by chunk id) exists only
once embeddings were configured; a trigger deletes a chunk's vector with the chunk, because vec0 has
no upsert and no foreign keys. A chunk whose text hash is unchanged keeps its stored vector. Beside
it, pipeline.vector_codes keeps quantised codes and float copies for fast KNN on large stores,
written in the same transaction; install() creates and fills them for a store that lacks them.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from config.errors import EmbeddingUnavailable, PipelineError, VectorIdentityMismatch
from config.settings import EmbeddingsSettings, Settings
from pipeline import db, vector_codes
from pipeline.embeddings import EmbeddingsClient, Probe
from pipeline.models import Document

TABLE = "chunks_vec"
TRIGGER = "chunks_vec_ad"
REINDEX = "knowledge index --reindex"


@dataclass(frozen=True)
class VectorIdentity:
    """What makes two vectors comparable: the model, its dimension, normalisation and both prefixes."""

    model: str
    dimension: int
    query_prefix: str = ""
    document_prefix: str = ""
    normalized: bool = True  # stored vectors are unit length (the client normalises them)

    def to_meta(self) -> dict[str, str]:
        """The identity as meta rows."""
        return {
            "model": self.model,
            "dimension": str(self.dimension),
            "normalized": "true" if self.normalized else "false",
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (run info)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VectorIdentity:
        """Inverse of to_dict."""
        return cls(str(data["model"]), int(data["dimension"]), str(data.get("query_prefix", "")),
                   str(data.get("document_prefix", "")), bool(data.get("normalized", True)))


def configured_identity(settings: EmbeddingsSettings, dimension: int) -> VectorIdentity:
    """The identity the configuration asks for, with the dimension the server answers."""
    return VectorIdentity(settings.model, dimension, settings.query_prefix, settings.document_prefix)


def pinned_identity(meta: Mapping[str, str]) -> VectorIdentity | None:
    """The identity pinned in a store's meta table, or None when no vector run ever wrote."""
    if not meta.get("model") or not str(meta.get("dimension", "")).isdigit():
        return None
    return VectorIdentity(meta["model"], int(meta["dimension"]), meta.get("query_prefix", ""),
                          meta.get("document_prefix", ""), meta.get("normalized", "true") == "true")


def differences(pinned: VectorIdentity, wanted: VectorIdentity) -> list[str]:
    """Human-readable differences, `field: index has X, configured Y`."""
    out: list[str] = []
    for name in ("model", "dimension", "query_prefix", "document_prefix", "normalized"):
        have, want = getattr(pinned, name), getattr(wanted, name)
        if have != want:
            out.append(f"{name}: index has {have!r}, configured {want!r}")
    return out


def mismatch(where: object, pinned: VectorIdentity, wanted: VectorIdentity) -> VectorIdentityMismatch:
    """The loud error for a store whose vectors were built with another identity."""
    return VectorIdentityMismatch(
        f"the vectors in {where} were built with another identity ({'; '.join(differences(pinned, wanted))}); "
        f"run `{REINDEX}` to rebuild them, or restore the previous embeddings settings"
    )


def check_identity(where: object, pinned: VectorIdentity | None, wanted: VectorIdentity) -> None:
    """Raise VectorIdentityMismatch unless pinned equals wanted (None: the index has no vectors)."""
    if pinned is None:
        raise VectorIdentityMismatch(
            f"the index at {where} has no vectors yet for model {wanted.model!r}; run `knowledge index` to embed it"
        )
    if pinned != wanted:
        raise mismatch(where, pinned, wanted)


@dataclass(frozen=True)
class VectorPlan:
    """What an index run does with vectors, decided before anything is written."""

    identity: VectorIdentity
    reuse: bool  # stored vectors of unchanged chunks may be kept (same identity, no --reindex)
    backfill: frozenset[str] = field(default_factory=frozenset)  # documents with a chunk lacking a vector
    batch_size: int = 64

    def to_info(self) -> dict[str, Any]:
        """The run-info form every process of the run reads."""
        return {"identity": self.identity.to_dict(), "reuse": self.reuse, "batch_size": self.batch_size}

    @classmethod
    def from_info(cls, info: Mapping[str, Any] | None) -> VectorPlan | None:
        """Inverse of to_info; None for a lexical-only run."""
        if not info:
            return None
        return cls(VectorIdentity.from_dict(info["identity"]), bool(info["reuse"]),
                   batch_size=int(info.get("batch_size", 64)))


def probe_server(settings: EmbeddingsSettings, environ: Mapping[str, str] | None = None) -> Probe:
    """Probe the configured server once; an unreachable or failing server is a loud error."""
    with EmbeddingsClient(settings, environ=environ) as client:
        try:
            return client.probe()
        except EmbeddingUnavailable as exc:
            raise EmbeddingUnavailable(
                f"embeddings are configured but the server cannot embed: {exc}; nothing was written "
                "(start the server, or remove the embeddings block to index lexical-only)"
            ) from exc


def plan(settings: Settings, reindex: bool, probe: Probe | None = None) -> VectorPlan | None:
    """Reconcile the live server with the pinned manifest; None when embeddings are not configured.

    Raises EmbeddingUnavailable when the server cannot be probed and VectorIdentityMismatch when
    the index holds vectors of another identity and `reindex` is off. Reads the store read-only.
    """
    emb = settings.embeddings
    if emb is None:
        return None
    probe = probe or probe_server(emb)
    wanted = configured_identity(emb, probe.dimension)
    pinned, missing = _stored_state(settings.db_path)
    if pinned is not None and pinned != wanted:
        if not reindex:
            raise mismatch(settings.db_path, pinned, wanted)
        return VectorPlan(wanted, reuse=False, backfill=missing, batch_size=emb.batch_size)
    return VectorPlan(wanted, reuse=pinned is not None and not reindex, backfill=missing,
                      batch_size=emb.batch_size)


def _stored_state(db_path: Path) -> tuple[VectorIdentity | None, frozenset[str]]:
    """The pinned identity and the paths of documents holding a chunk without a vector."""
    if not db_path.is_file():
        return None, frozenset()
    conn = db.open_reader(db_path)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "meta" not in names or "chunks" not in names:
            return None, frozenset()
        pinned = pinned_identity({k: v for k, v in conn.execute("SELECT key, value FROM meta")})
        return pinned, frozenset(missing_vector_paths(conn, TABLE in names))
    finally:
        conn.close()


def missing_vector_paths(conn: Any, has_table: bool = True) -> list[str]:
    """Paths of documents with at least one chunk that has no vector."""
    where = f"c.id NOT IN (SELECT chunk_id FROM {TABLE})" if has_table else "1"
    rows = conn.execute(
        f"SELECT DISTINCT d.path FROM chunks c JOIN documents d ON d.id = c.document_id WHERE {where}"
    )
    return sorted(r[0] for r in rows)


def has_table(conn: Any) -> bool:
    """True when the store has a vector table."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (TABLE,)).fetchone() is not None


def install(conn: Any, identity: VectorIdentity) -> bool:
    """Create (or, for another identity, recreate) chunks_vec and pin identity; call inside a transaction.

    Returns True when the table was (re)created. Recreating drops every stored vector: the
    planner only lets that happen under `--reindex` or when no identity was pinned. The quantised
    companions (pipeline.vector_codes) are created too, and filled from chunks_vec when a store
    written before them, or with another encoding, lacks them.
    """
    meta = {k: v for k, v in conn.execute("SELECT key, value FROM meta")}
    exists = has_table(conn)
    if exists and pinned_identity(meta) == identity:
        if not vector_codes.ready(conn):
            vector_codes.install(conn, identity.dimension)
        return False
    vector_codes.drop(conn)
    if exists:
        conn.execute(f"DROP TABLE {TABLE}")
    conn.execute(
        f"CREATE VIRTUAL TABLE {TABLE} USING vec0(chunk_id INTEGER PRIMARY KEY, embedding float[{identity.dimension}])"
    )
    conn.execute(
        f"CREATE TRIGGER IF NOT EXISTS {TRIGGER} AFTER DELETE ON chunks BEGIN "
        f"DELETE FROM {TABLE} WHERE chunk_id = old.id; END"
    )
    vector_codes.install(conn, identity.dimension)
    conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list(identity.to_meta().items()))
    return True


def to_blob(vector: Sequence[float] | bytes) -> bytes:
    """A vector as sqlite-vec's float32 blob."""
    if isinstance(vector, bytes):
        return vector
    return array("f", vector).tobytes()


def from_blob(blob: bytes) -> list[float]:
    """A float32 blob as a list of floats."""
    values = array("f")
    values.frombytes(blob)
    return values.tolist()


def reusable_hashes(conn: Any, path: str) -> set[str]:
    """Text hashes of the stored chunks of path that have a vector (reader or writer connection)."""
    if not has_table(conn):
        return set()
    rows = conn.execute(
        f"SELECT c.text_hash FROM documents d JOIN chunks c ON c.document_id = d.id"
        f" JOIN {TABLE} v ON v.chunk_id = c.id WHERE d.path = ?",
        (path,),
    )
    return {r[0] for r in rows}


class VectorWriter:
    """The Store's vector hook: inside the document's transaction, keep reusable vectors and insert all.

    Each vector goes to chunks_vec and, when the store has them, to the quantised companions.
    """

    def __init__(self, reuse: bool) -> None:
        self.reuse = reuse

    def stored(self, conn: Any, doc_id: int) -> dict[str, bytes]:
        """The document's stored vectors by chunk text hash (empty when reuse is off)."""
        if not self.reuse:
            return {}
        rows = conn.execute(
            f"SELECT c.text_hash, v.embedding FROM chunks c JOIN {TABLE} v ON v.chunk_id = c.id"
            " WHERE c.document_id = ?",
            (doc_id,),
        )
        return {h: bytes(blob) for h, blob in rows}

    def write(self, conn: Any, doc_id: int, doc: Document, kept: Mapping[str, bytes]) -> None:
        """Insert a vector for every chunk of doc; raise PipelineError (rolling back) if one is missing."""
        ids = dict(conn.execute("SELECT ordinal, id FROM chunks WHERE document_id = ?", (doc_id,)).fetchall())
        rows: list[tuple[int, bytes]] = []
        for chunk in doc.chunks:
            vector = doc.vectors.get(chunk.ordinal)
            blob = to_blob(vector) if vector is not None else kept.get(chunk.text_hash)
            if blob is None:
                raise PipelineError(f"no vector for section {chunk.ordinal}; the document was not written")
            rows.append((ids[chunk.ordinal], blob))
        conn.executemany(f"INSERT INTO {TABLE}(chunk_id, embedding) VALUES (?, ?)", rows)
        if vector_codes.ready(conn):  # absent or stale companions are rebuilt by the next install()
            vector_codes.insert(conn, rows)
