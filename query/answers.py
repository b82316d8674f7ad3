"""The read side's answers, one type per operation, each with the JSON shape(s) every surface prints.

search and match answers wrap what the core found (query.search.SearchResponse, query.enumerate's
EnumerateResult) with the request's filters and the citation rules; `to_json()` is the shape of
`search --json`/`match --json` (and the page), `budgeted()` the agent tool's shape within the text
budget. The read, sources, stats and words answers live beside the code that computes them
(query/reading.py, query/listing.py, query/words.py) and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from query import budget
from query.enumerate import EnumerateResult, document_json, ok_note
from query.enumerate import to_json as match_json
from query.filters import Filter
from query.listing import SourcesAnswer, StatsAnswer
from query.reader import Hit
from query.reading import ReadAnswer
from query.search import SearchResponse, hit_json
from query.search import to_json as search_json
from query.status import Status
from query.words import WordsResult

if TYPE_CHECKING:
    from query.citations import CitationMapper

__all__ = ["MatchAnswer", "ReadAnswer", "SearchAnswer", "ShowAnswer", "SourcesAnswer", "StatsAnswer",
           "WordsAnswer"]

WordsAnswer = WordsResult

OK_SEARCH_NOTE = (
    "ranked by relevance, best first; a ranking can miss a document, so check with knowledge_enumerate "
    "before saying the documents do not mention something"
)


@dataclass(frozen=True)
class SearchAnswer:
    """A ranked search: what the core found, for which query and filters, cited by the rules."""

    query: str
    filters: Filter
    response: SearchResponse
    mapper: CitationMapper | None = None

    @property
    def status(self) -> Status:
        """The answer's status."""
        return Status(self.response.status)

    @property
    def hits(self) -> list[Hit]:
        """The ranked hits, best first."""
        return self.response.hits

    def results(self) -> list[dict[str, Any]]:
        """The hits as every surface prints them (query.search.hit_json)."""
        return [hit_json(h, self.mapper) for h in self.response.hits]

    def to_json(self) -> dict[str, Any]:
        """The `search --json` shape (the page renders it too)."""
        return search_json(self.response, self.mapper)

    def budgeted(self, settings: Settings) -> dict[str, Any]:
        """The knowledge_search (and /v1/search) shape: the hits that fit the text budget, saying so."""
        response = self.response
        hits = self.results()
        fitted = budget.fit(hits, budget.hit_size, budget.search_budget(settings))
        notes: list[str] = []
        if response.status == Status.OK:
            notes.append(OK_SEARCH_NOTE if hits else "no section matched the query's terms")
        if response.note:
            notes.append(response.note)
        if fitted.trimmed:
            notes.append(budget.trimmed_note("results", fitted, settings.max_injected_tokens))
        return {
            "status": response.status,
            "note": "; ".join(notes),
            "tier": response.tier,
            "query": self.query,
            **({"filters": self.filters.to_json()} if self.filters.active else {}),
            "dropped_terms": list(response.dropped),
            **({"rerank": response.rerank.to_json()} if response.rerank is not None else {}),
            "returned": len(fitted.items),
            "trimmed": fitted.trimmed,
            "results": fitted.items,
        }


@dataclass(frozen=True)
class MatchAnswer:
    """A complete match: every document holding the words (up to the limit), with the filters applied."""

    filters: Filter
    result: EnumerateResult
    mapper: CitationMapper | None = None

    @property
    def status(self) -> Status:
        """The answer's status."""
        return Status(self.result.status)

    def to_json(self) -> dict[str, Any]:
        """The `match --json` and `/v1/match` shape (the page renders it too)."""
        return match_json(self.result, self.mapper)

    def budgeted(self, settings: Settings) -> dict[str, Any]:
        """The knowledge_enumerate shape: the documents that fit a quarter of the text budget, saying so."""
        result = self.result
        entries = [document_json(d, self.mapper) for d in result.documents]
        fitted = budget.fit(entries, budget.entry_size, budget.enumerate_budget(settings), offered=result.matched)
        ok = result.status == Status.OK
        note = ok_note(result, shown=result.matched) if ok else result.note
        if ok and self.filters.active:
            note += "; " + self.filters.describe()
        if fitted.trimmed:
            note += "; " + budget.trimmed_note("documents", fitted, settings.max_injected_tokens)
            note += "; narrow the query (more words, heading:, -exclusions) to see the rest"
        return {
            "status": result.status,
            "note": note,
            "query": result.query,
            **({"filters": self.filters.to_json()} if self.filters.active else {}),
            "matched": result.matched,
            "indexed_documents": result.indexed_documents,
            "returned": len(fitted.items),
            "trimmed": fitted.trimmed,
            "dropped_terms": list(result.dropped),
            "terms": [r.to_json() for r in result.terms],
            "documents": fitted.items,
        }


@dataclass(frozen=True)
class ShowAnswer:
    """The section a citation names (with its neighbours' tokens when asked), or every section of a document."""

    status: Status
    note: str | None
    ref: str
    hits: list[Hit] = field(default_factory=list)
    cited: bool = False  # one section a citation named, not a whole document
    previous: str | None = None
    following: str | None = None
    mapper: CitationMapper | None = None

    def results(self) -> list[dict[str, Any]]:
        """The sections as every surface prints them (query.search.hit_json)."""
        return [hit_json(h, self.mapper) for h in self.hits]

    def to_json(self) -> dict[str, Any]:
        """The `show --json` shape."""
        return {"status": self.status, "note": self.note, "results": self.results()}
