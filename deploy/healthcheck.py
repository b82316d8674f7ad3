"""The image's HEALTHCHECK: `knowledge serve` (a replica too) is healthy when its /healthz answers 200.

It finds the container's `knowledge` process in /proc. When that process serves, the port and address
come from its own arguments (--port, --host, --config) else from the config it reads (KNOWLEDGE_CONFIG,
knowledge.expose.mcp); a wildcard address is probed on loopback. Every other role (worker, writer, ...)
has no HTTP port: it is healthy while its process runs, which is what the container's state says.
Exit 0 healthy, 1 not. Only the standard library and the project's own config loader: no curl needed.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

WILDCARDS = {"0.0.0.0", "::", "[::]", ""}


def knowledge_argv() -> list[str] | None:
    """The arguments after `knowledge` of the container's knowledge process (None when there is none)."""
    for entry in sorted(Path("/proc").iterdir(), key=lambda p: (not p.name.isdigit(), p.name)):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        for i, arg in enumerate(argv[:3]):
            if Path(arg).name == "knowledge":
                return argv[i + 1:]
    return None


def option(argv: list[str], name: str) -> str | None:
    """The value of --name V or --name=V in argv."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def command(argv: list[str]) -> str | None:
    """The subcommand in argv, past the global options and their values."""
    valued = {"--config", "--store-dir"}
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in valued:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def probe_url(argv: list[str]) -> str:
    """Where the serving process answers /healthz."""
    host, port = option(argv, "--host"), option(argv, "--port")
    if host is None or port is None:
        from config.loader import load_settings

        mcp = load_settings(option(argv, "--config"), option(argv, "--store-dir")).expose.mcp
        host = mcp.host if host is None else host
        port = str(mcp.port) if port is None else port
    if host in WILDCARDS:
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/healthz"


def main() -> int:
    argv = knowledge_argv()
    if argv is None:
        print("no knowledge process in this container", file=sys.stderr)
        return 1
    if command(argv) != "serve":
        return 0
    url = probe_url(argv)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    try:
        with opener.open(url, timeout=4) as answer:
            healthy = answer.status == 200
    except OSError as failure:
        print(f"{url}: {failure}", file=sys.stderr)
        return 1
    print(f"{url}: {'ok' if healthy else 'not ok'}")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
