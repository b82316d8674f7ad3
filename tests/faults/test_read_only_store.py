"""A store on a file system remounted read-only (what a kernel does after disk errors): every write
command says so in one line, reads go on answering, `check` never reports ok, and once the file system
is writable again the store converges (the fault suite's invariants)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.lib.corpus import generate
from tests.faults.invariants import Invariants

RunCli = Callable[..., tuple[int, str, str]]


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of its own at tmp_path/fs, unmounted at the end (skipped where this user cannot mount)."""
    point = tmp_path / "fs"
    point.mkdir()
    made = _mount("-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(point))
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip() or 'mount failed'}): needs root")
    try:
        yield point
    finally:
        os.chdir(tmp_path)
        _mount("-o", "remount,rw", str(point))
        gone = subprocess.run(["umount", str(point)], capture_output=True, timeout=30, check=False)
        if gone.returncode != 0:  # a connection this process still holds: detach it, freed when closed
            subprocess.run(["umount", "-l", str(point)], capture_output=True, timeout=30, check=False)


def test_a_store_on_a_read_only_file_system_reads_refuses_writes_by_name_and_recovers(
        mounted: Path, run_cli: RunCli) -> None:
    os.chdir(mounted)
    (mounted / "knowledge.yaml").write_text("knowledge:\n  paths: [docs]\n", encoding="utf-8")
    generate(mounted / "docs", 30, seed=7)
    assert run_cli("index", "docs")[0] == 0
    found = json.loads(run_cli("search", "the", "--json")[1])["results"]
    assert found
    assert _mount("-o", "remount,ro", str(mounted)).returncode == 0

    for command in (["index", "docs"], ["vacuum"], ["rebuild"], ["reset", "--force"], ["rm", found[0]["path"]]):
        code, out, err = run_cli(*command)
        assert code == 1 and "Traceback" not in err, (command, err)
        assert "read-only file system" in err and "remount it read-write" in err, (command, err)
    watch = subprocess.run([str(Path(sys.executable).with_name("knowledge")), "watch"], capture_output=True, text=True,
                           timeout=60, check=False, cwd=mounted)
    assert watch.returncode == 1 and "read-only file system" in watch.stderr and "Traceback" not in watch.stderr

    code, out, err = run_cli("search", "the", "--json")  # reads answer, from the immutable file
    assert code == 0 and json.loads(out)["results"] == found, err
    for command in (["stats", "--json"], ["sources", "--json"], ["show", found[0]["index_ref"], "--json"],
                    ["match", "the", "--json"]):
        code, out, err = run_cli(*command)
        assert code == 0 and json.loads(out)["status"] == "ok", (command, err)

    code, out, err = run_cli("check", "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["complete"] is False and report["blocked"] == "read-only"
    assert report["findings"] == [] and "Traceback" not in err
    code, out, _ = run_cli("check")
    assert code == 1 and out.splitlines()[-1].startswith("check: not ok") and "read-only file system" in out
    code, out, _ = run_cli("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["store"]["status"] == "ok" and "read-only file system" in checks["integrity"]["detail"]

    assert _mount("-o", "remount,rw", str(mounted)).returncode == 0
    Invariants(run_cli, mounted, mounted / "knowledge/default/knowledge.db", ("docs",)).assert_recovered()
