"""A thread that searches a store in a loop, for tests that change the store under readers."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from config.settings import Settings
from tests.lent import search


class Searcher(threading.Thread):
    """Searches in a loop until stopped, counting answers, errors and lexical-only (degraded) answers."""

    def __init__(self, settings: Settings, queries: Sequence[str]) -> None:
        super().__init__(daemon=True)
        self.queries = tuple(queries)
        self.settings, self.stop = settings, threading.Event()
        self.answers, self.degraded, self.empty = 0, 0, 0
        self.errors: list[BaseException] = []
        self.tiers: set[str] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            for text in self.queries:
                try:
                    response = search(self.settings, text)
                except Exception as exc:  # noqa: BLE001 - every failure is a finding
                    self.errors.append(exc)
                    continue
                self.answers += 1
                self.degraded += response.degraded is not None
                self.empty += not response.hits
                self.tiers.add(response.tier)
