"""One stored spelling per file: paths relative to one base directory, absolute outside it.

The same file reached as `../corpus/a.md`, `/srv/corpus/a.md` or `./corpus//a.md` is one document:
every path a user or a config names is made absolute against where it was written (the working
directory for the command line, the config file's directory for knowledge.yaml), the symlinks of
its parent directories are resolved (the last component is left for the walker, which refuses a
symlink), and the result is stored relative to the base (knowledge.root_directory, by default the
config file's directory) when it lies under it, absolute otherwise. Web pages keep their URL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the read commands use this module without the walker
    from pipeline.models import Skip
    from pipeline.walker import WalkResult

HERE = "."


@dataclass(frozen=True)
class PathBase:
    """The directory stored paths are relative to (absolute, its own symlinks resolved)."""

    directory: str

    @classmethod
    def at(cls, directory: str | os.PathLike[str]) -> PathBase:
        """The base for a directory as given (made absolute, symlinks resolved)."""
        return cls(os.path.realpath(os.path.abspath(directory)))

    def locate(self, given: str, relative_to: str | os.PathLike[str] | None = None) -> str:
        """The absolute filesystem path of a user-given path (relative ones against relative_to, else
        the working directory), with its parents' symlinks resolved and its last component kept."""
        start = os.fspath(relative_to) if relative_to is not None else os.getcwd()
        absolute = os.path.normpath(os.path.join(start, os.path.expanduser(given)))
        parent, name = os.path.split(absolute)
        if not name:  # the filesystem root
            return absolute
        return os.path.join(os.path.realpath(parent), name)

    def stored(self, absolute: str) -> str:
        """The stored spelling of an absolute path: relative to the base under it, else absolute."""
        if absolute == self.directory:
            return HERE
        prefix = self.directory.rstrip("/") + "/"
        if absolute.startswith(prefix):
            return absolute[len(prefix):]
        return absolute

    def filesystem(self, stored: str) -> str:
        """The absolute path of a stored spelling."""
        if os.path.isabs(stored):
            return stored
        return self.directory if stored == HERE else os.path.join(self.directory, stored)

    def canonical(self, given: str, relative_to: str | os.PathLike[str] | None = None) -> str:
        """The stored spelling of a user-given path."""
        return self.stored(self.locate(given, relative_to))

    def restate(self, result: WalkResult) -> WalkResult:
        """A walk of an absolute root with every path in its stored spelling."""
        from pipeline.walker import Found  # the walk's side only: the read commands never restate

        roots = {root: self.stored(root) for root in {f.root for f in result.files}}  # one string per root
        return replace(
            result,
            root=self.stored(result.root),
            files=[Found(self.stored(f.path), roots[f.root], f.size, f.mtime_ns) for f in result.files],
            skipped=[self._skip(s) for s in result.skipped],
            errors=[self._skip(s) for s in result.errors],
        )

    def _skip(self, skip: Skip) -> Skip:
        trail = "/" if skip.path.endswith("/") and skip.path != "/" else ""
        return replace(skip, path=self.stored(skip.path.rstrip("/") or "/") + trail)


def under(path: str, directory: str) -> bool:
    """True when a stored path is directory itself or lies beneath it (stored spellings both)."""
    if directory == HERE:
        return not os.path.isabs(path) and "://" not in path
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def file_identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """The (device, inode) a path names now, or None when nothing is there: a new one means it was replaced."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
