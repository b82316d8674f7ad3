"""The vocabulary: every word the documents contain, its porter stem, and its document counts.

Words come from chunks_vocab (the exact, unstemmed table). Stems are computed by SQLite's own
porter tokenizer in a scratch in-memory database, so they can never drift from the index's.
"As written" counts documents holding the word itself; "any form" counts documents holding any
word sharing its stem, which is what `knowledge match <word>` reports.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from config.settings import Settings
from pipeline import db, schema
from pipeline.db import Connection
from query.reader import Reader
from query.status import Status
from query.terms import quote
from query.word_patterns import invalid_note, refusal
from query.word_scope import candidate_words

SHORT_LIST = 20
BULK_COUNTS = 200
RELATED_MAX = 20
FORMS_SHOWN = 5
_STEM_CACHE_MAX = 200_000
PATTERN_SECONDS = 3.0
"""The most time a pattern may spend matching the whole vocabulary (see matching_words)."""


NOTE_CORPUS_EMPTY = (
    "the index holds no documents, so it has no vocabulary; check knowledge.paths and run `knowledge index`"
)


class Stemmer:
    """SQLite's porter tokenizer over a scratch in-memory FTS5 table, with a cache."""

    def __init__(self) -> None:
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._cache: dict[str, str] = {}

    def _connection(self) -> Connection:
        if self._conn is None:
            conn = db.memory_connection()
            for statement in schema.STEMMER_DDL:
                conn.execute(statement)
            self._conn = conn
        return self._conn

    def stems(self, words: Iterable[str]) -> dict[str, str]:
        """The porter stem of each word ('' when it has no token; tokens space-joined if several)."""
        wanted = list(dict.fromkeys(words))
        with self._lock:
            missing = [w for w in wanted if w not in self._cache]
            if missing:
                if len(self._cache) + len(missing) > _STEM_CACHE_MAX:
                    self._cache.clear()  # then every wanted word is missing, not only the new ones
                    missing = wanted
                self._cache.update(self._compute(missing))
            return {w: self._cache[w] for w in wanted}

    def _compute(self, words: list[str]) -> dict[str, str]:
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO scratch(rowid, w) VALUES (?, ?)", list(enumerate(words)))
            rows = conn.execute("SELECT doc, term FROM scratch_tokens ORDER BY doc, offset").fetchall()
            conn.execute("DELETE FROM scratch")
        finally:
            conn.execute("COMMIT")
        parts: dict[int, list[str]] = {}
        for doc, term in rows:
            parts.setdefault(int(doc), []).append(str(term))
        return {w: " ".join(parts.get(i, [])) for i, w in enumerate(words)}


STEMMER = Stemmer()


def _prefix_for(stem: str) -> str:
    # Porter rewrites at most the last character or two of a word (y -> i, an added e), so every
    # word with this stem starts with the stem minus its last two characters.
    keep = len(stem) - 2 if len(stem) > 4 else len(stem) - 1
    return stem[: max(1, keep)]


def related_forms(conn: Connection, stem: str, limit: int = RELATED_MAX) -> list[str]:
    """Words of the index whose porter stem is stem (at most limit, sorted)."""
    if not stem or " " in stem:
        return []
    prefix = _prefix_for(stem)
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    rows = conn.execute(
        "SELECT term FROM chunks_vocab WHERE term >= ? AND term < ? ORDER BY term", (prefix, upper)
    ).fetchall()
    candidates = [str(t) for (t,) in rows]
    stems = STEMMER.stems(candidates)
    return [w for w in candidates if stems[w] == stem][:limit]


