"""Filters on search and match: path prefix or glob, root, and front-matter field equality.

A filter narrows the documents a query may answer from; it is applied inside candidate generation
(query/lexical.py, query/vector.py, query/enumerate.py), so a filtered search still returns k
results when k matching sections exist. Several paths or roots widen (any of them); several
`where` conditions narrow (all of them). A path is matched against the stored spelling
(pipeline/paths.py): with a glob character (`*`, `?`) it is a glob as knowledge.include writes
them (pipeline/globs.py: `*` within one name, `**` across directories, a glob without a slash
matches a name at any depth); without one it names a file or a directory and everything beneath.
`where` compares a front-matter field (pipeline/front_matter.py) with a value: equal text, and a
list field matches when one of its items equals the value. `lang` keeps the documents of a language
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
from pipeline.paths import under

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
        ids: set[int] | None = None
        for key, value in self.where:
            rows = conn.execute("SELECT document_id FROM document_fields WHERE key = ? AND value = ?", (key, value))
            found = {int(r[0]) for r in rows}
            ids = found if ids is None else ids & found
        if self.langs:
            found = language_documents(conn, self.langs)
            ids = found if ids is None else ids & found
        if not self.paths and not self.roots:
            if ids is not None:
                return ids
            return {int(r[0]) for r in conn.execute("SELECT id FROM documents")}
        matchers = [_path_matcher(p) for p in self.paths]
        roots = {r.rstrip("/") or "/" for r in self.roots}
        allowed: set[int] = set()
        for doc_id, path, root in conn.execute("SELECT id, path, root FROM documents"):
            if ids is not None and doc_id not in ids:
                continue
            if roots and root not in roots:
                continue
            if matchers and not any(m(path) for m in matchers):
                continue
            allowed.add(int(doc_id))
        return allowed


def parse_langs(langs: Iterable[str]) -> tuple[str, ...]:
    """Language filter values as tags (lower case, `_` as `-`); QueryError for one that is not a tag."""
    found: list[str] = []
    for lang in langs:
        if not TAG.fullmatch(lang.strip()):
            raise QueryError(f"lang {lang[:40]!r} is not a language tag; pass a code such as en, de, ja or zh-hant "
                             "(or any, for no language preference)")
        found.append(lang.strip().lower().replace("_", "-"))
    return tuple(found)


def language_documents(conn: Connection, langs: Sequence[str]) -> set[int]:
    """The documents in one of the languages: the tag itself, or (for a tag without a subtag) any region or script
    of it (`zh` is also `zh-cn`, `zh-hant`)."""
    ids: set[int] = set()
    for lang in langs:
        rows = conn.execute("SELECT id FROM documents WHERE lang = ? OR (? NOT LIKE '%-%' AND lang LIKE ? || '-%')",
                            (lang, lang, lang))
        ids |= {int(r[0]) for r in rows}
    return ids


def document_ids_json(ids: set[int]) -> str:
    """Document ids as the JSON array the filtered SQL of the tiers reads with json_each."""
    return json.dumps(sorted(ids))


def _strings(value: Sequence[str] | str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(v for v in value if v)


def _path_matcher(given: str) -> PathMatcher:
    if any(c in given for c in _GLOB_CHARS):
        try:
            glob = Glob.compile(given)
        except GlobError as exc:
            raise QueryError(f"path filter {given[:60]!r}: {exc}") from None
        return glob.matches
    directory = given.rstrip("/") or "/"
    return lambda path: under(path, directory)

