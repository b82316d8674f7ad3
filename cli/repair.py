"""The repair commands: `check` finds damage in the store, `rebuild` repairs it from chunks, `vacuum` shrinks it."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from cli.app import Context, cli, echo_json, pass_context, prologue
from config.errors import EXIT_BUSY, EXIT_FAILURE
from pipeline.integrity import (
    INDEX,
    READ_ONLY,
    REBUILD,
    RESET,
    Progress,
    Report,
    way_forward,
)
from query.terminal import clean


def _print_report(report: Report) -> None:
    for step in report.steps:
        click.echo(f"  {step.status:<8} {step.name:<11} {clean(step.detail)}")
    if report.ok:
        click.echo(f"check: ok: {report.db_path}")
    elif not report.damaged:
        why = ("the store is on a read-only file system" if report.blocked == READ_ONLY
               else "a run holds the write lock")
        click.echo(f"check: not ok: no damage found, but some checks did not run ({why})")
    else:
        click.echo(f"check: damaged: {len(report.findings)} problem(s) in {report.db_path}")
        for repair in sorted({f.repair for f in report.findings}, key=[RESET, REBUILD, INDEX].index):
            click.echo(f"  the way forward: {way_forward(repair)}")


@contextmanager
def terminal_progress(command: str) -> Iterator[Progress | None]:
    """On a terminal's stderr, one line rewritten as each step starts (`check: 4/6 fts ...`, with the time since
    the start) and erased at the end; None when stderr is not a terminal (a pipe, a file, a test)."""
    if not sys.stderr.isatty():
        yield None
        return
    began = time.monotonic()

    def show(step: str, number: int, steps: int) -> None:
        sys.stderr.write(f"\r\x1b[K{command}: {number}/{steps} {step} ... ({time.monotonic() - began:.1f} s)")
        sys.stderr.flush()

    try:
        yield show
    finally:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def _exit(report: Report) -> None:
    """1 for damage or a store that cannot be fully checked where it is (read-only); 75 while a run holds the lock."""
    if report.damaged or (not report.complete and report.blocked == READ_ONLY):
        sys.exit(EXIT_FAILURE)
    if not report.complete:
        sys.exit(EXIT_BUSY)


@cli.command("check")
@click.option("--full", is_flag=True, help="PRAGMA integrity_check (every index, slower) instead of quick_check.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_context
def check_command(obj: Context, full: bool, as_json: bool) -> None:
    """Check the store for damage: the file, every FTS index against chunks, triggers, vectors.

    Exits 0 when the store is sound, 1 when something is damaged (the report names it and the
    command that repairs it) or the store is on a read-only file system (the FTS cross-check writes),
    75 when a run held the write lock so the FTS cross-check could not run.
    """
    from workers.engine import open_engine
    from workers.operations import Check

    settings = prologue(obj, as_json)
    with terminal_progress("check") as progress, open_engine(settings) as engine:
        report = engine.apply(Check(full, progress))
    if as_json:
        echo_json(report.to_json())
    else:
        _print_report(report)
    _exit(report)


@cli.command("rebuild")
@click.option("--json", "as_json", is_flag=True, help="Print what was done and the check after it as JSON.")
@pass_context
def rebuild_command(obj: Context, as_json: bool) -> None:
    """Repair the store from its sections, without reading the tree: FTS indexes, triggers, vectors.

    Holds the write lock (exit 75 while a run holds it), or has the running `knowledge writer` do
    it. Damage to the file itself cannot be repaired in place: rebuild says so and names
    `knowledge reset --force` and `knowledge index`.
    """
    from workers.engine import open_engine

    settings = prologue(obj, as_json)
    with open_engine(settings) as engine:
        repair = engine.rebuild()
    if as_json:
        echo_json(repair.to_json())
    else:
        for action in repair.actions:
            click.echo(f"  {clean(action)}")
        remaining = [f for f in repair.after.findings if f.repair != INDEX]
        if not repair.after.findings:
            click.echo("rebuild: done; `knowledge check` passes")
        elif not remaining:
            click.echo("rebuild: done; the next `knowledge index` embeds the sections that lack a vector")
        else:
            click.echo("rebuild: some damage remains:")
            _print_report(repair.after)
    if any(f.repair != INDEX for f in repair.after.findings):
        sys.exit(EXIT_FAILURE)



@cli.command("vacuum")
@pass_context
def vacuum_command(obj: Context) -> None:
    """Rewrite the store without free pages, and let a store made before auto_vacuum shrink by itself.

    A store created by this version gives the space of large removals back by itself; this merges
    every FTS index and VACUUMs the file (switching it to auto_vacuum = INCREMENTAL). Holds the
    write lock (exit 75 while a run holds it), or has the running `knowledge writer` do it; needs
    free disk about the size of the store.
    """
    from workers.engine import open_engine

    settings = prologue(obj, False)
    with open_engine(settings) as engine:
        before, after = engine.vacuum()
    click.echo(f"vacuum: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB ({settings.db_path})")
