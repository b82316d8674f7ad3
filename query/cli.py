"""The `knowledge` command: a thin click adapter over the core. Read commands live here.

Every command prints the tier line first (stderr with --json, stdout otherwise). Errors from the
error tree become one line on stderr and the exit code their class carries.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from config.errors import EXIT_FAILURE, IndexNotBuilt, KnowledgeError
from config.loader import load_settings
from config.settings import Settings
from query.reader import Reader, open_reader, parse_ref
from query.search import search, to_json
from query.terminal import clean, one_line
from query.tier import tier_line

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    """Per-invocation state: the config flags and the settings built from them once."""

    def __init__(self, config: str | None, store_dir: str | None) -> None:
        self.config = config
        self.store_dir = store_dir
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        """Settings from --config/--store-dir, the environment and knowledge.yaml."""
        if self._settings is None:
            self._settings = load_settings(self.config, self.store_dir)
        return self._settings


pass_context = click.make_pass_decorator(Context)


def echo_tier(line: str, as_json: bool) -> None:
    """Print the tier line: to stderr when stdout carries JSON."""
    click.echo(line, err=as_json)


def echo_json(data: Any) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def require_reader(settings: Settings) -> Reader:
    """A Reader, or IndexNotBuilt naming the fix."""
    reader = open_reader(settings)
    if reader is None:
        raise IndexNotBuilt(f"no index at {settings.db_path}; run `knowledge index` first")
    return reader


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config", metavar="FILE", help="knowledge.yaml to read (default: $KNOWLEDGE_CONFIG or ./knowledge.yaml).")
@click.option("--store-dir", metavar="DIR", help="Base directory of relative stores (default: $KNOWLEDGE_STORE_DIR or the working directory).")
@click.pass_context
def cli(ctx: click.Context, config: str | None, store_dir: str | None) -> None:
    """Index a documentation tree into one SQLite file and search it with citations."""
    ctx.obj = Context(config, store_dir)


@cli.command("search")
@click.argument("query")
@click.option("--top-k", type=click.IntRange(1, 20), default=None, help="Results to return (default top_k, max 20).")
@click.option("--full", is_flag=True, help="Print whole sections instead of previews.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def search_command(obj: Context, query: str, top_k: int | None, full: bool, as_json: bool) -> None:
    """Rank the sections that best answer QUERY."""
    settings = obj.settings
    response = search(settings, query, top_k)
    echo_tier(response.tier, as_json)
    from query.citations import CitationMapper

    mapper = CitationMapper.from_settings(settings)
    mapped = [mapper.map_chunk(h.path, h.ordinal, h.section) if mapper.configured else None for h in response.hits]
    if as_json:
        data = to_json(response)
        for result, mapping in zip(data["results"], mapped):
            if mapping:
                result["mapped"] = mapping
        echo_json(data)
        return
    if response.note:
        click.echo(f"note: {clean(response.note)}")
    if not response.hits:
        if response.status == "ok":
            click.echo(f"no results for {one_line(query, 60)!r}")
        return
    render_hits(response.hits, full, mapped)


def render_hits(hits: list[Any], full: bool, mapped: list[str | None] | None = None) -> None:
    """Print hits the way the reference does: the raw token, then Mapped, Section and Chunk."""
    for i, hit in enumerate(hits):
        click.echo(f"\n  {clean(hit.ref)}:\n")
        if mapped and mapped[i]:
            click.echo(f"       Mapped: {clean(mapped[i] or '')}")
        if hit.section:
            click.echo(f"      Section: {clean(hit.section)}")
        if full:
            body = clean(hit.content).replace("\n", "\n               ")
            click.echo(f"        Chunk: {body}")
        else:
            click.echo(f"        Chunk: {one_line(hit.content)}")


@cli.command("show")
@click.argument("citation")
@pass_context
def show_command(obj: Context, citation: str) -> None:
    """Print the section a citation token (`<path>#<ordinal>`) names."""
    settings = obj.settings
    echo_tier(tier_line(settings), False)
    ref = parse_ref(citation)
    if ref is None:
        raise click.UsageError(f"{citation!r} is not a citation; expected <path>#<ordinal> as search prints it")
    with require_reader(settings) as reader:
        hit = reader.chunk(*ref)
    if hit is None:
        raise KnowledgeError(f"no section {citation} in the index; `knowledge sources` lists the documents")
    click.echo(f"\n  {clean(hit.ref)}\n")
    if hit.section:
        click.echo(f"Section: {clean(hit.section)}\n")
    click.echo(clean(hit.content))


@cli.command("sources")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def sources_command(obj: Context, as_json: bool) -> None:
    """List the indexed documents."""
    from query.citations import CitationMapper
    from rich.console import Console
    from rich.table import Table

    settings = obj.settings
    echo_tier(tier_line(settings), as_json)
    with require_reader(settings) as reader:
        rows = reader.sources()
    mapper = CitationMapper.from_settings(settings)
    for row in rows:
        row["mapped"] = mapper.map_document(row["path"]) if mapper.configured else None
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no documents indexed")
        return
    table = Table()
    for column in ("Path", "Chunks", "Last Indexed") + (("Mapped",) if mapper.configured else ()):
        table.add_column(column)
    for row in rows:
        cells = [clean(row["path"]), str(row["chunks"]), row["indexed_at"]]
        if mapper.configured:
            cells.append(clean(row["mapped"] or ""))
        table.add_row(*cells)
    Console(soft_wrap=False, width=max(120, Console().width)).print(table)
    if mapper.configured:
        unmatched = sum(1 for r in rows if not r["mapped"])
        verb = "is" if unmatched == 1 else "are"
        click.echo(f"\n{unmatched} of {len(rows)} documents matched no citation rule and {verb} cited by path")


@cli.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def stats_command(obj: Context, as_json: bool) -> None:
    """Counts and facts about the index."""
    settings = obj.settings
    echo_tier(tier_line(settings), as_json)
    with require_reader(settings) as reader:
        stats = reader.stats()
    stats["tier"] = tier_line(settings)
    if as_json:
        echo_json(stats)
        return
    for key, value in stats.items():
        if key != "tier":
            click.echo(f"{key:>15}: {value}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI and map errors to exit codes."""
    try:
        cli.main(args=argv, prog_name="knowledge", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("aborted", err=True)
        sys.exit(EXIT_FAILURE)
    except KnowledgeError as exc:
        click.echo(f"knowledge: error: {clean(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(EXIT_FAILURE)
    sys.exit(0)


from query import cli_index  # noqa: E402,F401  (registers index, rm, reset)
from query import cli_workers  # noqa: E402,F401  (registers worker, writer, runs)
from query import cli_match  # noqa: E402,F401  (registers match/enumerate/which, words)
from query import cli_doctor  # noqa: E402,F401  (registers doctor)
from query import cli_serve  # noqa: E402,F401  (registers mcp, serve)
