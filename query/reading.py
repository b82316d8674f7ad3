"""Reading around a hit: the cited section with its neighbours, or grown to its whole section.

around() answers a `<path>#<ordinal>` citation with that section plus up to `before` sections
before and `after` sections after it in the same document, in ordinal order, each in the hit shape
of search (score null). With expand, the cited hit first grows to its whole section: the
consecutive chunks of the document that share its heading path, walked out one chunk at a time,
its citation unchanged and a `span` (`path#low..#high`) saying what it covers.

The text budget of the agent tools applies (query/budget.py): the cited section is always kept;
the expansion, then the neighbours, are added nearest first, alternating before and after, until
the next would exceed the budget, and a trimmed answer says so. Statuses: ok, index_not_built,
not_found (no such section), query_error (not a citation, or a negative count).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from query import budget
from query.reader import Hit, Reader, ambiguous_note, is_short_ref, parse_ref
from query.requests import MAX_AROUND, ReadRequest
from query.search import hit_json
from query.status import Status

if TYPE_CHECKING:
    from query.citations import CitationMapper

JOINER = "\n\n"


@dataclass(frozen=True)
class Window:
    """The chunks of one document, the cited span [low, high] within it (list positions)."""

    chunks: list[Hit]
    low: int
    high: int

    def text_size(self) -> int:
        """The injected text of the span as one hit."""
        return budget.hit_size(self.span_json())

    def span_json(self) -> dict[str, Any]:
        """The span as one hit's text fields (for measuring)."""
        run = self.chunks[self.low:self.high + 1]
        return {"section": self.chunks[self.low].section, "content": JOINER.join(c.content for c in run)}


def _alternate(before: list[int], after: list[int]) -> Iterator[int]:
    """Positions nearest first, before then after, until both sides run out."""
    for i in range(max(len(before), len(after))):
        if i < len(before):
            yield before[i]
        if i < len(after):
            yield after[i]


def _expand(chunks: list[Hit], at: int, room: int) -> tuple[int, int, bool]:
    """(low, high, stopped): the run of chunks sharing chunks[at]'s heading path, walked out one chunk at a
    time within room characters; stopped when the budget ended the walk before the section did."""
    heading = chunks[at].section
    low = high = at
    used = budget.hit_size({"section": heading, "content": chunks[at].content})
    while True:
        grew = False
        for side in (-1, 1):
            nxt = low - 1 if side < 0 else high + 1
            if not 0 <= nxt < len(chunks) or chunks[nxt].section != heading:
                continue
            cost = len(JOINER) + len(chunks[nxt].content)
            if used + cost > room:
                return low, high, True
            used += cost
            low, high = (nxt, high) if side < 0 else (low, nxt)
            grew = True
        if not grew:
            return low, high, False


@dataclass(frozen=True)
class ReadAnswer:
    """The cited section and its neighbours (hits in the search shape, document order), or why not."""

    status: Status
    note: str | None
    citation: str
    results: list[dict[str, Any]] = field(default_factory=list)
    index_ref: str = ""
    before: int = 0
    after: int = 0
    expanded: bool = False
    span: str | None = None
    trimmed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The `show --json` (with --before/--after/--section), knowledge_read and `/v1/read` shape."""
        head: dict[str, Any] = {"status": self.status, "note": self.note, "citation": self.citation}
        if self.status != Status.OK:
            return {**head, "results": self.results}
        return {**head, "index_ref": self.index_ref, "before": self.before, "after": self.after,
                "expanded": self.expanded, **({"span": self.span} if self.expanded else {}),
                "returned": len(self.results), "trimmed": self.trimmed, "results": self.results}


def refusal(request: ReadRequest) -> ReadAnswer | None:
    """The query_error answer of a request that names no citation (nor a hit's short ref) or a negative count,
    else None."""
    citation = request.citation.strip()
    if parse_ref(citation) is None and not is_short_ref(citation):
        return ReadAnswer(Status.QUERY_ERROR, f"{citation!r} is not a citation token `<path>#<ordinal>` "
                          "(the `index_ref` of a search result) nor its 6-character `ref`", citation)
    if request.before < 0 or request.after < 0:
        return ReadAnswer(Status.QUERY_ERROR, "before and after count sections and cannot be negative", citation)
    return None


def around(settings: Settings, reader: Reader, request: ReadRequest, mapper: CitationMapper | None) -> ReadAnswer:
    """The answer to a read request on an open Reader."""
    refused = refusal(request)
    if refused is not None:
        return refused
    citation = request.citation.strip()
    ref = parse_ref(citation)
    if ref is None:  # refusal() let it through: a hit's short ref
        named = reader.short_refs(citation)
        if len(named) > 1:
            return ReadAnswer(Status.QUERY_ERROR, ambiguous_note(citation, named), citation)
        ref = parse_ref(named[0]) if named else None
        if ref is None:
            return ReadAnswer(Status.NOT_FOUND, f"no section has the short ref {citation}; search results carry "
                              "the refs and citations to read", citation)
    notes: list[str] = []
    for name, value in (("before", request.before), ("after", request.after)):
        if value > MAX_AROUND:
            notes.append(f"{name}={value} capped at {MAX_AROUND} sections")
    before, after = min(request.before, MAX_AROUND), min(request.after, MAX_AROUND)
    chunks = reader.document(ref[0])
    at = next((i for i, c in enumerate(chunks) if c.ordinal == ref[1]), None)
    if at is None:
        return ReadAnswer(Status.NOT_FOUND, f"no section {citation} in the index; `knowledge sources` lists the "
                          "documents and search results carry citations to read", citation)
    return _fit(settings, Window(chunks, at, at), before, after, request.expand, notes, citation, mapper)


def _fit(settings: Settings, window: Window, before: int, after: int, expand: bool, notes: list[str],
         citation: str, mapper: CitationMapper | None) -> ReadAnswer:
    """The answer: the (expanded) cited hit, then neighbours added within the budget."""
    room = budget.search_budget(settings)
    chunks, at = window.chunks, window.low
    cut = False
    if expand:
        low, high, cut = _expand(chunks, at, room)
        window = Window(chunks, low, high)
    used = window.text_size()
    wanted = _alternate(list(range(window.low - 1, max(-1, window.low - 1 - before), -1)),
                        list(range(window.high + 1, min(len(chunks), window.high + 1 + after))))
    kept: list[int] = []
    for position in wanted:
        cost = budget.hit_size({"section": chunks[position].section, "content": chunks[position].content})
        if cut or used + cost > room:
            cut = True
            continue
        kept.append(position)
        used += cost
    cited = replace(chunks[at], content=window.span_json()["content"])
    span = f"{cited.path}#{chunks[window.low].ordinal}..#{chunks[window.high].ordinal}"
    results: list[dict[str, Any]] = []
    for position in sorted([*kept, at]):
        hit = hit_json(cited if position == at else chunks[position], mapper)
        if position == at and expand:
            hit["span"] = span
        results.append(hit)
    if cut:
        notes.append(f"trimmed to the text budget: returning {len(results)} section(s), the cited one "
                     f"{'grown to ' + span if expand else 'whole'} ({room} characters, from "
                     f"max_injected_tokens={settings.max_injected_tokens})")
    return ReadAnswer(Status.OK, "; ".join(notes) or None, citation, results, cited.index_ref,
                      sum(1 for p in kept if p < at), sum(1 for p in kept if p > at), expand,
                      span if expand else None, cut)
