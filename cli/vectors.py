"""`knowledge vectors switch`: change the embedding model without a search outage (pipeline/shadow.py)."""

from __future__ import annotations

import sys
import time

import click

from cli.app import Context, cli, echo_json, pass_context, prologue
from config.errors import EXIT_BUSY, IndexNotBuilt, UsageError
from config.loader import load_settings
from config.settings import EmbeddingsSettings, Settings
from pipeline import db, schema, shadow
from pipeline.embeddings import EmbeddingsClient
from pipeline.vectors import configured_identity, pinned_identity, probe_server
from query.terminal import clean

COMMAND = "knowledge vectors switch"


@cli.group("vectors")
def vectors_group() -> None:
    """The vector tier's maintenance: switch the embedding model while search keeps serving."""


@vectors_group.command("switch")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Embed at most this many sections now; the next run resumes (exit 75 while unfinished).")
@click.option("--abandon", is_flag=True, help="Drop the shadow vectors of an unfinished switch.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@pass_context
def switch_command(obj: Context, limit: int | None, abandon: bool, as_json: bool) -> None:
    """Embed every section with `embeddings_next` beside the serving vectors, then swap them in one transaction.

    Search keeps answering hybrid with the old model throughout and with the new one from the
    swap on. Resumable: a run stopped by a crash, a failing server or --limit keeps what it
    embedded and the next run goes on from there. Holds the write lock (exit 75 while a run holds
    it), or has the running `knowledge writer` apply every write, swapping once no index run is in
    progress. Exits 75 when it stopped before the swap (--limit).
    """
    from workers.engine import open_engine

    settings = prologue(obj, as_json)
    nxt = load_settings(obj.config, obj.store_dir).embeddings_next  # as written, even once it serves
    if not abandon and nxt is None:
        raise UsageError("`knowledge vectors switch` needs the new model in knowledge.embeddings_next")
    if not settings.db_path.is_file():
        raise IndexNotBuilt.at(settings.db_path)
    with open_engine(settings) as engine:
        done = _switch(settings, nxt, engine.shadow_writer(), limit, abandon, as_json)
    if done is None:
        return
    identity = done.identity
    outcome = {"swapped": done.swapped, "embedded": done.embedded, "total": done.total,
               "identity": identity.to_dict()}
    if done.swapped:
        _say(as_json, outcome, f"switch: done; the store serves {clean(identity.model)} dim={identity.dimension}; "
                               "move the embeddings_next block to embeddings in the configuration")
        return
    left = (f"{done.left} sections left" if done.left else
            "every section is embedded but an index run kept the swap waiting")
    _say(as_json, outcome, f"switch: {left}; run `{COMMAND}` again to go on")
    sys.exit(EXIT_BUSY)


def _switch(settings: Settings, nxt: EmbeddingsSettings | None, writer: shadow.ShadowWriter,
            limit: int | None, abandon: bool, as_json: bool) -> shadow.Progress | None:
    """Run the switch through writer (None when it had nothing to do: abandoned, or already serving)."""
    reader = db.connect_readonly(settings.db_path)
    try:
        if abandon:
            writer.abandon()
            _say(as_json, {"abandoned": True}, "switch: abandoned; the serving vectors are unchanged")
            return None
        assert nxt is not None
        identity, dropped = shadow.target(reader, lambda: configured_identity(nxt, probe_server(nxt).dimension),
                                          wait=lambda: time.sleep(0.5))
        if dropped and not as_json:
            click.echo(f"note: {clean(dropped)}")
        if pinned_identity(schema.read_meta(reader)) == identity:
            writer.abandon()
            _say(as_json, {"swapped": False, "serving": identity.to_dict()},
                 f"switch: the store already serves {identity.model!r}; move embeddings_next to embeddings")
            return None

        def report(done: shadow.Progress) -> None:
            if not as_json:
                click.echo(f"switch: {done.embedded}/{done.total} sections embedded with {clean(identity.model)}")

        with EmbeddingsClient(nxt, expected_dim=identity.dimension) as client:
            return shadow.run(writer, reader, identity, client.embed, nxt.batch_size, limit, report)
    finally:
        reader.close()


def _say(as_json: bool, data: dict[str, object], line: str) -> None:
    if as_json:
        echo_json(data)
    else:
        click.echo(line)
