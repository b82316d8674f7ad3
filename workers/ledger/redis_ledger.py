"""The run ledger in Redis: the InMemoryLedger contract under expiring keys of the store's namespace.

Keys (all under `<namespace>:run:<run id>:` and expiring after TTL_SECONDS):
  meta         hash: info, state, total, walked, finished, removed, files, chunks, error
  out          hash path -> first recorded outcome (HSETNX: first wins, a redelivery repeats harmlessly);
               it expires FINISHED_TTL_SECONDS after the run closes, being needed only while messages
               of the run may still be redelivered
  cnt          hash outcome -> number of paths with that outcome (bumped only when HSETNX set the path,
               and by the walk's count of files unchanged by stat, which are never listed in `out`)
  fail / skip  hash path -> reason, for failed and skipped outcomes
  walkskip     hash path -> reason, for files the walk skipped without reading
  prune        zlib(JSON list) of the stored paths the walk's complete roots no longer hold
  stage:<key>  zlib(JSON payload) staged by an ingest message for the writer
  staging      set of the keys staged and not yet applied (ingest waits while it is full)
`<namespace>:runs` is a sorted set of run ids by start time. The embedding backlog (`emb:*` keys)
is in workers/ledger/redis_backlog.py; the run lock, presence and replies in redis_duties.py; the
Lua scripts in workers/ledger/lua/.
"""

from __future__ import annotations

import json
import time
import zlib
from typing import Any

import redis

from workers.ledger.protocol import OUTCOME_NAMES, Outcome, RunSummary, Wire
from workers.ledger.redis_backlog import RedisBacklog
from workers.ledger.redis_duties import RedisPresence, RedisReplies, RedisRunLock, text
from workers.ledger.scripts import Scripts

TTL_SECONDS = 7 * 24 * 3600
FINISHED_TTL_SECONDS = 3600
RECORD_CHUNK = 500


def _pack(value: Any) -> bytes:
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)


def _unpack(data: Any) -> Any:
    return json.loads(zlib.decompress(data))


