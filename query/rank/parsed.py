"""The query text read once: its lexical terms, exclusions, CJK runs and the phrases it asks for verbatim."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from query.terms import LexicalQuery, build_query, verbatim_phrases


@dataclass(frozen=True)
class ParsedQuery:
    """What every step of a search reads from the query text; `text` itself is what the vector tier embeds."""

    text: str
    lexical: LexicalQuery  # the terms kept, dropped and excluded, the CJK runs, and their FTS5 expression

    @cached_property
    def phrases(self) -> tuple[str, ...]:
        """The identifiers and quoted phrases asked for verbatim (query/verbatim.py); read when first asked for,
        as only a hybrid ranking protects them."""
        return verbatim_phrases(self.text)

    @property
    def terms(self) -> tuple[str, ...]:
        """The searchable terms (at most query.terms.MAX_TERMS)."""
        return self.lexical.terms

    @property
    def dropped(self) -> tuple[str, ...]:
        """The terms under two characters, left out and reported."""
        return self.lexical.dropped

    @property
    def excluded(self) -> tuple[str, ...]:
        """The words of `-word`s: sections holding one are left out."""
        return self.lexical.excluded

    @property
    def cjk(self) -> tuple[str, ...]:
        """The CJK runs, looked up in the trigram table too."""
        return self.lexical.cjk


@dataclass(frozen=True)
class QueryLanguage:
    """The language a query is answered in, and how it was chosen ("asked", "detected" or "default");
    chosen by query/rank/language.query_language."""

    lang: str
    how: str
    default: str


def parse_query(text: str) -> ParsedQuery:
    """The one reading of a query's text that search, explain and the search page share."""
    return ParsedQuery(text, build_query(text))
