"""Find the eligible files under the configured roots, reporting every skip with its reason.

The walk is iterative (a tree 1,000 directories deep is walked like any other), streamed
(stream_root yields each file as it is found, in the byte order of the paths, which is the order
of the store's path index, so a survey merges the two holding neither) and never follows a
symlink: each directory is opened with O_NOFOLLOW and must be the very directory (device and
inode) its parent listed, so a directory swapped for a symlink while the walk runs is refused, not
followed. A name that is not valid UTF-8 cannot be stored or cited, so it is skipped with a reason.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import formats
from pipeline.globs import Globs
from pipeline.models import Skip

EXTENSIONS = formats.EXTENSIONS  # every format the registry knows; a run may turn some off
MAX_FILE_BYTES = 512 * 1024  # the markdown and text limit (pipeline/formats has each format's)
NO_EXTENSION = "(no extension)"
EXCLUDED_DIRS = frozenset({"memory"})
BAD_NAME = "file name is not valid UTF-8"

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device"}


@dataclass(frozen=True, slots=True)  # one per walked file: slots keep a large walk small
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
    directory: bool = False  # the root was a directory walked as a tree (not a single file)
    extensions: frozenset[str] = EXTENSIONS  # those of the formats this run indexes
    other: Counter[str] = field(default_factory=Counter)  # files of no indexed format, by extension

    @property
    def complete(self) -> bool:
        """True when the whole root was walked with no error (a precondition of pruning)."""
        return not self.errors


def valid_name(path: str) -> bool:
    """True when path (as the OS handed it over) is valid UTF-8, so it can be stored and cited."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _display(path: str) -> str:
    """The path with forward slashes; bytes that are not UTF-8 shown as \\xNN escapes."""
    shown = path if valid_name(path) else os.fsencode(path).decode("utf-8", "backslashreplace")
    return shown.replace(os.sep, "/")


def _join(base: str, name: str) -> str:
    return name if base in ("", ".") else f"{base.rstrip('/')}/{name}"


UNINDEXABLE = ("too large", "symlink refused", "not a regular file", BAD_NAME)


def unindexable(reason: str) -> bool:
    """True when a skip says the file itself cannot be indexed now, so an indexed copy is stale."""
    return reason.startswith(UNINDEXABLE)


def not_regular(mode: int) -> str:
    """The skip reason for a file that is neither regular, a directory nor a symlink."""
    return f"not a regular file ({_KINDS.get(stat.S_IFMT(mode), 'a special file')})"


def _identity(directory: Path | None) -> tuple[int, int] | None:
    """(device, inode) of the store directory, to know it when the walk meets it; None if absent."""
    if directory is None:
        return None
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def walk_root(root: str, store_dir: Path | None = None, globs: Globs | None = None,
              extensions: frozenset[str] = EXTENSIONS) -> WalkResult:
    """Walk one root (a directory or a single file) whole: stream_root's files gathered in its result."""
    result, files = stream_root(root, store_dir, globs, extensions)
    result.files = list(files)
    return result


