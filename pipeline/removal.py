"""What a removal names: each `knowledge rm` argument resolved to stored paths, and how much of the store they are.

The write side asks (workers/engine.py `Engine.resolve`) before it removes anything: an argument is a
document as stored, or as spelled from here (pipeline/paths.py); else, or with --prefix, a directory,
every document stored under it. The scale (documents in the store, the roots every one of whose
documents would go) is what `rm` refuses a sweeping removal by. Read on a read-only connection of its
own: a running writer may hold the write lock meanwhile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pipeline import db
from pipeline.db import Connection
from pipeline.paths import PathBase, under

PART = 500  # paths bound to one statement


@dataclass(frozen=True)
class Target:
    """One argument of a removal: the stored paths it names, and whether it named a subtree."""

    given: str
    stored: tuple[str, ...]
    subtree: bool


@dataclass(frozen=True)
class Removal:
    """A removal's arguments resolved, and its scale: the documents in the store, the whole roots it takes."""

    targets: tuple[Target, ...]
    documents: int = 0
    whole_roots: tuple[str, ...] = ()

    @property
    def wanted(self) -> list[str]:
        """Every stored path the arguments name, in argument order."""
        return [p for target in self.targets for p in target.stored]

    @property
    def subtree(self) -> bool:
        """Whether any argument named a subtree."""
        return any(target.subtree for target in self.targets)


def resolve(db_path: Path, base: PathBase, paths: tuple[str, ...], prefix: bool) -> Removal:
    """Each argument with the stored paths it names, and the scale of removing them all (nothing named and
    no scale without a store)."""
    paths = tuple(dict.fromkeys(paths))  # an argument given twice is one target
    if not db_path.is_file():
        return Removal(tuple(Target(p, (), prefix) for p in paths))
    conn = db.connect_readonly(db_path)
    try:
        with db.translating_damage(db_path):
            targets = tuple(_target(conn, base, given, prefix) for given in paths)
            documents, whole = _scale(conn, [p for t in targets for p in t.stored])
    finally:
        conn.close()
    return Removal(targets, documents, tuple(whole))


def _target(conn: Connection, base: PathBase, given: str, prefix: bool) -> Target:
    spelled = given if "://" in given else base.canonical(given)
    if not prefix:
        exact = stored_paths(conn, [given, spelled])
        if exact or "://" in given:
            return Target(given, ((given if given in exact else spelled),) if exact else (), False)
    below = paths_under(conn, spelled) or paths_under(conn, given.rstrip("/") or "/")
    return Target(given, tuple(below), bool(prefix or below or os.path.isdir(given)))


def _scale(conn: Connection, paths: list[str]) -> tuple[int, list[str]]:
    """(documents in the store, the roots every one of whose documents is among paths)."""
    per_root = dict(conn.execute("SELECT root, count(*) FROM documents GROUP BY root").fetchall())
    taken: dict[str, int] = {}
    for start in range(0, len(paths), PART):
        part = paths[start:start + PART]
        marks = ",".join("?" * len(part))
        for root, count in conn.execute(
                f"SELECT root, count(*) FROM documents WHERE path IN ({marks}) GROUP BY root", part):
            taken[str(root)] = taken.get(str(root), 0) + int(count)
    whole = sorted(root for root, count in taken.items() if count == per_root.get(root))
    return sum(int(c) for c in per_root.values()), whole


def stored_paths(conn: Connection, candidates: list[str]) -> set[str]:
    """Those of candidates that are stored document paths."""
    found: set[str] = set()
    for start in range(0, len(candidates), PART):
        part = candidates[start:start + PART]
        marks = ",".join("?" * len(part))
        found |= {str(r[0]) for r in conn.execute(f"SELECT path FROM documents WHERE path IN ({marks})", part)}
    return found


def paths_under(conn: Connection, directory: str) -> list[str]:
    """The stored file paths at or beneath a directory (stored spelling), sorted."""
    rows = conn.execute("SELECT path FROM documents WHERE source = 'file' ORDER BY path").fetchall()
    return [str(path) for (path,) in rows if under(str(path), directory)]