class RedisLedger:
    """The run ledger of one store on a Redis connection (the twin of InMemoryLedger)."""

    def __init__(self, client: redis.Redis, namespace: str, ttl: int = TTL_SECONDS) -> None:
        self.client = client
        self.namespace = namespace
        self.ttl = ttl
        self.scripts = Scripts(client)
        self.backlog = RedisBacklog(client, self._key, ttl, self.scripts)
        self.run_lock = RedisRunLock(client, namespace, self.scripts, on_acquired=self._abandon_stale)
        self.presence = RedisPresence(client, namespace)
        self.replies = RedisReplies(client, namespace)

    @property
    def runs_key(self) -> str:
        """The sorted set of run ids by start time."""
        return f"{self.namespace}:runs"

    def _key(self, run_id: str, part: str) -> str:
        return f"{self.namespace}:run:{run_id}:{part}"

    def start(self, run_id: str, info: dict[str, Any]) -> None:
        """Create the run and list it among the recent runs."""
        now = time.time()
        meta = self._key(run_id, "meta")
        pipe = self.client.pipeline()
        pipe.hset(meta, mapping={"info": json.dumps(info), "state": "running", "total": 0, "walked": 0,
                                 "started": now})
        pipe.expire(meta, self.ttl)
        pipe.zadd(self.runs_key, {run_id: now})
        pipe.zremrangebyscore(self.runs_key, "-inf", now - self.ttl)
        pipe.expire(self.runs_key, self.ttl)
        pipe.execute()

    def walked(self, run_id: str, total: int, unchanged: int, removals: list[str]) -> None:
        """Record the finished walk: its file count, how many are unchanged by stat (one counter, in the
        same transaction as the total), and the stored paths to remove when the run finishes."""
        meta, cnt = self._key(run_id, "meta"), self._key(run_id, "cnt")
        pipe = self.client.pipeline()
        if removals:
            pipe.set(self._key(run_id, "prune"), _pack(removals), ex=self.ttl)
        if unchanged:
            pipe.hincrby(cnt, "unchanged", unchanged)
            pipe.expire(cnt, self.ttl)
        pipe.hset(meta, mapping={"total": total, "walked": 1})
        pipe.expire(meta, self.ttl)
        pipe.execute()

    def record(self, run_id: str, outcomes: list[Outcome]) -> None:
        """Record (path, outcome, reason) triples; the first outcome of a path wins."""
        keys = [self._key(run_id, p) for p in ("out", "cnt", "fail", "skip")]
        for start in range(0, len(outcomes), RECORD_CHUNK):
            args: list[Any] = [self.ttl]
            for path, outcome, reason in outcomes[start:start + RECORD_CHUNK]:
                args += [path, outcome, reason or ""]
            self.scripts["record"](keys=keys, args=args)

    def skip(self, run_id: str, skips: list[tuple[str, str]]) -> None:
        """Record paths the walk skipped before reading, with reasons."""
        if not skips:
            return
        key = self._key(run_id, "walkskip")
        pipe = self.client.pipeline()
        pipe.hset(key, mapping=dict(skips))
        pipe.expire(key, self.ttl)
        pipe.execute()

    def stage(self, run_id: str, key: str, payload: list[Wire]) -> None:
        """Hold a payload for the writer under key (compressed, expiring), counted as staged."""
        staging = self._key(run_id, "staging")
        pipe = self.client.pipeline()
        pipe.set(self._key(run_id, f"stage:{key}"), _pack(payload), ex=self.ttl)
        pipe.sadd(staging, key)
        pipe.expire(staging, self.ttl)
        pipe.execute()

    def staged(self, run_id: str, key: str) -> list[Wire] | None:
        """The payload under key, or None if it was already applied."""
        data = self.client.get(self._key(run_id, f"stage:{key}"))
        return None if data is None else list(_unpack(data))

    def unstage(self, run_id: str, key: str) -> None:
        """Drop an applied payload."""
        pipe = self.client.pipeline()
        pipe.delete(self._key(run_id, f"stage:{key}"))
        pipe.srem(self._key(run_id, "staging"), key)
        pipe.execute()

    def staged_count(self, run_id: str) -> int:
        """How many payloads of the run are staged and not applied yet."""
        return int(self.client.scard(self._key(run_id, "staging")))

    def removals(self, run_id: str) -> list[str]:
        """The stored paths the walk's complete roots no longer hold."""
        data = self.client.get(self._key(run_id, "prune"))
        return [] if data is None else [str(path) for path in _unpack(data)]

    def claim_finish(self, run_id: str) -> bool:
        """True exactly once for a running run: the caller runs the finishing step."""
        return bool(self.scripts["claim_finish"](keys=[self._key(run_id, "meta")]))

    def finish(self, run_id: str, state: str, removed: int, files: int, chunks: int, error: str | None) -> None:
        """Close the run with its final state and store totals, and release its run lock."""
        meta = self._key(run_id, "meta")
        pipe = self.client.pipeline()
        pipe.hset(meta, mapping={"state": state, "removed": removed, "files": files, "chunks": chunks,
                                 "error": error or "", "ended": time.time()})
        pipe.expire(meta, self.ttl)
        # What stays for the run's TTL is its summary; the per-path record only guards redeliveries.
        pipe.expire(self._key(run_id, "out"), FINISHED_TTL_SECONDS)
        pipe.delete(self._key(run_id, "prune"))
        pipe.execute()
        self.run_lock.release(run_id)

    def fail(self, run_id: str, error: str) -> None:
        """Mark a still-running run failed (abandoned or lost); a later finish of it is refused."""
        meta = self._key(run_id, "meta")
        if text(self.client.hget(meta, "state")) == "running":
            self.client.hset(meta, mapping={"state": "failed", "error": error, "finished": 1, "ended": time.time()})

    def summary(self, run_id: str) -> RunSummary:
        """A snapshot of the run; a run whose keys are gone reads as failed."""
        pipe = self.client.pipeline(transaction=False)
        for part in ("meta", "cnt", "fail", "skip", "walkskip"):
            pipe.hgetall(self._key(run_id, part))
        meta_raw, cnt_raw, fail_raw, skip_raw, walkskip_raw = pipe.execute()
        meta = _texts(meta_raw)
        if not meta:
            return RunSummary(run_id=run_id, state="failed",
                              error="the run's ledger is gone from Redis (expired, or Redis lost its data)")
        counts = {k: int(v) for k, v in _texts(cnt_raw).items()}
        skips = {**_texts(walkskip_raw), **_texts(skip_raw)}
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
            failures=[{"path": p, "reason": r} for p, r in sorted(_texts(fail_raw).items())],
            error=meta.get("error") or None,
            info={**json.loads(meta.get("info") or "{}"), "started": float(meta.get("started") or 0),
                  **({"ended": float(meta["ended"])} if meta.get("ended") else {})},
        )

    def recent(self, limit: int = 10) -> list[RunSummary]:
        """The most recent runs still in Redis, newest first."""
        ids = [text(i) for i in self.client.zrevrange(self.runs_key, 0, max(limit, 1) - 1)]
        summaries = [self.summary(i) for i in ids if i]
        return [s for s in summaries if s.info]

    def _abandon_stale(self, run_id: str) -> None:
        """Runs left 'running' without a lock (their CLI and workers went away) can never finish now."""
        for other in self.recent(20):
            if other.run_id != run_id and other.state == "running":
                self.fail(other.run_id, f"abandoned: its run lock expired and run {run_id} started")


def _texts(raw: dict[Any, Any]) -> dict[str, str]:
    """A Redis hash as text keys and values."""
    return {text(k) or "": text(v) or "" for k, v in raw.items()}
