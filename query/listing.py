"""The `sources` and `stats` answers (one JSON shape for the CLI's --json and the HTTP API), and
which stored documents a removal names (`knowledge rm`: a path in any spelling, or a directory).

Both carry a `status` and a `note` (null when there is nothing to say), like every other answer;
each document carries its mapped citation (`mapped`, null where no rule applies). `sources` pages:
a path prefix or glob (as search's `--path`, query/filters.py), an offset and a limit, read from
the path index in path order and handed out row by row (SourcesListing), so the first line of a
listing of 100,000 documents is printed before the second row is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from pipeline import db
from query.filters import Filter
from query.reader import Reader
from query.status import Status
from query.tier import tier_line

if TYPE_CHECKING:
    from query.citations import CitationMapper
    from query.requests import SourcesRequest


@dataclass(frozen=True)
class SourcesAnswer:
    """A page of the indexed documents by path (chunk count, time of indexing, fields, mapped citation), or not
    built; with where the page starts, how many documents the listing holds and where the next page starts."""

    status: Status
    note: str | None
    store: str
    documents: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    offset: int = 0
    next_offset: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The `sources --json` and `/v1/sources` shape."""
        if self.status != Status.OK:
            return {"status": self.status, "note": self.note}
        return {"status": self.status, "store": self.store, "total": self.total, "offset": self.offset,
                "documents": self.documents, "returned": len(self.documents), "next_offset": self.next_offset,
                "note": self.note}


class SourcesListing:
    """One page of the sources listing, read row by row from an open reader: the head (status, store, total,
    offset) is known at once and each document as it is read, so a caller prints the first line before the
    last row is read; the note (how many rows no citation rule mapped) is known after the last row."""

    def __init__(self, settings: Settings, reader: Reader, mapper: CitationMapper | None,
                 request: SourcesRequest) -> None:
        self.store = str(settings.db_path)
        self.offset = max(0, request.offset or 0)
        self.limit = request.limit
        self.mapper = mapper if mapper is not None and mapper.configured else None
        self.returned = 0
        self.unmatched = 0
        conn = reader.conn
        where, args = Filter.of(request.path).condition(conn)
        with db.translating_damage(settings.db_path):
            self.total = int(conn.execute(f"SELECT count(*) FROM documents WHERE {where}", args).fetchone()[0])
        self._reader, self._where, self._args = reader, where, args
        self._rows = reader.iter_sources(where, args, self.limit, self.offset)

    def _counted(self, rows: Iterator[str]) -> Iterator[str]:
        for row in rows:
            self.returned += 1
            yield row

    def documents(self) -> Iterator[dict[str, Any]]:
        """The page's documents in path order, each with its mapped citation (null where no rule applies)."""
        for row in self._rows:
            row["mapped"] = self.mapper.map_document(row["path"]) if self.mapper is not None else None
            self.returned += 1
            self.unmatched += 0 if row["mapped"] else 1
            yield row

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts; None when this page reaches the end of the listing."""
        end = self.offset + self.returned
        return end if end < self.total else None

    @property
    def note(self) -> str | None:
        """How many of the documents listed no citation rule maps, when rules are configured (after the rows)."""
        if self.mapper is None:
            return None
        verb = "is" if self.unmatched == 1 else "are"
        return f"{self.unmatched} of {self.returned} documents matched no citation rule and {verb} cited by path"

    def answer(self) -> SourcesAnswer:
        """The whole page read into one answer."""
        documents = list(self.documents())
        return SourcesAnswer(Status.OK, self.note, self.store, documents, self.total, self.offset, self.next_offset)

    def json_text(self) -> Iterator[str]:
        """The `sources --json` document in pieces, the first before any row is read (the shape of to_json)."""
        head = {"status": Status.OK, "store": self.store, "total": self.total, "offset": self.offset}
        yield json.dumps(head, ensure_ascii=False)[:-1] + ', "documents": ['
        rows = (json.dumps(row, ensure_ascii=False) for row in self.documents()) if self.mapper is not None else (
            self._counted(self._reader.iter_sources_json(self._where, self._args, self.limit, self.offset)))
        for n, row in enumerate(rows):
            yield ("\n  " if n == 0 else ",\n  ") + row
        tail = {"returned": self.returned, "next_offset": self.next_offset, "note": self.note}
        yield ("\n" if self.returned else "") + "], " + json.dumps(tail, ensure_ascii=False)[1:] + "\n"


@dataclass(frozen=True)
class StatsAnswer:
    """Counts and facts about the index and the tier line, or not built."""

    status: Status
    note: str | None
    facts: dict[str, Any] = field(default_factory=dict)
    tier: str = ""

    def to_json(self) -> dict[str, Any]:
        """The `stats --json` and `/v1/stats` shape."""
        if self.status != Status.OK:
            return {"status": self.status, "note": self.note}
        return {"status": self.status, "note": None, **self.facts, "tier": self.tier}


def stats_answer(settings: Settings, reader: Reader) -> StatsAnswer:
    """Counts and facts about the index, and the tier line."""
    return StatsAnswer(Status.OK, None, reader.stats(), tier_line(settings))
