"""The `knowledge` click group, its per-invocation Context and the helpers every command shares.

Every command prints the tier line first (stderr with --json, stdout otherwise). Errors from the
error tree become one line on stderr and the exit code their class carries.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from cli.arguments import hoist_global_options
from config.errors import EXIT_FAILURE, KnowledgeError, StoreError
from config.loader import load_settings
from config.settings import Settings
from pipeline import db
from query.terminal import clean
from query.tier import tier_line

if TYPE_CHECKING:
    from query.citations import CitationMapper


class Context:
    """Per-invocation state: the config flags and the settings built from them once."""

    last_store = "in use"  # named in a store error that reaches main() untranslated

    def __init__(self, config: str | None, store_dir: str | None) -> None:
        self.config = config
        self.store_dir = store_dir
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        """Settings from --config/--store-dir, the environment and knowledge.yaml."""
        if self._settings is None:
            self._settings = load_settings(self.config, self.store_dir)
            if self._settings.expose.mcp.builtins:  # the tool names are declared by the query side
                from query.tools import check_allowlist

                check_allowlist(self._settings)
            if self._settings.embeddings_next is not None:  # after a model switch the new block serves
                from pipeline.vectors import serving_store

                self._settings = serving_store(self._settings)
            Context.last_store = str(self._settings.db_path)
        return self._settings


pass_context = click.make_pass_decorator(Context)


def echo_tier(line: str, as_json: bool) -> None:
    """Print the tier line: to stderr when stdout carries JSON."""
    click.echo(line, err=as_json)


def echo_json(data: object) -> None:
    """Print one JSON document on stdout."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def prologue(obj: Context, as_json: bool) -> Settings:
    """The opening of every store command: settings built once, then the tier line."""
    settings = obj.settings
    echo_tier(tier_line(settings), as_json)
    return settings


def citation_mapper(settings: Settings) -> CitationMapper | None:
    """The mapper of knowledge.citations; None without rules (its module and the chunker then stay unloaded)."""
    if not settings.citations:
        return None
    from query.citations import CitationMapper

    return CitationMapper.from_settings(settings)


class LazyGroup(click.Group):
    """A click group that imports a command's module the first time the command is asked for.

    It also remembers which command ran, so that the executable can end a one-shot read command
    without the interpreter's teardown (run()).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, str] = {}
        self.read_only: set[str] = set()  # commands that start no thread and write nothing
        self.invoked: str | None = None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                             list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        self.invoked = name
        return name, command, rest

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            importlib.import_module(self.lazy_commands[cmd_name])
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="knowledge-pipeline", prog_name="knowledge", message="%(prog)s %(version)s")
@click.option("--config", "config", metavar="FILE",
              help="knowledge.yaml to read (default: $KNOWLEDGE_CONFIG or ./knowledge.yaml).")
@click.option("--store-dir", metavar="DIR",
              help="Base directory of relative stores (default: $KNOWLEDGE_STORE_DIR or the working directory).")
@click.pass_context
def cli(ctx: click.Context, config: str | None, store_dir: str | None) -> None:
    """Index a documentation tree into one SQLite file and search it with citations."""
    ctx.obj = Context(config, store_dir)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI and map errors to exit codes."""
    commands = sorted(set(cli.commands) | set(cli.lazy_commands))
    args = hoist_global_options(sys.argv[1:] if argv is None else argv, commands)
    try:
        cli.main(args=args, prog_name="knowledge", standalone_mode=False)
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
    except db.DatabaseError as exc:  # the last boundary: a SQLite error no layer translated
        error = db.damaged(Context.last_store, exc) if db.is_damage(exc) else StoreError(f"the store failed: {exc}")
        click.echo(f"knowledge: error: {clean(str(error))}", err=True)
        sys.exit(error.exit_code)
    except BrokenPipeError:
        sys.exit(EXIT_FAILURE)
    sys.exit(0)


def run() -> None:
    """The `knowledge` executable: main(), and after a read command an exit without the interpreter's teardown.

    A normal exit frees every module and object one by one and collects them all once more: about a
    tenth of a one-shot search (bench/RESULTS.md). After a read-only command (and only while no
    thread but daemons is left) the exit runs what must run, the atexit hooks (an exporter's final
    flush) and the flush of stdout and stderr, then ends the process with the command's exit code.
    """
    try:
        main()
    except SystemExit as done:
        if cli.invoked not in cli.read_only or not _only_daemons_left():
            raise
        _leave(done.code)


def _only_daemons_left() -> bool:
    import threading

    return all(t.daemon for t in threading.enumerate() if t is not threading.current_thread())


def _leave(code: object) -> NoReturn:
    """Exit at once with code (SystemExit's: None, an int, or a message for stderr), as Python would."""
    import atexit

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone (BrokenPipeError, as main() treats it) or a closed stream
            status = status or EXIT_FAILURE
    os._exit(status)

