"""Read one walked file: refuse symlinks at any component, non-regular files, binary and non-UTF-8
content; hash it; chunk it."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Any

from config.errors import FileSkipped, PipelineError
from pipeline import formats
from pipeline.chunker import pack
from pipeline.extraction import Caller, Extraction, inline
from pipeline.formats.decoding import decode as decode  # re-exported: it moved into formats/ (issue 31)
from pipeline.languages import document_hint
from pipeline.models import Chunk, Document, FileJob
from pipeline.walker import not_regular

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _components(path: str, root: str) -> tuple[str, list[str]]:
    """The directory to start from and the names leading from it to path.

    A file walked under a directory root is reached from that root one component at a time; a
    single-file root (path == root) is opened as named.
    """
    if path == root:
        return "", [path]
    if root == ".":
        rel = path
    elif root == "/":
        rel = path[1:]
    elif path.startswith(root.rstrip("/") + "/"):
        rel = path[len(root.rstrip("/")) + 1:]
    else:
        raise PipelineError(f"cannot read: not under its root {root}")
    return root, [name for name in rel.split("/") if name not in ("", ".")]


def _open_beneath(path: str, root: str) -> int:
    """A descriptor of path opened from root with no symlink followed at any component.

    Each directory below root is opened relative to its parent (dir_fd) with O_NOFOLLOW and
    O_DIRECTORY, so a directory swapped for a symlink during a run is refused, never followed. The
    file itself is opened with O_NONBLOCK, so a FIFO put in its place cannot hang the read.
    """
    start, names = _components(path, root)
    if any(name == ".." for name in names):
        raise FileSkipped("path leaves its root")
    parent: int | None = os.open(start, _DIR_FLAGS) if start else None
    try:
        for name in names[:-1]:
            child = _open_at(name, _DIR_FLAGS, parent)
            if parent is not None:
                os.close(parent)
            parent = child
        return _open_at(names[-1], _FILE_FLAGS, parent)
    finally:
        if parent is not None:
            os.close(parent)


def _open_at(name: str, flags: int, parent: int | None) -> int:
    """os.open of name in parent; a symlink there is FileSkipped (Linux says ELOOP, or ENOTDIR
    with O_DIRECTORY), so is a directory since replaced by a file."""
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            raise exc from None
        if stat.S_ISLNK(st.st_mode):
            raise FileSkipped("symlink refused") from exc
        raise FileSkipped(f"{name} is no longer a directory") from exc


VANISHED = "vanished since the walk (deleted or renamed)"


def read_bytes(path: str, root: str | None = None) -> tuple[bytes, os.stat_result]:
    """The file's bytes and stat, reached from root without following a symlink anywhere below it.

    A file larger than its format allows (pipeline/formats, by its extension) is not read.

    Raise FileSkipped (symlink, not a regular file, too large, vanished since the walk) or
    PipelineError (read failure).
    """
    limit = formats.size_limit(path)
    try:
        fd = _open_beneath(path, path if root is None else root)
    except FileNotFoundError as exc:  # deleted or renamed since the walk: an ordinary edit, not a failure
        raise FileSkipped(VANISHED) from exc
    except OSError as exc:
        raise PipelineError(f"cannot read: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileSkipped(not_regular(st.st_mode))
        if st.st_size > limit:
            raise FileSkipped(f"too large ({st.st_size} bytes > {limit})")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise PipelineError(f"cannot read: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(data) > limit:
        raise FileSkipped(f"too large (over {limit} bytes)")
    return data, st


def sha256_hex(data: bytes) -> str:
    """Content hash of a file."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Parsed:
    """What a file's bytes hold: its title, sections, front-matter fields and language."""

    title: str | None
    chunks: list[Chunk]
    fields: dict[str, Any]
    front_matter_error: str | None
    language: tuple[str, str] | None


