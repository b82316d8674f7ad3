"""What an index run has to do, found without writing anything: walk, restate, classify.

survey() walks every root (absolute) with the configured globs, restates each path in its stored
spelling, and sorts what it found against the store: files to read (jobs), files unchanged by stat,
walk failures, stale documents (indexed, now unindexable), and the directories whose complete walk
reconciles deletions under them. An index run enqueues the result (workers/run.py); `index --dry-run`
reports it (preview()), reading the changed files only to tell an update from a touch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from config.errors import KnowledgeError
from config.settings import Settings
from pipeline.files import read_bytes, sha256_hex
from pipeline.fingerprint import StoredStat, classify
from pipeline.globs import Globs
from pipeline.models import FileJob, Skip
from pipeline.paths import PathBase, under
from pipeline.walker import Found, unindexable, walk_root


@dataclass
class Survey:
    """The outcome of walking a run's roots, in stored spellings."""

    base: PathBase
    files: dict[str, Found] = field(default_factory=dict)
    jobs: list[FileJob] = field(default_factory=list)
    unchanged: list[Found] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    failures: list[Skip] = field(default_factory=list)
    stale: dict[str, Skip] = field(default_factory=dict)
    prunable: list[str] = field(default_factory=list)

    def backfill(self, lacking_vectors: frozenset[str]) -> None:
        """Re-read the unchanged files that hold a chunk without a vector (their unchanged chunks keep
        any stored vector), and read every changed one of them whatever its hash."""
        if not lacking_vectors:
            return
        lacking = [f for f in self.unchanged if f.path in lacking_vectors]
        self.unchanged = [f for f in self.unchanged if f.path not in lacking_vectors]
        self.jobs = [replace(j, stored_sha256=None) if j.path in lacking_vectors else j for j in self.jobs]
        self.jobs += [FileJob(f.path, f.root, f.size, f.mtime_ns, None, self.base.directory) for f in lacking]

    def removals(self, stored: Iterable[str]) -> list[str]:
        """The stored files (never web pages) under a completely walked root that no root of this run
        walked: what the run removes when it finishes (the stale documents leave as skips, not here)."""
        if not self.prunable:
            return []
        return sorted(p for p in stored if p not in self.files and p not in self.stale and "://" not in p
                      and any(under(p, root) for root in self.prunable))


def survey(settings: Settings, roots: list[str], stored: dict[str, StoredStat], reindex: bool,
           store_dir: Path | None = None) -> Survey:
    """Walk roots (absolute) and sort what they hold against the stored fingerprints."""
    base = PathBase.at(settings.path_base)
    globs = Globs.of(settings.include, settings.exclude)
    out = Survey(base)
    for root in roots:
        result = base.restate(walk_root(root, store_dir, globs))
        out.skipped += result.skipped
        out.stale.update((s.path, s) for s in result.skipped if s.path in stored and unindexable(s.reason))
        out.failures += result.errors
        for found in result.files:
            out.files.setdefault(found.path, found)
        # A directory walked completely reconciles what lies under it (a file named alone never
        # prunes; neither does a walk that found nothing, which may be a mount that is not there).
        if result.complete and result.files and result.directory:
            out.prunable.append(result.root)
    for path in out.files:  # another root walked it as a file: it has its outcome there
        out.stale.pop(path, None)
    out.jobs, out.unchanged = classify(list(out.files.values()), stored, reindex, base.directory)
    return out


@dataclass(frozen=True)
class Preview:
    """What `index --dry-run` found: the paths a run would add, update, remove, and leave alone."""

    added: list[str]
    updated: list[str]
    unchanged: int
    removed: list[str]
    skipped: list[Skip]
    failures: list[Skip]

    def to_json(self) -> dict[str, object]:
        """The object `index --dry-run --json` prints."""
        return {
            "dry_run": True, "added": self.added, "updated": self.updated, "unchanged": self.unchanged,
            "removed": self.removed,
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "failures": [{"path": s.path, "reason": s.reason} for s in self.failures],
        }


def preview(found: Survey, stored: dict[str, StoredStat]) -> Preview:
    """The run found would make, reading changed files to tell an edit from a touch; nothing is written."""
    added: list[str] = []
    updated: list[str] = []
    unchanged = len(found.unchanged)
    failures = list(found.failures)
    for job in found.jobs:
        if job.path not in stored:
            added.append(job.path)
            continue
        try:
            data, _ = read_bytes(job.on_disk(job.path), job.on_disk(job.root))
        except KnowledgeError as exc:
            failures.append(Skip(job.path, str(exc)))
            continue
        if job.stored_sha256 is not None and sha256_hex(data) == job.stored_sha256:
            unchanged += 1
        else:
            updated.append(job.path)
    removed = sorted({*found.stale, *found.removals(stored)})
    return Preview(sorted(added), sorted(updated), unchanged, removed, found.skipped, failures)
