"""Another commit's code beside this tree's: a detached worktree of it, and a command that runs it first."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.lib.paths import ROOT


def baseline_tree(ref: str, out: Path) -> Path:
    """A detached worktree of ref's commit under out (made once per commit)."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    tree = out / f"baseline-{commit[:12]}"
    if not (tree / "pipeline" / "store.py").exists():
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
                       capture_output=True, check=True)
    return tree


def tree_python(tree: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    """This interpreter running args with tree's packages first: the command and its environment.

    `-P` keeps the working directory off the path, and PYTHONPATH puts tree before the installed
    project, so `import pipeline` (or `query`, `cli`) is tree's code.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    env["PYTHONPATH"] = str(tree.resolve())
    return [sys.executable, "-P", *args], env
