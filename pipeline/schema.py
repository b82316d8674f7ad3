"""The store's schema and its pinned format version: every table, trigger, view and meta key.

documents and chunks are the content; three FTS5 tables index chunks (porter for ranking, exact
words for vocabulary and prefixes, trigram over CJK runs), all kept in step by triggers; meta holds
the format version, the vector identity and the vector code scheme. The vector tables (sqlite-vec)
exist only once a vector run installed them: chunks_vec holds one float32 vector per chunk, and its
quantised companions (pipeline/vector_codes.py) an int8 code per chunk filed under a centroid's list;
triggers delete a chunk's rows with the chunk, because vec0 has no foreign keys. A read-only connection gets its
temp fts5vocab views when it is opened (READER_TEMP_DDL, INSTANCES_DDL), so no reader ever writes.
Everything else asks this module for names, DDL, meta values and which objects exist.
"""

from __future__ import annotations

from collections.abc import Mapping

from config.errors import IndexNotBuilt, StoreDamaged, StoreFormatError
from pipeline import identifiers
from pipeline.db import Connection

FORMAT_VERSION = 10
# The oldest format the writer of an index run migrates (pipeline/migrations.py holds one step per
# format from here to FORMAT_VERSION); an older store is refused with `knowledge reset --force`.
MIGRATES_FROM = 1
# What format 2 lacks, added by its migration (ensure() then creates document_fields).
FIELDS_COLUMN_DDL = "ALTER TABLE documents ADD COLUMN fields TEXT"
# Format 3 kept a float copy of every vector beside bit codes; its migration drops both.
# Format 5 recorded no chunk policy per document; its migration adds the column.
POLICY_COLUMN_DDL = "ALTER TABLE documents ADD COLUMN policy TEXT NOT NULL DEFAULT ''"
# Format 6 recorded no language per document; its migration adds these (pipeline/translations.py).
LANGUAGE_COLUMNS = ("text_lang", "text_lang_source", "lang", "lang_source", "translation_group")
GROUP_INDEX_DDL = ("CREATE INDEX IF NOT EXISTS documents_translation_group ON documents(translation_group)"
                   " WHERE translation_group != ''")
ADD_LANGUAGES_DDL = tuple(f"ALTER TABLE documents ADD COLUMN {c} TEXT NOT NULL DEFAULT ''" for c in LANGUAGE_COLUMNS)
LEGACY_CODE_TABLES = ("chunks_vec_bits", "chunks_vec_f32")
LEGACY_CODES_TRIGGER = "chunks_vec_bits_ad"

TABLES = ("meta", "documents", "document_fields", "chunks", "chunks_fts", "chunks_fts_exact", "chunks_fts_cjk",
          "chunks_vocab", "chunks_exact")
CONTENT_TABLES = ("meta", "documents", "document_fields", "chunks")  # the truth: everything else is derived from them
FTS_TABLES = ("chunks_fts", "chunks_fts_exact", "chunks_fts_cjk")
FTS_CJK = "chunks_fts_cjk"  # indexes only the chunks with CJK runs, as its triggers do
VOCAB_TABLE = "chunks_vocab"
EXACT_TABLE = "chunks_fts_exact"
EXACT_VIEW = "chunks_exact"  # the exact table's content: each text's words, then its identifiers

# The exact table (words as written) keeps identifiers whole (pipeline/identifiers.py): `_`, `-` and
# `.` are token characters there, and it indexes the chunks_exact view: each text with them read as
# spaces (the words unicode61 alone cuts, so every word and phrase found before is found still),
# then the identifiers the writer keeps beside it in chunks. docs/architecture.md "Identifiers".
EXACT_TOKENIZER = f"unicode61 tokenchars '{identifiers.TOKENCHARS}'"
IDENTIFIER_COLUMNS = ("body_identifiers", "heading_identifiers")
ADD_IDENTIFIERS_DDL = tuple(f"ALTER TABLE chunks ADD COLUMN {c} TEXT NOT NULL DEFAULT ''" for c in IDENTIFIER_COLUMNS)
_EXACT_BODY = identifiers.exact_sql("{row}body", "{row}body_identifiers")
_EXACT_HEADING = identifiers.exact_sql("{row}heading_path", "{row}heading_identifiers")

