"""`knowledge watch`: keep the index current as files change (workers/watcher.py does the watching).

One watcher per store: it holds <store_dir>/watch.lock for its life, so a second one is refused
with exit 75 like a second writer. Each run goes through one engine held for the watcher's life
(workers/engine.py: in-process it holds the writer lock; with a broker each run goes to the
workers and the writer). SIGTERM (or Ctrl-C) lets the current run finish, then exits 0.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType

import click

from cli.app import Context, cli, pass_context, prologue
from query.terminal import clean

IDLE_MS = 1_000  # the engine's idle worker threads wake once a second, not twenty times


class Lines:
    """Each watcher event as a line for a person on a terminal, else as a structlog JSON line (stderr)."""

    def __init__(self) -> None:
        from config.observability import get_logger

        self.interactive = sys.stderr.isatty()
        self.log = get_logger("knowledge.watch")

    def __call__(self, event: str, fields: dict[str, object]) -> None:
        if not self.interactive:
            getattr(self.log, self.level(event, fields))(event, **fields)
            return
        click.echo(clean(self.human(event, fields)), err=True)

    @staticmethod
    def level(event: str, fields: dict[str, object]) -> str:
        """The log level of an event: error for a failed watcher or run, warning for what waits or was skipped."""
        if event == "watcher-error" or (event == "run" and "error" in fields):
            return "error"
        if event in ("root-unreadable", "busy", "root-replaced", "skipped") or \
                (event == "run" and (fields.get("failed") or "pending" in fields)):
            return "warning"
        return "info"

    @staticmethod
    def human(event: str, fields: dict[str, object]) -> str:
        """The line a person reads for one event."""
        if event == "watching":
            roots = fields.get("roots")
            shown = ", ".join(str(r) for r in roots) if isinstance(roots, list) else str(roots)
            return f"watching {shown} (Ctrl-C stops)"
        if event == "run":
            what = (f"full run ({fields['full']})" if "full" in fields
                    else f"{fields.get('changed', 0)} changed, {fields.get('gone', 0)} deleted path(s)")
            if "error" in fields and "state" not in fields:
                kept = (f"; {fields['pending']} path(s) kept, retrying in {fields['retry_s']} s"
                        if "pending" in fields else "")
                return f"{what}: failed: {fields['error']}{kept}"
            return (f"{what}: added={fields.get('added')} updated={fields.get('updated')} "
                    f"removed={fields.get('removed')} failed={fields.get('failed')} in {fields.get('seconds')} s")
        if event == "root-unreadable":
            return f"cannot watch {fields['root']}: missing or unreadable; looking again every {fields['retry_s']} s"
        if event == "root-replaced":
            return f"{fields['root']} was replaced (moved or re-created); watching the new one with a full run"
        if event == "skipped":
            return f"skipped: {fields['path']}: {fields['reason']}"
        if event == "busy":
            return f"another run holds the store; trying again in {fields['retry_s']} s"
        if event == "watcher-error":
            return f"the file watcher failed ({fields['error']}); restarting it with a full run"
        if event == "stopped":
            return f"stopped after {fields.get('runs')} run(s)"
        return f"{event}: " + " ".join(f"{k}={v}" for k, v in fields.items())


@cli.command("watch")
@pass_context
def watch_command(obj: Context) -> None:
    """Watch knowledge.paths and index each change as it happens (in-process, or through the broker)."""
    from config.instruments import observe_watch_backlog
    from config.observability import configure_logging, configure_metrics, configure_tracing
    from pipeline.primary import refuse_replica
    from workers.engine import open_engine
    from workers.watcher import EngineApply, Watcher, watch_lock

    settings = prologue(obj, False)
    refuse_replica("watch", settings)
    configure_logging("INFO")
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # its own "N changes detected" per batch
    configure_tracing("knowledge-watch")
    configure_metrics("knowledge-watch", listens=True)  # long-lived: a scrape port with KNOWLEDGE_METRICS_PORT
    lines = Lines()
    stop = threading.Event()

    def stopping(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stopping)
    with watch_lock(settings), open_engine(settings, lambda text: lines("note", {"text": text}), IDLE_MS) as engine:
        engine.start("watch")  # in-process: the writer lock from the start, naming the watcher to whoever is refused
        watcher = Watcher(settings, EngineApply(engine), lines, stop)
        observe_watch_backlog(watcher.backlog)  # read at each export or scrape
        runs = watcher.run()
    lines("stopped", {"runs": runs})
