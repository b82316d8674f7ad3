"""The enumerate commands: `match` (aliases `enumerate`, `which`) and `words`."""

from __future__ import annotations

import shutil
import sys
from typing import TYPE_CHECKING

import click

from cli.app import Context, cli, echo_json, echo_tier, pass_context, prologue
from cli.arguments import QueryCommand, filter_options, mirrored, query_text
from config.errors import (
    EXIT_FAILURE,
    IndexNotBuilt,
    KnowledgeError,
    QueryError,
    UsageError,
)
from config.observability import configure_metrics, configure_tracing
from query import words as vocab
from query.enumerate import DEFAULT_LIMIT, SORTS, EnumerateResult, checked_limit
from query.reader import not_built_note
from query.requests import MatchRequest, WordsRequest
from query.service import QueryService
from query.status import Status
from query.terminal import clean, name
from query.tier import tier_line

if TYPE_CHECKING:  # rich and the citation rules load only when a command prints with them
    from rich.console import JustifyMethod
    from rich.table import Table
    from rich.text import Text

    from query.citations import CitationMapper



def _table(columns: list[tuple[str, JustifyMethod]]) -> Table:
    from rich.table import Table

    table = Table()
    for title, justify in columns:
        # A cut path or URL is useless: long cells wrap instead of ending in an ellipsis.
        table.add_column(title, justify=justify, overflow="fold")
    return table


def _print_table(table: Table) -> None:
    from rich.console import Console

    Console(soft_wrap=False, width=max(200, shutil.get_terminal_size((100, 24)).columns)).print(table)


def _text(value: str) -> Text:
    from rich.text import Text

    return Text(clean(value))


@click.command("match", cls=QueryCommand)
@click.argument("words", nargs=-1, required=True, metavar="QUERY...")
@click.option("--limit", type=int, default=None,
              help=f"Documents to list (default {DEFAULT_LIMIT}; every one with --paths-only).")
@click.option("--all", "show_all", is_flag=True, help="List every matching document.")
@click.option("--sort", type=click.Choice(SORTS), default="matches", show_default=True, help="Order of the list.")
@mirrored("--min-matches", MatchRequest, "min_matches", show_default=True,
          help="Only documents with at least N matching sections (body and heading matches summed).")
@click.option("--paths-only", is_flag=True, help="Print only the paths, one per line (line breaks in a name escaped).")
@click.option("-0", "--null", "null", is_flag=True,
              help="Print only the paths, each ended by a NUL byte, as stored (for `xargs -0`).")
