"""What an index run has to do, found as the walk goes, without writing anything.

A Survey walks every root (absolute) with the configured globs and sorts each file it finds, in
its stored spelling, against the store: a file to read (a job, handed out at once by jobs()) or one
unchanged by stat (counted). It never holds a record per file: the walk yields files in the byte
order of their paths and the stored fingerprints under the root are read in the same order a page
at a time (pipeline/paged_fingerprints.py), so the two streams merge; the stored documents the merge passes
without a walked file are the root's candidates for removal. Once jobs() is exhausted the walk
failures, skips, stale documents (indexed, now unindexable) and removals are whole; removals count
only for a root walked completely. An index run enqueues the jobs as they come (workers/run.py);
`index --dry-run` reports them (preview()), reading the changed files only to tell an update from
a touch.

Roots that nest (`docs` and `docs/api`, or a file named inside a walked tree) are the one case that
keeps a set: the paths those roots walked, so a file walked twice is read once (its first root
wins) and is neither stale nor removed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from config.errors import KnowledgeError
from config.settings import Settings
from pipeline import formats, schema
from pipeline.files import read_bytes, sha256_hex
from pipeline.fingerprint import StoredStat, needs_read
from pipeline.globs import Globs
from pipeline.models import FileJob, Skip
from pipeline.paged_fingerprints import LOOKUP, StoredFingerprints
from pipeline.paths import HERE, PathBase, under
from pipeline.walker import Found, WalkResult, stream_root, unindexable

ToRead = tuple[FileJob, bool]  # a job, and whether the store knew the file


class Survey:
    """One survey of a run's roots, in stored spellings: iterate jobs() once, then read the rest."""

    def __init__(self, settings: Settings, roots: list[str], stored: StoredFingerprints, reindex: bool,
                 store_dir: Path | None = None, backfill: frozenset[str] | set[str] = frozenset(),
                 watch: Iterable[str] = ()) -> None:
        """backfill: stored paths holding a chunk without a vector, read again (with no stored hash)
        even when unchanged by stat; watch: stored spellings under which the walked paths are kept
        (in `watched`)."""
        self.base = PathBase.at(settings.path_base)
        self.globs = Globs.of(settings.include, settings.exclude)
        self.extensions = formats.extensions_of(settings.formats)
        self.roots = roots
        self.stored = stored
        self.reindex = reindex
        self.store_dir = store_dir
        self.backfill = backfill
        self.watch = tuple(watch)
        self.files = 0  # distinct files walked
        self.unchanged = 0  # of them, unchanged by stat (not read)
        self.rechunked = 0  # of them, read again because their stored chunk policy is older
        self.skipped: list[Skip] = []
        self.failures: list[Skip] = []
        self.stale: dict[str, Skip] = {}
        self.watched: set[str] = set()
        self.walked = False
        self._candidates: list[str] = []  # stored under a complete root, not walked by it
        self._seen: set[str] = set()  # every path walked by a root that nests with another
        self._strays: set[str] = set()  # walked paths looked up alone, outside their root's merge

    def jobs(self) -> Iterator[ToRead]:
        """The files to read, in walk order, as the walk finds them."""
        if self.walked:
            raise RuntimeError("a survey walks once")
        nested = _nested(self.roots)
        for root in self.roots:
            yield from self._walk(root, root in nested)
        for path in [p for p in self.stale if p in self._seen]:  # another root walked it as a file
            del self.stale[path]
        self.walked = True

    def removals(self) -> list[str]:
        """The stored files (never web pages) under a completely walked root that no root of this run
        walked: what the run removes when it finishes (the stale documents leave as skips, not here)."""
        if not self.walked:
            raise RuntimeError("removals are known only once the walk is complete")
        gone = {p for p in self._candidates if p not in self.stale and p not in self._seen and p not in self._strays}
        return sorted(gone)

    def _walk(self, root: str, nested: bool) -> Iterator[ToRead]:
        """Walk one root, merging its files with the stored documents under it."""
        result, files = stream_root(root, self.store_dir, self.globs, self.extensions)
        spelled = self.base.stored(result.root)
        rows = self.stored.under(spelled) if result.directory else iter(())
        head = next(rows, None)
        candidates: list[str] = []
        strays: list[Found] = []
        last: str | None = None
        walked_any = False
        roots: dict[str, str] = {}
        for found in files:
            restated = self._restate(found, nested, roots)
            if restated is None:
                continue  # an earlier root walked it: its outcome is there
            path = restated.path
            walked_any = True
            if not under(path, spelled) or (last is not None and path <= last):
                strays.append(restated)  # the base lies inside this root: not in its stored range
                self._strays.add(path)
                if len(strays) >= LOOKUP:
                    yield from self._strays_read(strays)
                    strays = []
                continue
            last = path
            while head is not None and head[0] < path:
                if not result.errors:  # a walk that failed somewhere prunes nothing: stop collecting
                    candidates.append(head[0])
                head = next(rows, None)
            row = None
            if head is not None and head[0] == path:
                row = head[1]
                head = next(rows, None)
            job = self._classify(restated, row)
            if job is not None:
                yield job
        yield from self._strays_read(strays)
        # A directory walked completely reconciles what lies under it (a file named alone never
        # prunes; neither does a walk that found nothing, which may be a mount that is not there).
        if result.complete and result.directory and walked_any:
            self._candidates += [*candidates, *([] if head is None else [head[0]]), *(row[0] for row in rows)]
        self._close(self.base.restate(result))

    def _restate(self, found: Found, nested: bool, roots: dict[str, str]) -> Found | None:
        """A walked file in stored spellings, counted (and noted when watched); None when a nesting root
        walked it already. roots caches the stored spelling of each walk root."""
        path = self.base.stored(found.path)
        if nested:
            if path in self._seen:
                return None
            self._seen.add(path)
        self.files += 1
        if self.watch and any(under(path, w) for w in self.watch):
            self.watched.add(path)
        root_spelled = roots.get(found.root)
        if root_spelled is None:
            root_spelled = roots[found.root] = self.base.stored(found.root)
        return Found(path, root_spelled, found.size, found.mtime_ns)

    def _strays_read(self, strays: list[Found]) -> Iterator[ToRead]:
        if not strays:
            return
        known = self.stored.lookup(f.path for f in strays)
        for found in strays:
            job = self._classify(found, known.get(found.path))
            if job is not None:
                yield job

    def _classify(self, found: Found, row: StoredStat | None) -> ToRead | None:
        """The job for a walked file (restated) that needs reading, else None (counted unchanged)."""
        lacking = found.path in self.backfill
        outdated = (row is not None and not self.reindex and row.policy != ""
                    and row.policy != formats.policy_of(found.path))
        if lacking or outdated or needs_read(found, row, self.reindex):
            sha = None if (self.reindex or row is None or lacking or outdated) else row.sha256
            self.rechunked += outdated
            job = FileJob(found.path, found.root, found.size, found.mtime_ns, sha, self.base.directory)
            return job, row is not None
        self.unchanged += 1
        return None

    def _close(self, result: WalkResult) -> None:
        """Take a finished root's skips and failures; its stored unindexable skips are stale."""
        self.skipped += result.skipped
        self.failures += result.errors
        maybe = [s for s in result.skipped if unindexable(s.reason)]
        known = self.stored.lookup(s.path for s in maybe) if maybe else {}
        self.stale.update((s.path, s) for s in maybe if s.path in known)


