"""The `sources` and `stats` answers: one JSON shape for the CLI's --json and the HTTP API.

Both carry a `status` and a `note` (null when there is nothing to say), like every other answer;
each document carries its mapped citation (`mapped`, null where no rule applies).
"""

from __future__ import annotations

from typing import Any

from config.settings import Settings
from query.reader import Reader
from query.tier import tier_line

STATUS_OK = "ok"


def sources_answer(settings: Settings, reader: Reader) -> dict[str, Any]:
    """Every indexed document by path, with chunk count, time of indexing and mapped citation."""
    from query.citations import CitationMapper  # the rules compile only when a listing is asked for

    rows = reader.sources()
    mapper = CitationMapper.from_settings(settings)
    for row in rows:
        row["mapped"] = mapper.map_document(row["path"]) if mapper.configured else None
    note = None
    if mapper.configured:
        unmatched = sum(1 for r in rows if not r["mapped"])
        verb = "is" if unmatched == 1 else "are"
        note = f"{unmatched} of {len(rows)} documents matched no citation rule and {verb} cited by path"
    return {"status": STATUS_OK, "note": note, "store": str(settings.db_path), "documents": rows}


def stats_answer(settings: Settings, reader: Reader) -> dict[str, Any]:
    """Counts and facts about the index, and the tier line."""
    return {"status": STATUS_OK, "note": None, **reader.stats(), "tier": tier_line(settings)}
