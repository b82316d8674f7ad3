"""Which store takes writes: `index`, `rm`, `watch` and the other write verbs are refused against a replica's copy.

A read replica (`knowledge serve --snapshots DIR`) serves generations that `knowledge publish` wrote
on the primary; writing to one of them would fork the index, and nothing would ever publish it. A
configured store counts as a replica's when

- its directory is a published generation (`gNNNNNN` beside its manifest `gNNNNNN.json`);
- its directory is itself a directory of generations (it holds manifests); or
- it has no file of its own while its publish directory holds generations copied from another
  store (the replica host's config, whose `knowledge.publish.directory` is the shared directory).

Each manifest names its `source`, the primary's store, which the refusal names with the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from config.errors import UsageError
from config.settings import Settings
from pipeline import publish as pub

_GENERATION = re.compile(r"g(\d{6})")


class ReplicaStore(UsageError):
    """A write verb was run against a read replica's copy of the store; the message names the primary."""


@dataclass(frozen=True)
class Replica:
    """What the configured store is (a sentence) and the primary store its generations came from."""

    what: str
    source: str


def _source(directory: Path, generation: int) -> str:
    try:
        return pub.read_manifest(directory, generation).source
    except pub.SnapshotRefused:
        return "(unreadable manifest)"


def replica_of(store_dir: Path, db_path: Path, publish_dir: Path) -> Replica | None:
    """The Replica the configured store is a copy for, or None when it is a primary's (or a new) store."""
    match = _GENERATION.fullmatch(store_dir.name)
    if match and pub.manifest_path(store_dir.parent, int(match.group(1))).exists():
        number = int(match.group(1))
        return Replica(f"the store {store_dir} is generation {number} published in {store_dir.parent}",
                       _source(store_dir.parent, number))
    held = pub.generations(store_dir)
    if held:
        return Replica(f"the store directory {store_dir} is a directory of published generations",
                       _source(store_dir, held[0]))
    if not db_path.exists():
        published = pub.generations(publish_dir)
        if published:
            source = _source(publish_dir, published[0])
            if source != str(db_path):
                return Replica(f"this host has no store at {db_path} and reads the generations in {publish_dir}",
                               source)
    return None


def refuse_replica(verb: str, settings: Settings) -> None:
    """ReplicaStore (exit 2) when the configured store is a read replica's copy: `verb` writes only on the primary."""
    replica = replica_of(settings.store_dir, settings.db_path, settings.publish_dir)
    if replica is None:
        return
    raise ReplicaStore(
        f"knowledge {verb}: refused: {replica.what}, a read replica's copy of the primary store {replica.source}; "
        f"a replica never writes. Run `knowledge {verb}` on the primary (the host with {replica.source}), then "
        "`knowledge publish` there (or `index --publish`); the replicas take the new generation at their next poll. "
        "To make this host a primary of its own, point knowledge.directory and knowledge.publish.directory "
        "elsewhere"
    )
