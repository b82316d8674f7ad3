"""The `knowledge` command, the composition root: the only package that imports both workers/ and query/.

`cli.app` defines the click group and the helpers commands share; importing this package registers
every command module on it, in one direction (no command module is imported by `cli.app`).
"""

from __future__ import annotations

from cli import deployment, doctor, index, match, read, serve  # noqa: F401  (registers the commands)
from cli.app import cli, main

__all__ = ["cli", "main"]
