"""The `sources` and `stats` answers (one JSON shape for the CLI's --json and the HTTP API), and
which stored documents a removal names (`knowledge rm`: a path in any spelling, or a directory).

Both carry a `status` and a `note` (null when there is nothing to say), like every other answer;
each document carries its mapped citation (`mapped`, null where no rule applies).
"""

from __future__ import annotations

import os
from typing import Any

from config.settings import Settings
from pipeline.paths import PathBase
from query.reader import Reader, open_reader
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
