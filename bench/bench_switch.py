"""A model switch (`knowledge vectors switch`, pipeline/shadow.py) on a generated corpus, with searches running.

Builds a store of the corpus with hashed-bag-of-words vectors of `--old-dim` (as an index run with
the loopback server would), then switches it to `--new-dim` through the loopback embeddings server
(tests/embedserver.py, real HTTP) while one thread searches in a loop. Records the switch's wall
time, the embed share, the swap transaction (the one write that replaces the vector tier and
rebuilds the quantised companions), and the searches: count, errors, lexical-only answers and
latency p50/p95 before and during the switch. Usage:

    .venv/bin/python bench/bench_switch.py --files 2000 [--out bench/out/switch]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from corpus import generate, sample_queries  # noqa: E402

from config.loader import settings_from_mapping  # noqa: E402
from config.settings import Settings  # noqa: E402
from pipeline import shadow, vectors  # noqa: E402
from pipeline.embedded_text import document_text  # noqa: E402
from pipeline.embeddings import EmbeddingsClient  # noqa: E402
from pipeline.files import ingest_file  # noqa: E402
from pipeline.models import Document, FileJob  # noqa: E402
from pipeline.store import Store  # noqa: E402
from pipeline.walker import walk_root  # noqa: E402
from query.search import search  # noqa: E402
from tests.embedserver import EmbedServer, hashed_vector  # noqa: E402


class Searcher(threading.Thread):
    """Searches until stopped; latencies in seconds, split at the moment `phase` is set."""

    def __init__(self, settings: Settings, queries: list[str]) -> None:
        super().__init__(daemon=True)
        self.settings, self.queries = settings, queries
        self.stop, self.phase = threading.Event(), threading.Event()
        self.before: list[float] = []
        self.during: list[float] = []
        self.errors, self.degraded = 0, 0

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            text = self.queries[i % len(self.queries)]
            i += 1
            start = time.perf_counter()
            try:
                response = search(self.settings, text)
            except Exception:  # noqa: BLE001 - counted, the figure that matters
                self.errors += 1
                continue
            (self.during if self.phase.is_set() else self.before).append(time.perf_counter() - start)
            self.degraded += response.degraded is not None


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


def build(settings: Settings, corpus: Path, dim: int) -> int:
    store = Store(settings.db_path)
    try:
        with store.transaction() as conn:
            vectors.install(conn, vectors.VectorIdentity("old-bow", dim))
        store.vector_hook = vectors.VectorWriter(reuse=False)
        for item in walk_root(str(corpus)).files:
            doc = ingest_file(FileJob(item.path, item.root, item.size, item.mtime_ns))
            assert isinstance(doc, Document)
            doc.vectors = {c.ordinal: vectors.to_blob(_unit(hashed_vector(document_text(c.body, c.heading_path, ""),
                                                                          dim))) for c in doc.chunks}
            store.apply(doc)
        return int(store.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    finally:
        store.close()


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--old-dim", type=int, default=384)
    parser.add_argument("--new-dim", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "switch")
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    corpus = args.out / "corpus"
    generate(corpus, args.files, 7)
    with EmbedServer(dim=args.old_dim) as old, EmbedServer(dim=args.new_dim) as new:
        old.normalize = new.normalize = True
        settings = settings_from_mapping({
            "embeddings": {"base_url": old.base_url, "model": "old-bow", "timeout": 30},
            "embeddings_next": {"base_url": new.base_url, "model": "new-bow", "timeout": 30,
                                "batch_size": args.batch},
        }, store_base=args.out)
        chunks = build(settings, corpus, args.old_dim)
        searcher = Searcher(settings, sample_queries(50))
        searcher.start()
        time.sleep(3)  # searches before the switch: the baseline
        searcher.phase.set()
        identity = vectors.VectorIdentity("new-bow", args.new_dim)
        store = Store(settings.db_path)
        embed_s = 0.0
        swap_s = 0.0
        nxt = settings.embeddings_next
        assert nxt is not None
        with EmbeddingsClient(nxt, expected_dim=args.new_dim) as client:

            def timed_embed(texts: list[str]) -> list[list[float]]:
                nonlocal embed_s
                started = time.perf_counter()
                try:
                    return client.embed(texts)
                finally:
                    embed_s += time.perf_counter() - started

            class TimedWriter(shadow.LocalWriter):
                def finish(self, ident: vectors.VectorIdentity) -> shadow.Progress:
                    nonlocal swap_s
                    started = time.perf_counter()
                    try:
                        return super().finish(ident)
                    finally:
                        swap_s = time.perf_counter() - started

            started = time.perf_counter()
            done = shadow.run(TimedWriter(store), store.conn, identity, timed_embed, args.batch)
            switch_s = time.perf_counter() - started
        store.close()
        time.sleep(2)  # searches after the swap
        searcher.stop.set()
        searcher.join()
    result = {
        "files": args.files, "chunks": chunks, "old_dim": args.old_dim, "new_dim": args.new_dim,
        "swapped": done.swapped, "switch_s": round(switch_s, 2), "embed_s": round(embed_s, 2),
        "swap_transaction_s": round(swap_s, 2),
        "searches_before": len(searcher.before), "searches_during_and_after": len(searcher.during),
        "errors": searcher.errors, "degraded": searcher.degraded,
        "p50_ms_before": round(pct(searcher.before, 0.5), 1), "p95_ms_before": round(pct(searcher.before, 0.95), 1),
        "p50_ms_during": round(pct(searcher.during, 0.5), 1), "p95_ms_during": round(pct(searcher.during, 0.95), 1),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