def other_forms(conn: Connection, stem: str, surface: str, limit: int = FORMS_SHOWN) -> list[str]:
    """The index's other words sharing stem (not surface itself): at most limit, most chunks first."""
    forms = [w for w in related_forms(conn, stem) if w != surface.lower()]
    if not forms:
        return []
    marks = ",".join("?" * len(forms))
    chunks = dict(conn.execute(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", forms).fetchall())
    return sorted(forms, key=lambda w: (-int(chunks.get(w, 0)), w))[:limit]


def document_count(conn: Connection, table: str, expression: str) -> int:
    """Documents with at least one chunk matching an FTS5 expression in table."""
    row = conn.execute(
        f"SELECT count(DISTINCT c.document_id) FROM {table} f JOIN chunks c ON c.id = f.rowid"
        f" WHERE {table} MATCH ?",
        (expression,),
    ).fetchone()
    return int(row[0])


def document_counts(reader: Reader, words: list[str], stems: dict[str, str]) -> dict[str, tuple[int, int]]:
    """(as written, any form) document counts per word; one pass over the index for long lists."""
    conn = reader.conn
    if len(words) <= BULK_COUNTS:
        any_form: dict[str, int] = {}
        out: dict[str, tuple[int, int]] = {}
        for word in words:
            stem = stems[word]
            if stem not in any_form:
                any_form[stem] = document_count(conn, "chunks_fts", quote(word))
            out[word] = (document_count(conn, "chunks_fts_exact", quote(word)), any_form[stem])
        return out
    with reader.instances() as bulk:
        exact = _bulk_counts(bulk, "chunks_fts_exact")
        stemmed = _bulk_counts(bulk, "chunks_fts")
    # An identifier's stem is several porter tokens (`model_validator`: "model valid"), which no
    # instance row holds: its documents in any form are those of the phrase, as match counts them.
    phrases = {stems[w]: w for w in words if " " in stems[w]}
    stemmed.update({stem: document_count(conn, "chunks_fts", quote(w)) for stem, w in phrases.items()})
    return {w: (exact.get(w, 0), stemmed.get(stems[w], 0)) for w in words}


def _bulk_counts(conn: Connection, table: str) -> dict[str, int]:
    """Documents per token of table, from its instance vocabulary (a temp view of schema.INSTANCES_DDL)."""
    view = schema.INSTANCES[table]
    doc_of = dict(conn.execute("SELECT id, document_id FROM chunks").fetchall())
    counts: dict[str, int] = {}
    current: str | None = None
    documents: set[int] = set()
    # The instance vocabulary yields rows grouped by term, so one term's documents are in hand at once.
    for term, chunk in conn.execute(f"SELECT term, doc FROM {view}"):
        if term != current:
            if current is not None:
                counts[current] = len(documents)
            current, documents = term, set()
        documents.add(doc_of.get(chunk, -1))
    if current is not None:
        counts[current] = len(documents)
    return counts


@dataclass(frozen=True)
class WordInfo:
    """One vocabulary word with its stem and (when computed) document counts."""

    word: str
    stem: str
    as_written: int | None = None
    any_form: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The `words --json` shape of one word."""
        return {"word": self.word, "stem": self.stem, "as_written": self.as_written, "any_form": self.any_form}


@dataclass
class WordsResult:
    """The vocabulary (or the part a pattern selects), with a status and note."""

    status: str
    note: str | None = None
    pattern: str | None = None
    words: list[WordInfo] = field(default_factory=list)
    vocabulary_size: int | None = 0  # None when only a pattern's prefix range of the vocabulary was read
    matched: int = 0  # words the pattern and narrowing select, before offset and limit
    offset: int = 0

    @property
    def short(self) -> bool:
        """Whether the list is short enough to be shown with its counts."""
        return len(self.words) <= SHORT_LIST

    def to_json(self) -> dict[str, Any]:
        """The `words --json` shape."""
        out: dict[str, Any] = {"status": self.status}
        if self.note:
            out["note"] = self.note
        out.update(
            {
                "pattern": self.pattern,
                "vocabulary_size": self.vocabulary_size,
                "matched": self.matched,
                "offset": self.offset,
                "count": len(self.words),
                "words": [w.to_json() for w in self.words],
            }
        )
        return out


def matching_words(pattern: str, words: list[str]) -> list[str] | None:
    """The words pattern (case-insensitive) finds in, or None when that takes over PATTERN_SECONDS.

    Raise ValueError for a pattern the bounded engine cannot compile.

    Python's re backtracks without limit: a nested quantifier such as `(a+)+$` against one long
    word runs for hours, and a C-level match can be neither interrupted from another thread nor
    killed. The `regex` engine (re's syntax and semantics in its VERSION0 mode) takes a timeout per
    call, checked inside the match; every call gets what is left of one deadline for the whole scan.
    """
    import regex  # type: ignore[import-untyped]  # only a pattern scan pays for the bounded engine

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            compiled = regex.compile(pattern, regex.IGNORECASE | regex.VERSION0)
    except (regex.error, OverflowError, RecursionError) as exc:  # re accepted it, the bounded engine does not
        raise ValueError(str(exc)) from None
    deadline = time.monotonic() + PATTERN_SECONDS
    selected: list[str] = []
    for word in words:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            if compiled.search(word, timeout=remaining):
                selected.append(word)
        except TimeoutError:
            return None
    return selected


def _too_slow(pattern: str) -> str:
    return (f"{pattern!r} took over {PATTERN_SECONDS:g} s to match the vocabulary and was stopped; nested "
            "quantifiers such as (a+)+ backtrack exponentially: write it without them")


@dataclass(frozen=True)
class Narrowing:
    """What narrows, orders and pages a word list beyond its pattern (`words --min-docs/--max-docs/--field/--sort/
    --offset/--limit/--path`).

    min_docs/max_docs bound the documents holding the word as written; field keeps the words of the
    headings or of the bodies only; sort is `word` (alphabetical) or `docs` (most documents first);
    offset and limit cut a page of the ordered list; paths keep the words the documents under a path
    prefix or matching a glob hold (their counts stay those of the whole index).
    """

    min_docs: int | None = None
    max_docs: int | None = None
    field: str | None = None
    sort: str = "word"
    limit: int | None = None
    offset: int = 0
    paths: tuple[str, ...] = ()

    @property
    def needs_counts(self) -> bool:
        """Whether every word's document counts are needed to narrow or order the list."""
        return self.min_docs is not None or self.max_docs is not None or self.sort == "docs"

    def keeps(self, info: WordInfo) -> bool:
        """Whether a counted word is within the document bounds."""
        docs = info.as_written or 0
        return (self.min_docs is None or docs >= self.min_docs) and (self.max_docs is None or docs <= self.max_docs)


WORD_SORTS = ("word", "docs")
WORD_FIELDS = {"heading": "heading_path", "body": "body"}


def field_words(reader: Reader, field: str) -> set[str]:
    """The words of the exact table that occur in one column (heading or body)."""
    with reader.instances() as bulk:
        view = schema.INSTANCES["chunks_fts_exact"]
        rows = bulk.execute(f"SELECT DISTINCT term FROM {view} WHERE col = ?", (WORD_FIELDS[field],))
        return {str(t) for (t,) in rows}


def _ordered(infos: list[WordInfo], narrowing: Narrowing) -> list[WordInfo]:
    """infos in the narrowing's order (most documents as written first for "docs"), cut to its limit."""
    if narrowing.sort == "docs":
        infos = sorted(infos, key=lambda i: (-(i.as_written or 0), i.word))
    end = None if narrowing.limit is None else narrowing.offset + narrowing.limit
    return infos[narrowing.offset:end]


def list_words(
    settings: Settings, pattern: str | None = None, counts: bool | None = None, *, reader: Reader,
    narrowing: Narrowing | None = None,
) -> WordsResult:
    """The words matching pattern (a case-insensitive regex), read from the reader it is lent (QueryService
    lends one; a store never built is answered before); never raises for any pattern text.

    counts: None computes document counts only for a short list; True always; False never (unless
    the narrowing needs them).
    """
    narrowing = narrowing or Narrowing()
    refused = refusal(pattern)
    if refused is not None:
        return WordsResult(Status.PATTERN_INVALID, refused, pattern)
    with db.translating_damage(settings.db_path):
        if reader.document_count() == 0:
            return WordsResult(Status.CORPUS_EMPTY, NOTE_CORPUS_EMPTY, pattern)
        vocab, size = candidate_words(reader.conn, pattern, narrowing.paths)
        if size == 0:
            reader.require_intact()
        if narrowing.field:
            in_field = field_words(reader, narrowing.field)
            vocab = [w for w in vocab if w in in_field]
        try:
            selected = matching_words(pattern, vocab) if pattern else vocab
        except ValueError as exc:
            return WordsResult(Status.PATTERN_INVALID, invalid_note(pattern, exc), pattern)
        if selected is None:
            return WordsResult(Status.PATTERN_INVALID, _too_slow(pattern or ""), pattern)
        infos, matched = _page(reader, selected, narrowing, counts)
        note = None if infos else _nothing(pattern, narrowing, matched)
        return WordsResult(Status.OK, note, pattern, infos, size, matched, narrowing.offset)


def _page(reader: Reader, selected: list[str], narrowing: Narrowing,
          counts: bool | None) -> tuple[list[WordInfo], int]:
    """(the page of the selected words the narrowing asks for, with stems and counts; how many it pages through).

    Unless the narrowing needs every word's counts (document bounds, or the `docs` order), the page
    is cut first and only its words are stemmed and counted (with counts True, or None and a page of
    at most SHORT_LIST).
    """
    total: int | None = None
    if not narrowing.needs_counts:
        end = None if narrowing.limit is None else narrowing.offset + narrowing.limit
        total, selected, narrowing = len(selected), selected[narrowing.offset:end], Narrowing()
        if counts is False or (counts is None and len(selected) > SHORT_LIST):
            stems = STEMMER.stems(selected)
            return [WordInfo(w, stems[w]) for w in selected], total
    stems = STEMMER.stems(selected)
    reader.require_intact()  # counts from an emptied porter index would read as "no form"
    by_word = document_counts(reader, selected, stems)
    infos = [info for w in selected if narrowing.keeps(info := WordInfo(w, stems[w], *by_word[w]))]
    return _ordered(infos, narrowing), len(infos) if total is None else total


def _nothing(pattern: str | None, narrowing: Narrowing, matched: int) -> str:
    """The note of an empty page: past the end of the list, or nothing matched (under the paths)."""
    if matched:
        return f"{matched} words match; none past offset {narrowing.offset}"
    under = f" under {' or '.join(narrowing.paths)}" if narrowing.paths else ""
    return f"no word of the index{under} matches {pattern!r}" if pattern else f"no word of the index{under}"


def by_counts(words: list[WordInfo]) -> list[WordInfo]:
    """The short-list order: most documents in any form, then as written, then alphabetical."""
    return sorted(words, key=lambda w: (-(w.any_form or 0), -(w.as_written or 0), w.word))
