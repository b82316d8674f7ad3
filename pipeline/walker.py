"""Find the eligible files under the configured roots, reporting every skip with its reason."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.models import Skip

EXTENSIONS = frozenset({".md", ".markdown", ".txt", ".text"})
MAX_FILE_BYTES = 512 * 1024
EXCLUDED_DIRS = frozenset({"memory"})


@dataclass(frozen=True)
class Found:
    """An eligible file: the path as walked (forward slashes), its root, and its stat."""

    path: str
    root: str
    size: int
    mtime_ns: int


@dataclass
class WalkResult:
    """Everything one walk of one root produced."""

    root: str
    files: list[Found] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    errors: list[Skip] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when the whole root was walked with no error (a precondition of pruning)."""
        return not self.errors


def _display(path: str) -> str:
    return path.replace(os.sep, "/")


def _join(base: str, name: str) -> str:
    return name if base in ("", ".") else f"{base.rstrip('/')}/{name}"


def walk_root(root: str, store_dir: Path | None = None) -> WalkResult:
    """Walk one root (a directory or a single file), depth first in sorted order."""
    result = WalkResult(root=root)
    store_real = os.path.realpath(store_dir) if store_dir is not None else None
    try:
        st = os.lstat(root)
    except OSError as exc:
        result.errors.append(Skip(_display(root), f"cannot read: {exc.strerror}"))
        return result
    if stat.S_ISLNK(st.st_mode):
        result.errors.append(Skip(_display(root), "symlink refused"))
        return result
    if stat.S_ISREG(st.st_mode):
        _consider(root, root, st, result, explicit=True)
        return result
    if not stat.S_ISDIR(st.st_mode):
        result.errors.append(Skip(_display(root), "not a regular file or directory"))
        return result
    base = os.path.normpath(root)
    result.root = _display(base)
    for found in _walk_dir(base, store_real, result):
        result.files.append(found)
    return result


def _walk_dir(directory: str, store_real: str | None, result: WalkResult) -> Iterator[Found]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        result.errors.append(Skip(_display(directory), f"cannot list directory: {exc.strerror}"))
        return
    for entry in entries:
        path = _join(directory, entry.name)
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            result.skipped.append(Skip(_display(path), f"cannot stat: {exc.strerror}"))
            continue
        if stat.S_ISLNK(st.st_mode):
            result.skipped.append(Skip(_display(path), "symlink refused"))
            continue
        if stat.S_ISDIR(st.st_mode):
            if entry.name.startswith("."):
                result.skipped.append(Skip(_display(path) + "/", "dot directory"))
            elif entry.name in EXCLUDED_DIRS:
                result.skipped.append(Skip(_display(path) + "/", "memory directory"))
            elif store_real is not None and os.path.realpath(path) == store_real:
                result.skipped.append(Skip(_display(path) + "/", "the store's own directory"))
            else:
                yield from _walk_dir(path, store_real, result)
            continue
        if stat.S_ISREG(st.st_mode):
            found = _consider(path, result.root, st, result, explicit=False)
            if found is not None:
                yield found


def _consider(path: str, root: str, st: os.stat_result, result: WalkResult, explicit: bool) -> Found | None:
    name = os.path.basename(path)
    if os.path.splitext(name)[1].lower() not in EXTENSIONS:
        if explicit:
            result.skipped.append(Skip(_display(path), "not a .md, .markdown, .txt or .text file"))
        return None
    if name.startswith(".") and not explicit:
        result.skipped.append(Skip(_display(path), "dot file"))
        return None
    if st.st_size > MAX_FILE_BYTES:
        result.skipped.append(Skip(_display(path), f"too large ({st.st_size} bytes > {MAX_FILE_BYTES})"))
        return None
    found = Found(_display(path), _display(root), st.st_size, st.st_mtime_ns)
    if explicit:
        result.files.append(found)
    return found
