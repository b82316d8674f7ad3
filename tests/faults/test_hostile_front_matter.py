"""Hostile YAML front matter in a tree (alias bombs, recursive aliases, deep nesting, huge tag lists,
non-finite numbers) next to ordinary files: the run finishes, each refused block is indexed as text,
JSON answers stay valid, and the store holds exactly the tree (the fault suite's invariants)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.lib.corpus import generate
from tests.cli.test_filters import HOSTILE
from tests.conftest import write_tree
from tests.faults.invariants import Invariants

RunCli = Callable[..., tuple[int, str, str]]


@pytest.mark.timeout(180)
def test_hostile_front_matter_among_ordinary_files_is_bounded_and_the_store_converges(workdir: Path,
                                                                                      run_cli: RunCli) -> None:
    generate(workdir / "docs", 40, seed=11)
    write_tree(workdir, {f"docs/hostile/{Path(p).name}": text for p, text in HOSTILE.items()})
    code, out, err = run_cli("index", "docs", "--json")
    summary = json.loads(out)
    assert code == 0 and summary["failed"] == 0, err
    refused = {s["path"] for s in summary["skipped"]}
    assert {"docs/hostile/laughs.md", "docs/hostile/recursive.md", "docs/hostile/deep.md"} <= refused

    def strict(constant: str) -> None:
        raise ValueError(f"invalid JSON constant {constant}")

    for command in (("sources", "--json"), ("stats", "--json"), ("search", "laughing", "--json")):
        code, out, _ = run_cli(*command)
        assert code == 0 and json.loads(out, parse_constant=strict)["status"] == "ok", command
    Invariants(run_cli, workdir, workdir / "knowledge/default/knowledge.db", ("docs",)).assert_recovered()
