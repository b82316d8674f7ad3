"""QueryService: the read side's one door. Typed requests in (query/requests.py), typed answers out.

Every surface asks it: the CLI read commands, the MCP tools, the /v1 API and the search page
render the answers it gives (query/answers.py), never a shape of their own. It lends each request
a Reader from its ReadIndex (query/read_index.py: kept across requests in `knowledge serve`),
answers a store that was never built with Status.INDEX_NOT_BUILT and its note, applies the
request's filters, and builds the citation rules once. A damaged store raises StoreDamaged and a
query the syntax refuses raises QueryError, as the cores do; the tool layer (query/tools.py)
turns them into error answers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from config.errors import IndexNotBuilt, KnowledgeError
from config.settings import Settings
from query import budget
from query.answers import MatchAnswer, SearchAnswer, ShowAnswer, SourcesAnswer, StatsAnswer, WordsAnswer
from query.enumerate import EnumerateResult, checked_limit, enumerate_documents
from query.listing import SourcesListing, stats_answer
from query.match_query import scrub
from query.read_index import ReadIndex
from query.reader import Reader, ambiguous_note, not_built_note, parse_ref
from query.reading import ReadAnswer, around, refusal
from query.requests import (
    EnumerateRequest,
    MatchRequest,
    ReadRequest,
    SearchRequest,
    ShowRequest,
    SourcesRequest,
    WordsRequest,
)
from query.search import not_built, search
from query.status import Status
from query.words import Narrowing, list_words

if TYPE_CHECKING:
    from query.citations import CitationMapper

T = TypeVar("T", covariant=True)


class Evaluation(Protocol[T]):
    """An evaluation run on the Reader the service lends (query/evaluation.py)."""

    def on(self, settings: Settings, reader: Reader) -> T: ...


KEEP_READERS = 8  # idle Readers a server keeps between requests (one per concurrent request in use)


class QueryService:
    """The read side for one store: search, enumerate, read, show, sources, stats and words."""

    def __init__(self, settings: Settings, index: ReadIndex | None = None) -> None:
        self.settings = settings
        self.index = index or ReadIndex(settings)

    @classmethod
    def shared(cls, settings: Settings) -> QueryService:
        """A service for a server: its Readers and their caches are kept across requests."""
        return cls(settings, ReadIndex(settings, keep=KEEP_READERS))

    def warm(self) -> threading.Thread:
        """Open a Reader and fill the lexical caches in the background (a server's start): see ReadIndex.warm.

        First the document frequencies search shapes its queries with (that Reader is kept for the first
        request), then, on a Reader of its own, match's documents of the corpus's most common words
        (query/match_sets.py), kept for the store's generation.
        """
        from query.enumerate import warm as warm_match
        from query.lexical.frequency import prime

        return self.index.warm(lambda reader: prime(reader.conn, reader.lexical), warm_match)

    def close(self) -> None:
        """Close the Readers kept between requests."""
        self.index.close()

    @cached_property
    def mapper(self) -> CitationMapper | None:
        """The citation rules (compiled once); None without rules. Raises ConfigError for an invalid rule."""
        if not self.settings.citations:
            return None
        from query.citations import CitationMapper  # the rules (and the chunker) load only when configured

        return CitationMapper.from_settings(self.settings)

    def search(self, request: SearchRequest) -> SearchAnswer:
        """The top-k sections for the query within the request's filters."""
        query = scrub(request.query)
        filters = request.filters
        with self.index.reader() as reader:
            if reader is None:  # the index lends none: never let search open settings.db_path behind a replica
                return SearchAnswer(query, filters, not_built(self.settings, query), self.mapper)
            response = search(self.settings, query, request.top_k, reader, filters=filters, explain=request.explain,
                              lang=request.lang)
        return SearchAnswer(query, filters, response, self.mapper)

    def enumerate(self, request: MatchRequest | EnumerateRequest) -> MatchAnswer:
        """Every document holding the words; an EnumerateRequest lists as many as a quarter budget can hold."""
        filters = request.filters
        if isinstance(request, MatchRequest):
            wanted = None if request.all else checked_limit(request.limit)
            limit, sort, least = 0 if request.count else wanted, request.sort, request.min_matches
        else:
            limit, sort, least = budget.most_entries(budget.enumerate_budget(self.settings)), "matches", 1
        query = scrub(request.query)
        with self.index.reader() as reader:
            if reader is None:
                result = EnumerateResult(Status.INDEX_NOT_BUILT, not_built_note(self.settings), query)
                return MatchAnswer(filters, result, self.mapper)
            result = enumerate_documents(self.settings, query, limit, sort, reader=reader, min_matches=least,
                                         filters=filters)
        return MatchAnswer(filters, result, self.mapper)

    def read(self, request: ReadRequest) -> ReadAnswer:
        """The cited section with its neighbours (or grown to its section) within the text budget."""
        refused = refusal(request)
        if refused is not None:
            return refused
        with self.index.reader() as reader:
            if reader is None:
                return ReadAnswer(Status.INDEX_NOT_BUILT, not_built_note(self.settings), request.citation.strip())
            return around(self.settings, reader, request, self.mapper)

    def show(self, request: ShowRequest) -> ShowAnswer:
        """The section a citation token names, else every section of the document stored at that path, else the
        section whose 6-character ref (Hit.short_ref) it is; a ref several sections share is refused, naming them."""
        ref = parse_ref(request.ref)
        with self.index.reader() as reader:
            if reader is None:
                return ShowAnswer(Status.INDEX_NOT_BUILT, not_built_note(self.settings), request.ref)
            hit = reader.chunk(*ref) if ref else None
            if hit is None:
                hits = reader.document(request.ref)
                if hits:
                    return ShowAnswer(Status.OK, None, request.ref, hits, mapper=self.mapper)
                named = reader.short_refs(request.ref) if ref is None else []
                if len(named) > 1:
                    return ShowAnswer(Status.QUERY_ERROR, ambiguous_note(request.ref, named), request.ref,
                                      mapper=self.mapper)
                found = parse_ref(named[0]) if named else None
                hit = reader.chunk(*found) if found else None
            if hit is None:
                note = f"no section or document {request.ref} in the index; `knowledge sources` lists the documents"
                return ShowAnswer(Status.NOT_FOUND, note, request.ref, mapper=self.mapper)
            previous = following = None
            if request.neighbours:
                before = reader.chunk(hit.path, hit.ordinal - 1) if hit.ordinal > 0 else None
                after = reader.chunk(hit.path, hit.ordinal + 1)
                previous, following = (before.index_ref if before else None), (after.index_ref if after else None)
            return ShowAnswer(Status.OK, None, request.ref, [hit], True, previous, following, self.mapper)

    def sources(self, request: SourcesRequest | None = None) -> SourcesAnswer:
        """A page of the indexed documents by path (every one without a limit), with their mapped citations."""
        with self.sources_listing(request or SourcesRequest()) as listing:
            if listing is None:
                return SourcesAnswer(Status.INDEX_NOT_BUILT, not_built_note(self.settings), str(self.settings.db_path))
            return listing.answer()

    @contextmanager
    def sources_listing(self, request: SourcesRequest) -> Iterator[SourcesListing | None]:
        """The page of sources to read row by row while the block runs (None when the index was never built)."""
        with self.index.reader() as reader:
            yield None if reader is None else SourcesListing(self.settings, reader, self.mapper, request)

    def stats(self) -> StatsAnswer:
        """Counts and facts about the index, and the tier line."""
        with self.index.reader() as reader:
            if reader is None:
                return StatsAnswer(Status.INDEX_NOT_BUILT, not_built_note(self.settings))
            return stats_answer(self.settings, reader)

    def evaluate(self, run: Evaluation[T]) -> T:
        """An evaluation (query/evaluation.py: CasesRun, QrelsRun) on one Reader; IndexNotBuilt without a store,
        KnowledgeError when it holds no documents."""
        with self.index.reader() as reader:
            if reader is None:
                raise IndexNotBuilt.at(self.settings.db_path)
            if reader.document_count() == 0:
                raise KnowledgeError("the index holds no documents; check knowledge.paths and run `knowledge index`")
            return run.on(self.settings, reader)

    def words(self, request: WordsRequest) -> WordsAnswer:
        """The vocabulary words matching the pattern, narrowed and counted as asked."""
        narrowing = Narrowing(request.min_docs, request.max_docs, request.in_field, request.sort, request.limit,
                              request.offset, tuple(request.path or ()))
        with self.index.reader() as reader:
            if reader is None:
                return WordsAnswer(Status.INDEX_NOT_BUILT, not_built_note(self.settings), request.pattern)
            return list_words(self.settings, request.pattern, request.counts, reader=reader, narrowing=narrowing)


def read_around(settings: Settings, citation: str, before: int = 0, after: int = 0,
                expand: bool = False) -> dict[str, Any]:
    """The cited section and its neighbours within the text budget, as JSON with a status (one-shot); never
    raises for the caller's input (a damaged store still raises StoreDamaged)."""
    return QueryService(settings).read(ReadRequest(citation, before, after, expand)).to_json()
