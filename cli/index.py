"""The write-side commands: index, rm, reset. Each goes through the engine (workers/engine.py)."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import click

from cli.app import Context, cli, echo_json, pass_context, prologue
from config.errors import EXIT_FAILURE, UsageError
from config.settings import Settings
from query.terminal import clean, name

if TYPE_CHECKING:  # workers/ and rich are imported only when a run starts or a bar is drawn
    from rich.progress import Progress, TaskID

    from pipeline.removal import Removal
    from workers.distributed import Enqueued
    from workers.ledger import RunSummary
    from workers.run import RunRequest, Targets


class ProgressView:
    """A progress bar on a terminal, plain lines at most every few seconds otherwise."""

    def __init__(self, as_json: bool, interval: float = 2.0, embed_timeout: float | None = None) -> None:
        self.interactive = sys.stdout.isatty() and not as_json
        self.embed_timeout = embed_timeout  # set when the run embeds: the line shows the embedding too
        self.err = as_json
        self.interval = interval
        self._last = time.monotonic()
        self._bar: tuple[Progress, TaskID] | None = None  # the bar and its one task

    def __call__(self, summary: RunSummary) -> None:
        if not summary.walked:
            return
        if self.interactive:
            self._draw_bar(summary)
            return
        now = time.monotonic()
        if now - self._last >= self.interval and summary.state == "running":
            self._last = now
            click.echo(f"progress: {summary.accounted}/{summary.total} files{self.embedding(summary)}", err=self.err)

    def embedding(self, summary: RunSummary) -> str:
        """"; embedded 512/4000 sections; embeddings slow: ..." when this process embeds for the run, else ""."""
        if self.embed_timeout is None:
            return ""
        from workers.embed_pace import known_health

        health = known_health(summary.run_id)
        return "" if health is None or not health.queued else f"; {health.line(self.embed_timeout)}"

    def _draw_bar(self, summary: RunSummary) -> None:
        if self._bar is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TimeElapsedColumn,
            )

            bar = Progress("indexing", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           "{task.description}", transient=True)
            bar.start()
            self._bar = bar, bar.add_task("", total=max(summary.total, 1))
        bar, task = self._bar
        bar.update(task, completed=summary.accounted, total=max(summary.total, 1),
                   description=self.embedding(summary).removeprefix("; "))
        if summary.state != "running":
            self.close()

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar[0].stop()
            self._bar = None


def print_summary(summary: RunSummary, as_json: bool) -> None:
    """The closing line of a run and every skipped or failed file with its reason."""
    from workers.embed_pace import known_health

    data = summary.to_json()
    health = known_health(summary.run_id)
    if health is not None and health.requests:
        data["embeddings"] = health.to_json()
    data["rechunked"] = int(summary.info.get("rechunked") or 0)
    if as_json:
        echo_json(data)
        return
    click.echo(
        f"indexed: added={data['added']} updated={data['updated']} unchanged={data['unchanged']} "
        f"removed={data['removed']} failed={data['failed']}; store: {data['files']} files, {data['chunks']} chunks"
    )
    if data["rechunked"]:
        click.echo(f"re-chunked: {data['rechunked']} (newer extractor or chunker)")
    if data.get("vectors_added"):
        click.echo(f"vectors added: {data['vectors_added']} (unchanged files, read again for the vectors they lacked)")
    if health is not None and health.requests:
        retried = (f"; {health.timeouts} timeout(s), {health.retried} input(s) retried in smaller batches "
                   f"({health.halvings} halving(s))" if health.halvings or health.timeouts else "")
        click.echo(f"embeddings: {health.embedded} section(s) in {health.requests} request(s){retried}")
    for item in data["skipped"]:
        click.echo(f"  skipped: {name(item['path'])}: {name(item['reason'])}")
    for item in data["failures"]:
        click.echo(f"  failed: {name(item['path'])}: {name(item['reason'])}")
    if data.get("error"):
        click.echo(f"  run failed: {clean(data['error'])}")


def note(text: str) -> None:
    """A line about a run in progress (a missing process, a stall): always stderr, never the JSON stdout."""
    click.echo(text, err=True)


def print_enqueued(enqueued: Enqueued, as_json: bool) -> None:
    """What `knowledge index --detach` enqueued."""
    if as_json:
        echo_json(enqueued.to_json())
    else:
        click.echo(f"run {enqueued.run_id} enqueued: {enqueued.files} files, {enqueued.to_read} to read; "
                   "`knowledge runs` follows it")


@cli.command("index")
@click.argument("paths", nargs=-1)
@click.option("--reindex", is_flag=True, help="Re-read and rebuild every file, ignoring hashes.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--detach", is_flag=True, help="With a broker: enqueue, print the run id and exit.")
@click.option("--dry-run", is_flag=True,
              help="Say what a run would add, update and remove, and its vector plan; write nothing.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Stop waiting for the run after SECONDS (exit 1); with a broker the run goes on in the workers.")
@click.option("--publish", "publish", is_flag=True,
              help="After a run that changed something, publish a generation (see `knowledge publish`; "
                   "knowledge.publish.after_index: true does it always).")
@pass_context
def index_command(obj: Context, paths: tuple[str, ...], reindex: bool, as_json: bool, detach: bool,
                  dry_run: bool, timeout: float | None, publish: bool) -> None:
    """Index PATHS and http(s) URLs (default: knowledge.paths and knowledge.urls), incrementally by content hash."""
    from config.observability import configure_logging, configure_metrics, configure_tracing
    from workers.engine import open_engine
    from workers.run import RunRequest

    settings = prologue(obj, as_json)
    if not dry_run:
        from pipeline.primary import refuse_replica

        refuse_replica("index", settings)
    configure_logging("WARNING")
    configure_tracing("knowledge-cli")
    configure_metrics("knowledge-cli")  # OTLP only, when configured (a short-lived process is not scraped)
    request = RunRequest(paths=paths, reindex=reindex)
    targets = request.targets(settings)
    refuse_missing_roots(paths, targets)
    if dry_run:
        print_dry_run(settings, request, targets, as_json)
        return
    view = ProgressView(as_json, embed_timeout=settings.embeddings.timeout if settings.embeddings else None)
    with open_engine(settings, note) as engine:
        if detach:
            print_enqueued(engine.detach(request, targets), as_json)
            return
        try:
            summary = engine.run(request, view, targets, timeout=timeout)
        finally:
            view.close()
    print_summary(summary, as_json)
    if summary.state != "complete" or summary.counts.get("failed", 0):
        sys.exit(EXIT_FAILURE)
    if (publish or settings.publish.after_index) and changed(summary):
        from cli.publish import print_published, publish_store

        print_published(publish_store(settings, None, None), False, err=as_json)  # the summary owns stdout


def changed(summary: RunSummary) -> bool:
    """Whether a run added, updated or removed a document or added vectors."""
    data = summary.to_json()
    return any(int(data.get(key) or 0) for key in ("added", "updated", "removed", "vectors_added"))


def refuse_missing_roots(paths: tuple[str, ...], targets: Targets) -> None:
    """UsageError (exit 2) naming every root given on the command line that does not exist, before any store is made."""
    if not targets.explicit:
        return
    missing = [root for root in targets.roots if not os.path.lexists(root)]
    if not missing:
        return
    given = {os.path.normpath(os.path.abspath(p)): p for p in paths}
    named = ", ".join(name(given.get(os.path.normpath(root), root)) for root in missing)
    which = "" if len(missing) == len(targets.roots) and len(missing) == 1 else (
        f" ({len(missing)} of the {len(targets.roots)} roots given)")
    raise UsageError(f"cannot index {named}: no such file or directory{which}; nothing was indexed and no store "
                     "was created or changed")


def print_dry_run(settings: Settings, request: RunRequest, targets: Targets, as_json: bool) -> None:
    """What `index --dry-run` prints: the changes a run would make and its vector plan."""
    from pipeline.vectors import recipe_note
    from workers.run import dry_run

    found, plan = dry_run(settings, request, targets)
    vectors = None if plan is None else {
        "model": plan.identity.model, "dimension": plan.identity.dimension, "reuse": plan.reuse,
        "documents_lacking_vectors": len(plan.backfill), "recipe": plan.identity.recipe,
    }
    if as_json:
        echo_json({**found.to_json(), "urls": targets.urls, "vectors": vectors})
        return
    click.echo(f"dry run, nothing written: would add {len(found.added)}, update {len(found.updated)}, remove "
               f"{len(found.removed)}; {found.unchanged} unchanged; {len(targets.urls)} web page(s) fetched")
    if found.rechunked:
        click.echo(f"re-chunked: {len(found.rechunked)} (newer extractor or chunker)")
    for verb, paths in (("add", found.added), ("update", found.updated), ("remove", found.removed)):
        for path in paths:
            click.echo(f"  {verb}: {name(path)}")
    for item in found.skipped:
        click.echo(f"  skipped: {name(item.path)}: {name(item.reason)}")
    for item in found.failures:
        click.echo(f"  failed: {name(item.path)}: {name(item.reason)}")
    if vectors is not None:
        mode = "reuses the stored vectors of unchanged sections" if plan and plan.reuse else "embeds every section"
        click.echo(f"vectors: model={vectors['model']} dim={vectors['dimension']} recipe={vectors['recipe']}: {mode}; "
                   f"{vectors['documents_lacking_vectors']} document(s) lack vectors")
        older = recipe_note(plan.identity) if plan is not None and plan.reuse else None
        if older is not None:
            click.echo(f"note: {older}")


@cli.command("rm")
@click.argument("paths", nargs=-1, required=True)
@click.option("--prefix", is_flag=True, help="Treat every PATH as a directory: remove everything indexed under it.")
@click.option("--force", is_flag=True, help="Remove even a whole root or past knowledge.rm_max_percent.")
@pass_context
def rm_command(obj: Context, paths: tuple[str, ...], prefix: bool, force: bool) -> None:
    """Remove documents by path (as `sources` lists it, or as a path from here); a directory removes its subtree."""
    from workers.engine import open_engine

    for position, given in enumerate(paths, 1):
        if not given.strip():
            raise UsageError(
                f"knowledge rm: argument {position} is empty (an unset variable, as in `knowledge rm \"$DOC\"`, "
                "reads as nothing); name the document or directory to remove"
            )
    from pipeline.primary import refuse_replica

    settings = prologue(obj, False)
    refuse_replica("rm", settings)
    removed: set[str] = set()
    with open_engine(settings) as engine:
        removal = engine.resolve(paths, prefix)
        wanted = removal.wanted
        if not force:
            _refuse_a_sweeping_removal(settings, removal)
        if wanted:
            removed = set(engine.remove(wanted))
    missed = False
    for target in removal.targets:
        given, stored, subtree = target.given, target.stored, target.subtree
        gone = [p for p in stored if p in removed]
        missed = missed or not gone
        if subtree:
            click.echo(f"removed {len(gone)} document{'' if len(gone) == 1 else 's'} under {name(given)}")
        else:
            click.echo(f"{'removed' if gone else 'not indexed'}: {name(stored[0] if stored else given)}")
    if missed:
        sys.exit(EXIT_FAILURE)


def _refuse_a_sweeping_removal(settings: Settings, removal: Removal) -> None:
    """UsageError when a removal without --force takes a whole root or more than rm_max_percent of the store.

    One document named exactly is never sweeping: the rule guards directories and long lists.
    """
    wanted = removal.wanted
    if len(wanted) < 2 and not removal.subtree:
        return
    total, whole_roots = removal.documents, removal.whole_roots
    share = 100 * len(wanted) / total if total else 0.0
    if not whole_roots and share <= settings.rm_max_percent:
        return
    why = (f"every document of the root {', '.join(name(r) for r in whole_roots)}" if whole_roots
           else f"more than knowledge.rm_max_percent ({settings.rm_max_percent}%) of the store")
    raise UsageError(
        f"knowledge rm would remove {len(wanted)} of {total} documents ({why}); nothing was removed. "
        "Add --force to remove them"
    )


@cli.command("reset")
@click.option("--force", is_flag=True, help="Really delete the index.")
@pass_context
def reset_command(obj: Context, force: bool) -> None:
    """Empty the index, keeping an empty store with its schema (the documents on disk are untouched)."""
    from pipeline.primary import refuse_replica
    from workers.engine import open_engine

    settings = prologue(obj, False)
    refuse_replica("reset", settings)
    if not force:
        raise UsageError(f"this deletes the index at {settings.db_path}; run `knowledge reset --force` to do it")
    with open_engine(settings) as engine:
        emptied = engine.reset()
    if not emptied.existed:
        removed = "nothing (there was no index)"
    elif emptied.documents is None:
        removed = "a damaged store (its documents could not be counted)"
    else:
        removed = f"{emptied.documents} documents and {emptied.chunks} chunks"
    click.echo(f"reset: removed {removed}; the store at {settings.db_path} is empty: run `knowledge index` to fill it")
