"""The serving commands: `knowledge mcp` (stdio) and `knowledge serve` (MCP over HTTP + JSON API)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cli.app import Context, cli, pass_context
from config.loader import read_secret
from config.settings import Settings

if TYPE_CHECKING:
    from pipeline.pull import Puller
    from query.replica import SnapshotIndex


@cli.command("mcp")
@pass_context
def mcp_command(obj: Context) -> None:
    """Serve the allowlisted knowledge tools over MCP on stdin/stdout (logs on stderr)."""
    from config.observability import configure_logging, configure_metrics, configure_tracing
    from query.serve.mcp_server import serve_stdio

    configure_logging("WARNING")
    configure_tracing("knowledge-mcp")
    configure_metrics("knowledge-mcp")
    serve_stdio(obj.settings)


@cli.command("serve")
@click.option("--host", default=None, help="Address to bind (default knowledge.expose.mcp.host, 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port to bind (default knowledge.expose.mcp.port).")
@click.option("--snapshots", metavar="DIR", default=None,
              help="Serve read-only the newest verified generation `knowledge publish` wrote to DIR, swapping newer "
                   "ones in (poll every knowledge.publish.poll_interval).")
@click.option("--pull-from", "pull_from", metavar="URL", default=None,
              help="With --snapshots: fetch newer generations into DIR from the primary's `knowledge serve` at URL "
                   "(its /v1/snapshots routes; the token of knowledge.expose.mcp.token_env is sent).")
@pass_context
def serve_command(obj: Context, host: str | None, port: int | None, snapshots: str | None,
                  pull_from: str | None) -> None:
    """Serve MCP over streamable HTTP at /mcp and the JSON API at /v1 on one port."""
    from config.observability import configure_logging, configure_metrics, configure_tracing
    from query.serve.http_api import serve

    configure_logging("WARNING")
    configure_tracing("knowledge-serve")
    configure_metrics("knowledge-serve", serves_metrics=True)  # /metrics, plus OTLP when configured
    settings = obj.settings
    exposure = settings.expose.mcp
    token = read_secret(exposure.token_env)
    if pull_from is not None and snapshots is None:
        raise click.UsageError("--pull-from needs --snapshots DIR: the directory the pulled generations go to")
    replica = puller = None
    if snapshots is not None:
        from pathlib import Path

        from config.instruments import observe_snapshot
        from query.replica import SnapshotIndex
        from query.service import KEEP_READERS

        replica = SnapshotIndex(settings, Path(snapshots), keep=KEEP_READERS)
        if pull_from is not None:
            puller = start_pull(settings, pull_from, replica, token)
        replica.start(settings.publish.poll_interval)
        observe_snapshot(replica.sample)
    try:
        serve(settings, host or exposure.host, exposure.port if port is None else port, token, replica)
    finally:
        if puller is not None:
            puller.close()
        if replica is not None:
            replica.close()


def start_pull(settings: Settings, url: str, replica: SnapshotIndex, token: str | None) -> Puller:
    """A Puller fetching from url into the replica's directory, checked once (a token or Host the primary refuses
    stops the serve here), then pulling every poll interval."""
    from pipeline.pull import Puller, startup_check

    puller = Puller(url, replica.directory, settings.publish.keep, token, token_env=settings.expose.mcp.token_env)
    try:
        problem = startup_check(puller)
    except BaseException:
        puller.close()
        raise
    if problem:
        puller.say(problem)
    replica.pull_status = puller.record.to_json  # /healthz says how pulling goes
    puller.start(settings.publish.poll_interval, lambda _generation: replica.poll())
    return puller
