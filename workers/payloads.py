"""What crosses the queues and the ledger between ingest, embed and the writer, typed.

An ingest message turns each file into one item: a document to write, an unchanged file to
touch, a skip or a failure. Items are staged in the run ledger for the writer as their wire form
(a JSON-able dict), so a document is serialised once on its way to the writer and rebuilt once
there. A document waiting for vectors is staged alone (`embed` set); its chunks needing a vector
go to the embedding backlog as EmbedWork, and the vectors come back as float32 blobs (`bytes`)
that the writer attaches unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pipeline.models import Document
from workers.ledger.shapes import Wire


@dataclass(frozen=True)
class DocumentItem:
    """A read and chunked file for the writer; `embed`: it waits for vectors from the backlog."""

    path: str
    document: Document
    embed: bool = False
    outcome: ClassVar[str] = "document"

    def to_wire(self) -> Wire:
        """The staged form."""
        wire: Wire = {"path": self.path, "outcome": self.outcome, "doc": self.document.to_dict()}
        if self.embed:
            wire["embed"] = True
        return wire

    @classmethod
    def from_wire(cls, wire: Wire) -> DocumentItem:
        """Inverse of to_wire."""
        return cls(wire["path"], Document.from_dict(wire["doc"]), bool(wire.get("embed")))


@dataclass(frozen=True)
class Touch:
    """An unchanged file (or page): the writer refreshes its stat fingerprint."""

    path: str
    size: int
    mtime_ns: int
    outcome: ClassVar[str] = "unchanged"

    def to_wire(self) -> Wire:
        """The staged form."""
        return {"path": self.path, "outcome": self.outcome, "touch": [self.size, self.mtime_ns]}

    @classmethod
    def from_wire(cls, wire: Wire) -> Touch:
        """Inverse of to_wire."""
        size, mtime_ns = wire["touch"]
        return cls(wire["path"], int(size), int(mtime_ns))


@dataclass(frozen=True)
class Skipped:
    """A file not indexed on purpose (binary, too large, ...), with the reason."""

    path: str
    reason: str
    outcome: ClassVar[str] = "skipped"

    def to_wire(self) -> Wire:
        """The staged form."""
        return {"path": self.path, "outcome": self.outcome, "reason": self.reason}

    @classmethod
    def from_wire(cls, wire: Wire) -> Skipped:
        """Inverse of to_wire."""
        return cls(wire["path"], str(wire.get("reason") or ""))


@dataclass(frozen=True)
class Failed:
    """A file that could not be indexed, with the reason."""

    path: str
    reason: str
    outcome: ClassVar[str] = "failed"

    def to_wire(self) -> Wire:
        """The staged form."""
        return {"path": self.path, "outcome": self.outcome, "reason": self.reason}

    @classmethod
    def from_wire(cls, wire: Wire) -> Failed:
        """Inverse of to_wire."""
        return cls(wire["path"], str(wire.get("reason") or ""))


Item = DocumentItem | Touch | Skipped | Failed
_KINDS: dict[str, type[DocumentItem | Touch | Skipped | Failed]] = {
    kind.outcome: kind for kind in (DocumentItem, Touch, Skipped, Failed)
}


def item_from_wire(wire: Wire) -> Item:
    """A staged item, typed by its outcome."""
    return _KINDS[wire["outcome"]].from_wire(wire)


def to_wire(items: Sequence[Item]) -> list[Wire]:
    """A payload's staged form."""
    return [item.to_wire() for item in items]


def from_wire(payload: list[Wire]) -> list[Item]:
    """A staged payload, typed."""
    return [item_from_wire(wire) for wire in payload]


@dataclass(frozen=True)
class EmbedWork:
    """One chunk waiting in the embedding backlog: its document's staging key, path, ordinal and text."""

    doc_key: str
    path: str
    ordinal: int
    text: str

    @property
    def slot(self) -> tuple[str, int]:
        """The (doc key, ordinal) its vector is stored under."""
        return self.doc_key, self.ordinal

    def to_wire(self) -> list[Any]:
        """The backlog form, [doc key, path, ordinal, text] (the Lua scripts read it by position)."""
        return [self.doc_key, self.path, self.ordinal, self.text]

    @classmethod
    def from_wire(cls, wire: list[Any]) -> EmbedWork:
        """Inverse of to_wire."""
        return cls(str(wire[0]), str(wire[1]), int(wire[2]), str(wire[3]))
