"""Integrity of a store: find damage (check); pipeline/repair.py repairs what `chunks` still holds.

`documents`, `chunks` and `meta` are the truth; the three FTS tables, the vocabulary, the triggers
and the vector companions are derived from them, so damage there is repaired from the store
itself without reading the tree again. A chunk with no vector is left for the next index run to
embed (the run finds it through pipeline.vectors.missing_vector_paths). Damage to the file itself
(`PRAGMA quick_check` fails, "database disk image is malformed") is not repairable in place: the
way forward is `knowledge reset --force` and a fresh `knowledge index`, and rebuild says so.

The FTS5 cross-check (`integrity-check` with rank 1, which compares every index with its content
table) is an INSERT, so it needs a writable connection and therefore the store's write lock;
while a run holds the lock those checks are reported as not run, never as passed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from config.errors import IndexNotBuilt, StoreDamaged
from pipeline import db, schema, vector_codes, vectors
from pipeline.db import Connection

OK = "ok"
DAMAGED = "damaged"
NOT_RUN = "not run"
BUSY = "busy"
READ_ONLY = "read-only"
_NOT_RUN_WHY = {
    BUSY: "a run holds the write lock; run `knowledge check` when it ends",
    READ_ONLY: "the store is on a read-only file system, and this cross-check writes (and rolls back); "
               "remount it read-write to run it",
}

REBUILD = "knowledge rebuild"
INDEX = "knowledge index"
RESET = "knowledge reset --force, then knowledge index"

_WAY_FORWARD = {
    REBUILD: "`knowledge rebuild` (repairs from the sections in the store)",
    INDEX: "`knowledge index` (embeds the sections that lack a vector)",
    RESET: "`knowledge reset --force` then `knowledge index` (the file itself is damaged; the documents on disk"
           " are untouched)",
}


def way_forward(repair: str) -> str:
    """The command that repairs a finding, with what it does."""
    return _WAY_FORWARD.get(repair, f"`{repair}`")


_ROWS_SHOWN = 5


@dataclass(frozen=True)
class Finding:
    """One problem: which part of the store, where in it, what is wrong, and the command that repairs it."""

    area: str
    where: str
    problem: str
    repair: str

    def to_json(self) -> dict[str, str]:
        """JSON form."""
        return asdict(self)


@dataclass(frozen=True)
class Step:
    """One check that ran (or could not), with its verdict."""

    name: str
    status: str
    detail: str


@dataclass
class Report:
    """What `knowledge check` found."""

    db_path: Path
    full: bool
    steps: list[Step] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    blocked: str | None = None  # why the FTS cross-check could not write: BUSY or READ_ONLY

    @property
    def ok(self) -> bool:
        """True when every check ran and nothing is damaged (a check that could not run is never a pass)."""
        return not self.findings and self.complete

    @property
    def damaged(self) -> bool:
        """True when a check found damage."""
        return bool(self.findings)

    @property
    def complete(self) -> bool:
        """True when every check ran."""
        return all(s.status != NOT_RUN for s in self.steps)

    @property
    def file_damaged(self) -> bool:
        """True when the file itself is damaged: rebuild cannot repair it."""
        return any(f.repair == RESET for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        """The `check --json` shape."""
        return {
            "store": str(self.db_path),
            "ok": self.ok,
            "complete": self.complete,
            "blocked": self.blocked if not self.complete else None,
            "full": self.full,
            "checks": [asdict(s) for s in self.steps],
            "findings": [f.to_json() for f in self.findings],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        """The Report to_json described."""
        return cls(Path(data["store"]), bool(data["full"]), [Step(**s) for s in data["checks"]],
                   [Finding(**f) for f in data["findings"]], data.get("blocked"))

    def _step(self, name: str, found: list[Finding], passed: str) -> None:
        self.findings += found
        if found:
            self.steps.append(Step(name, DAMAGED, "; ".join(f"{f.where}: {f.problem}" for f in found)))
        else:
            self.steps.append(Step(name, OK, passed))


# -- cheap probes, for readers and the writer's open ---------------------------------------------


def missing_triggers(conn: Connection) -> list[str]:
    """Triggers that keep derived tables in step with chunks and are absent."""
    names = schema.table_names(conn)
    return [t for t in schema.expected_triggers(conn) if t not in names]


def preflight(conn: Connection, where: object) -> None:
    """Refuse to write into a store whose triggers are gone or whose FTS index lost rows (StoreDamaged)."""
    with db.translating_damage(where):
        problems = [f"trigger {t} is missing" for t in missing_triggers(conn)] + schema.fts_row_gaps(conn)
    if problems:
        raise db.damaged(where, "; ".join(problems))


# -- check ------------------------------------------------------------------------------------------


Progress = Callable[[str, int, int], None]  # (the step starting, its number from 1, the number of steps)


def check_store(db_path: Path, full: bool = False, progress: Progress | None = None,
                blocked: str | None = None) -> Report:
    """Check the store at db_path; raise IndexNotBuilt when there is none. Never raises for damage.

    The caller holds the write lock (workers/operations.py Check, through the engine), or says why it
    cannot (blocked: BUSY or READ_ONLY): the FTS cross-check writes, so without the lock those steps are
    reported as not run. progress is told each step as it starts.
    """
    if not db_path.is_file() and not db_path.is_symlink():
        raise IndexNotBuilt.at(db_path)
    try:
        with _connection(db_path, blocked is None) as conn:
            return check(conn, db_path, full, writable=blocked is None, blocked=blocked, progress=progress)
    except StoreDamaged as exc:
        report = Report(db_path, full)
        report._step("file", [Finding("file", str(db_path), f"does not open: {exc.__cause__ or exc}", RESET)], "")
        return report


@contextmanager
def _connection(db_path: Path, writable: bool) -> Iterator[Connection]:
    conn = db.open_writer(db_path) if writable else db.connect_readonly(db_path)
    try:
        yield conn
    finally:
        conn.close()


def check(conn: Connection, db_path: Path, full: bool = False, writable: bool = False,
          blocked: str | None = None, progress: Progress | None = None) -> Report:
    """Run every check on an open connection (writable: the FTS cross-check runs too; blocked: why it cannot;
    progress: told each step as it starts)."""
    report = Report(db_path, full, blocked=blocked if not writable else None)
    steps: list[tuple[str, Callable[[Connection], tuple[list[Finding], str]]]] = [
        ("file", lambda c: _file(c, full)),
        ("schema", _schema),
        ("chunks", _orphan_chunks),
        # an index the file step already found damaged is not reported twice
        ("fts", lambda c: _fts(c, writable, {f.where for f in report.findings if f.area == "fts"})),
        ("vocabulary", _vocabulary),
        ("vectors", _vectors),
    ]
    for number, (name, run) in enumerate(steps, 1):
        if progress is not None:
            progress(name, number, len(steps))
        try:
            found, passed = run(conn)
        except db.DatabaseError as exc:
            if not db.is_damage(exc):  # such as a missing table, which the schema step reports
                report.steps.append(Step(name, NOT_RUN, f"could not run: {exc}"))
                continue
            repair = RESET if name in ("file", "schema", "chunks") else REBUILD
            found, passed = [Finding(name, str(db_path) if repair == RESET else name, str(exc), repair)], ""
        if passed == NOT_RUN:
            report.steps.append(Step(name, NOT_RUN, _NOT_RUN_WHY[report.blocked or BUSY]))
            continue
        report._step(name, found, passed)
        if any(f.repair == RESET for f in found):
            break  # the rest would read through the same damage
    return report


_TREE = re.compile(r"\bTree (\d+)\b")
_FTS_ROW = re.compile(r"\b(?:table|FTS5 table) \"?(?:main\.)?(" + "|".join(schema.FTS_TABLES) + r")\b")


def _file(conn: Connection, full: bool) -> tuple[list[Finding], str]:
    pragma = "integrity_check" if full else "quick_check"
    rows = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}").fetchall()]
    if rows == ["ok"]:
        return [], f"PRAGMA {pragma}: ok"
    # SQLite runs FTS5's own structure check inside the pragma: a row naming an FTS table is damage
    # to that index, which rebuild recreates from chunks, not to the file.
    fts = {m.group(1): row for row in rows if (m := _FTS_ROW.search(row))}
    found = [Finding("fts", table, f"PRAGMA {pragma}: {row}", REBUILD) for table, row in sorted(fts.items())]
    rows = [row for row in rows if not _FTS_ROW.search(row)]
    if not rows:
        return found, ""
    roots = schema.root_pages(conn)
    places = sorted({roots.get(int(m.group(1)), f"tree {m.group(1)}") for r in rows for m in _TREE.finditer(r)})
    # One line: a row of the pragma may itself hold several lines.
    shown = "; ".join(" ".join(row.split()) for row in rows[:_ROWS_SHOWN])
    shown += f"; and {len(rows) - _ROWS_SHOWN} more" if len(rows) > _ROWS_SHOWN else ""
    where = ", ".join(places) or str(db_path_of(conn))
    return [*found, Finding("file", where, f"PRAGMA {pragma} failed: {shown}", RESET)], ""


def db_path_of(conn: Connection) -> str:
    """The file a connection has open."""
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row else "the file"


def _schema(conn: Connection) -> tuple[list[Finding], str]:
    names = schema.table_names(conn)
    found = [
        Finding("schema", t, "table is missing", RESET if t in schema.CONTENT_TABLES else REBUILD)
        for t in schema.TABLES if t not in names
    ]
    found += [Finding("schema", t, "trigger is missing", REBUILD) for t in missing_triggers(conn)]
    return found, f"{len(schema.TABLES)} tables and their triggers present"


def _orphan_chunks(conn: Connection) -> tuple[list[Finding], str]:
    n = conn.execute("SELECT count(*) FROM chunks WHERE document_id NOT IN (SELECT id FROM documents)").fetchone()[0]
    if n:
        return [Finding("chunks", "chunks", f"{n} sections belong to no document", REBUILD)], ""
    return [], "every section belongs to a document"


def _fts(conn: Connection, writable: bool, known: set[str] | None = None) -> tuple[list[Finding], str]:
    names = schema.table_names(conn)
    present = [t for t in schema.FTS_TABLES if t in names]
    known = known or set()
    found: list[Finding] = []
    if not known:  # the row counts read the same damaged index
        gaps = [gap.split(" ", 1) for gap in schema.fts_row_gaps(conn)]
        found = [Finding("fts", table, problem, REBUILD) for table, problem in gaps if table in present]
    if not writable:
        return found, NOT_RUN if not found and not known else ""
    flagged = {f.where for f in found} | known
    for table in present:
        if table in flagged:
            continue
        conn.execute("SAVEPOINT fts_check")
        try:
            conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
        except db.DatabaseError as exc:
            if not db.is_damage(exc):
                raise
            found.append(Finding("fts", table, f"index out of step with chunks ({exc})", REBUILD))
        finally:
            conn.execute("ROLLBACK TO fts_check")
            conn.execute("RELEASE fts_check")
    checked = [t for t in present if t not in flagged]
    passed = f"{', '.join(checked) or 'no table'}: integrity-check against chunks ok"
    return found, passed + (f"; {', '.join(sorted(known))} reported by the file check" if known else "")


def _vocabulary(conn: Connection) -> tuple[list[Finding], str]:
    if schema.VOCAB_TABLE not in schema.table_names(conn):
        return [], "no vocabulary table (reported under schema)"
    n = conn.execute(f"SELECT count(*) FROM {schema.VOCAB_TABLE}").fetchone()[0]
    return [], f"{n} words readable"


def _vectors(conn: Connection) -> tuple[list[Finding], str]:
    names = schema.table_names(conn)
    if schema.VECTORS not in names:
        return [], "no vector table (lexical store)"
    found: list[Finding] = []
    orphans = count(conn, f"SELECT count(*) FROM {schema.VECTORS} WHERE chunk_id NOT IN (SELECT id FROM chunks)")
    if orphans:
        found.append(Finding("vectors", schema.VECTORS, f"{orphans} vectors belong to no section", REBUILD))
    missing = count(conn, f"SELECT count(*) FROM chunks WHERE id NOT IN (SELECT chunk_id FROM {schema.VECTORS})")
    if missing:
        docs = len(vectors.missing_vector_paths(conn))
        found.append(Finding("vectors", schema.VECTORS, f"{missing} sections in {docs} documents have no vector",
                             INDEX))
    if schema.CODES in names and schema.LISTS in names:
        stray, lacking = vector_codes.out_of_step(conn)
        if stray or lacking:
            found.append(Finding("vectors", schema.CODES,
                                 f"{stray} codes without a vector and {lacking} vectors without a code", REBUILD))
    return found, "every section has exactly one vector"


def count(conn: Connection, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0])
