"""Caches: what the read side keeps between requests for one store, owned by that store's ReadIndex.

Nothing in query/ keeps process-wide state in a module global (tests/test_architecture.py pins it): a
module that wants to keep something across requests declares a class for it and asks the Reader it
was lent for its instance (`reader.caches.of(Kind)`), made on first use. ReadIndex lends every Reader
it opens the same Caches, so a kept value outlives the request and the Reader (a server keeps its
ReadIndex for its lifetime; a replica one per generation); close() lets it all go with the index.
A Reader opened outside a ReadIndex (tests, bench) gets a Caches of its own and closes it with itself.
"""

from __future__ import annotations

import threading
from typing import Protocol, TypeVar, cast


class Closing(Protocol):
    """A kept value that holds something to let go of (a sentinel connection, an HTTP pool)."""

    def close(self) -> None: ...


K = TypeVar("K")


class Caches:
    """One instance of each kind of kept state, made on first use; thread-safe."""

    def __init__(self) -> None:
        self._kinds: dict[type, object] = {}
        self._lock = threading.Lock()

    def of(self, kind: type[K]) -> K:
        """The instance of kind kept here (kind() on first use)."""
        with self._lock:
            found = self._kinds.get(kind)
            if found is None:
                found = self._kinds[kind] = kind()
        return cast(K, found)

    def kinds(self) -> list[str]:
        """The names of the kinds made so far (what this store's read side keeps), sorted."""
        with self._lock:
            return sorted(kind.__qualname__ for kind in self._kinds)

    def close(self) -> None:
        """Let every kept value go (closing those that hold something)."""
        with self._lock:
            kept, self._kinds = list(self._kinds.values()), {}
        for value in kept:
            close = getattr(value, "close", None)
            if callable(close):
                cast(Closing, value).close()
