"""The ledger's primitives: expiring values, hashes, sets, stamped sets and logs, each call atomic.

The run ledger, its backlog and its duties (workers/ledger/runs.py, backlog.py, duties.py) are
written once on these; MemoryPrimitives (workers/ledger/memory.py) holds them in this process and
RedisPrimitives (workers/ledger/redis_ledger.py) in Redis under a namespace, Lua only where one call
reads and writes (lua/*.lua). Keys are names without the namespace; TTLs are seconds (float); values
go in as text, bytes or numbers and come back as bytes; fields and members come back as text. A
container left empty disappears, its TTL with it (as in Redis).

A log is an append-only sequence of values at positions 0, 1, ...: each append is made once per
name (a repeat returns the positions recorded the first time), a value whose slot is already live
keeps its position, and a freed position is gone for good.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

Value = str | bytes | int | float
Op = tuple[str, tuple[Any, ...]]  # a queued write: the primitive's name and its arguments


def encode(value: Value) -> bytes:
    """A value as both twins hold it (the bytes redis-py sends)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return repr(value).encode()


class Batch:
    """Writes queued to run as one atomic step (one MULTI/EXEC in Redis): `with store.batch() as b: ...`."""

    def __init__(self, apply: Callable[[list[Op]], object]) -> None:
        self.ops: list[Op] = []
        self._apply = apply

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None and self.ops:
            self._apply(self.ops)

    def put(self, key: str, value: Value, ttl: float) -> None:
        """Queue Primitives.put."""
        self.ops.append(("put", (key, value, ttl)))

    def delete(self, keys: list[str]) -> None:
        """Queue Primitives.delete."""
        self.ops.append(("delete", (keys,)))

    def expire(self, key: str, ttl: float) -> None:
        """Queue Primitives.expire."""
        self.ops.append(("expire", (key, ttl)))

    def hash_put(self, key: str, mapping: dict[str, Value], ttl: float) -> None:
        """Queue Primitives.hash_put."""
        self.ops.append(("hash_put", (key, mapping, ttl)))

    def hash_drop(self, key: str, fields: list[str]) -> None:
        """Queue Primitives.hash_drop."""
        self.ops.append(("hash_drop", (key, fields)))

    def hash_incr(self, key: str, field: str, amount: int, ttl: float) -> None:
        """Queue Primitives.hash_incr."""
        self.ops.append(("hash_incr", (key, field, amount, ttl)))

    def set_add(self, key: str, members: list[str], ttl: float) -> None:
        """Queue Primitives.set_add."""
        self.ops.append(("set_add", (key, members, ttl)))

    def set_drop(self, key: str, members: list[str]) -> None:
        """Queue Primitives.set_drop."""
        self.ops.append(("set_drop", (key, members)))

    def stamp(self, key: str, member: str, at: float, ttl: float, keep: float) -> None:
        """Queue Primitives.stamp."""
        self.ops.append(("stamp", (key, member, at, ttl, keep)))


class Primitives(Protocol):
    """What the ledger needs from a key-value store; every method is one atomic step."""

    def batch(self) -> Batch:
        """Writes to run together as one atomic step when the block ends (nothing if it raises)."""

    def pack(self, value: Any) -> bytes:
        """A JSON value (a staged payload) as this twin holds it: compressed in Redis, the object itself here."""

    def unpack(self, data: bytes) -> Any:
        """The JSON value pack held."""

    def get(self, key: str) -> bytes | None:
        """The value under key."""

    def put(self, key: str, value: Value, ttl: float, new: bool = False) -> bool:
        """Set key to value for ttl seconds (only if absent when new); whether it was set."""

    def refresh_if(self, key: str, value: Value, ttl: float) -> bool:
        """Give key a new ttl if it holds value."""

    def delete_if(self, key: str, value: Value) -> bool:
        """Delete key if it holds value."""

    def delete(self, keys: list[str]) -> None:
        """Delete keys of any kind."""

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key whose name starts with prefix."""

    def expire(self, key: str, ttl: float) -> None:
        """Give an existing key a new ttl."""

    def hash_put(self, key: str, mapping: dict[str, Value], ttl: float) -> None:
        """Set fields of a hash and its ttl."""

    def hash_first(self, key: str, mapping: dict[str, Value], ttl: float, counts: str | None = None) -> list[bytes]:
        """Set each field not set yet (the first value wins) and, with counts, add one to field <value> of hash
        `counts` for each field set; the value each field holds after the call, in mapping's order."""

    def hash_get(self, key: str, fields: list[str]) -> list[bytes | None]:
        """The values of fields of a hash."""

    def hash_has(self, pairs: list[tuple[str, str]]) -> list[bool]:
        """Whether each (hash, field) is set (one read of several hashes)."""

    def hash_all(self, keys: list[str]) -> list[dict[str, bytes]]:
        """Every field of each hash (one read of several hashes)."""

    def hash_drop(self, key: str, fields: list[str]) -> None:
        """Delete fields of a hash."""

    def hash_len(self, keys: list[str]) -> list[int]:
        """How many fields each hash holds (one read of several hashes)."""

    def hash_incr(self, key: str, field: str, amount: int, ttl: float) -> int:
        """Add amount to a field of a hash (and set its ttl); the new value."""

    def set_add(self, key: str, members: list[str], ttl: float) -> int:
        """Add members to a set (and set its ttl); how many members it holds after."""

    def set_drop(self, key: str, members: list[str]) -> None:
        """Remove members from a set."""

    def set_has(self, key: str, members: list[str]) -> list[bool]:
        """Whether each member is in a set."""

    def set_len(self, key: str) -> int:
        """How many members a set holds."""

    def stamp(self, key: str, member: str, at: float, ttl: float, keep: float) -> None:
        """Stamp a member of a stamped set with time `at`, forget those stamped before at - keep, set the ttl."""

    def stamped(self, key: str, since: float | None = None, limit: int | None = None) -> list[str]:
        """The members stamped at or after since, newest first, at most limit."""

    def unstamp(self, key: str, member: str) -> None:
        """Remove a member from a stamped set."""

    def log_append(self, key: str, name: str, entries: list[tuple[str, Value]], ttl: float,
                   limit: int | None = None) -> list[int] | None:
        """Append (slot, value) entries once per name; the positions of name's entries (a slot already live
        keeps its position); None, appending nothing, when limit is given, there are entries and more than
        limit values are live."""

    def log_read(self, key: str, start: int, stop: int) -> list[bytes]:
        """The live values at positions [start, stop), in order."""

    def log_free(self, key: str, start: int = 0, stop: int | None = None) -> None:
        """Free the values at positions [start, stop) (every position when stop is None); names and length stay."""

    def log_counts(self, key: str, name: str = "") -> tuple[int, int, bool]:
        """(values ever appended, values live, whether name has appended)."""
