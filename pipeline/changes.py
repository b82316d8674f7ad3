"""File events reduced to what one incremental run must do: the paths that matter, coalesced, sorted
into updates and stat-confirmed deletes.

`knowledge watch` hands every event batch to Pending; when no run is in progress it takes what has
piled up (everything seen while the last run went on becomes one batch) and decide() stats each
path: a path that exists is an update (a file deleted and re-created inside the window is an
update), a path that is gone by its lstat is a delete, and a batch too large to name file by file,
an event on a root itself, or a watcher that lost events becomes a full incremental run of the
configured roots. Scope says which paths can matter at all: under a configured root, outside the
store directory, in no dot or memory directory, not a dot file, not excluded by knowledge.exclude
and matched by knowledge.include when there is one — the same judgement the walker makes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pipeline.globs import Globs
from pipeline.walker import EXCLUDED_DIRS, EXTENSIONS

# Past this many changed paths in one batch a full incremental run (a stat per file, reading only the
# changed ones) is cheaper and simpler than naming each path: a `git checkout` of 5,000 files is one run.
FULL_RUN_OVER = 256


@dataclass(frozen=True)
class Scope:
    """Which filesystem paths can change the index: absolute roots (parents' symlinks resolved, like
    the run's targets), the store directory, and the configured globs."""

    roots: tuple[str, ...]
    store_dir: str | None = None
    globs: Globs = field(default_factory=Globs)

    @classmethod
    def of(cls, roots: Sequence[str], store_dir: str | os.PathLike[str] | None, include: Sequence[str] = (),
           exclude: Sequence[str] = ()) -> Scope:
        """The scope of roots with the store directory (resolved) and knowledge.include/exclude."""
        store = os.path.realpath(os.fspath(store_dir)) if store_dir is not None else None
        return cls(tuple(os.path.normpath(r) for r in roots), store, Globs.of(include, exclude))

    def root_of(self, path: str) -> str | None:
        """The configured root path lies in (the deepest, when roots nest), or None."""
        best: str | None = None
        for root in self.roots:
            if (path == root or path.startswith(root.rstrip("/") + "/")) and (best is None or len(root) > len(best)):
                best = root
        return best

    def in_store(self, path: str) -> bool:
        """True for the store directory and everything in it."""
        if self.store_dir is None:
            return False
        store = self.store_dir.rstrip("/")
        return path == store or path.startswith(store + "/") or os.path.realpath(path).startswith(store + "/")

    def relevant(self, path: str) -> bool:
        """True when a change at path (absolute) may change the index."""
        path = os.path.normpath(path)
        root = self.root_of(path)
        if root is None or self.in_store(path):
            return False
        if path == root:
            return True
        relative = path[len(root.rstrip("/")) + 1:]
        parts = relative.split("/")
        for depth, name in enumerate(parts):
            if name.startswith(".") or (depth < len(parts) - 1 and name in EXCLUDED_DIRS):
                return False
            if self.globs.exclude and depth < len(parts) - 1 and \
                    self.globs.excluded_by("/".join(parts[:depth + 1]), True) is not None:
                return False
        if self.globs.exclude and self.globs.excluded_by(relative, False) is not None:
            return False
        if parts[-1] in EXCLUDED_DIRS:
            return False
        suffix = os.path.splitext(parts[-1])[1].lower()
        if suffix in EXTENSIONS:
            return self.globs.included(relative)
        return True  # no indexable extension: a directory, or an irrelevant file decide() drops by its stat


class Pending:
    """Changed paths piling up between runs (a set: a path changed twice is one change)."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.full_reason: str | None = None

    def add(self, paths: Iterable[str]) -> None:
        """Note changed paths (already filtered by Scope.relevant)."""
        self.paths.update(os.path.normpath(p) for p in paths)

    def need_full(self, reason: str) -> None:
        """Ask for a full incremental run (the watcher lost events, or a root changed)."""
        self.full_reason = self.full_reason or reason

    def __bool__(self) -> bool:
        return bool(self.paths) or self.full_reason is not None

    def take(self) -> tuple[set[str], str | None]:
        """Everything noted so far, and empty the pile."""
        paths, reason = self.paths, self.full_reason
        self.paths, self.full_reason = set(), None
        return paths, reason


@dataclass(frozen=True)
class Batch:
    """What one run applies: a full run of the configured roots (with the reason), or the paths that
    exist now (files and directories to re-walk) and those a stat found gone."""

    full: str | None = None
    changed: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.full is not None or bool(self.changed) or bool(self.gone)


def gone(path: str) -> bool:
    """True when lstat says nothing is at path any more (its own or a parent's name is gone)."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False  # there but unreadable: the run reports it
    return False


def decide(paths: Iterable[str], scope: Scope, full_reason: str | None = None,
           full_over: int = FULL_RUN_OVER) -> Batch:
    """Sort changed paths by their stat now: existing files and directories to re-walk, gone ones to
    remove; a full run for a root's own change, a lost-events reason, or more than full_over paths."""
    if full_reason is not None:
        return Batch(full=full_reason)
    changed: list[str] = []
    removed: list[str] = []
    for path in sorted(set(paths)):
        if path in scope.roots:
            return Batch(full=f"a configured root changed: {path}")
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            removed.append(path)
            continue
        except OSError:
            changed.append(path)  # unreadable: the run records the failure rather than dropping it
            continue
        indexable = os.path.splitext(path)[1].lower() in EXTENSIONS
        if stat.S_ISDIR(st.st_mode) or (stat.S_ISREG(st.st_mode) and indexable):
            changed.append(path)
        elif indexable and os.path.dirname(path) not in ("", path):
            # a symlink or a special file now: its directory's walk refuses it and drops the old text
            changed.append(os.path.dirname(path))
    if len(changed) + len(removed) > full_over:
        return Batch(full=f"{len(changed) + len(removed)} paths changed at once")
    return Batch(changed=tuple(_outermost(changed)), gone=tuple(_outermost(removed)))


def _outermost(paths: list[str]) -> list[str]:
    """Sorted paths without those inside another of them (a re-walked directory covers its files)."""
    out: list[str] = []
    for path in sorted(paths):
        if out and (path == out[-1] or path.startswith(out[-1].rstrip("/") + "/")):
            continue
        out.append(path)
    return out