# The impact lists of the common porter terms (pipeline/impacts.py), derived from chunks_fts; format 7.
IMPACTS = "lexical_impacts"
IMPACT_FLOORS = "lexical_impact_terms"
# The writer's view of the porter vocabulary (every term's document count), read when it makes the lists.
IMPACT_VOCAB = "temp.impact_vocab"
IMPACT_VOCAB_DDL = f"CREATE VIRTUAL TABLE IF NOT EXISTS {IMPACT_VOCAB} USING fts5vocab(main, chunks_fts, 'row')"

# The posting columns of the porter terms most queries hold (pipeline/postings.py), derived from
# chunks_fts; format 10. The gone table lists the rows deleted since the columns were made (its
# trigger keeps it), the sizes row holds every row's token count then.
POSTINGS = "lexical_postings"
POSTINGS_SIZES = "lexical_row_sizes"
POSTINGS_GONE = "lexical_gone"
POSTINGS_TOP_KEY = "postings_top"
POSTINGS_STAMP_KEY = "postings_stamp"  # set while the store has columns: a reader imports numpy only then
POSTINGS_WEIGHTS_KEY = "postings_weights"
GONE_TRIGGER = "chunks_gone"
INSTANCE_VOCAB = "temp.porter_instances"
INSTANCE_VOCAB_DDL = (f"CREATE VIRTUAL TABLE IF NOT EXISTS {INSTANCE_VOCAB}"
                      " USING fts5vocab(main, chunks_fts, 'instance')")
# The highest chunk id ever given (pipeline/store.py): ids are never reused, so rows above a stamp are new.
CHUNK_HIGH_KEY = "chunk_id_high"

TRIGGERS = ("chunks_ai", "chunks_ad", "chunks_au")  # keep every FTS table in step with chunks

# Meta keys: the format version, the vector identity (pipeline/vectors.py) and the code scheme.
FORMAT_VERSION_KEY = "format_version"
MODEL_KEY = "model"
DIMENSION_KEY = "dimension"
NORMALIZED_KEY = "normalized"
QUERY_PREFIX_KEY = "query_prefix"
DOCUMENT_PREFIX_KEY = "document_prefix"
DOCUMENT_RECIPE_KEY = "document_recipe"  # how a section's text was embedded (pipeline/embedding_input.py)
VECTOR_CODES_KEY = "vector_codes"
COMMON_LANGUAGE_KEY = "common_language"  # the tree's most common document language (pipeline/translations.py)
DOCUMENT_LANGUAGES_KEY = "document_languages"  # the languages the last pass gave documents (a JSON list)
LANGUAGES_KEY = "languages_assigned"  # the conventions the languages were last assigned by; unset: a write since
VECTOR_CODES_STATE_KEY = "vector_codes_state"  # JSON: the vectors the centroids were trained on, their count, scale
# The identity of a shadow vector build under way (pipeline/shadow.py): the same fields, prefixed.
NEXT_KEY_PREFIX = "next_"
NEXT_KEYS = tuple(NEXT_KEY_PREFIX + key for key in (MODEL_KEY, DIMENSION_KEY, NORMALIZED_KEY, QUERY_PREFIX_KEY,
                                                    DOCUMENT_PREFIX_KEY, DOCUMENT_RECIPE_KEY))

# The vector tables and their delete triggers.
VECTORS = "chunks_vec"
VECTORS_TRIGGER = "chunks_vec_ad"
CODES = "chunks_vec_i8"  # the codes filed since the lists were last written (the delta), one row each
LISTS = "chunks_vec_lists"  # each list's chunk ids and int8 codes as two contiguous blobs (pipeline/vector_codes.py)
CODES_INDEX = "chunks_vec_i8_chunk"
CENTROIDS = "chunks_vec_centroids"  # the fine centroids: one per list
COARSE = "chunks_vec_coarse"  # the coarse centroids: each owns a range of fine ids (pipeline/kmeans.py)
CODES_TRIGGER = "chunks_vec_i8_ad"
# The scratch table the writer builds the companions with (pipeline/vector_codes.py), dropped after.
CODE_STAGING = "temp.chunks_vec_i8_staging"
# The shadow vector table a model switch fills while chunks_vec keeps serving (pipeline/shadow.py).
NEXT_VECTORS = "chunks_vec_next"
NEXT_VECTORS_TRIGGER = "chunks_vec_next_ad"

