"""The `sources` and `stats` answers (one JSON shape for the CLI's --json and the HTTP API), and
which stored documents a removal names (`knowledge rm`: a path in any spelling, or a directory).

Both carry a `status` and a `note` (null when there is nothing to say), like every other answer;
each document carries its mapped citation (`mapped`, null where no rule applies).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from config.settings import Settings
from pipeline.paths import PathBase
from query.reader import Reader, open_reader
from query.status import Status
from query.tier import tier_line

if TYPE_CHECKING:
    from query.citations import CitationMapper


@dataclass(frozen=True)
class SourcesAnswer:
    """Every indexed document by path (chunk count, time of indexing, fields, mapped citation), or not built."""

    status: Status
    note: str | None
    store: str
    documents: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The `sources --json` and `/v1/sources` shape."""
        if self.status != Status.OK:
            return {"status": self.status, "note": self.note}
        return {"status": self.status, "note": self.note, "store": self.store, "documents": self.documents}


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


def sources_answer(settings: Settings, reader: Reader, mapper: CitationMapper | None) -> SourcesAnswer:
    """Every indexed document by path, with chunk count, time of indexing and mapped citation."""
    rows = reader.sources()
    configured = mapper is not None and mapper.configured
    for row in rows:
        row["mapped"] = mapper.map_document(row["path"]) if mapper is not None and configured else None
    note = None
    if configured:
        unmatched = sum(1 for r in rows if not r["mapped"])
        verb = "is" if unmatched == 1 else "are"
        note = f"{unmatched} of {len(rows)} documents matched no citation rule and {verb} cited by path"
    return SourcesAnswer(Status.OK, note, str(settings.db_path), rows)


def stats_answer(settings: Settings, reader: Reader) -> StatsAnswer:
    """Counts and facts about the index, and the tier line."""
    return StatsAnswer(Status.OK, None, reader.stats(), tier_line(settings))


def removal_scale(settings: Settings, paths: list[str]) -> tuple[int, list[str]]:
    """(documents in the store, the roots every one of whose documents is among paths): how much a removal takes."""
    reader = open_reader(settings)
    if reader is None:
        return 0, []
    with reader:
        per_root = dict(reader.conn.execute("SELECT root, count(*) FROM documents GROUP BY root").fetchall())
        taken: dict[str, int] = {}
        for start in range(0, len(paths), 500):
            part = paths[start:start + 500]
            marks = ",".join("?" * len(part))
            for root, count in reader.conn.execute(
                    f"SELECT root, count(*) FROM documents WHERE path IN ({marks}) GROUP BY root", part):
                taken[str(root)] = taken.get(str(root), 0) + int(count)
    whole = sorted(root for root, count in taken.items() if count == per_root.get(root))
    return sum(int(c) for c in per_root.values()), whole


def removal_targets(settings: Settings, paths: tuple[str, ...], prefix: bool) -> dict[str, tuple[list[str], bool]]:
    """Each argument with the stored paths it names and whether it named a subtree: a document as stored,
    or as spelled from here; else (or with --prefix) a directory, every document under it."""
    reader = open_reader(settings)
    if reader is None:
        return {p: ([], prefix) for p in paths}
    base = PathBase.at(settings.path_base)
    out: dict[str, tuple[list[str], bool]] = {}
    with reader:
        for given in paths:
            spelled = given if "://" in given else base.canonical(given)
            if not prefix:
                exact = reader.stored_paths([given, spelled])
                if exact or "://" in given:
                    out[given] = ([given if given in exact else spelled] if exact else [], False)
                    continue
            below = reader.paths_under(spelled) or reader.paths_under(given.rstrip("/") or "/")
            out[given] = (below, bool(prefix or below or os.path.isdir(given)))
    return out