def parse_file(path: str, data: bytes) -> Parsed:
    """The sections of a file's bytes, read by the format of path; raise FileSkipped when none can be read.

    Every format (markdown and text too: a leading front-matter block gives fields and title, not
    text) hands over an Outline (pipeline/formats), whose sections the chunker packs. A file of no
    format is read as markdown. Ingest runs this under the extraction bound (pipeline/extraction.py).
    """
    fmt = formats.format_of(path) or formats.BY_NAME["markdown"]
    outline = fmt.outline(data)
    chunked = pack(outline.sections)
    if fmt.name not in formats.PLAIN and not chunked.chunks:
        raise FileSkipped(f"no text found in this {fmt.name} file")
    title, fields = outline.title or chunked.title, outline.fields
    error = outline.notes[0] if outline.notes else None
    language = document_hint(fields, title, (c.body for c in chunked.chunks))
    return Parsed(title, chunked.chunks, fields, error, language)


@dataclass(frozen=True)
class Read:
    """A file's bytes as read beneath its root, with their stat and hash: what its parsing needs."""

    job: FileJob
    data: bytes
    st: os.stat_result
    digest: str

    @property
    def reader(self) -> tuple[str, ...]:
        """The module that parses the file's format (loaded in the extraction child off the file's clock)."""
        fmt = formats.format_of(self.job.path)
        return () if fmt is None or not fmt.extractor else (f"pipeline.formats.{fmt.extractor}",)


def read_file(job: FileJob, force: bool = False) -> Read | str:
    """The file's bytes, stat and hash, or "unchanged" when the hash is the stored one (and force is off).

    Raises FileSkipped (symlink, not regular, too large, vanished) or PipelineError (read failure).
    """
    data, st = read_bytes(job.on_disk(job.path), job.on_disk(job.root))
    digest = sha256_hex(data)
    if not force and job.stored_sha256 == digest:
        return "unchanged"
    return Read(job, data, st, digest)


def document(read: Read, parsed: Parsed) -> Document:
    """The Document of a file read and parsed."""
    job = read.job
    return Document(
        path=job.path,
        root=job.root,
        sha256=read.digest,
        size=read.st.st_size,
        mtime_ns=read.st.st_mtime_ns,
        title=parsed.title,
        chunks=parsed.chunks,
        fields=parsed.fields,
        front_matter_error=parsed.front_matter_error,
        policy=formats.policy_of(job.path),
        language=parsed.language,
    )


def ingest_file(job: FileJob, force: bool = False, call: Caller = inline) -> Document | str:
    """Read, hash and parse one file (parse_file, run by call: in a bounded child when ingest runs it).

    Returns the Document, or the string "unchanged" when the content hash equals the stored one
    (and force is off). Raises FileSkipped (not indexable, or past the extraction bound) or
    PipelineError (read failure).
    """
    read = read_file(job, force)
    if isinstance(read, str):
        return read
    return document(read, call(parse_file, job.path, read.data, size=len(read.data), needs=read.reader))


Outcome = Document | str | FileSkipped | PipelineError  # a file's Document, "unchanged", or why it has none


def ingest_files(jobs: list[FileJob], force: bool, extraction: Extraction) -> list[Outcome]:
    """ingest_file of each job, in order, their parsing streamed through one bounded child (Extraction.call_each):
    a batch of files costs one exchange with it. An error is that file's outcome, never the batch's."""
    reads: list[Read | Outcome] = []
    for job in jobs:
        try:
            reads.append(read_file(job, force))
        except (FileSkipped, PipelineError) as exc:
            reads.append(exc)
        except Exception as exc:  # noqa: BLE001 - one bad file must not fail the others
            reads.append(PipelineError(f"unexpected error: {type(exc).__name__}: {exc}"))
    todo = [r for r in reads if isinstance(r, Read)]
    needs = tuple(sorted({name for r in todo for name in r.reader}))
    parsed = iter(extraction.call_each(parse_file, [((r.job.path, r.data), len(r.data)) for r in todo], needs))
    outcomes: list[Outcome] = []
    for read in reads:
        if not isinstance(read, Read):
            outcomes.append(read)
            continue
        found = next(parsed)
        outcomes.append(found if isinstance(found, (FileSkipped, PipelineError)) else document(read, found))
    return outcomes
