"""Store migrations: one step per older format version, run in order by the writer of the next index run.

Each step takes a store of its `source` format to its `target` in one transaction, and the format
version is written with it, so a run stopped between two steps leaves a store of a known format
that the next run carries on from. Readers never migrate: schema.check refuses an older store and
names `knowledge index`, whose writer (pipeline.store.Store opened with a PathBase) calls upgrade().
The table is complete and ordered: every format from schema.MIGRATES_FROM to schema.FORMAT_VERSION
has exactly one step (tests/pipeline/test_migrations.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from pipeline import formats, schema, translations, vector_codes
from pipeline.db import Connection
from pipeline.identifiers import identifiers
from pipeline.languages import TEXT_SAMPLE, document_hint
from pipeline.paths import PathBase


@dataclass(frozen=True)
class Step:
    """One migration: from a format version to the next, what does it, and one line of what it changes."""

    source: int
    target: int
    migrate: Callable[[Connection, PathBase], None]
    does: str


def _restate_paths(conn: Connection, base: PathBase) -> None:
    """Format 1 stored paths as walked; restate them in the one spelling of pipeline/paths.py.

    A relative path is taken as relative to the base (the usual working directory); an absolute
    one under the base becomes relative. Where two rows now name one file, the one indexed
    last is kept. Web pages keep their URL. Paths are unique, so changed rows pass through a
    placeholder first.
    """
    rows = conn.execute("SELECT id, path, root FROM documents WHERE source = 'file'"
                        " ORDER BY indexed_at DESC, id DESC").fetchall()
    final: dict[int, tuple[str, str]] = {}
    taken: set[str] = set()
    for doc_id, path, root in rows:
        new_path = base.canonical(path, base.directory)
        if new_path in taken:
            conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))
            continue
        taken.add(new_path)
        final[doc_id] = (new_path, base.canonical(root, base.directory))
        if final[doc_id] != (path, root):
            conn.execute("UPDATE documents SET path = ? WHERE id = ?", (f"\x00{doc_id}", doc_id))
    for doc_id, (path, root) in final.items():
        conn.execute("UPDATE documents SET path = ?, root = ? WHERE id = ?", (path, root, doc_id))


def _add_fields(conn: Connection, base: PathBase) -> None:
    """Format 2 kept no front-matter fields; add their column and table.

    A file whose first section begins with a front-matter fence (`---` or `+++`) had its block
    indexed as text: its stored hash and stat are cleared, so this run reads it again and
    splits the block off. Every other document is left as it is.
    """
    schema.add_fields_column(conn)
    schema.ensure(conn)
    conn.execute(
        "UPDATE documents SET sha256 = '', mtime_ns = -1 WHERE source = 'file' AND id IN"
        " (SELECT document_id FROM chunks WHERE ordinal = 0 AND heading_path = ''"
        " AND (body LIKE '---%' OR body LIKE '+++%'))"
    )


def _drop_float_copies(conn: Connection, base: PathBase) -> None:
    """Format 3 kept a float copy of every vector beside bit codes; drop both.

    chunks_vec is kept as it is: the run's vector step (pipeline.vectors.install) files the int8
    codes from it, so nothing is read or embedded again. A lexical run leaves the codes to the
    next vector run; until then queries use exact KNN.
    """
    schema.drop_legacy_vector_codes(conn)


def _keep_identifiers(conn: Connection, base: PathBase) -> None:
    """Format 4 split `model_validator`, `config.yaml` and `--workers` into words in the exact table too.

    chunks gains the identifier columns, filled from each section's text and heading (with the
    FTS triggers dropped, so the porter and CJK tables are left as they are); the exact table, its
    vocabulary and the triggers are created anew and the exact table is rebuilt from chunks.
    Nothing is read from the files or embedded again.
    """
    schema.drop_fts_triggers(conn)
    schema.drop_exact(conn)
    schema.add_identifier_columns(conn)
    rows = conn.execute("SELECT id, body, heading_path FROM chunks")
    found = ((identifiers(body), identifiers(heading), chunk_id) for chunk_id, body, heading in rows)
    conn.executemany("UPDATE chunks SET body_identifiers = ?, heading_identifiers = ? WHERE id = ?",
                     [row for row in found if row[0] or row[1]])
    schema.ensure(conn)
    conn.execute(f"INSERT INTO {schema.EXACT_TABLE}({schema.EXACT_TABLE}) VALUES ('rebuild')")


def _pin_policy(conn: Connection, base: PathBase) -> None:
    """Format 5 recorded no chunk policy per document; add the column, each file's policy today's.

    A file's documents were built by today's extractor and chunker for its format (the versions
    start with this format), so each gets the policy of its path's format and nothing is re-chunked
    by the next run. Web pages keep none ('').
    """
    schema.add_policy_column(conn)
    rows = conn.execute("SELECT id, path FROM documents WHERE source = 'file'").fetchall()
    conn.executemany("UPDATE documents SET policy = ? WHERE id = ?",
                     [(formats.policy_of(path), doc_id) for doc_id, path in rows])


def _add_impacts(conn: Connection, base: PathBase) -> None:
    """Format 6 kept no impact lists; create their tables (empty: the run's end makes the lists)."""
    schema.ensure(conn)


def _group_codes(conn: Connection, base: PathBase) -> None:
    """Format 7 kept one row per int8 code; file them as one row per list (its chunk ids and codes, two blobs).

    The centroids, the lists each code belongs to and the codes themselves stay as they are
    (pipeline/vector_codes.regroup): nothing is trained, filed or embedded again. A store without
    the companions (lexical, or built by an older scheme) is left to the next vector run.
    """
    vector_codes.regroup(conn)


def _add_languages(conn: Connection, base: PathBase) -> None:
    """Format 8 recorded no language or translation group per document; add the columns and fill them.

    Each document's front-matter or text language is told from its stored fields and sections
    (nothing is read from the files again), then every language and group is assigned from the
    paths (pipeline/translations.py) as an unconfigured tree shows them; the run's own pass at its
    end applies knowledge.languages.
    """
    schema.add_language_columns(conn)
    schema.ensure(conn)
    documents = conn.execute("SELECT id, title, fields FROM documents").fetchall()
    hints = []
    for doc_id, title, fields in documents:
        bodies = [str(r[0]) for r in conn.execute(
            "SELECT substr(body, 1, ?) FROM chunks WHERE document_id = ? ORDER BY ordinal LIMIT 50",
            (TEXT_SAMPLE, doc_id))]
        hints.append((*document_hint(json.loads(fields) if fields else {}, title, bodies), doc_id))
    conn.executemany("UPDATE documents SET text_lang = ?, text_lang_source = ? WHERE id = ?", hints)
    translations.assign(conn, translations.Unconfigured())


def _add_postings(conn: Connection, base: PathBase) -> None:
    """Format 9 kept no posting columns and could give a deleted chunk's id again; create the columns' tables
    and trigger (empty: the run's end makes the columns) and record the highest id given, never given again."""
    schema.ensure(conn)
    top = int(conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0])
    schema.write_meta(conn, {schema.CHUNK_HIGH_KEY: str(top)})


