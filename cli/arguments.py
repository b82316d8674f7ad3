"""Command-line shaping click does not do itself: query words, `-word` exclusions, global options anywhere.

- A command whose last argument is a free-text QUERY takes its words unquoted (`knowledge search
  background tasks`), and once the query has started a `-word` is a word of the query (an
  exclusion), not an option: `knowledge match api -deprecated` works as written, and so does a
  `--word` that is no option of the command (`knowledge search fastapi run --workers 4`). The
  command's own options (`--json`) stay options wherever they appear; `--` still ends the options.
- The global options (`--config`, `--store-dir`) are accepted after the sub-command too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

GLOBAL_OPTIONS = ("--config", "--store-dir")


class QueryCommand(click.Command):
    """A command whose variadic QUERY argument swallows `-word` tokens once the query has begun."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            options, words = split_query(args, self._value_options(ctx), self._flag_options(ctx))
        except LeadingDash as exc:
            raise click.UsageError(
                f"No such option {exc.token!r}. To look up a word starting with '-', put `--` before it: "
                f"{ctx.command_path} -- {exc.token}", ctx) from None
        return super().parse_args(ctx, options + (["--", *words] if words else []))

    def _value_options(self, ctx: click.Context) -> set[str]:
        return {name for p in self.get_params(ctx) if isinstance(p, click.Option) and not p.is_flag
                for name in p.opts + p.secondary_opts}

    def _flag_options(self, ctx: click.Context) -> set[str]:
        return {name for p in self.get_params(ctx) if isinstance(p, click.Option) and p.is_flag
                for name in p.opts + p.secondary_opts}


class LeadingDash(Exception):
    """A query's first word starts with '-' and names no option."""

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _option_at(args: Sequence[str], i: int) -> list[str]:
    """The tokens of the value-taking option at args[i]: itself, and its value unless written `--opt=value`."""
    return list(args[i:i + 1 if "=" in args[i] else i + 2])


def split_query(args: Sequence[str], value_options: set[str], flag_options: set[str]) -> tuple[list[str], list[str]]:
    """(option tokens, query words) of args: after the first word, an unknown `-x` token is a word.

    LeadingDash when an unknown `-x` comes before any word (it would read as an option).
    """
    options: list[str] = []
    words: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            words += list(args[i + 1 :])
            break
        if token.split("=", 1)[0] in value_options:
            taken = _option_at(args, i)
            options += taken
            i += len(taken)
            continue
        if token.split("=", 1)[0] in flag_options or token == "-h":
            options.append(token)  # the command's options wherever they appear
        elif token.startswith("-") and len(token) > 1 and not words:
            raise LeadingDash(token)
        else:
            words.append(token)
        i += 1
    return options, words


def hoist_global_options(argv: Sequence[str], commands: Sequence[str]) -> list[str]:
    """argv with `--config X` / `--store-dir X` found after the sub-command moved in front of it."""
    args = list(argv)
    position = next((i for i, a in enumerate(args) if a in commands), None)
    if position is None:
        return args
    moved: list[str] = []
    kept: list[str] = []
    i = position
    while i < len(args):
        if args[i] == "--":
            kept += args[i:]
            break
        if args[i].split("=", 1)[0] in GLOBAL_OPTIONS:
            taken = _option_at(args, i)
            moved += taken
            i += len(taken)
            continue
        kept.append(args[i])
        i += 1
    return args[:position] + moved + kept


def query_text(words: tuple[str, ...]) -> str:
    """The words of a QUERY argument as one string."""
    return " ".join(words)


F = TypeVar("F", bound=Callable[..., Any])


def filter_options(command: F) -> F:
    """--path, --root and --where (each repeatable) and --lang: the filters of search and match (query/filters.py)."""
    for option in reversed((
        click.option("--path", "paths", multiple=True, metavar="PREFIX|GLOB",
                     help="Only documents under this path prefix or matching this glob (docs/api/**); "
                          "repeat for any of several."),
        click.option("--root", "roots", multiple=True, metavar="ROOT",
                     help="Only documents of this indexed root; repeat for any of several."),
        click.option("--where", "where", multiple=True, metavar="KEY=VALUE",
                     help="Only documents whose front-matter field KEY equals VALUE (a list field: contains it); "
                          "repeat for all of several."),
        click.option("--lang", "lang", default=None, metavar="CODE|any",
                     help="Only documents in this language (en, de, ja, zh-hant). A search without it answers in "
                          "the query's language and shows a translated page once; `any` turns that off."),
    )):
        command = option(command)
    return command


def mirrored(flag: str, request: type, name: str, dest: str | None = None, help: str | None = None,  # noqa: A002
             **extra: Any) -> Callable[[F], F]:
    """A click option mirroring a field of a query request type (query/requests.py): its lower bound, its
    default and (unless the command words it for a terminal) its help text."""
    from query.requests import params  # only the commands that mirror a request load it

    spec = next(p for p in params(request) if p.name == name)
    kind = click.IntRange(min=spec.minimum) if spec.minimum is not None else None
    default = extra.pop("default", spec.default)
    option = click.option(flag, *((dest,) if dest else ()), type=kind, default=default, help=help or spec.help,
                          **extra)
    return option
