"""Each document's language and translation group, assigned by the writer over the whole tree's paths.

A document's language comes from, in order:

1. its path: a directory named by a language tag (`docs/de/...`, `i18n/ja/...`, `content/zh-cn/...`),
   or a file name's suffix (`page.de.md`). A name is a language only when it is a known code
   (pipeline/languages.CODES, or knowledge.languages.codes) AND the tree shows the convention: a
   directory beside it is another language (`docs/en/` beside `docs/de/`), or a file beside it is the
   same page in another language or without a suffix (`page.md` beside `page.de.md`), or the
   convention is configured (knowledge.languages.directories names the parent, or
   knowledge.languages.suffixes is on). So `docs/go/`, `api/` or a lone `docs/it/` are never
   languages by their name alone;
2. its front matter (`lang`, `language`), else its text (pipeline/languages.py), both read when
   it is written (documents.text_lang);
3. else the default: knowledge.languages.default, else the tree's most common language.

Documents are one translation group when they are the same page in several languages: the same
path once the language directory or suffix is set aside (`docs/*/guide/intro.md`), or the same
front-matter `translationKey`, or one names the other with `translation_of` (a path, or a key).
The group is named by its first member's path. assign() recomputes both for every document in one
pass and writes only what changed; the writer runs it when a run finishes (after its removals) and
after `knowledge rm`, so groups stay right after adds, changes and removals. A run that wrote
nothing under unchanged conventions skips it (meta `languages_assigned`, unset by every write).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pipeline import schema
from pipeline.db import Connection
from pipeline.languages import tag

PATH, SUFFIX, DEFAULT = "path", "path suffix", "default"
KEY_FIELDS = ("translationKey", "translation_key")
OF_FIELDS = ("translation_of", "translationOf")


class Conventions(Protocol):
    """What the writer is told about a tree's languages (config.settings.LanguageSettings)."""

    @property
    def default(self) -> str: ...

    @property
    def directories(self) -> tuple[str, ...]: ...

    @property
    def suffixes(self) -> bool: ...

    @property
    def codes(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Unconfigured:
    """No conventions configured: the tree's own evidence alone (a migration's view)."""

    default: str = ""
    directories: tuple[str, ...] = ()
    suffixes: bool = False
    codes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PathLanguage:
    """What a path says: its language tag, how (PATH or SUFFIX) and its group key (the path, language aside)."""

    lang: str
    source: str
    key: str


class _Tree:
    """The directories of every stored path and their children, to see whether a name follows a convention.

    Every question is a dictionary lookup (the language directories under each parent, the suffixed
    pages of each directory counted once), so the pass is linear in the tree's paths.
    """

    def __init__(self, paths: Iterable[str], conventions: Conventions) -> None:
        self.extra = tuple(c.lower() for c in conventions.codes)
        self.suffixes = conventions.suffixes
        self.configured = {d.strip("/") for d in conventions.directories}
        self.languages: dict[str, set[str]] = {}  # parent directory -> its children that are language tags
        self.files: dict[str, set[str]] = {}  # directory -> its files' names
        self.suffixed: dict[tuple[str, str, str], int] = {}  # (directory, stem, ext) -> pages with a language suffix
        self._tags: dict[str, str | None] = {}
        for path in paths:
            parts = path.split("/")
            for i in range(len(parts) - 1):
                if self.tag(parts[i]) is not None:
                    self.languages.setdefault("/".join(parts[:i]), set()).add(parts[i])
            directory = "/".join(parts[:-1])
            self.files.setdefault(directory, set()).add(parts[-1])
            split = self._suffix(parts[-1])
            if split is not None:
                key = (directory, split[0], split[2])
                self.suffixed[key] = self.suffixed.get(key, 0) + 1

    def tag(self, name: str) -> str | None:
        if name not in self._tags:
            self._tags[name] = tag(name, self.extra)
        return self._tags[name]

    def _suffix(self, name: str) -> tuple[str, str, str] | None:
        """(stem, language, extension) of a `stem.<language>.ext` name, else None."""
        pieces = name.split(".")
        if len(pieces) < 3:
            return None
        found = self.tag(pieces[-2])
        return None if found is None else (".".join(pieces[:-2]), found, pieces[-1])

    def directory_language(self, parts: Sequence[str]) -> PathLanguage | None:
        """The first directory of a path that is a language directory, and the path's group key."""
        for i in range(len(parts) - 1):
            found = self.tag(parts[i])
            if found is None:
                continue
            parent = "/".join(parts[:i])
            if parent in self.configured or len(self.languages.get(parent, ())) > 1:
                return PathLanguage(found, PATH, "/".join((*parts[:i], "*", *parts[i + 1:])))
        return None

    def suffix_language(self, parts: Sequence[str]) -> PathLanguage | None:
        """`page.de.md`: the suffix's language when the convention shows beside it (or is configured)."""
        split = self._suffix(parts[-1])
        if split is None:
            return None
        stem, found, ext = split
        directory = "/".join(parts[:-1])
        shown = f"{stem}.{ext}" in self.files.get(directory, ()) or self.suffixed[(directory, stem, ext)] > 1
        if not (shown or self.suffixes):
            return None
        return PathLanguage(found, SUFFIX, "/".join((*parts[:-1], f"{stem}.*.{ext}")))

    def unsuffixed_key(self, parts: Sequence[str]) -> str | None:
        """`page.md` beside `page.de.md`: the key of the suffixed pages' group, which it joins."""
        pieces = parts[-1].rsplit(".", 1)
        if len(pieces) != 2:
            return None
        stem, ext = pieces
        directory = "/".join(parts[:-1])
        if (directory, stem, ext) in self.suffixed:
            return "/".join((*parts[:-1], f"{stem}.*.{ext}"))
        return None

    def language(self, path: str) -> PathLanguage | None:
        """What the path says of its language, if anything."""
        parts = path.split("/")
        return self.directory_language(parts) or self.suffix_language(parts)


class _Groups:
    """Union-find over document ids."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while x != root:  # halve the path for the next find
            self.parent[x], x = root, self.parent.get(x, x)
        return root

    def join(self, members: Sequence[int]) -> None:
        roots = [self.find(m) for m in members]
        for r in roots[1:]:
            if r != roots[0]:
                self.parent[r] = roots[0]


@dataclass(frozen=True)
class _Row:
    id: int
    path: str
    source: str
    text_lang: str
    text_source: str


def _front_matter_links(conn: Connection) -> tuple[dict[int, str], dict[int, str]]:
    """{document id: translationKey} and {document id: translation_of} from the filterable fields."""
    keys: dict[int, str] = {}
    targets: dict[int, str] = {}
    for doc_id, key, value in conn.execute(
            "SELECT document_id, key, value FROM document_fields WHERE key IN (?, ?, ?, ?)",
            (*KEY_FIELDS, *OF_FIELDS)):
        (keys if key in KEY_FIELDS else targets)[int(doc_id)] = str(value)
    return keys, targets


def _grouped(rows: list[_Row], path_keys: dict[int, str], conn: Connection) -> dict[int, str]:
    """Each document's group name (its first member's path), for the documents in a group of two or more."""
    groups = _Groups()
    by_key: dict[str, list[int]] = {}
    for doc_id, key in path_keys.items():
        by_key.setdefault(key, []).append(doc_id)
    keys, targets = _front_matter_links(conn)
    for doc_id, key in keys.items():
        by_key.setdefault("key:" + key, []).append(doc_id)
    by_path = {r.path: r.id for r in rows}
    for doc_id, target in targets.items():
        found = by_path.get(target.strip().lstrip("./")) or next(
            (i for p, i in by_path.items() if p.endswith("/" + target.strip().lstrip("./"))), None)
        if found is not None:
            groups.join([doc_id, found])
        else:
            by_key.setdefault("key:" + target, []).append(doc_id)
    for ids in by_key.values():
        groups.join(ids)
    components: dict[int, list[_Row]] = {}
    for row in rows:
        components.setdefault(groups.find(row.id), []).append(row)
    named: dict[int, str] = {}
    for members in components.values():
        if len(members) > 1:
            name = min(m.path for m in members)
            named.update((m.id, name) for m in members)
    return named


def assign(conn: Connection, conventions: Conventions) -> int:
    """Recompute every document's language and translation group (in the caller's transaction); the rows changed.

    The tree's most common language (of the documents whose path, front matter or text told it) is
    kept in meta (schema.COMMON_LANGUAGE_KEY): the default of queries and documents when none is configured.
    """
    rows = [_Row(int(i), str(p), str(s), str(t), str(ts)) for i, p, s, t, ts in conn.execute(
        "SELECT id, path, source, text_lang, text_lang_source FROM documents")]
    tree = _Tree((r.path for r in rows if r.source == "file"), conventions)
    told: dict[int, tuple[str, str]] = {}
    path_keys: dict[int, str] = {}
    for row in rows:
        said = tree.language(row.path) if row.source == "file" else None
        if said is not None:
            told[row.id] = (said.lang, said.source)
            path_keys[row.id] = said.key
        elif row.text_lang:
            told[row.id] = (row.text_lang, row.text_source)
        if said is None and row.source == "file" and (key := tree.unsuffixed_key(row.path.split("/"))):
            path_keys[row.id] = key
    common = _most_common(lang for lang, _ in told.values())
    default = conventions.default.lower() or common
    groups = _grouped(rows, path_keys, conn)
    current = {int(i): (str(lang), str(src), str(g)) for i, lang, src, g in conn.execute(
        "SELECT id, lang, lang_source, translation_group FROM documents")}
    changes = []
    present: set[str] = set()
    for row in rows:
        lang, source = told.get(row.id, (default, DEFAULT if default else ""))
        present.add(lang)
        wanted = (lang, source, groups.get(row.id, ""))
        if current.get(row.id) != wanted:
            changes.append((*wanted, row.id))
    conn.executemany("UPDATE documents SET lang = ?, lang_source = ?, translation_group = ? WHERE id = ?", changes)
    schema.write_meta(conn, {schema.COMMON_LANGUAGE_KEY: common, schema.DOCUMENT_LANGUAGES_KEY: json.dumps(
        sorted(present)), schema.LANGUAGES_KEY: fingerprint(conventions)})
    return len(changes)


def fingerprint(conventions: Conventions) -> str:
    """The conventions as the store records them: a pass under the same ones over an unwritten tree is skipped."""
    return json.dumps([conventions.default.lower(), sorted(conventions.directories), conventions.suffixes,
                       sorted(conventions.codes)])


def current(conn: Connection, conventions: Conventions) -> bool:
    """Whether every document's language and group are those a pass would assign now: nothing was written
    since the last pass (a write unsets the mark: mark_stale) and it ran under the same conventions."""
    return (schema.meta_value(conn, schema.LANGUAGES_KEY) == fingerprint(conventions)
            and schema.meta_value(conn, schema.DOCUMENT_LANGUAGES_KEY) is not None)  # a store of before the list


def mark_stale(conn: Connection) -> None:
    """Record that documents changed since the last pass (in the writer's transaction)."""
    schema.delete_meta(conn, schema.LANGUAGES_KEY)
    schema.delete_meta(conn, schema.DOCUMENT_LANGUAGES_KEY)


def languages_present(conn: Connection) -> list[str] | None:
    """The languages of the documents as the last pass left them; None when a document was written since."""
    if schema.meta_value(conn, schema.LANGUAGES_KEY) is None:
        return None
    found = schema.meta_value(conn, schema.DOCUMENT_LANGUAGES_KEY)
    return None if found is None else [str(lang) for lang in json.loads(found)]


def _most_common(langs: Iterable[str]) -> str:
    """The language most documents are in ('' for none); a tie goes to English if it is among them, else to the
    first tag in order, so the choice never depends on the order rows are read in."""
    counts = Counter(langs)
    if not counts:
        return ""
    most = max(counts.values())
    tied = sorted(lang for lang, n in counts.items() if n == most)
    return "en" if "en" in tied else tied[0]
