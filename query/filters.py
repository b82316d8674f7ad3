"""Filters on search and match: path prefix or glob, root, and front-matter field equality.

A filter narrows the documents a query may answer from; it is applied inside candidate generation
(query/lexical.py, query/vector.py, query/enumerate.py), so a filtered search still returns k
results when k matching sections exist. Several paths or roots widen (any of them); several
`where` conditions narrow (all of them). A path is matched against the stored spelling
(pipeline/paths.py): with a glob character (`*`, `?`) it is a glob as knowledge.include writes
them (pipeline/globs.py: `*` within one name, `**` across directories, a glob without a slash
matches a name at any depth); without one it names a file or a directory and everything beneath.
`where` compares a front-matter field (pipeline/front_matter.py) with a value: equal text, and a
list field matches when one of its items equals the value.

The allowed documents are read from indexes (Filter.condition: the path and root indexes, the
primary key of document_fields), and handed to the tiers as Allowed: the span of the allowed chunk
ids, which FTS5 takes as a rowid range before it scores anything, plus a per-row check only where
the span holds other documents' chunks. A filter allowing every document is no filter at all (the
unfiltered path, at its cost). docs/filters.md gives the figures. `lang` keeps the documents of a language
(pipeline/translations.py): `zh` is Chinese in any script or region (`zh`, `zh-cn`, `zh-hant`),
`zh-hant` only that.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from config.errors import QueryError
from pipeline.db import Connection
from pipeline.globs import Glob, GlobError
from pipeline.languages import TAG
from pipeline.paths import HERE, under
from query.generation import Generation

_GLOB_CHARS = ("*", "?")
PathMatcher = Callable[[str], bool]


def parse_where(conditions: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """`key=value` conditions as pairs; QueryError for one without `=` or without a key."""
    pairs: list[tuple[str, str]] = []
    for condition in conditions:
        key, sep, value = condition.partition("=")
        if not sep or not key.strip():
            raise QueryError(f"a where condition is key=value (e.g. tags=security), got {condition!r}")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


@dataclass(frozen=True)
class Filter:
    """Which documents a query may answer from; an empty filter allows every one."""

    paths: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()
    where: tuple[tuple[str, str], ...] = ()
    langs: tuple[str, ...] = ()

    @classmethod
    def of(cls, paths: Sequence[str] | str | None = (), roots: Sequence[str] | str | None = (),
           where: Sequence[str] | str | None = (), langs: Sequence[str] | str | None = ()) -> Filter:
        """A filter from surface values: one string or a list of each; QueryError for a bad condition."""
        found = cls(_strings(paths), _strings(roots), parse_where(_strings(where)), parse_langs(_strings(langs)))
        for path in found.paths:
            _path_matcher(path)  # a glob past the bounds is a QueryError here, before any work
        return found

    @property
    def active(self) -> bool:
        """Whether the filter narrows anything."""
        return bool(self.paths or self.roots or self.where or self.langs)

    def describe(self) -> str:
        """The filter as a note reads it."""
        parts = [f"path {' or '.join(self.paths)}" if self.paths else "",
                 f"root {' or '.join(self.roots)}" if self.roots else "",
                 " and ".join(f"{k}={v}" for k, v in self.where),
                 f"language {' or '.join(self.langs)}" if self.langs else ""]
        return "filtered to " + "; ".join(p for p in parts if p)

    def to_json(self) -> dict[str, object]:
        """The filter as JSON answers echo it."""
        return {"path": list(self.paths), "root": list(self.roots), "where": [f"{k}={v}" for k, v in self.where],
                "lang": list(self.langs)}

    def documents(self, conn: Connection) -> set[int]:
        """The ids of the documents the filter allows."""
        where, args = self.condition(conn)
        return {int(r[0]) for r in conn.execute(f"SELECT id FROM documents WHERE {where}", args)}

    def condition(self, conn: Connection) -> tuple[str, list[object]]:
        """A WHERE clause over `documents` selecting the allowed ones, and its arguments.

        Each part reads an index: a `where` condition one range of document_fields' primary key, a root
        the documents_root index, a path (or a glob's leading literal directories) one range of the
        unique path index, compared as text, so `%` and `_` in a path are only characters.
        """
        parts: list[str] = []
        args: list[object] = []
        for key, value in self.where:
            parts.append("id IN (SELECT document_id FROM document_fields WHERE key = ? AND value = ?)")
            args += [key, value]
        if self.langs:
            tags = [("lang = ?", [lang]) if "-" in lang else ("(lang = ? OR lang LIKE ? || '-%')", [lang, lang])
                    for lang in self.langs]  # `zh` is any region or script of it, `zh-hant` only itself
            parts.append("(" + " OR ".join(sql for sql, _ in tags) + ")")
            args += [a for _, more in tags for a in more]
        if self.roots:
            parts.append("root IN (SELECT value FROM json_each(?))")
            args.append(json.dumps(sorted({r.rstrip("/") or "/" for r in self.roots})))
        if self.paths:
            alternatives = [_path_condition(conn, p) for p in self.paths]
            parts.append("(" + " OR ".join(sql for sql, _ in alternatives) + ")")
            args += [a for _, more in alternatives for a in more]
        return " AND ".join(parts) or "1", args

    def allowed(self, conn: Connection, total: int | None = None,
                generation: Generation | None = None) -> Allowed | None:
        """The chunks the filter allows as the tiers' SQL restricts to them; None when it allows every
        document of the total (then a query takes the unfiltered path, at its cost).

        With a generation (query/generation.py) the answer is kept for as long as the store is unchanged,
        so a server asked with the same filter again reads it from memory: a glob is matched in Python,
        path by path.
        """
        if generation is None:
            return self._allowed(conn, total)
        found: tuple[Allowed | None] = generation.get(
            ("filter", self), lambda: (self._allowed(conn, total),), lambda a: 1 + (a[0].count if a[0] else 0))
        generation.keep()
        return found[0]

    def _allowed(self, conn: Connection, total: int | None) -> Allowed | None:
        where, args = self.condition(conn)
        if total is None:
            total = int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])
        count = int(conn.execute(f"SELECT count(*) FROM documents WHERE {where}", args).fetchone()[0])
        if count >= total:
            return None
        if count == 0:
            return Allowed("[]", 0, 0, -1, True)
        ids = str(conn.execute(f"SELECT json_group_array(id) FROM documents WHERE {where}", args).fetchone()[0])
        return allowed_documents(conn, ids, count)


def allowed_documents(conn: Connection, ids: str, count: int) -> Allowed:
    """These documents (a JSON array of `count` ids) as the tiers restrict a query to them: their chunks' span."""
    low, high, chunks = conn.execute(
        "SELECT min(id), max(id), count(*) FROM chunks WHERE document_id IN (SELECT value FROM json_each(?))",
        (ids,)).fetchone()
    if not chunks:
        return Allowed(ids, count, 0, -1, True)
    if int(high) - int(low) + 1 > 2 * int(chunks):  # other documents' chunks fill most of the span: not dense
        return Allowed(ids, count, int(low), int(high), False)  # (counting the span would read its rows)
    spanned = int(conn.execute("SELECT count(*) FROM chunks WHERE id BETWEEN ? AND ?", (low, high)).fetchone()[0])
    return Allowed(ids, count, int(low), int(high), spanned == int(chunks))


@dataclass(frozen=True)
class Allowed:
    """The chunks an active filter allows, as the tiers restrict a query to them.

    low..high is the span of their chunk ids: pushed into FTS5 as a rowid range (it seeks to low and
    stops at high), so a query over one directory reads that directory's rows, not the index's. A
    document's chunks are written together and a walk writes a directory's files together, so a path
    prefix spans few other chunks; when the span holds other documents' chunks too (dense False), each
    row in it is also checked against the allowed documents.
    """

    documents: str  # the allowed document ids, a JSON array (json_each), as the vector tier reads them
    count: int
    low: int
    high: int
    dense: bool

    @property
    def empty(self) -> bool:
        """Whether the filter allows no chunk at all (a query then answers nothing, reading nothing)."""
        return self.high < self.low

    def rows(self, column: str = "rowid") -> tuple[str, tuple[object, ...]]:
        """A SQL fragment (from ` AND `) keeping column to the allowed chunks, and its arguments."""
        sql = f" AND {column} BETWEEN ? AND ?"
        if self.dense:
            return sql, (self.low, self.high)
        # `+` keeps the IN list out of FTS5's index plan: as a rowid constraint SQLite would run the MATCH
        # once per allowed chunk; as a filter each row of the span is checked once.
        sql += f" AND +{column} IN (SELECT id FROM chunks WHERE document_id IN (SELECT value FROM json_each(?)))"
        return sql, (self.low, self.high, self.documents)


def parse_langs(langs: Iterable[str]) -> tuple[str, ...]:
    """Language filter values as tags (lower case, `_` as `-`); QueryError for one that is not a tag."""
    found: list[str] = []
    for lang in langs:
        if not TAG.fullmatch(lang.strip()):
            raise QueryError(f"lang {lang[:40]!r} is not a language tag; pass a code such as en, de, ja or zh-hant "
                             "(or any, for no language preference)")
        found.append(lang.strip().lower().replace("_", "-"))
    return tuple(found)


def document_ids_json(ids: set[int]) -> str:
    """Document ids as the JSON array the filtered SQL of the tiers reads with json_each."""
    return json.dumps(sorted(ids))


def _strings(value: Sequence[str] | str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(v for v in value if v)


def _path_matcher(given: str, whole: bool = True) -> PathMatcher:
    """The test of one path filter on a stored path; whole=False lets a bare glob read only the last name."""
    if any(c in given for c in _GLOB_CHARS):
        try:
            glob = Glob.compile(given)
        except GlobError as exc:
            raise QueryError(f"path filter {given[:60]!r}: {exc}") from None
        return glob.matches if whole or not glob.bare else glob.matches_last_name
    directory = given.rstrip("/") or "/"
    return lambda path: under(path, directory)



def _path_condition(conn: Connection, given: str) -> tuple[str, list[object]]:
    """The WHERE clause over documents of one path filter (a directory or file, or a glob), and its arguments."""
    if any(c in given for c in _GLOB_CHARS):
        matches = _path_matcher(given, whole=False)
        prefix = _literal_directories(given)
        span, args = _prefix_range(prefix) if prefix else ("1", [])
        rows = conn.execute(f"SELECT id, path FROM documents WHERE {span}", args)
        return "id IN (SELECT value FROM json_each(?))", [json.dumps([int(i) for i, p in rows if matches(str(p))])]
    directory = given.rstrip("/") or "/"
    if directory == HERE:  # the relative spellings: neither absolute nor a URL
        return "(substr(path, 1, 1) != '/' AND instr(path, '://') = 0)", []
    return _prefix_range(directory)


def _prefix_range(directory: str) -> tuple[str, list[object]]:
    """directory itself or anything beneath it, as ranges of the path index: d, and [d/, d0) ('/' sorts just
    before '0', so the range holds exactly the paths that begin with d/)."""
    base = directory if directory == "/" else directory.rstrip("/")
    above = base[:-1] + "0" if base.endswith("/") else base + "0"
    if base == "/":
        return "(path >= ? AND path < ?)", [base, above]
    return "(path = ? OR (path >= ? AND path < ?))", [base, base + "/", above]


def _literal_directories(glob: str) -> str:
    """The leading names of a glob with a slash that hold no glob character, joined ('' when none): every
    path it matches lies beneath them."""
    body = glob.strip("/")
    if "/" not in body:
        return ""
    names: list[str] = []
    for name in body.split("/")[:-1]:
        if any(c in name for c in _GLOB_CHARS):
            break
        names.append(name)
    return "/".join(names)