def other_formats(counts: Counter[str]) -> str:
    """One line counting the files of no indexed format by extension: `212 .png, 14 .svg`."""
    return ", ".join(f"{n} {ext}" for ext, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def stream_root(root: str, store_dir: Path | None = None, globs: Globs | None = None,
                extensions: frozenset[str] = EXTENSIONS) -> tuple[WalkResult, Iterator[Found]]:
    """Walk one root (a directory or a single file): its result, and an iterator of its eligible files.

    The files come depth first, in the byte order of their paths (a directory sorts as its name and
    a slash). The result's skips and errors fill as the iterator runs; they are whole once it is
    exhausted (its `files` stay empty). globs (knowledge.include/exclude) judge the files and
    directories under a directory root; a file named as the root is indexed whatever they say.
    extensions are those of the formats indexed (knowledge.formats); the other files of a tree are
    counted by extension and reported as one skip of the root once the walk ends.
    """
    result = WalkResult(root=root, extensions=extensions)
    if not valid_name(root):
        result.errors.append(Skip(_display(root), BAD_NAME))
        return result, iter(())
    store_id = _identity(store_dir)
    try:
        st = os.lstat(root)
    except OSError as exc:
        result.errors.append(Skip(_display(root), f"cannot read: {exc.strerror}"))
        return result, iter(())
    if stat.S_ISLNK(st.st_mode):
        result.errors.append(Skip(_display(root), "symlink refused"))
        return result, iter(())
    if stat.S_ISREG(st.st_mode):
        found = _consider(root, root, st, result, explicit=True)
        return result, iter(() if found is None else (found,))
    if not stat.S_ISDIR(st.st_mode):
        result.errors.append(Skip(_display(root), "not a regular file or directory"))
        return result, iter(())
    base = os.path.normpath(root)
    result.root = _display(base)
    result.directory = True
    return result, _walk_tree(base, st, store_id, result, globs or Globs())


def _order(item: tuple[str, os.stat_result | OSError]) -> str:
    """Sort key of a listed entry: its name, and a slash after a directory's, so that a depth-first
    walk yields paths in byte order (`a.md` before `a/b.md`, as the store's path index has them)."""
    name, st = item
    return name + "/" if not isinstance(st, OSError) and stat.S_ISDIR(st.st_mode) else name


def _list_dir(directory: str, expected: os.stat_result) -> list[tuple[str, os.stat_result | OSError]]:
    """The sorted entries of directory with their lstat, read through a descriptor that is the
    directory the parent listed (O_NOFOLLOW, same device and inode); raise OSError otherwise."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (expected.st_dev, expected.st_ino):
            raise OSError(0, "replaced while the walk ran")
        listed: list[tuple[str, os.stat_result | OSError]] = []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    listed.append((entry.name, entry.stat(follow_symlinks=False)))
                except OSError as exc:
                    listed.append((entry.name, exc))
    finally:
        os.close(fd)
    listed.sort(key=_order)
    return listed


def _walk_tree(base: str, base_stat: os.stat_result, store_id: tuple[int, int] | None, result: WalkResult,
               globs: Globs) -> Iterator[Found]:
    # A stack of sorted, not yet visited entries per open level: the same depth-first order as
    # recursion, without its depth limit.
    stack: list[tuple[str, list[tuple[str, os.stat_result | OSError]]]] = []
    pending: list[tuple[str, os.stat_result]] = [(base, base_stat)]
    while pending or stack:
        if pending:
            directory, expected = pending.pop()
            try:
                listed = _list_dir(directory, expected)
            except OSError as exc:
                if os.path.islink(directory):  # swapped for a symlink since its parent was listed
                    result.skipped.append(Skip(_display(directory) + "/", "symlink refused"))
                else:
                    result.errors.append(Skip(_display(directory), f"cannot list directory: {exc.strerror}"))
                continue
            stack.append((directory, listed[::-1]))
            continue
        directory, entries = stack[-1]
        if not entries:
            stack.pop()
            continue
        name, st = entries.pop()
        child = _visit(directory, name, st, store_id, result, globs)
        if isinstance(child, Found):
            yield child
        elif child is not None:
            pending.append(child)
    if result.other:
        result.skipped.append(Skip(result.root.rstrip("/") + "/",
                                   f"{other_formats(result.other)}: not an indexed format"))


def _relative(path: str, root: str) -> str:
    """path relative to the walked root (forward slashes), as globs see it."""
    return path if root in ("", ".") else path[len(root.rstrip("/")) + 1:]


def _visit(directory: str, name: str, st: os.stat_result | OSError, store_id: tuple[int, int] | None,
           result: WalkResult, globs: Globs) -> Found | tuple[str, os.stat_result] | None:
    """Judge one entry; return it when it is an eligible file, or a directory to descend into."""
    path = _join(directory, name)
    if isinstance(st, OSError):
        result.skipped.append(Skip(_display(path), f"cannot stat: {st.strerror}"))
        return None
    if not valid_name(name):
        suffix = "/" if stat.S_ISDIR(st.st_mode) else ""
        result.skipped.append(Skip(_display(path) + suffix, BAD_NAME))
        return None
    if stat.S_ISLNK(st.st_mode):
        result.skipped.append(Skip(_display(path), "symlink refused"))
        return None
    is_dir = stat.S_ISDIR(st.st_mode)
    glob = globs.excluded_by(_relative(path, result.root), is_dir) if globs.exclude else None
    if glob is not None:
        result.skipped.append(Skip(_display(path) + ("/" if is_dir else ""), f"excluded by {glob}"))
        return None
    if is_dir:
        refused = _refused_directory(name, st, store_id)
        if refused is None:
            return path, st
        result.skipped.append(Skip(_display(path) + "/", refused))
        return None
    if stat.S_ISREG(st.st_mode):
        if not globs.included(_relative(path, result.root)):
            return None  # like a file of another type: not what this tree indexes
        return _consider(path, result.root, st, result, explicit=False)
    result.skipped.append(Skip(_display(path), not_regular(st.st_mode)))
    return None


def _refused_directory(name: str, st: os.stat_result, store_id: tuple[int, int] | None) -> str | None:
    """Why a directory is not descended into (a dot, memory or the store's own directory), None to descend."""
    if name.startswith("."):
        return "dot directory"
    if name in EXCLUDED_DIRS:
        return "memory directory"
    if (st.st_dev, st.st_ino) == store_id:
        return "the store's own directory"
    return None


def _consider(path: str, root: str, st: os.stat_result, result: WalkResult, explicit: bool) -> Found | None:
    # root: a tree walk's displayed root (result.root), or the file named as the root itself (explicit)
    name = os.path.basename(path)
    ext = formats.extension(name)
    fmt = formats.BY_EXTENSION.get(ext)
    if fmt is None or ext not in result.extensions:
        if explicit:
            result.skipped.append(Skip(_display(path), _not_indexed(ext, fmt, result.extensions)))
        else:
            result.other[ext or NO_EXTENSION] += 1
        return None
    if name.startswith(".") and not explicit:
        result.skipped.append(Skip(_display(path), "dot file"))
        return None
    if st.st_size > fmt.max_bytes:
        result.skipped.append(Skip(_display(path), f"too large ({st.st_size} bytes > {fmt.max_bytes})"))
        return None
    return Found(_display(path), _display(root) if explicit else root, st.st_size, st.st_mtime_ns)


def _not_indexed(ext: str, fmt: formats.Format | None, extensions: frozenset[str]) -> str:
    """Why a file named as a root is not read: its format is off, or no format reads it."""
    if fmt is not None:
        return f"the {fmt.name} format is turned off (knowledge.formats)"
    return f"not an indexed format (indexed: {', '.join(sorted(extensions))})"
