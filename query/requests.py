"""The read side's requests, each declared once as a frozen dataclass whose fields carry their help and bounds.

A field whose metadata is doc() says what it means (help), the query-string name it goes by on /v1
(alias, else its own name), its bounds (minimum, maximum: shown in the MCP schema; the core
refuses below and caps above, saying so) and, for a required field, the example a refusal shows.
The agent tools' MCP schemas (query/serve/mcp_server.py), their /v1 query strings (from_query) and
the CLI flags that mirror them derive from these fields.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from config.errors import QueryError
from config.settings import MAX_TOP_K
from query.enumerate import DEFAULT_LIMIT
from query.filters import Filter

PATH_HELP = ("Only documents whose indexed path is under one of these prefixes (docs/api) or matches one of "
             "these globs (docs/api/**, *.md; ** spans directories).")
ROOT_HELP = "Only documents under one of these indexed roots."
WHERE_HELP = ("Front-matter field equality, all must hold: key=value strings or a {key: value} object "
              "(tags=security; a list field matches when it contains the value).")
EXPLAIN_HELP = ("Attach to each result an `explain` object: lexical rank and BM25 score, vector rank and "
                "distance, each tier's share of the fused RRF score, and `demoted` (moved below other "
                "documents because two sections of its own rank above it).")
LANG_HELP = ("The language to answer in, as a code (en, de, ja, zh-hant): only documents in it. Without it a "
             "search answers in the query's language (told from its words, else the tree's default) and shows "
             "each translated page once, listing its translations; `any` turns that off.")
MATCH_LANG_HELP = "Only documents in this language (a code: en, de, ja, zh-hant; `any` is every language)."
MAX_AROUND = 20  # sections read on each side at most (more is capped, with a note)
LISTING_PATH_HELP = ("Only entries under this path prefix (docs/api; `%` and `_` are plain characters) or matching "
                     "this glob (docs/api/**, *.md); repeat for any of several.")

Where = list[str] | dict[str, str] | None


def doc(text: str, *, alias: str | None = None, minimum: int | None = None, maximum: int | None = None,
        example: str = "...") -> dict[str, Any]:
    """A request field's metadata: its help text, /v1 name, bounds and the example a refusal shows."""
    return {"help": text, "alias": alias, "minimum": minimum, "maximum": maximum, "example": example}


@dataclass(frozen=True)
class Param:
    """One declared request field as the surfaces read it."""

    name: str
    annotation: Any
    help: str
    required: bool
    default: Any
    alias: str
    minimum: int | None
    maximum: int | None
    example: str


class Request(Protocol):
    """A request dataclass (only dataclasses made of param() fields qualify)."""

    __dataclass_fields__: typing.ClassVar[dict[str, Any]]


R = TypeVar("R", bound=Request)


_PARAMS: dict[type, tuple[Param, ...]] = {}


def params(cls: type) -> tuple[Param, ...]:
    """The declared fields of a request type, in order, with their resolved types."""
    found = _PARAMS.get(cls)
    if found is None:
        found = _PARAMS[cls] = _declared(cls)
    return found


