"""The primitives in Redis under a store's namespace, and the ledger on them: MemoryPrimitives' twin.

A key `k` is `<namespace>:k`. A call that only writes is one MULTI/EXEC; a call that reads and
writes is one Lua script (lua/*.lua: hash_first, if_equal, log_append, log_free). A log `k` is
five keys: `k:names` (name -> JSON positions), `k:slots` (slot -> live position), `k:items`
(position -> live value), `k:slot_of` (position -> slot) and `k:length`.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import redis

from workers.ledger.primitives import Batch, Op, Value, encode
from workers.ledger.runs import FINISHED_TTL_SECONDS, TTL_SECONDS, Ledger
from workers.ledger.scripts import Scripts

__all__ = ["FINISHED_TTL_SECONDS", "TTL_SECONDS", "RedisLedger", "RedisPrimitives"]

LOG_PARTS = ("names", "slots", "items", "slot_of", "length")
SINGLE_COMMAND = {"put", "delete", "expire", "hash_drop", "set_drop"}  # writes that need no MULTI alone


def _ms(ttl: float) -> int:
    return max(1, int(ttl * 1000))


def text(value: Any) -> str:
    """A Redis answer as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _raw(value: bytes | str | None) -> bytes | None:
    """A Redis answer as bytes (the client is not told to decode; its types allow text)."""
    return value.encode() if isinstance(value, str) else value


