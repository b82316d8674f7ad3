"""The `knowledge doctor` command: a thin adapter over query.doctor."""

from __future__ import annotations

import sys

import click

from cli.app import Context, cli, echo_json, pass_context, prologue
from config.errors import EXIT_FAILURE
from query.doctor import FAIL, NOT_RUN, failed_fatally, run_checks
from query.terminal import clean


@cli.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@pass_context
def doctor_command(obj: Context, as_json: bool) -> None:
    """Check the store, SQLite, the configured paths and the embeddings server."""
    from workers.engine import open_engine
    from workers.operations import Check

    settings = prologue(obj, as_json)
    with open_engine(settings) as engine:
        checks = run_checks(settings, lambda: engine.apply(Check()))
    fatal = failed_fatally(checks)
    if as_json:
        echo_json({"ok": not fatal, "checks": [c.to_json() for c in checks]})
    else:
        for check in checks:
            click.echo(f"  {check.status:<8} {check.name:<11} {clean(check.detail)}")
        failures = [c for c in checks if c.status == FAIL]
        if fatal:
            click.echo(f"doctor: {sum(1 for c in failures if c.fatal)} fatal check(s) failed")
        else:
            click.echo("doctor: no fatal problem found")
        unrun = [c.name for c in checks if c.status == NOT_RUN]
        if unrun:
            click.echo(f"doctor: {len(unrun)} check(s) did not run ({', '.join(unrun)}): "
                       "fix what stopped them above, then run `knowledge doctor` again")
    if fatal:
        sys.exit(EXIT_FAILURE)