def _declared(cls: type) -> tuple[Param, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(Param(f.name, hints[f.name], str(meta.get("help", "")), required,
                         None if required else f.default, meta.get("alias") or f.name, meta.get("minimum"),
                         meta.get("maximum"), str(meta.get("example", "..."))))
    return tuple(out)


class QueryParams(Protocol):
    """A query string as starlette hands it over: first value by name, and every value."""

    def get(self, key: str, /) -> str | None: ...

    def getlist(self, key: str) -> list[str]: ...


def _kind(annotation: Any) -> str:
    """How a field is read from a query string: text, number, flag or list."""
    args = set(typing.get_args(annotation)) or {annotation}
    if bool in args:
        return "flag"
    if int in args:
        return "number"
    if any(typing.get_origin(a) is list for a in args):
        return "list"
    return "text"


def from_query(cls: type[R], query: QueryParams) -> R:
    """A request from a /v1 query string; QueryError naming the parameter for a missing or malformed one, or a
    number below its declared minimum."""
    values: dict[str, Any] = {}
    for spec in params(cls):
        kind = _kind(spec.annotation)
        if kind == "list":
            values[spec.name] = query.getlist(spec.alias)
            continue
        raw = query.get(spec.alias)
        if raw is None:
            if spec.required:
                raise QueryError(f"pass the {spec.name} as ?{spec.alias}={spec.example}")
            continue
        if kind == "flag":
            values[spec.name] = str(raw).lower() in ("1", "true", "yes")
        elif kind == "number":
            if raw == "":
                continue
            try:
                number = int(raw)
            except ValueError as exc:
                raise QueryError(f"{spec.alias} must be a whole number, got {raw!r}") from exc
            if spec.minimum is not None and number < spec.minimum:
                raise QueryError(f"{spec.alias} must be at least {spec.minimum}, got {number}")
            values[spec.name] = number
        else:
            values[spec.name] = str(raw)
    return cls(**values)


def tool_filter(path: Sequence[str] | str | None = None, root: Sequence[str] | str | None = None,
                where: Where | Sequence[str] | str = None, lang: str | None = None) -> Filter:
    """The filter of a tool call or API request; `where` as `key=value` strings or a {key: value} object; `lang`
    a language code (None, '' or `any`: every language)."""
    if isinstance(where, Mapping):
        where = [f"{key}={value}" for key, value in where.items()]
    return Filter.of(path, root, where, None if lang is None or lang.strip().lower() in ("", "any") else lang)


@dataclass(frozen=True)
class SearchRequest:
    """knowledge_search, `knowledge search`, /v1/search and the page's search mode."""

    query: str = field(metadata=doc("The question or words to search for.", alias="q"))
    top_k: int | None = field(default=None, metadata=doc(
        f"Results to return (default: the configured count; at most {MAX_TOP_K}).", minimum=0, maximum=MAX_TOP_K))
    path: list[str] | None = field(default=None, metadata=doc(PATH_HELP))
    root: list[str] | None = field(default=None, metadata=doc(ROOT_HELP))
    where: Where = field(default=None, metadata=doc(WHERE_HELP))
    explain: bool = field(default=False, metadata=doc(EXPLAIN_HELP))
    lang: str | None = field(default=None, metadata=doc(LANG_HELP))

    @property
    def filters(self) -> Filter:
        """The request's filters."""
        return tool_filter(self.path, self.root, self.where, self.lang)


@dataclass(frozen=True)
class EnumerateRequest:
    """knowledge_enumerate: every document holding the words, within the text budget."""

    query: str = field(metadata=doc(
        "Words every listed document must contain (see the description for the syntax).", alias="q"))
    path: list[str] | None = field(default=None, metadata=doc(PATH_HELP))
    root: list[str] | None = field(default=None, metadata=doc(ROOT_HELP))
    where: Where = field(default=None, metadata=doc(WHERE_HELP))
    lang: str | None = field(default=None, metadata=doc(MATCH_LANG_HELP))

    @property
    def filters(self) -> Filter:
        """The request's filters."""
        return tool_filter(self.path, self.root, self.where, self.lang)


@dataclass(frozen=True)
class MatchRequest:
    """`knowledge match`, /v1/match and the page's match mode: the documents holding the words, unbudgeted."""

    query: str = field(metadata=doc("Words every listed document must contain.", alias="q"))
    limit: int | None = field(default=DEFAULT_LIMIT, metadata=doc(
        f"Documents to list (default {DEFAULT_LIMIT}).", minimum=1))
    sort: str = field(default="matches", metadata=doc("Order of the list: matches (most first) or path."))
    all: bool = field(default=False, metadata=doc("List every matching document (limit is ignored)."))
    min_matches: int = field(default=1, metadata=doc("Only documents with at least N matching sections.", minimum=1))
    path: list[str] | None = field(default=None, metadata=doc(PATH_HELP))
    root: list[str] | None = field(default=None, metadata=doc(ROOT_HELP))
    where: Where = field(default=None, metadata=doc(WHERE_HELP))
    count: bool = field(default=False, metadata=doc("Only count the matching documents (list none)."))
    lang: str | None = field(default=None, metadata=doc(MATCH_LANG_HELP))

    @property
    def filters(self) -> Filter:
        """The request's filters."""
        return tool_filter(self.path, self.root, self.where, self.lang)


@dataclass(frozen=True)
class ReadRequest:
    """knowledge_read, `knowledge show --before/--after/--section` and /v1/read."""

    citation: str = field(metadata=doc(
        "The `index_ref` of a result to read around (`<path>#<ordinal>`), or its 6-character `ref`.",
        example="<path>#<ordinal>"))
    before: int = field(default=0, metadata=doc(
        f"Sections to add before the cited one, nearest first (0 to {MAX_AROUND}).", minimum=0, maximum=MAX_AROUND))
    after: int = field(default=0, metadata=doc(
        f"Sections to add after the cited one, nearest first (0 to {MAX_AROUND}).", minimum=0, maximum=MAX_AROUND))
    expand: bool = field(default=False, metadata=doc(
        "Grow the cited result to its whole section: every consecutive chunk under the same heading, within "
        "the text budget; `span` names the chunks it covers."))


@dataclass(frozen=True)
class ShowRequest:
    """`knowledge show` and the page's /show/: a cited section, or every section of a document path."""

    ref: str = field(metadata=doc("A citation token `<path>#<ordinal>`, a document path or a hit's 6-character ref."))
    neighbours: bool = field(default=False, metadata=doc("Also name the sections just before and after a cited one."))


@dataclass(frozen=True)
class WordsRequest:
    """`knowledge words`: the vocabulary, narrowed by a pattern and counts."""

    pattern: str | None = field(default=None, metadata=doc(
        "A case-insensitive regular expression the words must match."))
    counts: bool | None = field(default=None, metadata=doc(
        "Document counts: always (true), never (false) or for a short list (null)."))
    min_docs: int | None = field(default=None, metadata=doc("Only words in at least N documents.", minimum=0))
    max_docs: int | None = field(default=None, metadata=doc("Only words in at most N documents.", minimum=0))
    in_field: str | None = field(default=None, metadata=doc(
        "Only the words of the headings (heading) or of the bodies (body)."))
    sort: str = field(default="word", metadata=doc("Alphabetical (word), or most documents first (docs)."))
    limit: int | None = field(default=None, metadata=doc("List at most N words.", minimum=1))
    offset: int = field(default=0, metadata=doc("Skip the first N words of the list (after sorting).", minimum=0))
    path: list[str] | None = field(default=None, metadata=doc(
        "Only words of the documents under this path prefix or matching this glob; repeat for any of several."))



@dataclass(frozen=True)
class SourcesRequest:
    """`knowledge sources`, /v1/sources and the page's /sources: a page of the indexed documents, in path order."""

    limit: int | None = field(default=None, metadata=doc(
        "Documents to list at most (default: every one from the offset).", minimum=1))
    offset: int = field(default=0, metadata=doc(
        "Documents to skip first, in path order (an answer's next_offset starts the next page).", minimum=0))
    path: list[str] | None = field(default=None, metadata=doc(LISTING_PATH_HELP))
