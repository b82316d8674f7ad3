"""Which part of the vocabulary a `words` listing reads: an anchored pattern's literal prefix as one range of
the vocabulary table, and the words of the documents a path filter allows.

The vocabulary table (fts5vocab over the exact index) has no stored list of its terms: reading it
whole walks the whole index (about a second at 120,000 words). A pattern anchored by literal text
(`^git`, `^model_val`) can only match words that begin with it, and the table answers a range of
terms by seeking, so only that range is read. Case-insensitive matching lets four non-ASCII letters
(capital I with a dot, dotless i, long s, the Kelvin sign) stand for ASCII `i`, `s` and `k`, so the
prefix stops before those letters and stays exact. A path filter (query/filters.py) keeps the words
the allowed documents hold: their chunks' exact text is tokenized again, by the exact table's own
tokenizer, in a scratch in-memory table (pipeline/schema.py SCOPE_DDL), so a directory's words cost
that directory's text.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline import db, schema
from pipeline.db import Connection
from pipeline.text import is_cjk
from query.filters import Filter

_FOLDED_ELSEWHERE = frozenset("iks")  # ASCII letters a non-ASCII letter matches case-insensitively
_QUANTIFIERS = frozenset("?*{")  # a quantifier after a letter makes it optional: the prefix ends before it


def literal_prefix(pattern: str | None) -> str:
    """The lower-cased ASCII text every word an anchored pattern matches begins with ('' when there is none)."""
    if not pattern or not pattern.startswith("^") or "|" in pattern:
        return ""
    prefix: list[str] = []
    for ch in pattern[1:]:
        if ch.isascii() and (ch.isalnum() or ch in "_-") and ch.lower() not in _FOLDED_ELSEWHERE:
            prefix.append(ch.lower())
            continue
        if ch in _QUANTIFIERS and prefix:
            prefix.pop()
        break
    return "".join(prefix)


def candidate_words(conn: Connection, pattern: str | None, paths: Sequence[str] = ()) -> tuple[list[str], int | None]:
    """(the vocabulary words a pattern and path filter may select, sorted; the vocabulary's size, None when only a
    prefix range was read). Single characters only when CJK, as everywhere in `words`."""
    prefix = literal_prefix(pattern)
    if prefix:
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        rows = conn.execute("SELECT term FROM chunks_vocab WHERE term >= ? AND term < ? ORDER BY term",
                            (prefix, upper)).fetchall()
    else:
        rows = conn.execute("SELECT term FROM chunks_vocab ORDER BY term").fetchall()
    words = [str(t) for (t,) in rows if len(t) >= 2 or is_cjk(t)]
    size = None if prefix else len(words)
    if paths:
        held = path_words(conn, Filter.of(list(paths)))
        if held is not None:
            words = [w for w in words if w in held]
    return words, size


def path_words(conn: Connection, filters: Filter) -> set[str] | None:
    """The words of the exact index the filter's documents hold; None when it allows every document."""
    allowed = filters.allowed(conn)
    if allowed is None:
        return None
    scratch = db.memory_connection()
    try:
        for statement in schema.SCOPE_DDL:
            scratch.execute(statement)
        rows = conn.execute(
            f"SELECT id, body, heading_path FROM {schema.EXACT_VIEW} WHERE id IN"
            " (SELECT id FROM chunks WHERE document_id IN (SELECT value FROM json_each(?)))", (allowed.documents,))
        scratch.execute("BEGIN")
        while batch := rows.fetchmany(500):
            scratch.executemany("INSERT INTO scope(rowid, body, heading_path) VALUES (?, ?, ?)", batch)
        scratch.execute("COMMIT")
        return {str(t) for (t,) in scratch.execute("SELECT term FROM scope_vocab")}
    finally:
        scratch.close()
