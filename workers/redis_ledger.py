"""The run ledger in Redis: the InMemoryLedger contract under expiring keys of the store's namespace.

Keys (all under `<namespace>:run:<run id>:` and expiring after TTL_SECONDS):
  meta         hash: info, state, total, walked, prunable, finished, removed, files, chunks, error
  out          hash path -> first recorded outcome (HSETNX: first wins, a redelivery repeats harmlessly)
  cnt          hash outcome -> number of paths with that outcome (bumped only when HSETNX set the path)
  fail / skip  hash path -> reason, for failed and skipped outcomes
  walkskip     hash path -> reason, for files the walk skipped without reading
  seen         hash root -> zlib(JSON list of paths) the walk saw
  stage:<key>  zlib(JSON payload) staged by an ingest message for the writer
`<namespace>:runs` is a sorted set of run ids by start time; `<namespace>:run-lock` names the run in
progress (SET NX with a TTL that the CLI and every processed message of that run refresh).
The embedding backlog of a vector run (`emb:*` keys) is in workers/redis_backlog.py.
"""

from __future__ import annotations

import json
import time
import zlib
from typing import Any

import redis

from workers.ledger import RunSummary
from workers.redis_backlog import RedisBacklog

TTL_SECONDS = 7 * 24 * 3600
LOCK_TTL_MS = 120_000
# A process that has not announced itself for this long is not counted as alive.
ALIVE_WINDOW_S = 15.0
RECORD_CHUNK = 500

_RECORD = """
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  local path, outcome, reason = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('hsetnx', KEYS[1], path, outcome) == 1 then
    redis.call('hincrby', KEYS[2], outcome, 1)
    if outcome == 'failed' then
      redis.call('hset', KEYS[3], path, reason)
    elseif outcome == 'skipped' then
      redis.call('hset', KEYS[4], path, reason)
    end
  end
end
for i = 1, 4 do redis.call('expire', KEYS[i], ttl) end
return 1
"""

_CLAIM = """
if redis.call('hget', KEYS[1], 'state') ~= 'running' then return 0 end
return redis.call('hsetnx', KEYS[1], 'finished', '1')
"""