# Temp views a read-only connection gets when it is opened (they live as long as it does): every
# query Reader has the porter index's vocabulary with document frequencies (query/frequency.py); the
# instance vocabularies of the porter and exact indexes serve bulk document counts (query/words.py).
PORTER_VOCAB = "temp.porter_vocab"
READER_TEMP_DDL = (f"CREATE VIRTUAL TABLE {PORTER_VOCAB} USING fts5vocab(main, chunks_fts, 'row')",)
INSTANCES = {table: f"temp.{table}_instances" for table in ("chunks_fts", "chunks_fts_exact")}
INSTANCES_DDL = tuple(
    f"CREATE VIRTUAL TABLE {view} USING fts5vocab(main, {table}, 'instance')" for table, view in INSTANCES.items()
)

# A scratch in-memory database for SQLite's own porter stemmer (query/words.py).
# `words --path`: the allowed documents' exact text tokenized again in a scratch in-memory database
# (query/word_scope.py), by the exact table's tokenizer, and read back as a vocabulary.
SCOPE_DDL = (
    f'CREATE VIRTUAL TABLE scope USING fts5(body, heading_path, tokenize="{EXACT_TOKENIZER}")',
    "CREATE VIRTUAL TABLE scope_vocab USING fts5vocab(scope, 'row')",
)
STEMMER_DDL = (
    "CREATE VIRTUAL TABLE scratch USING fts5(w, tokenize='porter unicode61')",
    "CREATE VIRTUAL TABLE scratch_tokens USING fts5vocab(scratch, 'instance')",
)
# What `knowledge doctor` creates in a scratch database to prove FTS5 and its tokenizers work.
FTS5_PROBE_DDL = (
    "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')",
    "CREATE VIRTUAL TABLE t3 USING fts5(x, tokenize='trigram')",
)


def _exact(row: str) -> str:
    """The exact table's two values for a row (`new.`, `old.` or '' in the view)."""
    return f"{_EXACT_BODY.format(row=row)}, {_EXACT_HEADING.format(row=row)}"


# The three FTS5 tables follow chunks through these trigger bodies: index a new row, unindex an old one.
_INDEX_NEW = f"""\
    INSERT INTO chunks_fts(rowid, body, heading_path) VALUES (new.id, new.body, new.heading_path);
    INSERT INTO chunks_fts_exact(rowid, body, heading_path) VALUES (new.id, {_exact("new.")});
    INSERT INTO chunks_fts_cjk(rowid, cjk) SELECT new.id, new.cjk WHERE new.cjk != '';
"""
_UNINDEX_OLD = f"""\
    INSERT INTO chunks_fts(chunks_fts, rowid, body, heading_path)
        VALUES ('delete', old.id, old.body, old.heading_path);
    INSERT INTO chunks_fts_exact(chunks_fts_exact, rowid, body, heading_path)
        VALUES ('delete', old.id, {_exact("old.")});
    INSERT INTO chunks_fts_cjk(chunks_fts_cjk, rowid, cjk) SELECT 'delete', old.id, old.cjk WHERE old.cjk != '';
"""