STEPS = (
    Step(1, 2, _restate_paths, "stores one spelling per file instead of paths as walked (nothing is read again)"),
    Step(2, 3, _add_fields, "adds front-matter fields (only files that begin with front matter are read again)"),
    Step(3, 4, _drop_float_copies, "drops the float copies and bit codes beside the vectors (nothing is embedded"
                                   " again)"),
    Step(4, 5, _keep_identifiers, "keeps identifiers (snake_case, dotted.names, --flags) whole in the exact table"
                                  " (rebuilt from the sections; nothing is read again)"),
    Step(5, 6, _pin_policy, "records each document's chunk policy (format, extractor and chunker versions;"
                            " nothing is read again)"),
    Step(6, 7, _add_impacts, "keeps each common word's best sections for one-word searches (made at the run's end;"
                             " nothing is read again)"),
    Step(7, 8, _group_codes, "files the vector codes as one row per list, so a query reads each probed list"
                             " in one read (nothing is embedded again)"),
    Step(8, 9, _add_languages, "records each document's language and translation group (told from its path,"
                               " front matter or stored text; nothing is read again)"),
    Step(9, 10, _add_postings, "keeps the rows and counts of the words many sections hold as columns a search"
                               " scores at once (made at the run's end; nothing is read again)"),
)
_BY_SOURCE = {step.source: step for step in STEPS}


def step_from(version: int | None) -> Step | None:
    """The step that migrates a store of this format version, None when there is none (current, or unknown)."""
    return None if version is None else _BY_SOURCE.get(version)


def upgrade(conn: Connection, transaction: Callable[[], AbstractContextManager[Connection]],
            base: PathBase) -> list[Step]:
    """Run every step from the store's format to the current one, each in its own transaction; the steps run."""
    done: list[Step] = []
    while (step := step_from(schema.format_version(conn))) is not None:
        with transaction() as writing:
            step.migrate(writing, base)
            schema.write_meta(writing, {schema.FORMAT_VERSION_KEY: str(step.target)})
        done.append(step)
    return done
