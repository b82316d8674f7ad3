"""Operator verbs that write outside an index run: remove documents, reset the store."""

from __future__ import annotations

import os
from pathlib import Path

from config.settings import Settings
from pipeline.db import SIDECARS
from pipeline.lock import WriteLock
from pipeline.store import Store


def remove_documents(settings: Settings, paths: list[str]) -> list[str]:
    """Delete documents by path under the write lock; return the paths that were indexed."""
    if not settings.db_path.is_file():
        return []
    with WriteLock(settings.store_dir):
        store = Store(settings.db_path)
        try:
            return store.remove(paths)
        finally:
            store.close()


def reset_store(settings: Settings) -> list[str]:
    """Delete knowledge.db and its sidecars under the write lock; return the names deleted."""
    deleted: list[str] = []
    with WriteLock(settings.store_dir):
        db_path = settings.db_path
        for candidate in (db_path, *(Path(f"{db_path}{s}") for s in SIDECARS)):
            if candidate.exists() or candidate.is_symlink():
                os.unlink(candidate)
                deleted.append(candidate.name)
    return deleted
