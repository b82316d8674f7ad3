"""The match query language: bare words, quoted phrases, a leading minus, heading:/body: scoping.

The language is small and closed. OR, AND, NOT and NEAR are rejected by name, because FTS5 would
silently answer a different question (unguarded, `foo OR bar` compiled to foo AND or AND bar), and
`*` because a prefix query against a stemmed index can return fewer documents as the prefix grows.
Terms under two characters are dropped and reported; CJK runs become terms of their own, matched
as substrings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from config.errors import QueryError
from pipeline.text import cjk_run, cjk_runs
from query.terms import MAX_TERMS, quote

FIELDS = {"heading": "heading_path", "body": "body"}
_OPERATORS = {
    "OR": "OR is not supported: match lists the documents holding every term; run one match per alternative",
    "AND": "AND is not needed: every term is already required; write the words side by side, as `api policy`",
    "NOT": "NOT is not supported: write a leading minus to exclude a word, as `api -deprecated`",
    "NEAR": (
        'NEAR is not supported: write a quoted phrase for adjacent words, as `"retention policy"`, '
        "or the words side by side to require both anywhere in a document"
    ),
}
_FIELD = re.compile(r"([^\W\d][\w-]*):")
_UNENCODABLE = re.compile("[\ud800-\udfff]")
WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Term:
    """One term of a match query: its text, whether quoted, its field, and whether it excludes."""

    text: str
    phrase: bool = False
    field: str | None = None
    negated: bool = False
    cjk: bool = False

    @property
    def label(self) -> str:
        """The term as it would be written in a query."""
        body = quote(self.text) if self.phrase else self.text
        scope = f"{self.field}:" if self.field else ""
        return f"{'-' if self.negated else ''}{scope}{body}"


@dataclass(frozen=True)
class ParsedQuery:
    """The terms of a query and the ones dropped for being under two characters."""

    terms: tuple[Term, ...]
    dropped: tuple[str, ...] = ()


def scrub(text: str) -> str:
    """text with what SQLite cannot take replaced: lone surrogates by U+FFFD, NUL by a space."""
    return _UNENCODABLE.sub("\ufffd", text).replace("\x00", " ")


def _scope(text: str, i: int) -> tuple[str | None, int]:
    """The field a term at i is scoped to (`heading:`, `body:`; None without one) and where its text starts."""
    found = _FIELD.match(text, i)
    if not found:
        return None, i
    name = found.group(1)
    i = found.end()
    if name.lower() not in FIELDS:
        raise QueryError(
            f"unknown field `{name}:`; the fields are heading: and body: "
            f"(to match the word itself, write {name} without the colon)"
        )
    if i >= len(text) or text[i].isspace():
        raise QueryError(f"`{name}:` needs a term right after it, as {name}:word or {name}:\"a phrase\"")
    return name.lower(), i


def parse(text: str) -> ParsedQuery:
    """Parse the match language; raise QueryError naming what to write instead."""
    text = scrub(text)
    raw: list[Term] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        negated = text[i] == "-"
        if negated:
            i += 1
            if i >= n or text[i].isspace():
                raise QueryError("a bare `-` excludes nothing: write it directly before a word, as `api -deprecated`")
        scope, i = _scope(text, i)
        if text[i] == '"':
            body, i = _phrase(text, i)
            phrase = True
        else:
            end = i
            while end < n and not text[end].isspace() and text[end] != '"':
                end += 1
            body, phrase, i = text[i:end], False, end
            _reject_operator(body)
        if "*" in body:
            raise QueryError(
                "`*` is not supported: a prefix search against a stemmed index can return fewer documents "
                "as the prefix grows; list the words with `knowledge words '^prefix'` and match them"
            )
        raw.append(Term(body, phrase, scope, negated))
    if len(raw) > MAX_TERMS:
        raise QueryError(f"a match query takes at most {MAX_TERMS} terms ({len(raw)} given): match the rarest words, "
                         "or run one match per group of words")
    if raw and all(t.negated for t in raw):
        raise QueryError(
            "a query of only exclusions has nothing to subtract from: add a word to match, as `api -deprecated`"
        )
    return _split_and_drop(raw)


def _phrase(text: str, start: int) -> tuple[str, int]:
    """(body, index after the closing quote) of the phrase opening at start; `""` inside is one quote."""
    body: list[str] = []
    i = start + 1
    while True:
        close = text.find('"', i)
        if close < 0:
            raise QueryError('unbalanced quote: close the phrase with a second `"`, as "retention policy"')
        body.append(text[i:close])
        if text.startswith('""', close):
            body.append('"')
            i = close + 2
            continue
        return "".join(body), close + 1


def _reject_operator(word: str) -> None:
    if word in _OPERATORS:
        raise QueryError(_OPERATORS[word])
    if word.startswith("NEAR") and (len(word) == 4 or not word[4].isalnum()):
        raise QueryError(_OPERATORS["NEAR"])


def _split_and_drop(raw: list[Term]) -> ParsedQuery:
    terms: list[Term] = []
    dropped: list[str] = []
    for term in raw:
        runs = cjk_runs(term.text)
        rest = cjk_run().sub(" ", term.text).strip() if runs else term.text
        for run in runs:
            terms.append(Term(run, False, term.field, term.negated, cjk=True))
        if runs and not WORD.search(rest):
            continue
        letters = "".join(WORD.findall(rest))
        if len(letters) < 2:
            dropped.append(term.label)
            continue
        terms.append(Term(rest, term.phrase, term.field, term.negated))
    unique = tuple(dict.fromkeys(terms))
    return ParsedQuery(unique, tuple(dict.fromkeys(dropped)))
