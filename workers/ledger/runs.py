"""The run ledger of one store, written once on the ledger's primitives (workers/ledger/primitives.py).

Keys (under `run:<run id>:`, expiring after the ledger's TTL):
  meta         hash: info, state, total, walked, started, finished, removed, files, chunks, error,
               ended, ingests
  out          hash path -> first recorded outcome (hash_first: the first wins and is counted once,
               so a redelivery repeats harmlessly); it expires FINISHED_TTL_SECONDS after the run
               closes, being needed only while messages of the run may still be redelivered
  cnt          hash outcome -> paths with that outcome (counted by hash_first as `out` is set, and by
               the walk for the files unchanged by stat, which are never listed in `out`)
  fail / skip  hash path -> reason of a failed or skipped outcome, written (first wins) for a path
               whose recorded outcome it is, so a redelivery writes one a crash lost
  walkskip     hash path -> reason, for files the walk skipped without reading
  prune        the packed list of the stored paths the walk's complete roots no longer hold
  staged       hash key -> packed payload staged by an ingest message for the writer, until applied
`runs` stamps the run ids by start time. The backlog is in backlog.py, the run lock, presence and
replies in duties.py.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from workers.ledger.backlog import Backlog
from workers.ledger.duties import Presence, Replies, RunLock
from workers.ledger.primitives import Primitives, Value
from workers.ledger.shapes import OUTCOME_NAMES, Outcome, RunSummary, Wire

TTL_SECONDS = 7 * 24 * 3600
FINISHED_TTL_SECONDS = 3600
RECORD_CHUNK = 500
RUNS_KEY = "runs"
NOTED = {"failed": "fail", "skipped": "skip"}  # outcomes listed with their reasons, and where


def _texts(raw: dict[str, bytes]) -> dict[str, str]:
    return {k: v.decode() for k, v in raw.items()}


class Ledger:
    """A store's index runs: per-path outcomes, the walk, staged payloads and the final state, with the
    embedding backlog, the run lock, presence and replies."""

    def __init__(self, store: Primitives, ttl: int = TTL_SECONDS) -> None:
        self.store = store
        self.ttl = ttl
        self.backlog = Backlog(store, ttl)
        self.run_lock = RunLock(store, on_acquired=self._abandon_stale)
        self.presence = Presence(store)
        self.replies = Replies(store)

    @staticmethod
    def _key(run_id: str, part: str) -> str:
        return f"run:{run_id}:{part}"

    def start(self, run_id: str, info: dict[str, Any]) -> None:
        """Create the run and list it among the recent runs."""
        now = time.time()
        with self.store.batch() as batch:
            batch.hash_put(self._key(run_id, "meta"), {"info": json.dumps(info), "state": "running", "total": 0,
                                                       "walked": 0, "started": now}, self.ttl)
            batch.stamp(RUNS_KEY, run_id, now, self.ttl, keep=self.ttl)

    def walked(self, run_id: str, total: int, unchanged: int, removals: list[str]) -> None:
        """Record the finished walk: its file count; how many of those files are unchanged by stat (counted
        as outcomes, not listed: a run with nothing to read records nothing per file); and the stored
        paths its complete roots no longer hold, which the writer removes when the run finishes (one step)."""
        with self.store.batch() as batch:
            if removals:
                batch.put(self._key(run_id, "prune"), self.store.pack(removals), self.ttl)
            if unchanged:
                batch.hash_incr(self._key(run_id, "cnt"), "unchanged", unchanged, self.ttl)
            batch.hash_put(self._key(run_id, "meta"), {"total": total, "walked": 1}, self.ttl)

    def record(self, run_id: str, outcomes: list[Outcome]) -> None:
        """Record (path, outcome, reason) triples; the first outcome of a path wins."""
        for start in range(0, len(outcomes), RECORD_CHUNK):
            batch = outcomes[start:start + RECORD_CHUNK]
            first: dict[str, Value] = {}
            for path, outcome, _ in batch:
                first.setdefault(path, outcome)
            held = dict(zip(first, self.store.hash_first(self._key(run_id, "out"), first, self.ttl,
                                                         counts=self._key(run_id, "cnt"))))
            notes: dict[str, dict[str, Value]] = {}
            for path, outcome, reason in batch:
                if outcome in NOTED and held[path].decode() == outcome:
                    notes.setdefault(NOTED[outcome], {}).setdefault(path, reason or "")
            for part, reasons in notes.items():
                self.store.hash_first(self._key(run_id, part), reasons, self.ttl)

    def skip(self, run_id: str, skips: list[tuple[str, str]]) -> None:
        """Record paths the walk skipped before reading, with reasons."""
        self.store.hash_put(self._key(run_id, "walkskip"), dict(skips), self.ttl)

    def stage(self, run_id: str, key: str, payload: list[Wire]) -> None:
        """Hold a payload for the writer under key (compressed, expiring), counted as staged."""
        self.store.hash_put(self._key(run_id, "staged"), {key: self.store.pack(payload)}, self.ttl)

    def staged(self, run_id: str, key: str) -> list[Wire] | None:
        """The payload under key, or None if it was already applied."""
        data = self.store.hash_get(self._key(run_id, "staged"), [key])[0]
        return None if data is None else list(self.store.unpack(data))

    def unstage(self, run_id: str, key: str) -> None:
        """Drop an applied payload."""
        self.store.hash_drop(self._key(run_id, "staged"), [key])

    def staged_count(self, run_id: str) -> int:
        """How many payloads of the run are staged and not applied yet."""
        return self.store.hash_len([self._key(run_id, "staged")])[0]

    def removals(self, run_id: str) -> list[str]:
        """The stored paths the walk's complete roots no longer hold (see walked)."""
        data = self.store.get(self._key(run_id, "prune"))
        return [] if data is None else [str(path) for path in self.store.unpack(data)]

    def claim_finish(self, run_id: str) -> bool:
        """True exactly once for a running run: the caller runs the finishing step.

        Every way out of "running" sets `finished` with the state (fail) or after this claim (finish),
        so the first to set it, checked after reading "running", is the one claimant.
        """
        meta = self._key(run_id, "meta")
        if self.store.hash_get(meta, ["state"])[0] != b"running":
            return False
        token = uuid.uuid4().hex
        return self.store.hash_first(meta, {"finished": token}, self.ttl) == [token.encode()]

    def finish(self, run_id: str, state: str, removed: int, files: int, chunks: int, error: str | None) -> None:
        """Close the run with its final state and store totals, and release its run lock."""
        with self.store.batch() as batch:
            batch.hash_put(self._key(run_id, "meta"), {"state": state, "removed": removed, "files": files,
                                                       "chunks": chunks, "error": error or "", "finished": 1,
                                                       "ended": time.time()}, self.ttl)
            # What stays for the run's TTL is its summary; the per-path record only guards redeliveries.
            batch.expire(self._key(run_id, "out"), FINISHED_TTL_SECONDS)
            batch.delete([self._key(run_id, "prune")])
        self.run_lock.release(run_id)

    def fail(self, run_id: str, error: str) -> None:
        """Mark a still-running run failed (abandoned or lost); a later finish of it is refused."""
        meta = self._key(run_id, "meta")
        if self.store.hash_get(meta, ["state"])[0] == b"running":
            self.store.hash_put(meta, {"state": "failed", "error": error, "finished": 1, "ended": time.time()},
                                self.ttl)

    def summary(self, run_id: str) -> RunSummary:
        """A snapshot of the run; a run whose keys are gone reads as failed."""
        meta, cnt, walkskip, skip, fail = (_texts(h) for h in self.store.hash_all(
            [self._key(run_id, part) for part in ("meta", "cnt", "walkskip", "skip", "fail")]))
        if not meta:
            return RunSummary(run_id=run_id, state="failed",
                              error="the run's ledger is gone from Redis (expired, or Redis lost its data)")
        counts = {k: int(v) for k, v in cnt.items()}
        skips = {**walkskip, **skip}
        failures = fail
        return RunSummary(
            run_id=run_id,
            state=meta.get("state") or "running",
            total=int(meta.get("total") or 0),
            walked=meta.get("walked") == "1",
            counts={k: counts.get(k, 0) for k in OUTCOME_NAMES},
            removed=int(meta.get("removed") or 0),
            files=int(meta.get("files") or 0),
            chunks=int(meta.get("chunks") or 0),
            skipped=[{"path": p, "reason": r} for p, r in sorted(skips.items())],
            failures=[{"path": p, "reason": r} for p, r in sorted(failures.items())],
            error=meta.get("error") or None,
            info={**json.loads(meta.get("info") or "{}"), "started": float(meta.get("started") or 0),
                  **({"ended": float(meta["ended"])} if meta.get("ended") else {})},
        )

    def recent(self, limit: int = 10) -> list[RunSummary]:
        """The most recent runs still held, newest first."""
        summaries = [self.summary(i) for i in self.store.stamped(RUNS_KEY, limit=max(limit, 1))]
        return [s for s in summaries if s.info]

    def _abandon_stale(self, run_id: str) -> None:
        """Runs left 'running' without a lock (their CLI and workers went away) can never finish now."""
        for other in self.recent(20):
            if other.run_id != run_id and other.state == "running":
                self.fail(other.run_id, f"abandoned: its run lock expired and run {run_id} started")
