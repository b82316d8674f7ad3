"""The distributed-shape commands: worker, writer, runs. They import workers/ only when called."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from cli.app import Context, cli, echo_json, pass_context
from config.errors import UsageError
from config.settings import Settings
from query.terminal import clean

if TYPE_CHECKING:  # workers/ is imported only when a command needs it
    from workers.ledger import RunSummary


def require_broker(settings: Settings, command: str) -> None:
    """UsageError unless a broker is configured."""
    if settings.broker is None:
        raise UsageError(
            f"`knowledge {command}` needs a broker: set knowledge.broker.url in knowledge.yaml or KNOWLEDGE_BROKER_URL "
            "(redis://host:port/db)"
        )


def child_argv(obj: Context, threads: int) -> list[str]:
    """The command line of one single-process worker, with this invocation's global options."""
    argv = [sys.executable, "-c", "from cli.app import main; main()"]
    if obj.config:
        argv += ["--config", obj.config]
    if obj.store_dir:
        argv += ["--store-dir", obj.store_dir]
    return [*argv, "worker", "--processes", "1", "--threads", str(threads)]


@cli.command("worker")
@click.option("--processes", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes to run (a supervisor restarts one that dies).")
@click.option("--threads", type=click.IntRange(1, 64), default=None,
              help="Threads per process (default: knowledge.workers).")
@pass_context
def worker_command(obj: Context, processes: int, threads: int | None) -> None:
    """Consume the ingest and embed queues of this store's broker until SIGTERM."""
    settings = obj.settings
    require_broker(settings, "worker")
    from workers.processes import run_worker, supervise

    count = threads or settings.workers
    if processes == 1:
        sys.exit(run_worker(settings, count))
    sys.exit(supervise(child_argv(obj, count), processes))


@cli.command("writer")
@pass_context
def writer_command(obj: Context) -> None:
    """Apply documents to the store from the write queue (one thread, holding the store's write lock)."""
    settings = obj.settings
    require_broker(settings, "writer")
    from workers.processes import run_writer

    sys.exit(run_writer(settings))


@cli.command("runs")
@click.option("--limit", type=click.IntRange(1, 1000), default=10, show_default=True, help="Runs to list.")
@click.option("--offset", type=click.IntRange(0), default=0, help="Runs to skip first, newest first.")
@click.option("--path", "paths", multiple=True, metavar="PREFIX",
              help="Only the runs that walked this path (a root at, beneath or above it); repeat for any of several.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def runs_command(obj: Context, limit: int, offset: int, paths: tuple[str, ...], as_json: bool) -> None:
    """List this store's recent index runs with their state and counters, newest first."""
    settings = obj.settings
    require_broker(settings, "runs")
    from workers.distributed import recent_runs

    runs, holder, alive = recent_runs(settings, limit, offset, paths)
    rows = [run_row(s, holder) for s in runs]
    if as_json:
        echo_json(rows)
        return
    click.echo(f"processes: {len(alive['worker'])} worker, {len(alive['writer'])} writer"
               + (f" ({', '.join(alive['worker'] + alive['writer'])})" if alive["worker"] or alive["writer"] else ""))
    if not rows:
        asked = "".join((f" that walked {', '.join(clean(p) for p in paths)}" if paths else "",
                         f" past the newest {offset}" if offset else ""))
        click.echo(f"no runs recorded for this store{asked} (the broker keeps them for 7 days)")
        return
    for row in rows:
        flag = " (holds the run lock)" if row["holds_lock"] else ""
        click.echo(
            f"{row['run_id']}  {row['state']:<8} {row['started']}  {row['accounted']}/{row['total']} files  "
            f"added={row['added']} updated={row['updated']} unchanged={row['unchanged']} removed={row['removed']} "
            f"failed={row['failed']}{flag}"
        )
        if row.get("error"):
            click.echo(f"    error: {clean(row['error'])}")


def run_row(summary: RunSummary, holder: str | None) -> dict[str, Any]:
    """One run as `knowledge runs --json` prints it."""
    data = summary.to_json()
    started = summary.info.get("started")
    ended = summary.info.get("ended")
    data.update(
        total=summary.total,
        accounted=summary.accounted,
        walked=summary.walked,
        started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "",
        seconds=round(ended - started, 2) if started and ended else None,
        roots=summary.info.get("roots", []),
        holds_lock=summary.run_id == holder,
    )
    return data
