"""Read one file: refuse symlinks, binary and non-UTF-8 content; hash it; chunk it."""

from __future__ import annotations

import hashlib
import os
import stat

from config.errors import FileSkipped, PipelineError
from pipeline.chunker import chunk_text
from pipeline.models import Document, FileJob
from pipeline.walker import MAX_FILE_BYTES


def read_bytes(path: str) -> tuple[bytes, os.stat_result]:
    """The file's bytes and stat, opened without following a symlink; raise FileSkipped/PipelineError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the final component is a symlink
            raise FileSkipped("symlink refused") from exc
        raise PipelineError(f"cannot read: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileSkipped("not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise FileSkipped(f"too large ({st.st_size} bytes > {MAX_FILE_BYTES})")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PipelineError(f"cannot read: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise FileSkipped(f"too large (over {MAX_FILE_BYTES} bytes)")
    return data, st


def decode(data: bytes) -> str:
    """UTF-8 text of data (a BOM dropped); raise FileSkipped for binary or other encodings."""
    if b"\x00" in data:
        raise FileSkipped("binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileSkipped(f"not UTF-8 (invalid byte at offset {exc.start})") from exc
    return text[1:] if text.startswith("\ufeff") else text


def sha256_hex(data: bytes) -> str:
    """Content hash of a file."""
    return hashlib.sha256(data).hexdigest()


def ingest_file(job: FileJob, force: bool = False) -> Document | str:
    """Read, hash and chunk one file.

    Returns the Document, or the string "unchanged" when the content hash equals the stored one
    (and force is off). Raises FileSkipped (not indexable) or PipelineError (read failure).
    """
    data, st = read_bytes(job.path)
    digest = sha256_hex(data)
    if not force and job.stored_sha256 == digest:
        return "unchanged"
    text = decode(data)
    chunked = chunk_text(text)
    return Document(
        path=job.path,
        root=job.root,
        sha256=digest,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        title=chunked.title,
        chunks=chunked.chunks,
    )
