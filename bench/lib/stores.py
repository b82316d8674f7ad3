"""Bench stores built once and reused: a generated corpus indexed by `knowledge index` for about N chunks."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench.lib.corpus import generate
from bench.lib.paths import KNOWLEDGE
from pipeline import schema

CHUNKS_PER_FILE = 13.2


def stale_format(base: Path) -> bool:
    """Whether the store has an older format (`knowledge index` migrates it: a no-change run here)."""
    conn = sqlite3.connect(f"file:{base / 'knowledge' / 'default' / 'knowledge.db'}?mode=ro", uri=True)
    try:
        return bool(schema.format_version(conn) != schema.FORMAT_VERSION)  # type: ignore[arg-type]
    finally:
        conn.close()


def lexical_store(out: Path, chunks: int, seed: int) -> Path:
    """Corpus and lexical store for about `chunks` chunks under out (reused when already built); its base dir."""
    files = max(1, round(chunks / CHUNKS_PER_FILE))
    corpus = out / f"corpus-{chunks}"
    base = out / f"store-{chunks}"
    if not (base / "knowledge" / "default" / "knowledge.db").exists() or stale_format(base):
        if not corpus.exists():
            generate(corpus, files, seed)
        started = time.perf_counter()
        subprocess.run(
            [KNOWLEDGE, "--store-dir", str(base), "index", corpus.name], cwd=out, check=True,
            stdout=subprocess.DEVNULL, env={k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")},
        )
        print(f"indexed {files} files in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return base
