"""Plain values passed between the pipeline's steps (and serialised into queue payloads)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Chunk:
    """One section piece of a document: its position, breadcrumb, text and text hash."""

    ordinal: int
    heading_path: str
    body: str
    text_hash: str
    cjk: str = ""


@dataclass(frozen=True, slots=True)
class FileJob:
    """A file the walker found changed (or unknown), with what the store knew of it.

    path and root are stored spellings (pipeline/paths.py): relative ones are under base, the
    absolute directory the reader resolves them against (any worker, whatever its working directory).
    """

    path: str
    root: str
    size: int
    mtime_ns: int
    stored_sha256: str | None = None
    base: str = ""

    def to_wire(self) -> list[Any]:
        """Compact form for a queue message."""
        return [self.path, self.root, self.size, self.mtime_ns, self.stored_sha256, self.base]

    @classmethod
    def from_wire(cls, data: list[Any]) -> FileJob:
        """Inverse of to_wire."""
        return cls(data[0], data[1], int(data[2]), int(data[3]), data[4], data[5] if len(data) > 5 else "")

    def on_disk(self, stored: str) -> str:
        """The filesystem path of one of this job's stored spellings (path or root)."""
        if not self.base or os.path.isabs(stored):
            return stored
        return self.base if stored == "." else os.path.join(self.base, stored)


@dataclass
class Document:
    """A read, hashed and chunked file, ready for the writer."""

    path: str
    root: str
    sha256: str
    size: int
    mtime_ns: int
    title: str | None
    chunks: list[Chunk]
    source: str = "file"
    # the front-matter fields (pipeline/front_matter.py), and why a leading block was not parsed
    fields: dict[str, Any] = field(default_factory=dict)
    front_matter_error: str | None = None
    # the chunk policy it was built with (pipeline/formats: `<format>:<extractor>+chunk:<chunker>`)
    policy: str = ""
    # its language as its front matter or text tells it, and which told it (pipeline/languages.document_hint),
    # told where it is read, off the writer; None: not told yet (the writer tells it)
    language: tuple[str, str] | None = None
    # float32 blobs by chunk ordinal, attached by the writer (they never cross a queue with the document)
    vectors: dict[int, bytes] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for staging in the run ledger (without vectors)."""
        data = asdict(self)
        data["chunks"] = [[c.ordinal, c.heading_path, c.body, c.text_hash, c.cjk] for c in self.chunks]
        del data["vectors"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Document:
        """Inverse of to_dict."""
        chunks = [Chunk(*row) for row in data["chunks"]]
        return cls(
            path=data["path"],
            root=data["root"],
            sha256=data["sha256"],
            size=data["size"],
            mtime_ns=data["mtime_ns"],
            title=data["title"],
            chunks=chunks,
            source=data.get("source", "file"),
            fields=data.get("fields") or {},
            front_matter_error=data.get("front_matter_error"),
            policy=data.get("policy") or "",
            language=(str(data["language"][0]), str(data["language"][1])) if data.get("language") else None,
        )


@dataclass(frozen=True)
class Skip:
    """A path not indexed, and why (binary, not UTF-8, too large, symlink, ...)."""

    path: str
    reason: str


OUTCOMES = ("added", "updated", "unchanged", "skipped", "failed")
