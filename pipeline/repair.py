"""Repair a store from what `chunks` still holds (`knowledge rebuild`); the caller holds the write lock.

Every FTS table is rebuilt from chunks, missing tables and triggers are recreated, orphan vectors
dropped and the vector companions refilled; a chunk with no vector is left for the next index run.
Where the file itself is damaged, the answer is StoreDamaged naming `knowledge reset --force` and
`knowledge index`: nothing pretends to repair it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.errors import IndexNotBuilt, StoreDamaged
from pipeline import db, schema, vector_codes, vectors
from pipeline.db import Connection
from pipeline.integrity import INDEX, RESET, Report, check


@dataclass
class Repair:
    """What `knowledge rebuild` did, and the check after it."""

    actions: list[str]
    after: Report

    def to_json(self) -> dict[str, Any]:
        """The `rebuild --json` shape."""
        return {"actions": self.actions, "after": self.after.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Repair:
        """The Repair to_json described (as a writer process answers it)."""
        return cls([str(a) for a in data["actions"]], Report.from_json(data["after"]))



def rebuild_store(db_path: Path) -> Repair:
    """Repair every derived part of the store from chunks; the caller holds the write lock.

    Raises IndexNotBuilt without a store, and StoreDamaged naming `reset --force` and `index` when
    the file itself is damaged.
    """
    if not db_path.is_file() and not db_path.is_symlink():
        raise IndexNotBuilt.at(db_path)
    try:
        conn = db.open_writer(db_path)
    except StoreDamaged as exc:
        raise _unrepairable(db_path, str(exc.__cause__ or exc)) from exc
    try:
        before = check(conn, db_path, writable=True)
        if before.file_damaged:
            what = "; ".join(f.problem if f.where == str(db_path) else f"{f.where}: {f.problem}"
                             for f in before.findings if f.repair == RESET)
            raise _unrepairable(db_path, what)
        try:
            actions = _repair(conn, before)
        except db.DatabaseError as exc:
            if db.is_damage(exc):
                raise _unrepairable(db_path, str(exc)) from exc
            raise
        return Repair(actions, check(conn, db_path, writable=True))
    finally:
        conn.close()


def _unrepairable(db_path: Path, what: str) -> StoreDamaged:
    return StoreDamaged(
        f"the file {db_path} itself is damaged ({what}); rebuild cannot repair it in place. The documents on "
        "disk are untouched: run `knowledge reset --force`, then `knowledge index` to index them again"
    )


def _repair(conn: Connection, before: Report) -> list[str]:
    actions: list[str] = []
    names = schema.table_names(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        schema.drop_fts_triggers(conn)  # out of the way while the FTS tables are rebuilt
        schema.ensure(conn)  # missing FTS tables, the vocabulary and the triggers come back
        created = sorted((schema.table_names(conn) - names) - set(schema.TRIGGERS))
        if created:
            actions.append(f"recreated {', '.join(created)}")
        schema.ensure_vector_triggers(conn)
        missing = [f.where for f in before.findings if f.area == "schema" and f.problem == "trigger is missing"]
        if missing:
            actions.append(f"recreated trigger(s) {', '.join(missing)}")
        orphans = conn.execute("DELETE FROM chunks WHERE document_id NOT IN (SELECT id FROM documents)").rowcount
        if orphans:
            actions.append(f"deleted {orphans} sections that belonged to no document")
        for table in schema.FTS_TABLES:
            _rebuild_fts(conn, table)
        actions.append(f"rebuilt {', '.join(schema.FTS_TABLES)} from chunks")
        actions += _repair_vectors(conn, names)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return actions


def _rebuild_fts(conn: Connection, table: str) -> None:
    if table == schema.FTS_CJK:  # only chunks with CJK runs, exactly as the triggers index them
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        conn.execute(f"INSERT INTO {table}(rowid, cjk) SELECT id, cjk FROM chunks WHERE cjk != ''")
    else:
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")


def _repair_vectors(conn: Connection, names: set[str]) -> list[str]:
    if schema.VECTORS not in names:
        return []
    actions: list[str] = []
    orphans = conn.execute(
        f"DELETE FROM {schema.VECTORS} WHERE chunk_id NOT IN (SELECT id FROM chunks)"
    ).rowcount
    if orphans:
        actions.append(f"dropped {orphans} vectors that belonged to no section")
    if {schema.CODES, schema.CENTROIDS} & names:
        pinned = vectors.pinned_identity(schema.read_meta(conn))
        out_of_step = not vector_codes.ready(conn) or any(vector_codes.out_of_step(conn))
        if out_of_step and pinned is not None:
            filled = vector_codes.install(conn, pinned.dimension)
            actions.append(f"refilled {schema.CODES} from {filled} vectors")
    missing = vectors.missing_vector_paths(conn)
    if missing:
        actions.append(f"left {len(missing)} documents with sections lacking a vector for the next "
                       f"`{INDEX}` to embed")
    return actions

