"""Queries drawn from a store's own text: running text of 1-4 words, and mid-frequency keyword sets."""

from __future__ import annotations

import random

from config.settings import Settings
from query.reader import Reader


def sample_queries(settings: Settings, n: int, seed: int) -> list[str]:
    """n queries of 1-4 consecutive words from random chunks."""
    rng = random.Random(seed)
    with Reader(settings) as reader:
        top = reader.conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
        queries: list[str] = []
        for _ in range(n * 20):
            if len(queries) >= n:
                break
            row = reader.conn.execute(
                "SELECT body FROM chunks WHERE id >= ? LIMIT 1", (rng.randint(1, top),)
            ).fetchone()
            words = [w for w in row[0].split() if w.isalpha() and len(w) > 2]
            if len(words) < 4:
                continue
            size = rng.randint(1, 4)
            start = rng.randrange(len(words) - size + 1)
            queries.append(" ".join(words[start : start + size]).lower())
    return queries


def keyword_queries(settings: Settings, n: int, seed: int) -> list[str]:
    """n queries of 1-3 words each held by 0.05%-5% of chunks: keyword searches, no stop words."""
    rng = random.Random(seed)
    with Reader(settings) as reader:
        total = reader.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        rows = reader.conn.execute(
            "SELECT term FROM chunks_vocab WHERE doc BETWEEN ? AND ? ORDER BY term",
            (max(2, total // 2000), max(3, total // 20)),
        ).fetchall()
    pool = [t for (t,) in rows if t.isalpha() and len(t) > 2]
    return [" ".join(rng.sample(pool, rng.randint(1, 3))) for _ in range(n)]
