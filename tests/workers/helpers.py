"""Helpers for running the embedded pipeline in tests."""

from __future__ import annotations

from config.settings import Settings
from workers.engine import InProcessEngine
from workers.ledger import RunSummary
from workers.run import RunRequest


def index(settings: Settings, *paths: str, reindex: bool = False) -> RunSummary:
    """Run one embedded index run and return its summary."""
    with InProcessEngine(settings) as engine:
        return engine.run(RunRequest(paths=tuple(paths), reindex=reindex))