def _glob(prefix: str) -> str:
    """A SCAN pattern matching names that start with prefix."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + "*"


class RedisPrimitives:
    """The primitives on one Redis client, every key under `<namespace>:`."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.scripts = Scripts(client)

    def _k(self, key: str) -> str:
        return f"{self.namespace}:{key}"

    def _log(self, key: str) -> list[str]:
        return [self._k(f"{key}:{part}") for part in LOG_PARTS]

    def batch(self) -> Batch:
        """Writes run as one MULTI/EXEC when the block ends."""
        return Batch(self._apply)

    def _apply(self, ops: list[Op]) -> list[Any]:
        """Run write primitives in one round trip: MULTI/EXEC unless it is one single-command write."""
        pipe = self.client.pipeline(transaction=len(ops) > 1 or ops[0][0] not in SINGLE_COMMAND)
        for name, args in ops:
            self._queue(pipe, name, *args)
        return list(pipe.execute())

    def _queue(self, pipe: Any, name: str, key: Any, *args: Any) -> None:
        """Queue the commands of one write primitive on a MULTI pipeline."""
        if name == "delete":
            if key:
                pipe.delete(*[self._k(k) for k in key])
            return
        if name in ("set_add", "set_drop", "stamp"):
            self._queue_set(pipe, name, key, *args)
        elif name == "put":
            pipe.set(self._k(key), encode(args[0]), px=_ms(args[1]))
        elif name == "expire":
            pipe.pexpire(self._k(key), _ms(args[0]))
        elif name == "hash_put" and args[0]:
            pipe.hset(self._k(key), mapping={f: encode(v) for f, v in args[0].items()})
            pipe.pexpire(self._k(key), _ms(args[1]))
        elif name == "hash_drop" and args[0]:
            pipe.hdel(self._k(key), *args[0])
        elif name == "hash_incr":
            pipe.hincrby(self._k(key), args[0], args[1])
            pipe.pexpire(self._k(key), _ms(args[2]))

    def _queue_set(self, pipe: Any, name: str, key: Any, *args: Any) -> None:
        """Queue the commands of one set or sorted-set write primitive on a MULTI pipeline."""
        if name == "set_add" and args[0]:
            pipe.sadd(self._k(key), *args[0])
            pipe.pexpire(self._k(key), _ms(args[1]))
            pipe.scard(self._k(key))
        elif name == "set_drop" and args[0]:
            pipe.srem(self._k(key), *args[0])
        elif name == "stamp":
            member, at, ttl, keep = args
            pipe.zadd(self._k(key), {member: at})
            pipe.zremrangebyscore(self._k(key), "-inf", f"({at - keep!r}")
            pipe.pexpire(self._k(key), _ms(ttl))

    def pack(self, value: Any) -> bytes:
        """A JSON value, compressed (Redis memory is shared)."""
        return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)

    def unpack(self, data: bytes) -> Any:
        """The JSON value pack held."""
        return json.loads(zlib.decompress(data))

    def get(self, key: str) -> bytes | None:
        """The value under key."""
        return _raw(self.client.get(self._k(key)))

    def put(self, key: str, value: Value, ttl: float, new: bool = False) -> bool:
        """Set key to value for ttl seconds (only if absent when new); whether it was set."""
        return bool(self.client.set(self._k(key), encode(value), px=_ms(ttl), nx=new))

    def refresh_if(self, key: str, value: Value, ttl: float) -> bool:
        """Give key a new ttl if it holds value."""
        return bool(self.scripts["if_equal"](keys=[self._k(key)], args=[encode(value), _ms(ttl)]))

    def delete_if(self, key: str, value: Value) -> bool:
        """Delete key if it holds value."""
        return bool(self.scripts["if_equal"](keys=[self._k(key)], args=[encode(value), "del"]))

    def delete(self, keys: list[str]) -> None:
        """Delete keys of any kind."""
        for start in range(0, len(keys), 500):
            self._apply([("delete", (keys[start:start + 500],))])

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key whose name starts with prefix."""
        doomed = list(self.client.scan_iter(match=_glob(self._k(prefix)), count=1000))
        for start in range(0, len(doomed), 500):
            self.client.delete(*doomed[start:start + 500])

    def expire(self, key: str, ttl: float) -> None:
        """Give an existing key a new ttl."""
        self._apply([("expire", (key, ttl))])

    def hash_put(self, key: str, mapping: dict[str, Value], ttl: float) -> None:
        """Set fields of a hash and its ttl."""
        if mapping:
            self._apply([("hash_put", (key, mapping, ttl))])

    def hash_first(self, key: str, mapping: dict[str, Value], ttl: float, counts: str | None = None) -> list[bytes]:
        """Set each field not set yet (the first value wins), counting those set in hash `counts`; the values held."""
        if not mapping:
            return []
        args: list[Any] = [_ms(ttl), "0" if counts is None else "1"]
        for name, value in mapping.items():
            args += [name, encode(value)]
        keys = [self._k(key), self._k(counts if counts is not None else key)]
        return list(self.scripts["hash_first"](keys=keys, args=args))

    def hash_get(self, key: str, fields: list[str]) -> list[bytes | None]:
        """The values of fields of a hash."""
        return [_raw(v) for v in self.client.hmget(self._k(key), fields)] if fields else []

    def hash_has(self, pairs: list[tuple[str, str]]) -> list[bool]:
        """Whether each (hash, field) is set (one round trip, not a transaction)."""
        pipe = self.client.pipeline(transaction=False)
        for key, name in pairs:
            pipe.hexists(self._k(key), name)
        return [bool(answer) for answer in pipe.execute()] if pairs else []

    def hash_all(self, keys: list[str]) -> list[dict[str, bytes]]:
        """Every field of each hash (one round trip, not a transaction)."""
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(self._k(key))
        return [{text(k): _raw(v) or b"" for k, v in rows.items()} for rows in pipe.execute()]

    def hash_drop(self, key: str, fields: list[str]) -> None:
        """Delete fields of a hash."""
        if fields:
            self._apply([("hash_drop", (key, fields))])

    def hash_len(self, keys: list[str]) -> list[int]:
        """How many fields each hash holds (one round trip, not a transaction)."""
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.hlen(self._k(key))
        return [int(n) for n in pipe.execute()] if keys else []

    def hash_incr(self, key: str, field: str, amount: int, ttl: float) -> int:
        """Add amount to a field of a hash (and set its ttl); the new value."""
        return int(self._apply([("hash_incr", (key, field, amount, ttl))])[0])

    def set_add(self, key: str, members: list[str], ttl: float) -> int:
        """Add members to a set (and set its ttl); how many members it holds after."""
        if not members:
            return self.set_len(key)
        return int(self._apply([("set_add", (key, members, ttl))])[2])

    def set_drop(self, key: str, members: list[str]) -> None:
        """Remove members from a set."""
        if members:
            self._apply([("set_drop", (key, members))])

    def set_has(self, key: str, members: list[str]) -> list[bool]:
        """Whether each member is in a set."""
        return [bool(m) for m in self.client.smismember(self._k(key), members)] if members else []

    def set_len(self, key: str) -> int:
        """How many members a set holds."""
        return int(self.client.scard(self._k(key)))

    def stamp(self, key: str, member: str, at: float, ttl: float, keep: float) -> None:
        """Stamp a member with time `at`, forget those stamped before at - keep, set the ttl."""
        self._apply([("stamp", (key, member, at, ttl, keep))])

    def stamped(self, key: str, since: float | None = None, limit: int | None = None) -> list[str]:
        """The members stamped at or after since, newest first, at most limit."""
        low = "-inf" if since is None else repr(since)
        if limit is not None and limit <= 0:
            return []
        members = self.client.zrevrangebyscore(self._k(key), "+inf", low, start=0 if limit else None, num=limit)
        return [text(m) for m in members]

    def unstamp(self, key: str, member: str) -> None:
        """Remove a member from a stamped set."""
        self.client.zrem(self._k(key), member)

    def log_append(self, key: str, name: str, entries: list[tuple[str, Value]], ttl: float,
                   limit: int | None = None) -> list[int] | None:
        """Append (slot, value) entries once per name; their positions, or None when over the limit."""
        args: list[Any] = [_ms(ttl), name, -1 if limit is None else int(limit)]
        for slot, value in entries:
            args += [slot, encode(value)]
        encoded = self.scripts["log_append"](keys=self._log(key), args=args)
        return None if encoded is None else [int(p) for p in json.loads(encoded)]

    def log_read(self, key: str, start: int, stop: int) -> list[bytes]:
        """The live values at positions [start, stop), in order."""
        if stop <= start:
            return []
        rows = self.client.hmget(self._k(f"{key}:items"), list(range(start, stop)))
        return [v for v in map(_raw, rows) if v is not None]

    def log_free(self, key: str, start: int = 0, stop: int | None = None) -> None:
        """Free the values at positions [start, stop) (every position when stop is None)."""
        _, slots, items, slot_of, _ = self._log(key)
        if stop is None:
            self.client.delete(slots, items, slot_of)
        else:
            self.scripts["log_free"](keys=[slots, items, slot_of], args=[int(start), int(stop)])

    def log_counts(self, key: str, name: str = "") -> tuple[int, int, bool]:
        """(values ever appended, values live, whether name has appended)."""
        names, _, items, _, length = self._log(key)
        pipe = self.client.pipeline(transaction=False)
        pipe.get(length)
        pipe.hlen(items)
        pipe.hexists(names, name)
        appended, live, named = pipe.execute()
        return int(appended or 0), int(live), bool(named)


class RedisLedger(Ledger):
    """The run ledger of one store in Redis: the same rules as InMemoryLedger, on RedisPrimitives."""

    def __init__(self, client: redis.Redis, namespace: str, ttl: int = TTL_SECONDS) -> None:
        super().__init__(RedisPrimitives(client, namespace), ttl)
        self.client = client
        self.namespace = namespace
