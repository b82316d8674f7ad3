"""Decide, from stat alone, which walked files need reading.

A file whose (size, mtime_ns) equal the stored row is unchanged and is not read, unless its mtime
falls within RACY_WINDOW_NS of the moment the row was written: such a file could have changed
again within the same timestamp granularity (the racy-clean case), so it is re-hashed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.walker import Found

RACY_WINDOW_NS = 2_000_000_000


@dataclass(frozen=True, slots=True)
class StoredStat:
    """What the store knows of a document, enough to classify it without reading it."""

    sha256: str
    size: int
    mtime_ns: int
    indexed_ns: int
    policy: str = ""  # the chunk policy it was built with ('' for none recorded: a web page)


def needs_read(found: Found, stored: StoredStat | None, reindex: bool = False) -> bool:
    """True when the file must be read and hashed."""
    if reindex or stored is None:
        return True
    if found.size != stored.size or found.mtime_ns != stored.mtime_ns:
        return True
    return found.mtime_ns >= stored.indexed_ns - RACY_WINDOW_NS
