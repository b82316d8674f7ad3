"""The `knowledge` command, the composition root: the only package that imports both workers/ and query/.

`cli.app` defines the click group and the helpers commands share; this package names the module
that registers each command, and the group imports a module only when its command runs (or when
`--help` lists them all), so `knowledge search` never pays for the index, serve or worker code.
"""

from __future__ import annotations

from cli.app import cli, main

# command name -> the module whose import registers it on `cli`
COMMANDS = {
    "search": "cli.read", "show": "cli.read", "sources": "cli.read", "stats": "cli.read",
    "index": "cli.index", "rm": "cli.index", "reset": "cli.index",
    "worker": "cli.deployment", "writer": "cli.deployment", "runs": "cli.deployment",
    "match": "cli.match", "enumerate": "cli.match", "which": "cli.match", "words": "cli.match",
    "doctor": "cli.doctor",
    "watch": "cli.watch",
    "eval": "cli.evaluate",
    "check": "cli.repair", "rebuild": "cli.repair", "vacuum": "cli.repair",
    "vectors": "cli.vectors",
    "mcp": "cli.serve", "serve": "cli.serve",
}
cli.lazy_commands.update(COMMANDS)

__all__ = ["COMMANDS", "cli", "main"]
