"""The `knowledge` command, the composition root: the only package that imports both workers/ and query/.

`cli.app` defines the click group and the helpers commands share; this package names the module
that registers each command, and the group imports a module only when its command runs (or when
`--help` lists them all), so `knowledge search` never pays for the index, serve or worker code.
"""

from __future__ import annotations

from cli.app import cli, main, run

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
    "publish": "cli.publish",
}
cli.lazy_commands.update(COMMANDS)
# commands that read the store and start no thread: the executable ends them without the interpreter's teardown
cli.read_only.update({"search", "show", "sources", "stats", "match", "enumerate", "which", "words"})

__all__ = ["COMMANDS", "cli", "main", "run"]
