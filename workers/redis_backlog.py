"""The embedding backlog of a vector run in Redis: RedisLedger's twin of InMemoryLedger's backlog.

Keys under `<namespace>:run:<run id>:`, all expiring with the run (see workers/embed.py and
workers/backpressure.py for how they are used):
  emb:positions  hash ingest key -> JSON positions of its items (once per key)
  emb:queued     hash "<doc key>\\x00<ordinal>" -> backlog position (until its batch is embedded)
  emb:items      hash position -> JSON [doc key, path, ordinal, text] (until its batch is embedded)
  emb:length     chunks ever appended (positions are 0..length-1)
  emb:embedded   chunks whose batch was embedded or given up;  emb:done  set of those batches' starts
  emb:ingested   set of ingest keys done;  emb:expected  hash doc key -> vectors awaited
  emb:settled    set of doc keys written or failed;  emb:vec:<doc key>  hash ordinal -> float32 blob
  emb:complete   set of doc keys with every vector, not settled yet (waiting for the writer)
  emb:parked     hash ingest key -> JSON args of a deferred ingest message
  emb:waiting    zset of parked keys not woken yet (score: parking order, negative = woken before)
  emb:woken      zset of parked keys sent again but not admitted yet (score: when)
  emb:parkseq    the parking order counter;  emb:ticker  hash token, at: the run's one live ticker
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from workers.backlog import BacklogState

_QUEUE_EMBEDS = """
local ttl, key = tonumber(ARGV[1]), ARGV[2]
local got = redis.call('hget', KEYS[1], key)
if not got then
  local limit = tonumber(ARGV[3])
  if limit >= 0 and #ARGV > 3 then
    local pending = tonumber(redis.call('get', KEYS[4]) or '0') - tonumber(redis.call('get', KEYS[5]) or '0')
    if pending > limit then return false end
  end
  local positions = {}
  for i = 4, #ARGV, 2 do
    local pos = redis.call('hget', KEYS[2], ARGV[i])
    if not pos then
      pos = redis.call('incr', KEYS[4]) - 1
      redis.call('hset', KEYS[3], pos, ARGV[i + 1])
      redis.call('hset', KEYS[2], ARGV[i], pos)
    end
    positions[#positions + 1] = tonumber(pos)
  end
  got = '[]'
  if #positions > 0 then got = cjson.encode(positions) end
  redis.call('hset', KEYS[1], key, got)
  for i = 1, 4 do redis.call('expire', KEYS[i], ttl) end
end
redis.call('hdel', KEYS[6], key)
redis.call('zrem', KEYS[7], key)
redis.call('zrem', KEYS[8], key)
return got
"""

_BATCH_EMBEDDED = """
local ttl = tonumber(ARGV[1])
if redis.call('sadd', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('expire', KEYS[1], ttl)
local fields = {}
for p = tonumber(ARGV[2]), tonumber(ARGV[3]) - 1 do fields[#fields + 1] = p end
if #fields == 0 then return 0 end
local rows = redis.call('hmget', KEYS[3], unpack(fields))
local slots, n = {}, 0
for i = 1, #fields do
  if rows[i] then
    n = n + 1
    local item = cjson.decode(rows[i])
    slots[#slots + 1] = item[1] .. '\\0' .. string.format('%d', item[3])
  end
end
if n > 0 then
  redis.call('incrby', KEYS[2], n)
  redis.call('expire', KEYS[2], ttl)
  redis.call('hdel', KEYS[3], unpack(fields))
  redis.call('hdel', KEYS[4], unpack(slots))
end
return n
"""

_PUT_VECTORS = """
local ttl, prefix, ncheck = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local order, seen = {}, {}
local function touch(k)
  if not seen[k] then seen[k] = true; order[#order + 1] = k end
end
for i = 4, 3 + ncheck do touch(ARGV[i]) end
for i = 4 + ncheck, #ARGV, 3 do
  local k = ARGV[i]
  if redis.call('sismember', KEYS[2], k) == 0 then
    redis.call('hset', prefix .. k, ARGV[i + 1], ARGV[i + 2])
    redis.call('expire', prefix .. k, ttl)
    touch(k)
  end
end
local done = {}
for _, k in ipairs(order) do
  if redis.call('sismember', KEYS[2], k) == 0 then
    local want = redis.call('hget', KEYS[1], k)
    if want and redis.call('hlen', prefix .. k) >= tonumber(want) then done[#done + 1] = k end
  end
end
if #done > 0 then
  redis.call('sadd', KEYS[3], unpack(done))
  redis.call('expire', KEYS[3], ttl)
end
return done
"""

_PARK = """
local ttl, key, now = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[4])
redis.call('hset', KEYS[1], key, ARGV[3])
if redis.call('zrem', KEYS[3], key) == 1 then
  redis.call('zadd', KEYS[2], -redis.call('incr', KEYS[4]), key)
elseif not redis.call('zscore', KEYS[2], key) then
  redis.call('zadd', KEYS[2], redis.call('incr', KEYS[4]), key)
end
for i = 1, 4 do redis.call('expire', KEYS[i], ttl) end
local at = redis.call('hget', KEYS[5], 'at')
if at and now - tonumber(at) < tonumber(ARGV[5]) then return false end
redis.call('hset', KEYS[5], 'token', ARGV[6], 'at', ARGV[4])
redis.call('expire', KEYS[5], ttl)
return ARGV[6]
"""

_UNPARK = """
local keys = redis.call('zrange', KEYS[1], 0, tonumber(ARGV[2]) - 1)
if #keys == 0 then return {} end
redis.call('zrem', KEYS[1], unpack(keys))
for _, k in ipairs(keys) do redis.call('zadd', KEYS[2], ARGV[3], k) end
redis.call('expire', KEYS[2], tonumber(ARGV[1]))
return redis.call('hmget', KEYS[3], unpack(keys))
"""

_TICK = """
if redis.call('hget', KEYS[1], 'token') ~= ARGV[2] then return false end
if redis.call('zcard', KEYS[2]) == 0 and redis.call('zcard', KEYS[3]) == 0 then
  redis.call('del', KEYS[1])
  return false
end
redis.call('hset', KEYS[1], 'at', ARGV[3])
redis.call('expire', KEYS[1], tonumber(ARGV[1]))
local stale = redis.call('zrangebyscore', KEYS[3], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[4]))
if #stale == 0 then return {} end
for _, k in ipairs(stale) do redis.call('zadd', KEYS[3], ARGV[3], k) end
return redis.call('hmget', KEYS[4], unpack(stale))
"""

_PARK_PARTS = ("emb:parked", "emb:waiting", "emb:woken", "emb:parkseq", "emb:ticker")


def _text(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _args(rows: list[Any] | None) -> list[list[Any]]:
    return [json.loads(row) for row in rows or [] if row]


class RedisBacklog:
    """The embedding backlog methods of RedisLedger (which provides client, ttl and _key)."""

    client: Any
    ttl: int

    def _key(self, run_id: str, part: str) -> str:
        raise NotImplementedError

    def _script(self, name: str, source: str) -> Any:
        scripts = self.__dict__.setdefault("_embed_scripts", {})
        if name not in scripts:
            scripts[name] = self.client.register_script(source)
        return scripts[name]

    def _keys(self, run_id: str, *parts: str) -> list[str]:
        return [self._key(run_id, p) for p in parts]

    def expect_ingests(self, run_id: str, count: int) -> None:
        """Record how many ingest messages the run sent (the embedding tail flushes after the last)."""
        meta = self._key(run_id, "meta")
        pipe = self.client.pipeline()
        pipe.hset(meta, "ingests", count)
        pipe.expire(meta, self.ttl)
        pipe.execute()

    def queue_embeds(self, run_id: str, key: str, items: list[list[Any]], limit: int | None = None) -> list[int] | None:
        """Append an ingest message's items to the backlog once per key; return their positions, or
        None when a limit is given and more than `limit` chunks wait for their vectors."""
        keys = self._keys(run_id, "emb:positions", "emb:queued", "emb:items", "emb:length", "emb:embedded",
                          "emb:parked", "emb:waiting", "emb:woken")
        args: list[Any] = [self.ttl, key, -1 if limit is None else int(limit)]
        for item in items:
            args += [f"{item[0]}\x00{int(item[2])}", json.dumps(item, separators=(",", ":"))]
        encoded = self._script("queue_embeds", _QUEUE_EMBEDS)(keys=keys, args=args)
        return None if encoded is None else [int(p) for p in json.loads(encoded)]

    def backlog_state(self, run_id: str, key: str) -> BacklogState:
        """The run's backlog counters and where ingest message `key` stands."""
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self._key(run_id, "emb:length"))
        pipe.get(self._key(run_id, "emb:embedded"))
        pipe.hexists(self._key(run_id, "emb:positions"), key)
        pipe.sismember(self._key(run_id, "emb:ingested"), key)
        pipe.scard(self._key(run_id, "emb:complete"))
        pipe.hlen(self._key(run_id, "emb:positions"))
        pipe.zcard(self._key(run_id, "emb:woken"))
        length, embedded, queued, done, unwritten, admitted, woken = pipe.execute()
        return BacklogState(int(length or 0), int(embedded or 0), bool(queued), bool(done), int(unwritten),
                            int(admitted), int(woken))

    def batch_embedded(self, run_id: str, start: int, stop: int) -> None:
        """Count the batch at positions [start, stop) as embedded (once) and free its items."""
        keys = self._keys(run_id, "emb:done", "emb:embedded", "emb:items", "emb:queued")
        self._script("batch_embedded", _BATCH_EMBEDDED)(keys=keys, args=[self.ttl, int(start), int(stop)])

    def park(self, run_id: str, key: str, args: list[Any], now: float, ticker_after: float) -> str | None:
        """Hold a deferred ingest message's args until unpark; return a new ticker token when no
        ticker ran within ticker_after (the caller then starts one)."""
        token = uuid.uuid4().hex[:12]
        keys = self._keys(run_id, *_PARK_PARTS)
        answer = self._script("park", _PARK)(
            keys=keys, args=[self.ttl, key, json.dumps(args, separators=(",", ":")), repr(now), ticker_after, token])
        return _text(answer)

    def unpark(self, run_id: str, count: int, now: float) -> list[list[Any]]:
        """Take up to count parked messages' args, oldest first, marking them woken at now."""
        keys = self._keys(run_id, "emb:waiting", "emb:woken", "emb:parked")
        return _args(self._script("unpark", _UNPARK)(keys=keys, args=[self.ttl, int(count), repr(now)]))

    def tick(self, run_id: str, token: str, now: float, stale_after: float) -> list[list[Any]] | None:
        """A ticker's turn: None when it must stop, else the args of messages woken more than
        stale_after ago and still not admitted (woken again now)."""
        keys = self._keys(run_id, "emb:ticker", "emb:waiting", "emb:woken", "emb:parked")
        rows = self._script("tick", _TICK)(keys=keys, args=[self.ttl, token, repr(now), stale_after])
        return None if rows is None else _args(rows)

    def ingest_done(self, run_id: str, key: str) -> tuple[bool, int]:
        """Mark an ingest message done; return (all expected ingests are done, backlog length)."""
        done_key = self._key(run_id, "emb:ingested")
        pipe = self.client.pipeline()
        pipe.sadd(done_key, key)
        pipe.expire(done_key, self.ttl)
        pipe.scard(done_key)
        pipe.hget(self._key(run_id, "meta"), "ingests")
        pipe.get(self._key(run_id, "emb:length"))
        _, _, done, expected, length = pipe.execute()
        return expected is not None and int(done) >= int(expected), int(length or 0)

    def embed_items(self, run_id: str, start: int, stop: int) -> list[list[Any]]:
        """The backlog items at positions [start, stop) not yet freed."""
        if stop <= start:
            return []
        return _args(self.client.hmget(self._key(run_id, "emb:items"), list(range(start, stop))))

    def expect_vectors(self, run_id: str, counts: dict[str, int]) -> None:
        """Record how many vectors each pending document waits for."""
        if not counts:
            return
        key = self._key(run_id, "emb:expected")
        pipe = self.client.pipeline()
        pipe.hset(key, mapping=counts)
        pipe.expire(key, self.ttl)
        pipe.execute()

    def put_vectors(self, run_id: str, vectors: list[tuple[str, int, bytes]], check: list[str]) -> list[str]:
        """Store vectors per (doc key, ordinal); return the documents (touched or in check) now complete."""
        keys = self._keys(run_id, "emb:expected", "emb:settled", "emb:complete")
        args: list[Any] = [self.ttl, self._key(run_id, "emb:vec:"), len(check), *check]
        for doc_key, ordinal, blob in vectors:
            args += [doc_key, int(ordinal), blob]
        done = self._script("put_vectors", _PUT_VECTORS)(keys=keys, args=args)
        return [_text(k) or "" for k in done]

    def present_vectors(self, run_id: str, slots: list[tuple[str, int]]) -> list[bool]:
        """Whether each (doc key, ordinal) already has its vector (or its document was settled)."""
        settled = self._key(run_id, "emb:settled")
        pipe = self.client.pipeline(transaction=False)
        for doc_key, ordinal in slots:
            pipe.sismember(settled, doc_key)
            pipe.hexists(self._key(run_id, f"emb:vec:{doc_key}"), str(int(ordinal)))
        answers = pipe.execute()
        return [bool(answers[2 * i]) or bool(answers[2 * i + 1]) for i in range(len(slots))]

    def vectors(self, run_id: str, doc_key: str) -> dict[int, bytes]:
        """The vectors embedded for a document, by ordinal."""
        rows = self.client.hgetall(self._key(run_id, f"emb:vec:{doc_key}"))
        return {int(k): bytes(v) for k, v in rows.items()}

    def drop_vectors(self, run_id: str, doc_key: str) -> None:
        """Settle a written (or failed) document: forget its vectors; later puts for it are ignored."""
        settled = self._key(run_id, "emb:settled")
        pipe = self.client.pipeline()
        pipe.sadd(settled, doc_key)
        pipe.expire(settled, self.ttl)
        pipe.delete(self._key(run_id, f"emb:vec:{doc_key}"))
        pipe.hdel(self._key(run_id, "emb:expected"), doc_key)
        pipe.srem(self._key(run_id, "emb:complete"), doc_key)
        pipe.execute()

    def drop_backlog(self, run_id: str) -> None:
        """Free a finished run's embedding backlog, vectors and parked messages (the counters stay)."""
        doomed = self._keys(run_id, "emb:items", "emb:queued", "emb:done", "emb:complete", *_PARK_PARTS)
        doomed += [k for k in self.client.scan_iter(match=self._key(run_id, "emb:vec:*"), count=1000)]
        for start in range(0, len(doomed), 500):
            self.client.delete(*doomed[start:start + 500])