_IF_OWNER = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == 'del' then return redis.call('del', KEYS[1]) end
return redis.call('pexpire', KEYS[1], tonumber(ARGV[2]))
"""

_OUTCOMES = ("added", "updated", "unchanged", "skipped", "failed")

def _pack(value: Any) -> bytes:
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)


def _unpack(data: bytes) -> Any:
    return json.loads(zlib.decompress(data))


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


class RedisLedger(RedisBacklog):
    """The run ledger of one store on a Redis connection (the twin of InMemoryLedger)."""

    def __init__(self, client: redis.Redis, namespace: str, ttl: int = TTL_SECONDS) -> None:
        self.client = client
        self.namespace = namespace
        self.ttl = ttl
        self._record = client.register_script(_RECORD)
        self._claim = client.register_script(_CLAIM)
        self._if_owner = client.register_script(_IF_OWNER)

    @property
    def runs_key(self) -> str:
        """The sorted set of run ids by start time."""
        return f"{self.namespace}:runs"

    @property
    def lock_key(self) -> str:
        """The key naming the run in progress."""
        return f"{self.namespace}:run-lock"

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

    def walked(self, run_id: str, total: int, seen: dict[str, list[str]], prunable: list[str]) -> None:
        """Record the finished walk: its file count, the paths seen per root, the roots that may prune."""
        meta, seen_key = self._key(run_id, "meta"), self._key(run_id, "seen")
        pipe = self.client.pipeline()
        if seen:
            pipe.hset(seen_key, mapping={root: _pack(paths) for root, paths in seen.items()})
            pipe.expire(seen_key, self.ttl)
        pipe.hset(meta, mapping={"total": total, "walked": 1, "prunable": json.dumps(list(prunable))})
        pipe.expire(meta, self.ttl)
        pipe.execute()

    def record(self, run_id: str, outcomes: list[tuple[str, str, str | None]]) -> None:
        """Record (path, outcome, reason) triples; the first outcome of a path wins."""
        keys = [self._key(run_id, p) for p in ("out", "cnt", "fail", "skip")]
        for start in range(0, len(outcomes), RECORD_CHUNK):
            args: list[Any] = [self.ttl]
            for path, outcome, reason in outcomes[start:start + RECORD_CHUNK]:
                args += [path, outcome, reason or ""]
            self._record(keys=keys, args=args)

    def skip(self, run_id: str, skips: list[tuple[str, str]]) -> None:
        """Record paths the walk skipped before reading, with reasons."""
        if not skips:
            return
        key = self._key(run_id, "walkskip")
        pipe = self.client.pipeline()
        pipe.hset(key, mapping=dict(skips))
        pipe.expire(key, self.ttl)
        pipe.execute()

    def stage(self, run_id: str, key: str, payload: list[dict[str, Any]]) -> None:
        """Hold a payload for the writer under key (compressed, expiring)."""
        self.client.set(self._key(run_id, f"stage:{key}"), _pack(payload), ex=self.ttl)

    def staged(self, run_id: str, key: str) -> list[dict[str, Any]] | None:
        """The payload under key, or None if it was already applied."""
        data = self.client.get(self._key(run_id, f"stage:{key}"))
        return None if data is None else _unpack(data)  # type: ignore[arg-type]

    def unstage(self, run_id: str, key: str) -> None:
        """Drop an applied payload."""
        self.client.delete(self._key(run_id, f"stage:{key}"))

    def seen(self, run_id: str, root: str) -> set[str]:
        """Paths the walk saw under root."""
        data = self.client.hget(self._key(run_id, "seen"), root)
        return set() if data is None else set(_unpack(data))  # type: ignore[arg-type]

    def prunable(self, run_id: str) -> list[str]:
        """Roots whose walk was complete and saw at least one file."""
        data = self.client.hget(self._key(run_id, "meta"), "prunable")
        return [] if data is None else list(json.loads(data))  # type: ignore[arg-type]

    def claim_finish(self, run_id: str) -> bool:
        """True exactly once for a running run: the caller runs the finishing step."""
        return bool(self._claim(keys=[self._key(run_id, "meta")]))

    def finish(self, run_id: str, state: str, removed: int, files: int, chunks: int, error: str | None) -> None:
        """Close the run with its final state and store totals, and release its run lock."""
        meta = self._key(run_id, "meta")
        pipe = self.client.pipeline()
        pipe.hset(meta, mapping={"state": state, "removed": removed, "files": files, "chunks": chunks,
                                 "error": error or "", "ended": time.time()})
        pipe.expire(meta, self.ttl)
        pipe.execute()
        self.release_run_lock(run_id)

    def fail(self, run_id: str, error: str) -> None:
        """Mark a still-running run failed (abandoned or lost); a later finish of it is refused."""
        meta = self._key(run_id, "meta")
        if _text(self.client.hget(meta, "state")) == "running":
            self.client.hset(meta, mapping={"state": "failed", "error": error, "finished": 1, "ended": time.time()})

    def summary(self, run_id: str) -> RunSummary:
        """A snapshot of the run; a run whose keys are gone reads as failed."""
        pipe = self.client.pipeline(transaction=False)
        for part in ("meta", "cnt", "fail", "skip", "walkskip"):
            pipe.hgetall(self._key(run_id, part))
        meta_raw, cnt_raw, fail_raw, skip_raw, walkskip_raw = pipe.execute()
        meta = {_text(k): _text(v) for k, v in meta_raw.items()}
        if not meta:
            return RunSummary(run_id=run_id, state="failed",
                              error="the run's ledger is gone from Redis (expired, or Redis lost its data)")
        counts = {_text(k): int(v) for k, v in cnt_raw.items()}
        fails = {_text(k): _text(v) or "" for k, v in fail_raw.items()}
        skips = {**{_text(k): _text(v) or "" for k, v in walkskip_raw.items()},
                 **{_text(k): _text(v) or "" for k, v in skip_raw.items()}}
        return RunSummary(
            run_id=run_id,
            state=meta.get("state") or "running",
            total=int(meta.get("total") or 0),
            walked=meta.get("walked") == "1",
            counts={k: counts.get(k, 0) for k in _OUTCOMES},
            removed=int(meta.get("removed") or 0),
            files=int(meta.get("files") or 0),
            chunks=int(meta.get("chunks") or 0),
            skipped=[{"path": p, "reason": r} for p, r in sorted(skips.items())],  # type: ignore[arg-type]
            failures=[{"path": p, "reason": r} for p, r in sorted(fails.items())],  # type: ignore[arg-type]
            error=meta.get("error") or None,
            info={**json.loads(meta.get("info") or "{}"), "started": float(meta.get("started") or 0),
                  **({"ended": float(meta["ended"])} if meta.get("ended") else {})},
        )

    def recent(self, limit: int = 10) -> list[RunSummary]:
        """The most recent runs still in Redis, newest first."""
        ids = [_text(i) for i in self.client.zrevrange(self.runs_key, 0, max(limit, 1) - 1)]
        summaries = [self.summary(i) for i in ids if i]
        return [s for s in summaries if s.info]

    def acquire_run_lock(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> str | None:
        """Take the store's run lock for run_id; return None on success, else the run holding it."""
        for _ in range(3):
            if self.client.set(self.lock_key, run_id, nx=True, px=ttl_ms):
                self._abandon_stale(run_id)
                return None
            holder = _text(self.client.get(self.lock_key))
            if holder is not None:
                return holder
        return "unknown"

    def _abandon_stale(self, run_id: str) -> None:
        """Runs left 'running' without a lock (their CLI and workers went away) can never finish now."""
        for other in self.recent(20):
            if other.run_id != run_id and other.state == "running":
                self.fail(other.run_id, f"abandoned: its run lock expired and run {run_id} started")

    def refresh_run_lock(self, run_id: str, ttl_ms: int = LOCK_TTL_MS) -> bool:
        """Extend the run lock if run_id still holds it."""
        return bool(self._if_owner(keys=[self.lock_key], args=[run_id, ttl_ms]))

    def release_run_lock(self, run_id: str) -> bool:
        """Delete the run lock if run_id holds it."""
        return bool(self._if_owner(keys=[self.lock_key], args=[run_id, "del"]))

    def run_lock_holder(self) -> str | None:
        """The run holding the store's run lock, if any."""
        return _text(self.client.get(self.lock_key))

    def announce(self, role: str, member: str) -> None:
        """Mark a process (`host:pid`) of a role (worker, writer) alive now."""
        key, now = f"{self.namespace}:alive:{role}", time.time()
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(key, {member: now})
        pipe.zremrangebyscore(key, "-inf", now - ALIVE_WINDOW_S * 10)
        pipe.expire(key, 24 * 3600)
        pipe.execute()

    def withdraw(self, role: str, member: str) -> None:
        """Forget a process that is stopping."""
        self.client.zrem(f"{self.namespace}:alive:{role}", member)

    def alive(self, role: str, within_s: float = ALIVE_WINDOW_S) -> list[str]:
        """The processes of a role that announced themselves within the last within_s seconds."""
        members = self.client.zrangebyscore(f"{self.namespace}:alive:{role}", time.time() - within_s, "+inf")
        return sorted(_text(m) or "" for m in members)

    def put_reply(self, request_id: str, value: Any, ttl_s: int = 3600) -> None:
        """Answer an operator request (e.g. `knowledge rm` through the writer); the first answer stays."""
        self.client.set(f"{self.namespace}:reply:{request_id}", json.dumps(value), nx=True, ex=ttl_s)

    def reply(self, request_id: str) -> str | None:
        """The JSON answer to a request, once given."""
        return _text(self.client.get(f"{self.namespace}:reply:{request_id}"))
