"""The vector tier's store side: the pinned vector identity, the chunks_vec table, its writes and reuse.

The identity (model, dimension, normalized, query_prefix, document_prefix and the recipe of the
embedded text, pipeline/embedding_input.py) is pinned in `meta` when the first vector run writes; every
later run and every query must match it, or `--reindex` rebuilds the vectors. The recipe alone is
the exception: a store pinned with an older recipe keeps embedding by it (never a mix of two), and
doctor and `index --dry-run` say that `--reindex` or `knowledge vectors switch` moves it to the
current one. Queries do not depend on it.

chunks_vec (sqlite-vec vec0, one float32 row per chunk, keyed by chunk id; its DDL and meta keys
are pipeline/schema.py's) exists only once embeddings were configured; a trigger deletes a
chunk's vector with the chunk, because vec0 has no upsert and no foreign keys. A chunk whose text
hash is unchanged keeps its stored vector. Beside it, pipeline.vector_codes keeps an int8 code per
vector in inverted lists for fast KNN on large stores, written in the same transaction; install()
creates, fills and retrains them.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.errors import EmbeddingUnavailable, KnowledgeError, PipelineError, VectorIdentityMismatch
from config.settings import EmbeddingsSettings, Settings
from pipeline import db, embedding_input, schema, vector_codes
from pipeline.db import Connection

if TYPE_CHECKING:  # the HTTP client only when a server is really probed; the models only for the writer
    from pipeline.embeddings import Probe
    from pipeline.models import Document

REINDEX = "knowledge index --reindex"


@dataclass(frozen=True)
class VectorIdentity:
    """What makes two vectors comparable: the model, its dimension, normalisation, both prefixes, the text recipe."""

    model: str
    dimension: int
    query_prefix: str = ""
    document_prefix: str = ""
    normalized: bool = True  # stored vectors are unit length (the client normalises them)
    recipe: str = embedding_input.CURRENT  # how a section's text is embedded (pipeline/embedding_input.py)

    def document_text(self, body: str, crumb: str) -> str:
        """The text a section is embedded as under this identity's prefix and recipe."""
        return embedding_input.document_text(body, crumb, self.document_prefix, self.recipe)

    def to_meta(self) -> dict[str, str]:
        """The identity as meta rows."""
        return {
            schema.MODEL_KEY: self.model,
            schema.DIMENSION_KEY: str(self.dimension),
            schema.NORMALIZED_KEY: "true" if self.normalized else "false",
            schema.QUERY_PREFIX_KEY: self.query_prefix,
            schema.DOCUMENT_PREFIX_KEY: self.document_prefix,
            schema.DOCUMENT_RECIPE_KEY: self.recipe,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (run info)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VectorIdentity:
        """Inverse of to_dict."""
        return cls(str(data["model"]), int(data["dimension"]), str(data.get("query_prefix", "")),
                   str(data.get("document_prefix", "")), bool(data.get("normalized", True)),
                   str(data.get("recipe", embedding_input.LEGACY)))


def configured_identity(settings: EmbeddingsSettings, dimension: int,
                        recipe: str = embedding_input.CURRENT) -> VectorIdentity:
    """The identity the configuration asks for, with the dimension the server answers (and the recipe given)."""
    return VectorIdentity(settings.model, dimension, settings.query_prefix, settings.document_prefix,
                          recipe=recipe)


def pinned_identity(meta: Mapping[str, str]) -> VectorIdentity | None:
    """The identity pinned in a store's meta table, or None when no vector run ever wrote."""
    model, dimension = meta.get(schema.MODEL_KEY), meta.get(schema.DIMENSION_KEY, "")
    if not model or not dimension.isdigit():
        return None
    return VectorIdentity(model, int(dimension), meta.get(schema.QUERY_PREFIX_KEY, ""),
                          meta.get(schema.DOCUMENT_PREFIX_KEY, ""), meta.get(schema.NORMALIZED_KEY, "true") == "true",
                          meta.get(schema.DOCUMENT_RECIPE_KEY) or embedding_input.LEGACY)


def kept_recipe(pinned: VectorIdentity | None, reindex: bool) -> str:
    """The recipe a run embeds by: the pinned one while it is known and no --reindex asks otherwise, else CURRENT."""
    if pinned is not None and not reindex and pinned.recipe in embedding_input.RECIPES:
        return pinned.recipe
    return embedding_input.CURRENT


def recipe_note(pinned: VectorIdentity | None) -> str | None:
    """What to say about a store whose vectors were embedded by an older recipe (None when current)."""
    if pinned is None or pinned.recipe == embedding_input.CURRENT:
        return None
    return (f"the vectors embed each section by the {pinned.recipe!r} recipe (without its breadcrumb); `{REINDEX}`"
            f" or `knowledge vectors switch` re-embeds them by {embedding_input.CURRENT!r}, which ranks better")


def serves(settings: EmbeddingsSettings, identity: VectorIdentity) -> bool:
    """Whether an embeddings block asks for identity's model and prefixes (the dimension is the server's)."""
    return (settings.model, settings.query_prefix, settings.document_prefix) == (
        identity.model, identity.query_prefix, identity.document_prefix)


def serving(settings: Settings, meta: Mapping[str, str]) -> Settings:
    """The settings that serve a store with this meta: after a model switch, `embeddings_next` becomes `embeddings`.

    When the pinned identity is `embeddings_next`'s and not `embeddings`' (the switch is done, the
    configuration not yet edited), queries and index runs use the new block; otherwise unchanged.
    """
    pinned, emb, nxt = pinned_identity(meta), settings.embeddings, settings.embeddings_next
    if pinned is None or emb is None or nxt is None or serves(emb, pinned) or not serves(nxt, pinned):
        return settings
    return replace(settings, embeddings=nxt, embeddings_next=None)


def serving_store(settings: Settings) -> Settings:
    """serving() for the store on disk (read-only, best effort); unchanged without embeddings_next or a store."""
    if settings.embeddings_next is None or not settings.db_path.is_file():
        return settings
    try:
        conn = db.connect_readonly(settings.db_path)
    except (KnowledgeError, db.DatabaseError):  # the command itself reports an unreadable store
        return settings
    try:
        return serving(settings, schema.read_meta(conn))
    except db.DatabaseError:
        return settings
    finally:
        conn.close()


def differences(pinned: VectorIdentity, wanted: VectorIdentity) -> list[str]:
    """Human-readable differences, `field: index has X, configured Y`."""
    out: list[str] = []
    for name in ("model", "dimension", "query_prefix", "document_prefix", "normalized", "recipe"):
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


def no_vectors(where: object, model: str) -> VectorIdentityMismatch:
    """The error of a store that pins no vector identity yet."""
    return VectorIdentityMismatch(
        f"the index at {where} has no vectors yet for model {model!r}; run `knowledge index` to embed it"
    )


def check_identity(where: object, pinned: VectorIdentity | None, wanted: VectorIdentity) -> None:
    """Raise VectorIdentityMismatch unless pinned equals wanted (None: the index has no vectors)."""
    if pinned is None:
        raise no_vectors(where, wanted.model)
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
    from pipeline.embeddings import EmbeddingsClient

    with EmbeddingsClient(settings, environ=environ) as client:
        try:
            return client.probe()
        except EmbeddingUnavailable as exc:
            raise EmbeddingUnavailable(
                f"embeddings are configured but the server cannot embed: {exc}; nothing was written "
                "(start the server, or remove the embeddings block to index lexical-only)"
            ) from exc


def plan(settings: Settings, reindex: bool, probe: Probe | None = None,
         conn: Connection | None = None) -> VectorPlan | None:
    """Reconcile the live server with the pinned manifest; None when embeddings are not configured.

    Raises EmbeddingUnavailable when the server cannot be probed and VectorIdentityMismatch when
    the index holds vectors of another identity and `reindex` is off. Reads the store read-only
    (through conn, when the caller has it open).
    """
    emb, nxt = settings.embeddings, settings.embeddings_next
    if emb is None:
        return None
    pinned, missing = _stored_state(settings.db_path, conn)
    if pinned is not None and nxt is not None and not serves(emb, pinned) and serves(nxt, pinned):
        emb, probe = nxt, None  # a model switch swapped after this process read its settings: the new block
    probe = probe or probe_server(emb)
    wanted = configured_identity(emb, probe.dimension, kept_recipe(pinned, reindex))
    if pinned is not None and pinned != wanted:
        if not reindex:
            raise mismatch(settings.db_path, pinned, wanted)
        return VectorPlan(wanted, reuse=False, backfill=missing, batch_size=emb.batch_size)
    return VectorPlan(wanted, reuse=pinned is not None and not reindex, backfill=missing,
                      batch_size=emb.batch_size)


def _stored_state(db_path: Path, open_conn: Connection | None = None) -> tuple[VectorIdentity | None, frozenset[str]]:
    """The pinned identity and the paths of documents holding a chunk without a vector."""
    if open_conn is None and not db_path.is_file():
        return None, frozenset()
    conn = open_conn or db.connect_readonly(db_path)
    try:
        names = schema.table_names(conn)
        if "meta" not in names or "chunks" not in names:
            return None, frozenset()
        pinned = pinned_identity(schema.read_meta(conn))
        return pinned, frozenset(missing_vector_paths(conn, schema.VECTORS in names))
    finally:
        if open_conn is None:
            conn.close()


def missing_vector_paths(conn: Connection, has_table: bool = True) -> list[str]:
    """Paths of documents with at least one chunk that has no vector."""
    where = f"c.id NOT IN (SELECT chunk_id FROM {schema.VECTORS})" if has_table else "1"
    rows = conn.execute(
        f"SELECT DISTINCT d.path FROM chunks c JOIN documents d ON d.id = c.document_id WHERE {where}"
    )
    return sorted(str(r[0]) for r in rows)


def has_table(conn: Connection) -> bool:
    """True when the store has a vector table."""
    return schema.exists(conn, schema.VECTORS)


def install(conn: Connection, identity: VectorIdentity) -> bool:
    """Create (or, for another identity, recreate) chunks_vec and pin identity; call inside a transaction.

    Returns True when the table was (re)created. Recreating drops every stored vector: the
    planner only lets that happen under `--reindex` or when no identity was pinned. The quantised
    companions (pipeline.vector_codes) are created too, filled from chunks_vec when a store lacks
    them (or has another encoding) and trained again when the store outgrew their centroids.
    """
    exists = has_table(conn)
    if exists and pinned_identity(schema.read_meta(conn)) == identity:
        vector_codes.refresh(conn, identity.dimension)
        return False
    schema.drop_vector_codes(conn)
    schema.drop_vectors(conn)
    schema.create_vectors(conn, identity.dimension)
    vector_codes.install(conn, identity.dimension)
    schema.write_meta(conn, identity.to_meta())
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


def reusable_hashes(conn: Connection, path: str) -> set[str]:
    """Text hashes of the stored chunks of path that have a vector (reader or writer connection)."""
    if not has_table(conn):
        return set()
    rows = conn.execute(
        f"SELECT c.text_hash FROM documents d JOIN chunks c ON c.document_id = d.id"
        f" JOIN {schema.VECTORS} v ON v.chunk_id = c.id WHERE d.path = ?",
        (path,),
    )
    return {str(r[0]) for r in rows}


class VectorWriter:
    """The Store's vector hook: inside the document's transaction, keep reusable vectors and insert all.

    Each vector goes to chunks_vec and, when the store has them, to the quantised companions.
    """

    def __init__(self, reuse: bool) -> None:
        self.reuse = reuse

    def stored(self, conn: Connection, doc_id: int) -> dict[str, bytes]:
        """The document's stored vectors by chunk text hash (empty when reuse is off)."""
        if not self.reuse:
            return {}
        rows = conn.execute(
            f"SELECT c.text_hash, v.embedding FROM chunks c JOIN {schema.VECTORS} v ON v.chunk_id = c.id"
            " WHERE c.document_id = ?",
            (doc_id,),
        )
        return {h: bytes(blob) for h, blob in rows}

    def write(self, conn: Connection, doc_id: int, doc: Document, kept: Mapping[str, bytes]) -> None:
        """Insert a vector for every chunk of doc; raise PipelineError (rolling back) if one is missing."""
        ids = dict(conn.execute("SELECT ordinal, id FROM chunks WHERE document_id = ?", (doc_id,)).fetchall())
        rows: list[tuple[int, bytes]] = []
        for chunk in doc.chunks:
            vector = doc.vectors.get(chunk.ordinal)
            blob = to_blob(vector) if vector is not None else kept.get(chunk.text_hash)
            if blob is None:
                raise PipelineError(f"no vector for section {chunk.ordinal}; the document was not written")
            rows.append((ids[chunk.ordinal], blob))
        conn.executemany(f"INSERT INTO {schema.VECTORS}(chunk_id, embedding) VALUES (?, ?)", rows)
        if vector_codes.ready(conn):  # absent or stale companions are rebuilt by the next install()
            vector_codes.insert(conn, rows)
