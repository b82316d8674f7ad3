"""The four packages resolve to this repository and the dependency direction of DESIGN.md holds."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("config", "pipeline", "workers", "query")

# What each package may import, among the project's packages and the adapters' libraries.
FORBIDDEN = {
    "config": {"pipeline", "workers", "query", "dramatiq", "click", "mcp"},
    "pipeline": {"workers", "query", "dramatiq", "click", "mcp", "rich"},
    "workers": {"query", "click", "mcp"},
    "query": {"dramatiq"},
}
# query reaches workers only to start an index run or a worker process, always lazily.
QUERY_MAY_IMPORT_WORKERS = {"cli_index.py", "cli_workers.py", "cli_doctor.py"}


def test_pyproject_lists_the_four_packages_explicitly() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert sorted(data["tool"]["setuptools"]["packages"]) == sorted(PACKAGES)
    assert data["project"]["name"] == "knowledge-pipeline"
    assert data["project"]["scripts"]["knowledge"] == "query.cli:main"


@pytest.mark.parametrize("name", PACKAGES)
def test_each_import_name_resolves_to_this_repository(name: str) -> None:
    module = importlib.import_module(name)
    assert Path(module.__file__).resolve().parent == ROOT / name


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level module, imported at module level?) for every import in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, bool]] = []
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module.split(".")[0], id(node) in top_level))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_the_dependency_direction_holds(package: str) -> None:
    for path in sorted((ROOT / package).glob("*.py")):
        for module, at_top in _imports(path):
            assert module not in FORBIDDEN[package], f"{path.relative_to(ROOT)} imports {module}"
            if package == "query" and module == "workers":
                assert path.name in QUERY_MAY_IMPORT_WORKERS and not at_top, (
                    f"{path.relative_to(ROOT)} imports workers (only index/worker commands may, lazily)"
                )


def test_no_module_is_named_like_a_stdlib_or_dependency_module() -> None:
    taken = set(sys.stdlib_module_names) | {"dramatiq", "redis", "httpx", "yaml", "click", "rich", "mcp",
                                            "structlog", "tenacity", "opentelemetry", "sqlite_vec", "pytest"}
    for package in PACKAGES:
        for path in (ROOT / package).glob("*.py"):
            assert path.stem not in taken, f"{package}/{path.name} shadows a module"


def test_nothing_imports_the_stdlib_sqlite3_outside_the_db_door() -> None:
    for package in PACKAGES:
        for path in (ROOT / package).glob("*.py"):
            modules = {m for m, _ in _imports(path)}
            assert "sqlite3" not in modules, path
            if path != ROOT / "pipeline" / "db.py":
                assert "pysqlite3" not in modules, f"{path} bypasses pipeline/db.py"


def test_search_and_the_cli_do_not_import_dramatiq_or_redis() -> None:
    code = (
        "import sys, query.cli, query.search\n"
        "bad = [m for m in ('dramatiq', 'redis') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
