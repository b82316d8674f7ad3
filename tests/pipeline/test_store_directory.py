"""The store directory: one knowledge creates is 0700; an existing one is used as it is (never
chmod-ed), and refused with one line when it is group or world writable or a symlink."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def tree(workdir: Path) -> Path:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n"})
    return workdir


def _configure(workdir: Path, directory: str) -> None:
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  directory: {directory}\n", encoding="utf-8")


def test_a_store_directory_knowledge_creates_is_private(tree: Path, run_cli: RunCli) -> None:
    _configure(tree, "state/index")
    assert run_cli("index", "docs")[0] == 0
    assert _mode(tree / "state/index") == 0o700


def test_the_project_directory_as_the_store_keeps_its_mode(tree: Path, run_cli: RunCli) -> None:
    os.chmod(tree, 0o755)
    _configure(tree, ".")
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    assert (tree / "knowledge.db").is_file()
    assert _mode(tree) == 0o755
    assert run_cli("search", "alpha")[0] == 0


def test_an_existing_store_directory_is_used_as_it_is(tree: Path, run_cli: RunCli) -> None:
    (tree / "shared").mkdir(mode=0o750)
    os.chmod(tree / "shared", 0o750)
    _configure(tree, "shared")
    assert run_cli("index", "docs")[0] == 0
    assert _mode(tree / "shared") == 0o750


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o1777])
def test_a_group_or_world_writable_store_directory_is_refused(tree: Path, run_cli: RunCli, mode: int) -> None:
    (tree / "open").mkdir()
    os.chmod(tree / "open", mode)
    _configure(tree, "open")
    code, _, err = run_cli("index", "docs")
    assert code == 1
    assert err.count("\n") == 1 and "writable by group or others" in err and "chmod go-w" in err
    assert _mode(tree / "open") == mode and not (tree / "open/knowledge.db").exists()


def test_a_symlinked_store_directory_is_refused(tree: Path, run_cli: RunCli) -> None:
    (tree / "elsewhere").mkdir(mode=0o700)
    (tree / "linked").symlink_to(tree / "elsewhere", target_is_directory=True)
    _configure(tree, "linked")
    code, _, err = run_cli("index", "docs")
    assert code == 1 and err.count("\n") == 1 and "is a symlink" in err
    assert not (tree / "elsewhere/knowledge.db").exists()