@click.option("--count", "count_only", is_flag=True, help="Print only the number of matching documents.")
@click.option("--exit-code", is_flag=True,
              help="Exit 1 when no document matches (off by default: an empty answer is an answer).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@filter_options
@pass_context
def match_command(
    obj: Context, words: tuple[str, ...], limit: int | None, show_all: bool, sort: str, min_matches: int,
    paths_only: bool, null: bool,
    count_only: bool, exit_code: bool, as_json: bool,
    paths: tuple[str, ...], roots: tuple[str, ...], where: tuple[str, ...], lang: str | None,
) -> None:
    """List every document containing all the words of QUERY, completely and unranked.

    QUERY takes bare words (any form of each), "quoted phrases", -word to exclude, and heading:word
    or body:word to scope a term. OR, AND, NOT, NEAR and * are refused with what to write instead.
    """
    query = query_text(words)
    paths_only = paths_only or null
    _refuse_contradictions(checked_limit(limit), show_all, paths_only, count_only)
    settings = obj.settings
    machine = as_json or paths_only or count_only
    echo_tier(tier_line(settings), machine)
    everything = show_all or (limit is None and (paths_only or count_only))
    wanted = None if everything else limit or DEFAULT_LIMIT
    configure_tracing("knowledge-cli")  # each loads its SDK only when an exporter is configured
    configure_metrics("knowledge-cli")
    service = QueryService(settings)
    answer = service.enumerate(MatchRequest(query, wanted, sort, wanted is None, min_matches, list(paths),
                                            list(roots), list(where), count_only, lang))
    result, mapper = answer.result, service.mapper
    if as_json:
        echo_json(answer.to_json())
        if result.status == Status.INDEX_NOT_BUILT:
            raise IndexNotBuilt(result.note)
    elif paths_only or count_only:
        _refuse_unanswered(result)
        if count_only:
            click.echo(str(result.matched))
        for doc in result.documents:
            if null:  # a program reads these: the names as stored; a terminal still sees them cleaned
                click.echo((doc.path if not sys.stdout.isatty() else name(doc.path)) + "\0", nl=False)
            else:
                click.echo(name(doc.path))
    elif result.status == Status.INDEX_NOT_BUILT:
        raise IndexNotBuilt(result.note)
    else:
        _render(result, mapper)
    if exit_code and result.matched == 0:
        sys.exit(EXIT_FAILURE)


def _refuse_contradictions(limit: int | None, show_all: bool, paths_only: bool, count_only: bool) -> None:
    """UsageError for flags that ask for two different answers."""
    if show_all and limit is not None:
        raise UsageError("--all and --limit contradict each other: --all lists every document, --limit caps the list")
    if count_only and paths_only:
        raise UsageError(
            "--count and --paths-only contradict each other: --count prints one number, --paths-only the paths"
        )
    if count_only and (limit is not None or show_all):
        raise UsageError("--count prints the number of every matching document; drop --limit/--all")


def _refuse_unanswered(result: EnumerateResult) -> None:
    """A pipe must never read 'not built' or 'no terms' as 'no documents'."""
    if result.status == Status.QUERY_EMPTY:
        raise QueryError(result.note)
    if result.status != Status.OK:
        raise IndexNotBuilt(result.note) if result.status == Status.INDEX_NOT_BUILT else KnowledgeError(result.note)


def _render(result: EnumerateResult, mapper: CitationMapper | None) -> None:
    for rep in result.terms:
        forms = list(rep.related)
        extra = f"; forms: {', '.join(forms)}" if forms else ""
        click.echo(
            f"term {clean(rep.term.label)}: {rep.any_form} documents in any form, {rep.as_written} as written "
            f"(stem {clean(rep.stem)}{clean(extra)})"
        )
    if result.documents:
        mapped = mapper is not None and mapper.configured
        headers: list[tuple[str, JustifyMethod]] = [("Path", "left"), ("Lang", "left"), ("Body", "right"),
                                                    ("Heading", "right")]
        table = _table([*headers, ("Mapped", "left")] if mapped else headers)
        for doc in result.documents:
            cells: list[Text | str] = [_text(doc.path), _text(doc.lang), str(doc.body_matches),
                                       str(doc.heading_matches)]
            if mapper is not None and mapped:
                cells.append(_text(mapper.map_document(doc.path) or ""))
            table.add_row(*cells)
        _print_table(table)
    click.echo(f"note: {clean(result.note)}")


cli.add_command(match_command, "match")
cli.add_command(match_command, "enumerate")
cli.add_command(match_command, "which")


@cli.command("words")
@click.argument("pattern", required=False)
@mirrored("--min-docs", WordsRequest, "min_docs")
@mirrored("--max-docs", WordsRequest, "max_docs")
@click.option("--field", type=click.Choice(sorted(vocab.WORD_FIELDS)), default=None,
              help="Only the words of the headings or of the bodies.")
@click.option("--sort", type=click.Choice(vocab.WORD_SORTS), default="word", show_default=True,
              help="Alphabetical, or most documents first.")
@mirrored("--limit", WordsRequest, "limit")
@mirrored("--offset", WordsRequest, "offset")
@click.option("--path", "paths", multiple=True, metavar="PREFIX|GLOB",
              help="Only the words of the documents under this path prefix or matching this glob; repeat for any "
                   "of several (counts stay those of the whole index).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (every word with its stem and document counts).")
@pass_context
def words_command(obj: Context, pattern: str | None, min_docs: int | None, max_docs: int | None, field: str | None,
                  sort: str, limit: int | None, offset: int, paths: tuple[str, ...], as_json: bool) -> None:
    """List the words the documents contain; PATTERN (a regular expression) narrows the list.

    A short list shows each word's stem and how many documents hold it as written and in any form
    (what `knowledge match WORD` reports); a long list is plain words, several to a line.
    """
    settings = prologue(obj, as_json)
    result = QueryService(settings).words(
        WordsRequest(pattern, True if as_json else None, min_docs, max_docs, field, sort, limit, offset,
                     list(paths) or None))
    if result.status == Status.PATTERN_INVALID:
        raise UsageError(result.note or "invalid pattern")
    if as_json:
        echo_json(result.to_json())
    if result.status == Status.INDEX_NOT_BUILT:
        raise IndexNotBuilt(result.note or not_built_note(settings))
    if as_json:
        return
    if result.status != Status.OK or not result.words:
        click.echo(f"note: {clean(result.note or '')}")
        return
    if result.short:
        table = _table([("Word", "left"), ("Stem", "left"), ("As written", "right"), ("Any form", "right")])
        for info in result.words if sort == "docs" else vocab.by_counts(result.words):
            table.add_row(_text(info.word), _text(info.stem), str(info.as_written), str(info.any_form))
        _print_table(table)
        return
    columns(
        [clean(w.word) for w in result.words], shutil.get_terminal_size((100, 24)).columns
    )
    shown = f"{len(result.words)} words"
    if len(result.words) < result.matched:
        shown += f" ({result.offset + 1}-{result.offset + len(result.words)} of {result.matched})"
    click.echo(shown)


def columns(items: list[str], width: int) -> None:
    """Print items several to a line in aligned columns."""
    cell = max(len(i) for i in items) + 2
    per_line = max(1, width // cell)
    for start in range(0, len(items), per_line):
        click.echo("".join(i.ljust(cell) for i in items[start : start + per_line]).rstrip())
