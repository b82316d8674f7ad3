"""The primitives held in this process (the in-process default), and the ledger on them: RedisPrimitives' twin."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from workers.ledger.primitives import Batch, Op, Value, encode
from workers.ledger.runs import TTL_SECONDS, Ledger


class Held(bytes):
    """A JSON value kept as the object itself (packed by reference: no encoding, no copy)."""

    value: Any


@dataclass
class MemoryLog:
    """One log: live values by position, the live position of each slot, the positions of each name."""

    length: int = 0
    items: dict[int, bytes] = field(default_factory=dict)
    slots: dict[str, int] = field(default_factory=dict)
    slot_of: dict[int, str] = field(default_factory=dict)
    names: dict[str, list[int]] = field(default_factory=dict)


class MemoryPrimitives:
    """Every primitive under one lock; a key past its deadline is gone (checked when it is touched)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # a batch runs primitives under it
        self._values: dict[str, bytes] = {}
        self._hashes: dict[str, dict[str, bytes]] = {}
        self._sets: dict[str, set[str]] = {}
        self._stamps: dict[str, dict[str, float]] = {}
        self._logs: dict[str, MemoryLog] = {}
        self._deadlines: dict[str, float] = {}

    def _kinds(self) -> tuple[dict[str, Any], ...]:
        return self._values, self._hashes, self._sets, self._stamps, self._logs

    def _drop(self, key: str) -> None:
        for kind in self._kinds():
            kind.pop(key, None)
        self._deadlines.pop(key, None)

    def _live(self, key: str) -> None:
        """Forget key if its deadline has passed."""
        deadline = self._deadlines.get(key)
        if deadline is not None and deadline <= time.monotonic():
            self._drop(key)

    def _tidy(self, key: str, container: Any, ttl: float | None = None) -> None:
        """Drop an empty container (as Redis does) or set its ttl."""
        if not container:
            self._drop(key)
        elif ttl is not None:
            self._deadlines[key] = time.monotonic() + ttl

    def _hash(self, key: str, create: bool = False) -> dict[str, bytes]:
        self._live(key)
        return self._hashes.setdefault(key, {}) if create else self._hashes.get(key, {})

    def _set(self, key: str, create: bool = False) -> set[str]:
        self._live(key)
        return self._sets.setdefault(key, set()) if create else self._sets.get(key, set())

    def _log(self, key: str, create: bool = False) -> MemoryLog:
        self._live(key)
        return self._logs.setdefault(key, MemoryLog()) if create else self._logs.get(key, MemoryLog())

    def batch(self) -> Batch:
        """Writes run together under the lock when the block ends."""
        return Batch(self._apply)

    def _apply(self, ops: list[Op]) -> None:
        with self._lock:
            for name, args in ops:
                getattr(self, name)(*args)

    def pack(self, value: Any) -> bytes:
        """The value itself, behind a bytes handle."""
        held = Held()
        held.value = value
        return held

    def unpack(self, data: bytes) -> Any:
        """The value pack held."""
        return data.value if isinstance(data, Held) else json.loads(data)

    def get(self, key: str) -> bytes | None:
        """The value under key."""
        with self._lock:
            self._live(key)
            return self._values.get(key)

    def put(self, key: str, value: Value, ttl: float, new: bool = False) -> bool:
        """Set key to value for ttl seconds (only if absent when new); whether it was set."""
        with self._lock:
            self._live(key)
            if new and key in self._values:
                return False
            self._values[key] = encode(value)
            self._deadlines[key] = time.monotonic() + ttl
            return True

    def _if_holds(self, key: str, value: Value, ttl: float | None) -> bool:
        """Refresh key (or delete it, ttl None) if it holds value."""
        with self._lock:
            self._live(key)
            if self._values.get(key) != encode(value):
                return False
            if ttl is None:
                self._drop(key)
            else:
                self._deadlines[key] = time.monotonic() + ttl
            return True

    def refresh_if(self, key: str, value: Value, ttl: float) -> bool:
        """Give key a new ttl if it holds value."""
        return self._if_holds(key, value, ttl)

    def delete_if(self, key: str, value: Value) -> bool:
        """Delete key if it holds value."""
        return self._if_holds(key, value, None)

    def delete(self, keys: list[str]) -> None:
        """Delete keys of any kind."""
        with self._lock:
            for key in keys:
                self._drop(key)

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key whose name starts with prefix."""
        with self._lock:
            for key in [k for kind in self._kinds() for k in kind if k.startswith(prefix)]:
                self._drop(key)

    def expire(self, key: str, ttl: float) -> None:
        """Give an existing key a new ttl."""
        with self._lock:
            self._live(key)
            if any(key in kind for kind in self._kinds()):
                self._deadlines[key] = time.monotonic() + ttl

    def hash_put(self, key: str, mapping: dict[str, Value], ttl: float) -> None:
        """Set fields of a hash and its ttl."""
        with self._lock:
            fields = self._hash(key, create=True)
            fields.update({f: encode(v) for f, v in mapping.items()})
            self._tidy(key, fields, ttl)

    def hash_first(self, key: str, mapping: dict[str, Value], ttl: float, counts: str | None = None) -> list[bytes]:
        """Set each field not set yet (the first value wins), counting those set in hash `counts`; the values held."""
        with self._lock:
            fields = self._hash(key, create=True)
            tally = self._hash(counts, create=True) if counts is not None else {}
            held: list[bytes] = []
            for name, value in mapping.items():
                if name not in fields:
                    fields[name] = encode(value)
                    if counts is not None:
                        label = fields[name].decode()
                        tally[label] = encode(int(tally.get(label, b"0")) + 1)
                held.append(fields[name])
            self._tidy(key, fields, ttl)
            if counts is not None:
                self._tidy(counts, tally, ttl)
            return held

    def hash_get(self, key: str, fields: list[str]) -> list[bytes | None]:
        """The values of fields of a hash."""
        with self._lock:
            held = self._hash(key)
            return [held.get(f) for f in fields]

    def hash_has(self, pairs: list[tuple[str, str]]) -> list[bool]:
        """Whether each (hash, field) is set."""
        with self._lock:
            return [name in self._hash(key) for key, name in pairs]

    def hash_all(self, keys: list[str]) -> list[dict[str, bytes]]:
        """Every field of each hash."""
        with self._lock:
            return [dict(self._hash(key)) for key in keys]

    def hash_drop(self, key: str, fields: list[str]) -> None:
        """Delete fields of a hash."""
        with self._lock:
            held = self._hash(key)
            for name in fields:
                held.pop(name, None)
            self._tidy(key, held)

    def hash_len(self, keys: list[str]) -> list[int]:
        """How many fields each hash holds."""
        with self._lock:
            return [len(self._hash(key)) for key in keys]

    def hash_incr(self, key: str, field: str, amount: int, ttl: float) -> int:
        """Add amount to a field of a hash (and set its ttl); the new value."""
        with self._lock:
            held = self._hash(key, create=True)
            value = int(held.get(field, b"0")) + amount
            held[field] = encode(value)
            self._tidy(key, held, ttl)
            return value

    def set_add(self, key: str, members: list[str], ttl: float) -> int:
        """Add members to a set (and set its ttl); how many members it holds after."""
        with self._lock:
            held = self._set(key, create=True)
            held.update(members)
            self._tidy(key, held, ttl)
            return len(held)

    def set_drop(self, key: str, members: list[str]) -> None:
        """Remove members from a set."""
        with self._lock:
            held = self._set(key)
            held.difference_update(members)
            self._tidy(key, held)

    def set_has(self, key: str, members: list[str]) -> list[bool]:
        """Whether each member is in a set."""
        with self._lock:
            held = self._set(key)
            return [m in held for m in members]

    def set_len(self, key: str) -> int:
        """How many members a set holds."""
        with self._lock:
            return len(self._set(key))

    def stamp(self, key: str, member: str, at: float, ttl: float, keep: float) -> None:
        """Stamp a member with time `at`, forget those stamped before at - keep, set the ttl."""
        with self._lock:
            self._live(key)
            held = self._stamps.setdefault(key, {})
            held[member] = at
            for old in [m for m, t in held.items() if t < at - keep]:
                del held[old]
            self._tidy(key, held, ttl)

    def stamped(self, key: str, since: float | None = None, limit: int | None = None) -> list[str]:
        """The members stamped at or after since, newest first, at most limit."""
        with self._lock:
            self._live(key)
            held = self._stamps.get(key, {})
            newest = sorted(((t, m) for m, t in held.items() if since is None or t >= since), reverse=True)
            return [m for _, m in newest[:limit]]

    def unstamp(self, key: str, member: str) -> None:
        """Remove a member from a stamped set."""
        with self._lock:
            self._live(key)
            held = self._stamps.get(key, {})
            held.pop(member, None)
            self._tidy(key, held)

    def log_append(self, key: str, name: str, entries: list[tuple[str, Value]], ttl: float,
                   limit: int | None = None) -> list[int] | None:
        """Append (slot, value) entries once per name; their positions, or None when over the limit."""
        with self._lock:
            log = self._log(key, create=True)
            if name in log.names:
                return list(log.names[name])
            if limit is not None and entries and len(log.items) > limit:
                return None
            positions: list[int] = []
            for slot, value in entries:
                if slot not in log.slots:
                    log.slots[slot], log.slot_of[log.length] = log.length, slot
                    log.items[log.length] = encode(value)
                    log.length += 1
                positions.append(log.slots[slot])
            log.names[name] = positions
            self._deadlines[key] = time.monotonic() + ttl
            return list(positions)

    def log_read(self, key: str, start: int, stop: int) -> list[bytes]:
        """The live values at positions [start, stop), in order."""
        with self._lock:
            items = self._log(key).items
            return [items[p] for p in range(start, stop) if p in items]

    def log_free(self, key: str, start: int = 0, stop: int | None = None) -> None:
        """Free the values at positions [start, stop) (every position when stop is None)."""
        with self._lock:
            log = self._log(key)
            if stop is None:
                log.items.clear()
                log.slots.clear()
                log.slot_of.clear()
                return
            for position in range(start, stop):
                slot = log.slot_of.pop(position, None)
                if slot is not None:
                    del log.slots[slot], log.items[position]

    def log_counts(self, key: str, name: str = "") -> tuple[int, int, bool]:
        """(values ever appended, values live, whether name has appended)."""
        with self._lock:
            log = self._log(key)
            return log.length, len(log.items), name in log.names


class InMemoryLedger(Ledger):
    """The run ledger of the in-process default: the same rules as RedisLedger, on MemoryPrimitives."""

    def __init__(self, ttl: int = TTL_SECONDS) -> None:
        super().__init__(MemoryPrimitives(), ttl)
