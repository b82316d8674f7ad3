"""Decide, from stat alone, which walked files need reading.

A file whose (size, mtime_ns) equal the stored row is unchanged and is not read, unless its mtime
falls within RACY_WINDOW_NS of the moment the row was written: such a file could have changed
again within the same timestamp granularity (the racy-clean case), so it is re-hashed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.models import FileJob
from pipeline.walker import Found

RACY_WINDOW_NS = 2_000_000_000


@dataclass(frozen=True, slots=True)
class StoredStat:
    """What the store knows of a document, enough to classify it without reading it."""

    sha256: str
    size: int
    mtime_ns: int
    indexed_ns: int


def needs_read(found: Found, stored: StoredStat | None, reindex: bool = False) -> bool:
    """True when the file must be read and hashed."""
    if reindex or stored is None:
        return True
    if found.size != stored.size or found.mtime_ns != stored.mtime_ns:
        return True
    return found.mtime_ns >= stored.indexed_ns - RACY_WINDOW_NS


def classify(
    files: list[Found], stored: dict[str, StoredStat], reindex: bool = False, base: str = ""
) -> tuple[list[FileJob], list[Found]]:
    """Split walked files into jobs to read (their stored spellings under base) and files unchanged by stat."""
    jobs: list[FileJob] = []
    unchanged: list[Found] = []
    for found in files:
        row = stored.get(found.path)
        if needs_read(found, row, reindex):
            sha = None if (reindex or row is None) else row.sha256
            jobs.append(FileJob(found.path, found.root, found.size, found.mtime_ns, sha, base))
        else:
            unchanged.append(found)
    return jobs, unchanged