_DDL = f"""
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,
    root        TEXT NOT NULL,
    source      TEXT NOT NULL DEFAULT 'file',
    title       TEXT,
    sha256      TEXT NOT NULL,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL,
    indexed_at  TEXT NOT NULL,
    indexed_ns  INTEGER NOT NULL,
    fields      TEXT,
    policy      TEXT NOT NULL DEFAULT '',
    text_lang        TEXT NOT NULL DEFAULT '',
    text_lang_source TEXT NOT NULL DEFAULT '',
    lang             TEXT NOT NULL DEFAULT '',
    lang_source      TEXT NOT NULL DEFAULT '',
    translation_group TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS documents_root ON documents(root);
CREATE TABLE IF NOT EXISTS document_fields (
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    PRIMARY KEY (key, value, document_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS document_fields_document ON document_fields(document_id);
CREATE TABLE IF NOT EXISTS chunks (
    id           INTEGER PRIMARY KEY,
    document_id  INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    body         TEXT NOT NULL,
    text_hash    TEXT NOT NULL,
    cjk          TEXT NOT NULL DEFAULT '',
    body_identifiers    TEXT NOT NULL DEFAULT '',
    heading_identifiers TEXT NOT NULL DEFAULT '',
    UNIQUE (document_id, ordinal)
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    body, heading_path, content='chunks', content_rowid='id', tokenize='porter unicode61'
);
CREATE VIEW IF NOT EXISTS chunks_exact(id, body, heading_path) AS SELECT id, {_exact("")} FROM chunks;
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_exact USING fts5(
    body, heading_path, content='chunks_exact', content_rowid='id', tokenize="{EXACT_TOKENIZER}"
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_cjk USING fts5(
    cjk, content='chunks', content_rowid='id', tokenize='trigram', columnsize=0
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts_exact, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
{_INDEX_NEW}END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
{_UNINDEX_OLD}END;
CREATE TRIGGER IF NOT EXISTS chunks_au AFTER UPDATE ON chunks BEGIN
{_UNINDEX_OLD}{_INDEX_NEW}END;
CREATE TABLE IF NOT EXISTS {IMPACTS} (
    term     TEXT NOT NULL,
    rank     INTEGER NOT NULL,
    chunk_id INTEGER NOT NULL,
    score    REAL NOT NULL,
    PRIMARY KEY (term, rank)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {IMPACT_FLOORS} (
    term  TEXT PRIMARY KEY,
    held  INTEGER NOT NULL,
    floor REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {POSTINGS} (
    term  TEXT PRIMARY KEY,
    held  INTEGER NOT NULL,
    wide  INTEGER NOT NULL,
    gaps  BLOB NOT NULL,
    freqs BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS {POSTINGS_SIZES} (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    top    INTEGER NOT NULL,
    tokens BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS {POSTINGS_GONE} (
    id INTEGER PRIMARY KEY
);
CREATE TRIGGER IF NOT EXISTS {GONE_TRIGGER} AFTER DELETE ON chunks
WHEN old.id <= coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = '{POSTINGS_TOP_KEY}'), -1) BEGIN
    INSERT OR IGNORE INTO {POSTINGS_GONE}(id) VALUES (old.id);
END;
"""


