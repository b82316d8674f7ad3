"""The read commands: search, show, sources, stats. Each asks the query service and renders its answer."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterable
from typing import Any

import click

from cli.app import (
    Context,
    cli,
    echo_json,
    echo_tier,
    pass_context,
    prologue,
)
from cli.arguments import QueryCommand, filter_options, mirrored, query_text
from config.errors import IndexNotBuilt, KnowledgeError, QueryError
from config.observability import configure_metrics, configure_tracing
from config.settings import Settings
from query.highlight import styled
from query.listing import SourcesListing, StatsAnswer
from query.rank.parsed import parse_query
from query.reader import Hit, not_built_note
from query.requests import LISTING_PATH_HELP, MAX_AROUND, ReadRequest, SearchRequest, ShowRequest, SourcesRequest
from query.service import QueryService
from query.status import Status
from query.terminal import clean, one_line, preview
from query.terms import LexicalQuery


@cli.command("search", cls=QueryCommand)
@click.argument("words", nargs=-1, required=True, metavar="QUERY...")
@mirrored("--top-k", SearchRequest, "top_k")
@click.option("--full", is_flag=True, help="Print whole sections instead of previews.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@filter_options
@click.option("--explain", is_flag=True,
              help="Show per result its lexical rank and BM25 score, vector rank and distance, and RRF shares.")
@pass_context
def search_command(obj: Context, words: tuple[str, ...], top_k: int | None, full: bool, as_json: bool,
                   paths: tuple[str, ...], roots: tuple[str, ...], where: tuple[str, ...], lang: str | None,
                   explain: bool) -> None:
    """Rank the sections that best answer QUERY (its words need no quotes)."""
    query = query_text(words)
    settings = obj.settings
    configure_tracing("knowledge-cli")  # each loads its SDK only when an exporter is configured
    configure_metrics("knowledge-cli")
    service = QueryService(settings)
    answer = service.search(SearchRequest(query, top_k, list(paths), list(roots), list(where), explain, lang))
    response = answer.response
    echo_tier(response.tier, as_json)
    mapper = service.mapper
    mapped = [mapper.map_chunk(h.path, h.ordinal, h.section) if mapper else None for h in response.hits]
    if as_json:
        echo_json(answer.to_json())
    elif response.note and response.status != Status.INDEX_NOT_BUILT:
        click.echo(f"note: {clean(response.note)}")
    if response.status == Status.INDEX_NOT_BUILT:
        raise IndexNotBuilt(response.note or "no index")
    if as_json:
        return
    if not response.hits:
        if response.status == "ok":
            click.echo(f"no results for {one_line(query, 60)!r}; `knowledge match {shlex.quote(query)}` lists "
                       "every document holding all of its words")
        return
    render_hits(response.hits, full, mapped, (response.query or parse_query(query)).lexical)


def render_hits(hits: list[Hit], full: bool, mapped: list[str | None] | None = None,
                query: LexicalQuery | None = None) -> None:
    """Print hits the way the reference does: the raw token, then Mapped, Section and Chunk.

    On a terminal (stdout a TTY, NO_COLOR unset) the query's matched words of a preview are bold; piped, plain.
    """
    bold = query is not None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    for i, hit in enumerate(hits):
        click.echo(f"\n  {clean(hit.index_ref)}:\n")
        if mapped and mapped[i]:
            click.echo(f"       Mapped: {clean(mapped[i] or '')}")
        if hit.section:
            click.echo(f"      Section: {clean(hit.section)}")
        if full:
            body = clean(hit.content).replace("\n", "\n               ")
            click.echo(f"        Chunk: {body}")
        else:
            shown = preview(hit.content)
            if bold and query is not None:
                shown = styled(shown, query, lambda word: click.style(word, bold=True))
            click.echo(f"        Chunk: {shown}")
        if hit.translations:
            click.echo(f"      also in: {clean(', '.join(t.lang for t in hit.translations))}")
        if hit.explain is not None:
            click.echo(f"      {hit.explain.line()}")


@cli.command("show", cls=QueryCommand)
@click.argument("words", nargs=-1, required=True, metavar="CITATION")
@mirrored("--before", ReadRequest, "before",
          help=f"Also print up to N sections before the cited one (at most {MAX_AROUND}).")
@mirrored("--after", ReadRequest, "after",
          help=f"Also print up to N sections after the cited one (at most {MAX_AROUND}).")
@click.option("--section", "expand", is_flag=True,
              help="Grow the cited section to every consecutive chunk under the same heading.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the hit shape of search --json).")
@pass_context
def show_command(obj: Context, words: tuple[str, ...], before: int, after: int, expand: bool, as_json: bool) -> None:
    """Print the section a citation token (`<path>#<ordinal>`) or a hit's 6-character ref names, or every
    section of a document PATH.

    With --before, --after or --section, read around the cited section within the text budget.
    """
    citation = query_text(words)
    settings = prologue(obj, as_json)
    if before or after or expand:
        _show_around(settings, citation, before, after, expand, as_json)
        return
    answer = QueryService(settings).show(ShowRequest(citation))
    if answer.status == Status.INDEX_NOT_BUILT:
        raise IndexNotBuilt(answer.note or "no index")
    if answer.status == Status.QUERY_ERROR:
        raise QueryError(answer.note or f"{citation} names several sections")
    if answer.status != Status.OK:
        raise KnowledgeError(answer.note or f"no section or document {citation}")
    if as_json:
        echo_json(answer.to_json())
        return
    for hit in answer.hits:
        _print_section(hit.index_ref, hit.section, hit.content)


def _print_section(ref: str, section: str, content: str) -> None:
    click.echo(f"\n  {clean(ref)}\n")
    if section:
        click.echo(f"Section: {clean(section)}\n")
    click.echo(clean(content))


def _show_around(settings: Settings, citation: str, before: int, after: int, expand: bool, as_json: bool) -> None:
    """show --before/--after/--section: the cited section and its neighbours, or an error with its exit code."""
    answer = QueryService(settings).read(ReadRequest(citation, before, after, expand)).to_json()
    status, note = answer["status"], answer["note"] or ""
    if as_json:
        echo_json(answer)
    if status == Status.INDEX_NOT_BUILT:
        raise IndexNotBuilt(note)
    if status == Status.QUERY_ERROR:
        raise QueryError(note)
    if status == Status.NOT_FOUND:
        raise KnowledgeError(note)
    if as_json:
        return
    if note:
        click.echo(f"note: {clean(note)}")
    for hit in answer["results"]:
        ref = hit["index_ref"] + (f" (section {hit['span']})" if "span" in hit else "")
        _print_section(ref, hit["section"], hit["content"])


@cli.command("sources")
@mirrored("--limit", SourcesRequest, "limit")
@mirrored("--offset", SourcesRequest, "offset")
@click.option("--path", "paths", multiple=True, metavar="PREFIX|GLOB", help=LISTING_PATH_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (streamed as read).")
@pass_context
def sources_command(obj: Context, limit: int | None, offset: int, paths: tuple[str, ...], as_json: bool) -> None:
    """List the indexed documents in path order, a line each as they are read (a table for a page of at most
    100); --path, --offset and --limit page through a large tree."""
    settings = prologue(obj, as_json)
    service = QueryService(settings)
    with service.sources_listing(SourcesRequest(limit, offset, list(paths) or None)) as listing:
        if listing is None:
            if as_json:  # the answer still goes to stdout, as every read command's does
                echo_json({"status": Status.INDEX_NOT_BUILT, "note": not_built_note(settings)})
            raise IndexNotBuilt(not_built_note(settings))
        if as_json:
            stream(listing.json_text())
            return
        if listing.total == 0 or listing.offset >= listing.total:
            where = f" under {', '.join(clean(p) for p in paths)}" if paths else ""
            click.echo(f"no documents indexed{where}" if listing.total == 0
                       else f"no documents past offset {listing.offset} ({listing.total:,} in all{where})")
            return
        shown = listing.total - listing.offset if limit is None else min(limit, listing.total - listing.offset)
        if shown <= TABLE_ROWS:
            _sources_table(listing)
        else:
            stream(_source_line(row) for row in listing.documents())
        first = listing.offset + 1
        more = f"; the next page: --offset {listing.next_offset}" if listing.next_offset is not None else ""
        click.echo(f"\n{first:,}-{first + listing.returned - 1:,} of {listing.total:,} documents{more}")
        if listing.note:
            click.echo(clean(listing.note))


TABLE_ROWS = 100  # a listing of at most this many rows is a table, a longer one a line per row as read


def _source_line(row: dict[str, Any]) -> str:
    """One document as a streamed line: time of indexing, chunks, language, path (last, for cut and awk), mapped
    citation."""
    mapped = f"  -> {clean(row['mapped'])}" if row["mapped"] else ""
    return f"{row['indexed_at']}  {row['chunks']:>6}  {clean(row['lang'] or '-'):<7}  {clean(row['path'])}{mapped}\n"


def _sources_table(listing: SourcesListing) -> None:
    """A page of documents as a table (columns sized to the page)."""
    from rich.console import Console
    from rich.table import Table

    rows = list(listing.documents())
    mapped = listing.mapper is not None
    table = Table()
    for column in ("Path", "Lang", "Chunks", "Last Indexed") + (("Mapped",) if mapped else ()):
        table.add_column(column)
    for row in rows:
        cells = [clean(row["path"]), clean(row["lang"]), str(row["chunks"]), row["indexed_at"]]
        if mapped:
            cells.append(clean(row["mapped"] or ""))
        table.add_row(*cells)
    Console(soft_wrap=False, width=max(120, Console().width)).print(table)


def stream(pieces: Iterable[str]) -> None:
    """Write pieces of output to stdout as they come: the first flushed at once (a pipe is block-buffered),
    the rest in the stream's buffer, flushed at the end."""
    out = sys.stdout
    for n, piece in enumerate(pieces):
        out.write(piece)
        if n == 0:
            out.flush()
    out.flush()


@cli.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def stats_command(obj: Context, as_json: bool) -> None:
    """Counts and facts about the index."""
    stats = _listing(obj, as_json, QueryService.stats)
    if stats is None:
        return
    for key, value in stats.items():
        if key not in ("tier", "status", "note"):
            click.echo(f"{key:>15}: {value}")


def _listing(obj: Context, as_json: bool, answer: Callable[[QueryService], StatsAnswer],
             ) -> dict[str, Any] | None:
    """The answer of a listing command; printed as JSON (and None returned) with --json."""
    settings = prologue(obj, as_json)
    found = answer(QueryService(settings))
    if found.status == Status.INDEX_NOT_BUILT:
        raise IndexNotBuilt(found.note or "no index")
    data = found.to_json()
    if as_json:
        echo_json(data)
        return None
    return data
