"""The vocabulary: every word the documents contain, its porter stem, and its document counts.

Words come from chunks_vocab (the exact, unstemmed table). Stems are computed by SQLite's own
porter tokenizer in a scratch in-memory database, so they can never drift from the index's.
"As written" counts documents holding the word itself; "any form" counts documents holding any
word sharing its stem, which is what `knowledge match <word>` reports.
"""

from __future__ import annotations

import re
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from config.settings import Settings
from pipeline import db, schema
from pipeline.db import Connection
from pipeline.text import is_cjk
from query.reader import Reader, borrowed_reader, not_built_note
from query.status import Status
from query.terms import quote

SHORT_LIST = 20
BULK_COUNTS = 200
RELATED_MAX = 20
FORMS_SHOWN = 5
_STEM_CACHE_MAX = 200_000
PATTERN_SECONDS = 3.0
"""The most time a pattern may spend matching the whole vocabulary (see matching_words)."""
PATTERN_UNITS = 50_000
"""The most pattern items a pattern may unroll to: the bounded engine expands each repeat's minimum
count when it compiles ((?:a{60000}){60000} is 3.6 billion items, a MemoryError after seconds), and
compiling is not under PATTERN_SECONDS; 50,000 compile in well under 0.1 s."""


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
                    self._cache.clear()
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


def vocabulary(conn: Connection) -> list[str]:
    """Every word of the exact table, sorted; single characters only when CJK."""
    rows = conn.execute("SELECT term FROM chunks_vocab ORDER BY term").fetchall()
    return [str(t) for (t,) in rows if len(t) >= 2 or is_cjk(t)]


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
    vocabulary_size: int = 0

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


def unrolled_size(pattern: str) -> int:
    """How many items pattern unrolls to when its repeats' minimum counts are expanded (capped above PATTERN_UNITS).

    Read from re's own parse of the pattern (which never expands a repeat); raise re.error as
    re.compile would.
    """
    import importlib

    parser: Any = importlib.import_module("re._parser")  # the parser behind re.compile; no stub ships for it
    return _units(parser.parse(pattern, re.IGNORECASE))


def _units(items: Any) -> int:
    total = 0
    for op, arg in items:
        name = getattr(op, "name", str(op))
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _high, body = arg
            total += max(1, low) * _units(body)
        elif name == "SUBPATTERN":
            total += _units(arg[3])
        elif name == "BRANCH":
            total += sum(_units(branch) for branch in arg[1])
        elif name == "ATOMIC_GROUP":
            total += _units(arg)
        elif name in ("ASSERT", "ASSERT_NOT"):
            total += _units(arg[1])
        elif name == "GROUPREF_EXISTS":
            total += _units(arg[1]) + (_units(arg[2]) if arg[2] else 0)
        else:
            total += 1
        if total > PATTERN_UNITS:
            return PATTERN_UNITS + 1
    return total


def _too_large(pattern: str) -> str:
    return (f"{pattern[:80]!r}{'...' if len(pattern) > 80 else ''} repeats too much: it unrolls to over "
            f"{PATTERN_UNITS:,} pattern items, more than a word needs; use smaller repeat counts, as 'a{{3,}}'")


def _invalid(pattern: str | None, exc: Exception) -> str:
    return (f"{pattern!r} is not a regular expression: {exc}; to match characters such as + ( [ * ? literally, "
            "escape them with a backslash, as 'c\\+\\+'")


def _too_slow(pattern: str) -> str:
    return (f"{pattern!r} took over {PATTERN_SECONDS:g} s to match the vocabulary and was stopped; nested "
            "quantifiers such as (a+)+ backtrack exponentially: write it without them")


@dataclass(frozen=True)
class Narrowing:
    """What narrows and orders a word list beyond its pattern (`words --min-docs/--max-docs/--field/--sort/--limit`).

    min_docs/max_docs bound the documents holding the word as written; field keeps the words of the
    headings or of the bodies only; sort is `word` (alphabetical) or `docs` (most documents first).
    """

    min_docs: int | None = None
    max_docs: int | None = None
    field: str | None = None
    sort: str = "word"
    limit: int | None = None

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
    if narrowing.limit is not None:
        infos = infos[: narrowing.limit]
    return infos


def _refused_pattern(pattern: str | None) -> WordsResult | None:
    """The PATTERN_INVALID answer for a pattern re cannot compile or too large to run; None for a good one."""
    try:
        with warnings.catch_warnings():  # a user's pattern may trip re's FutureWarnings; it is not our code
            warnings.simplefilter("ignore", FutureWarning)
            if pattern:
                re.compile(pattern, re.IGNORECASE)
            if pattern and unrolled_size(pattern) > PATTERN_UNITS:  # before the bounded engine compiles it
                return WordsResult(Status.PATTERN_INVALID, _too_large(pattern), pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        return WordsResult(Status.PATTERN_INVALID, _invalid(pattern, exc), pattern)
    return None


def list_words(
    settings: Settings, pattern: str | None = None, counts: bool | None = None, reader: Reader | None = None,
    narrowing: Narrowing | None = None,
) -> WordsResult:
    """The words matching pattern (a case-insensitive regex); never raises for any pattern text.

    counts: None computes document counts only for a short list; True always; False never (unless
    the narrowing needs them).
    """
    narrowing = narrowing or Narrowing()
    refused = _refused_pattern(pattern)
    if refused is not None:
        return refused
    with borrowed_reader(settings, reader) as reader:
        if reader is None:
            return WordsResult(Status.INDEX_NOT_BUILT, not_built_note(settings), pattern)
        if reader.document_count() == 0:
            return WordsResult(Status.CORPUS_EMPTY, NOTE_CORPUS_EMPTY, pattern)
        vocab = vocabulary(reader.conn)
        if not vocab:
            reader.require_intact()
        if narrowing.field:
            in_field = field_words(reader, narrowing.field)
            vocab = [w for w in vocab if w in in_field]
        try:
            selected = matching_words(pattern, vocab) if pattern else vocab
        except ValueError as exc:
            return WordsResult(Status.PATTERN_INVALID, _invalid(pattern, exc), pattern)
        if selected is None:
            return WordsResult(Status.PATTERN_INVALID, _too_slow(pattern or ""), pattern)
        stems = STEMMER.stems(selected)
        want_counts = len(selected) <= SHORT_LIST if counts is None else counts
        if not (want_counts or narrowing.needs_counts):
            infos = [WordInfo(w, stems[w]) for w in selected]
        else:
            reader.require_intact()  # counts from an emptied porter index would read as "no form"
            by_word = document_counts(reader, selected, stems)
            infos = [info for w in selected if narrowing.keeps(info := WordInfo(w, stems[w], *by_word[w]))]
        infos = _ordered(infos, narrowing)
        selected = [i.word for i in infos]
        note = None if selected else f"no word of the index matches {pattern!r}"
        return WordsResult(Status.OK, note, pattern, infos, len(vocab))


def by_counts(words: list[WordInfo]) -> list[WordInfo]:
    """The short-list order: most documents in any form, then as written, then alphabetical."""
    return sorted(words, key=lambda w: (-(w.any_form or 0), -(w.as_written or 0), w.word))
