"""Build real knowledge stores for query tests without running the pipeline: chunk and apply."""

from __future__ import annotations

import hashlib
import random
import socket
from pathlib import Path
from typing import Any

from config.loader import settings_from_mapping
from config.settings import Settings
from pipeline.chunker import chunk_text
from pipeline.front_matter import split as split_front_matter
from pipeline.models import Document
from pipeline.store import Store


def store_settings(base: Path, **block: Any) -> Settings:
    """Settings whose store lives under base."""
    return settings_from_mapping(block, store_base=base)


def build_store(settings: Settings, docs: dict[str, str]) -> Settings:
    """Write docs ({stored path: markdown}) into the store of settings, as the writer would (front matter too)."""
    store = Store(settings.db_path)
    try:
        for path, text in docs.items():
            matter = split_front_matter(text)
            chunked = chunk_text(matter.body)
            data = text.encode()
            store.apply(
                Document(
                    path=path,
                    root=path.split("/", 1)[0],
                    sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data),
                    mtime_ns=1,
                    title=matter.title or chunked.title,
                    chunks=chunked.chunks,
                    fields=matter.fields,
                )
            )
    finally:
        store.close()
    return settings


def end_run(settings: Settings, docs: dict[str, str]) -> bool:
    """Write docs, then end the run as the writer does (workers/write.py): whether the impact lists or the
    posting columns were made again."""
    build_store(settings, docs)
    store = Store(settings.db_path)
    try:
        return store.refresh_impacts()
    finally:
        store.close()


def with_columns(settings: Settings) -> Settings:
    """settings' store with posting columns made for every word in 40 rows or more (a small store's own)."""
    from pipeline import postings

    writer = Store(settings.db_path)
    try:
        with writer.transaction() as conn:
            assert postings.refresh(conn, force=True, least=40, min_rows=1)
    finally:
        writer.close()
    return settings


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


DOCS = {
    "docs/retention.md": (
        "# Retention policy\n\nLogs are kept for a week and then deleted.\n\n"
        "## Exceptions\n\nAudit records are deprecated after a year.\n"
    ),
    "docs/split.md": (
        "# Storage\n\nThe retention of backups is set per bucket.\n\n"
        + "filler words about nothing in particular. " * 40
        + "\n\n## Rules\n\nEvery policy is reviewed quarterly.\n"
    ),
    "docs/api.md": (
        "# API\n\nThe old endpoint is deprecated; the deprecation notice went out in May.\n\n"
        "## Deprecations\n\nWe deprecate one endpoint a year.\n"
    ),
    "docs/guide.md": "# Guide\n\nThe API guide explains how to call the endpoint.\n",
    "notes.md": "# Notes\n\nRetention policy drafts and API notes.\n",
}


def zipf_docs(words: list[str], seed: int, count: int = 100) -> dict[str, str]:
    """count documents of 8 sections each whose words follow a Zipf law over words (a few in most sections)."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 2) for rank in range(len(words))]

    def text(n: int) -> str:
        return " ".join(rng.choices(words, weights, k=n))

    docs = {}
    for d in range(count):
        sections = [f"## {text(2)}\n\n{text(rng.randint(5, 60))}\n" for _ in range(8)]
        docs[f"docs/{d}.md"] = f"# {text(3)}\n\n" + "\n".join(sections)
    return docs