def _nested(roots: list[str]) -> set[str]:
    """The roots (absolute) at or under another root, and those holding another."""
    spelled = [os.path.normpath(r) for r in roots]
    nested: set[str] = set()
    for i, a in enumerate(spelled):
        for j, b in enumerate(spelled):
            if i != j and (under(a, b) or under(b, a)):
                nested.add(roots[i])
    return nested


@dataclass(frozen=True)
class Preview:
    """What `index --dry-run` found: the paths a run would add, update, remove, and leave alone."""

    added: list[str]
    updated: list[str]
    unchanged: int
    removed: list[str]
    skipped: list[Skip]
    failures: list[Skip]
    rechunked: list[str] = field(default_factory=list)  # of updated: read again for a newer policy

    def to_json(self) -> dict[str, object]:
        """The object `index --dry-run --json` prints."""
        return {
            "dry_run": True, "added": self.added, "updated": self.updated, "unchanged": self.unchanged,
            "removed": self.removed, "rechunked": self.rechunked,
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "failures": [{"path": s.path, "reason": s.reason} for s in self.failures],
        }


def preview(found: Survey) -> Preview:
    """The run found would make, reading changed files to tell an edit from a touch; nothing is written."""
    added: list[str] = []
    updated: list[str] = []
    touched = 0
    read_failures: list[Skip] = []
    rechunked: list[str] = []
    before = 0
    for job, known in found.jobs():
        if found.rechunked > before:  # the survey counts an outdated policy as it yields the job
            before = found.rechunked
            rechunked.append(job.path)
        if not known:
            added.append(job.path)
            continue
        try:
            data, _ = read_bytes(job.on_disk(job.path), job.on_disk(job.root))
        except KnowledgeError as exc:
            read_failures.append(Skip(job.path, str(exc)))
            continue
        if job.stored_sha256 is not None and sha256_hex(data) == job.stored_sha256:
            touched += 1
        else:
            updated.append(job.path)
    removed = sorted({*found.stale, *found.removals()})
    return Preview(sorted(added), sorted(updated), found.unchanged + touched, removed, found.skipped,
                   found.failures + read_failures, sorted(rechunked))


def outdated_policies(stored: StoredFingerprints, enabled: Iterable[str], roots: Iterable[str]) -> int:
    """The stored files under roots (stored spellings) of the enabled formats whose chunk policy is older
    than today's: what the run reads and chunks again."""
    if stored.conn is None or not schema.has_policy_column(stored.conn):
        return 0
    where: list[str] = []
    args: list[str] = []
    for root in roots:
        if root == HERE:
            where.append("substr(path, 1, 1) != '/'")
            continue
        prefix = root.rstrip("/")
        where.append("(path = ? OR (path >= ? AND path < ?))")
        args += [root, prefix + "/", prefix + "0"]
    if not where:
        return 0
    names = set(enabled)
    rows = stored.conn.execute("SELECT policy, count(*) FROM documents WHERE source = 'file' AND policy != ''"
                               f" AND ({' OR '.join(where)}) GROUP BY policy", args).fetchall()
    return sum(int(count) for policy, count in rows
               if policy.partition(":")[0] in names and formats.current_policy(policy) not in (None, policy))