def table_names(conn: Connection) -> set[str]:
    """Names of every table, view and trigger in the file."""
    return {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master")}


def exists(conn: Connection, name: str) -> bool:
    """Whether the store has a table, view or trigger of this name."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def create(conn: Connection) -> None:
    """Create the schema in an empty store and pin the format version (idempotent).

    A new file gets `auto_vacuum = INCREMENTAL` first (it can only be chosen before the first
    table; the VACUUM of the empty file applies it), so the writer can give the space of removed
    documents back (pipeline.store.Store.reclaim).
    """
    if not table_names(conn):
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
    conn.execute("BEGIN IMMEDIATE")
    try:
        ensure(conn)
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (FORMAT_VERSION_KEY, str(FORMAT_VERSION))
        )
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise


def ensure(conn: Connection) -> None:
    """Create every missing table and trigger, leaving those present as they are (in the caller's transaction)."""
    for statement in _statements():
        conn.execute(statement)
    if "translation_group" in {str(r[1]) for r in conn.execute("PRAGMA table_info(documents)")}:
        conn.execute(GROUP_INDEX_DDL)  # format 7 on: an older store being migrated gets it with its columns


def add_identifier_columns(conn: Connection) -> None:
    """Add format 5's identifier columns to a format 4 chunks table that lacks them (in the caller's transaction)."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(chunks)")}
    for column, ddl in zip(IDENTIFIER_COLUMNS, ADD_IDENTIFIERS_DDL, strict=True):
        if column not in columns:
            conn.execute(ddl)


def drop_exact(conn: Connection) -> None:
    """Drop the exact table, its vocabulary and content view (in the caller's transaction; ensure() makes them)."""
    conn.execute(f"DROP TABLE IF EXISTS {VOCAB_TABLE}")
    conn.execute(f"DROP TABLE IF EXISTS {EXACT_TABLE}")
    conn.execute(f"DROP VIEW IF EXISTS {EXACT_VIEW}")


def drop_fts_triggers(conn: Connection) -> None:
    """Drop the FTS triggers (in the caller's transaction) so the FTS tables can be rebuilt; ensure() restores them."""
    for trigger in TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")


def ensure_vector_triggers(conn: Connection) -> list[str]:
    """Recreate the delete trigger of each vector table that exists without it (in the caller's transaction)."""
    names = table_names(conn)
    restored: list[str] = []
    if VECTORS in names and VECTORS_TRIGGER not in names:
        conn.execute(
            f"CREATE TRIGGER {VECTORS_TRIGGER} AFTER DELETE ON chunks BEGIN "
            f"DELETE FROM {VECTORS} WHERE chunk_id = old.id; END"
        )
        restored.append(VECTORS_TRIGGER)
    if {CODES, CENTROIDS} <= names and CODES_TRIGGER not in names:
        conn.execute(_codes_trigger_ddl())
        restored.append(CODES_TRIGGER)
    if NEXT_VECTORS in names and NEXT_VECTORS_TRIGGER not in names:
        conn.execute(_next_trigger_ddl())
        restored.append(NEXT_VECTORS_TRIGGER)
    return restored


def expected_triggers(conn: Connection) -> list[str]:
    """Every trigger the store should have: the FTS ones, and each vector table's delete trigger."""
    names = table_names(conn)
    wanted = [*TRIGGERS, GONE_TRIGGER]
    if VECTORS in names:
        wanted.append(VECTORS_TRIGGER)
    if {CODES, CENTROIDS} & names:
        wanted.append(CODES_TRIGGER)
    if NEXT_VECTORS in names:
        wanted.append(NEXT_VECTORS_TRIGGER)
    return wanted


def fts_row_gaps(conn: Connection) -> list[str]:
    """The FTS tables whose row count differs from chunks' (one snapshot; the CJK table keeps no count)."""
    counted = ("chunks_fts", "chunks_fts_exact")
    row = conn.execute(
        "SELECT (SELECT count(*) FROM chunks), " + ", ".join(f"(SELECT count(*) FROM {t}_docsize)" for t in counted)
    ).fetchone()
    return [f"{t} indexes {n} of {row[0]} sections" for t, n in zip(counted, row[1:], strict=True) if n != row[0]]


def root_pages(conn: Connection) -> dict[int, str]:
    """The b-tree root page of every table and index, to name what an integrity report's "Tree N" is."""
    return {int(r[0]): str(r[1]) for r in conn.execute("SELECT rootpage, name FROM sqlite_master WHERE rootpage > 0")}


def _statements() -> list[str]:
    parts: list[str] = []
    buf: list[str] = []
    for line in _DDL.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf).strip()
        if text.endswith(";") and (not text.startswith("CREATE TRIGGER") or text.endswith("END;")):
            parts.append(text)
            buf = []
    return parts


def format_version(conn: Connection) -> int | None:
    """The store's format version, None when it has none."""
    value = meta_value(conn, FORMAT_VERSION_KEY) if exists(conn, "meta") else None
    return int(value) if value is not None and value.isdigit() else None


def check(conn: Connection, db_path: object) -> None:
    """Refuse a store of another format version or shape, naming the way forward."""
    names = table_names(conn)
    if not names:
        raise IndexNotBuilt.at(db_path)
    version = format_version(conn)
    if version is not None and version != FORMAT_VERSION:
        raise StoreFormatError(_other_format(db_path, version))
    missing = [t for t in TABLES if t not in names]
    if version == FORMAT_VERSION and missing and not set(missing) & set(CONTENT_TABLES):
        raise StoreDamaged(
            f"the store {db_path} is damaged (missing: {', '.join(missing)}); "
            "run `knowledge check` to see where and `knowledge rebuild` to repair it"
        )
    if version is None or missing:
        raise StoreFormatError(
            f"{db_path} is not a knowledge store of format {FORMAT_VERSION} "
            f"(missing: {', '.join(missing) or FORMAT_VERSION_KEY}); run `knowledge reset --force` and re-index"
        )


def _other_format(db_path: object, version: int) -> str:
    """The one refusal of a store of another format: which, newer or older, and the way forward."""
    if version > FORMAT_VERSION:
        relation, way = "newer", "upgrade knowledge"
    elif version >= MIGRATES_FROM:
        relation, way = "older", "run `knowledge index` once to migrate it (its writer upgrades the file in place)"
    else:
        relation, way = "older", "run `knowledge reset --force` and re-index"
    return f"{db_path} has format {version}, {relation} than this knowledge ({FORMAT_VERSION}); {way}"


def read_meta(conn: Connection) -> dict[str, str]:
    """The meta table as a dict (empty when the store has none yet)."""
    if not exists(conn, "meta"):
        return {}
    return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}


def meta_value(conn: Connection, key: str) -> str | None:
    """One meta value, or None when it is not set."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def write_meta(conn: Connection, values: Mapping[str, str]) -> None:
    """Set meta values (inside the caller's transaction)."""
    conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", list(values.items()))


def delete_meta(conn: Connection, key: str) -> None:
    """Unset a meta value (inside the caller's transaction)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (key,))


def create_vectors(conn: Connection, dimension: int) -> None:
    """Create chunks_vec for vectors of dimension and its delete trigger (inside a transaction)."""
    conn.execute(
        f"CREATE VIRTUAL TABLE {VECTORS} USING vec0(chunk_id INTEGER PRIMARY KEY, embedding float[{int(dimension)}])"
    )
    conn.execute(
        f"CREATE TRIGGER IF NOT EXISTS {VECTORS_TRIGGER} AFTER DELETE ON chunks BEGIN "
        f"DELETE FROM {VECTORS} WHERE chunk_id = old.id; END"
    )


def drop_vectors(conn: Connection) -> None:
    """Drop chunks_vec (its trigger stays: it deletes from a table that is recreated with it)."""
    conn.execute(f"DROP TABLE IF EXISTS {VECTORS}")


def _codes_trigger_ddl() -> str:
    return (f"CREATE TRIGGER IF NOT EXISTS {CODES_TRIGGER} AFTER DELETE ON chunks BEGIN "
            f"DELETE FROM {CODES} WHERE chunk_id = old.id; END")


def create_vector_codes(conn: Connection) -> None:
    """Create the quantised companions (int8 codes keyed by list and chunk, the centroids) and their trigger."""
    conn.execute(f"CREATE TABLE {CODES} (key INTEGER PRIMARY KEY, chunk_id INTEGER NOT NULL, code BLOB NOT NULL)")
    conn.execute(f"CREATE TABLE {CENTROIDS} (id INTEGER PRIMARY KEY, centroid BLOB NOT NULL)")
    conn.execute(f"CREATE TABLE {COARSE} (id INTEGER PRIMARY KEY, centroid BLOB NOT NULL)")
    create_code_lists(conn)
    conn.execute(_codes_trigger_ddl())


def create_code_lists(conn: Connection) -> None:
    """The lists' table: ids (int64, little-endian) first, so reading them never reads the codes' overflow pages."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {LISTS} (id INTEGER PRIMARY KEY, ids BLOB NOT NULL, codes BLOB NOT NULL)")


def index_vector_codes(conn: Connection) -> None:
    """Index the codes by chunk id (for the delete trigger); created after a bulk fill, so its pages are full."""
    conn.execute(f"CREATE INDEX IF NOT EXISTS {CODES_INDEX} ON {CODES}(chunk_id)")


def drop_vector_codes(conn: Connection) -> None:
    """Drop the companion tables, their trigger, scheme and state (inside the caller's transaction)."""
    conn.execute(f"DROP TRIGGER IF EXISTS {CODES_TRIGGER}")
    conn.execute(f"DROP TABLE IF EXISTS {CODES}")
    conn.execute(f"DROP TABLE IF EXISTS {CENTROIDS}")
    conn.execute(f"DROP TABLE IF EXISTS {COARSE}")
    conn.execute(f"DROP TABLE IF EXISTS {LISTS}")
    delete_meta(conn, VECTOR_CODES_KEY)
    delete_meta(conn, VECTOR_CODES_STATE_KEY)


def add_fields_column(conn: Connection) -> None:
    """Add format 3's documents.fields to a format 2 store that lacks it (inside the caller's transaction)."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(documents)")}
    if "fields" not in columns:
        conn.execute(FIELDS_COLUMN_DDL)


def has_policy_column(conn: Connection) -> bool:
    """True when documents records each document's chunk policy (format 6 on; a dry run reads older stores)."""
    return "policy" in {str(r[1]) for r in conn.execute("PRAGMA table_info(documents)")}


def add_policy_column(conn: Connection) -> None:
    """Add format 6's documents.policy to a format 5 store that lacks it (inside the caller's transaction)."""
    if not has_policy_column(conn):
        conn.execute(POLICY_COLUMN_DDL)


def add_language_columns(conn: Connection) -> None:
    """Add format 7's language columns to a format 6 documents table that lacks them (in the caller's transaction)."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(documents)")}
    for column, ddl in zip(LANGUAGE_COLUMNS, ADD_LANGUAGES_DDL, strict=True):
        if column not in columns:
            conn.execute(ddl)


def drop_legacy_vector_codes(conn: Connection) -> None:
    """Drop format 3's bit codes, float copies and their trigger (inside the caller's transaction)."""
    conn.execute(f"DROP TRIGGER IF EXISTS {LEGACY_CODES_TRIGGER}")
    for table in LEGACY_CODE_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    delete_meta(conn, VECTOR_CODES_KEY)


def has_vector_codes(conn: Connection) -> bool:
    """Whether the companion tables, the codes' index and their trigger exist (the scheme is vector_codes')."""
    wanted = {CODES, CODES_INDEX, CENTROIDS, COARSE, CODES_TRIGGER, LISTS}
    rows = conn.execute("SELECT name FROM sqlite_master WHERE name IN (?, ?, ?, ?, ?, ?)", tuple(wanted))
    return {r[0] for r in rows} == wanted


def create_code_staging(conn: Connection) -> None:
    """The temp table a companion build files codes into before writing them in key order."""
    conn.execute(f"DROP TABLE IF EXISTS {CODE_STAGING}")
    conn.execute(f"CREATE TABLE {CODE_STAGING} (key INTEGER, chunk_id INTEGER, code BLOB)")


def drop_code_staging(conn: Connection) -> None:
    """Drop the staging table."""
    conn.execute(f"DROP TABLE IF EXISTS {CODE_STAGING}")


def _next_trigger_ddl() -> str:
    return (f"CREATE TRIGGER IF NOT EXISTS {NEXT_VECTORS_TRIGGER} AFTER DELETE ON chunks BEGIN "
            f"DELETE FROM {NEXT_VECTORS} WHERE chunk_id = old.id; END")


def create_next_vectors(conn: Connection, dimension: int) -> None:
    """Create the shadow table chunks_vec_next for vectors of dimension and its delete trigger (in a transaction)."""
    conn.execute(
        f"CREATE VIRTUAL TABLE {NEXT_VECTORS} USING vec0(chunk_id INTEGER PRIMARY KEY,"
        f" embedding float[{int(dimension)}])"
    )
    conn.execute(_next_trigger_ddl())


def drop_next_vectors(conn: Connection) -> None:
    """Drop the shadow table, its trigger and its identity (inside the caller's transaction)."""
    conn.execute(f"DROP TRIGGER IF EXISTS {NEXT_VECTORS_TRIGGER}")
    conn.execute(f"DROP TABLE IF EXISTS {NEXT_VECTORS}")
    for key in NEXT_KEYS:
        delete_meta(conn, key)


def promote_next_vectors(conn: Connection, dimension: int) -> None:
    """Replace chunks_vec by the shadow table's rows (inside the caller's transaction); drop the shadow.

    The quantised companions are dropped with the old vectors; the caller rebuilds them.
    """
    drop_vector_codes(conn)
    drop_vectors(conn)
    create_vectors(conn, dimension)
    conn.execute(f"INSERT INTO {VECTORS}(chunk_id, embedding) SELECT chunk_id, embedding FROM {NEXT_VECTORS}")
    drop_next_vectors(conn)
