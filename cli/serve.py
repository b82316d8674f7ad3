"""The serving commands: `knowledge mcp` (stdio) and `knowledge serve` (MCP over HTTP + JSON API)."""

from __future__ import annotations

import click

from cli.app import Context, cli, pass_context
from config.loader import read_secret


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
@pass_context
def serve_command(obj: Context, host: str | None, port: int | None, snapshots: str | None) -> None:
    """Serve MCP over streamable HTTP at /mcp and the JSON API at /v1 on one port."""
    from config.observability import configure_logging, configure_metrics, configure_tracing
    from query.serve.http_api import serve

    configure_logging("WARNING")
    configure_tracing("knowledge-serve")
    configure_metrics("knowledge-serve", serves_metrics=True)  # /metrics, plus OTLP when configured
    settings = obj.settings
    exposure = settings.expose.mcp
    token = read_secret(exposure.token_env)
    replica = None
    if snapshots is not None:
        from pathlib import Path

        from query.replica import SnapshotIndex
        from query.service import KEEP_READERS

        replica = SnapshotIndex(settings, Path(snapshots), keep=KEEP_READERS)
        replica.start(settings.publish.poll_interval)
    try:
        serve(settings, host or exposure.host, exposure.port if port is None else port, token, replica)
    finally:
        if replica is not None:
            replica.close()
