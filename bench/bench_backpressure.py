"""What a vector run holds in Redis while embedding lags, with and without `embeddings.max_pending`.

    .venv/bin/python bench/bench_backpressure.py --files 300 --slow 0.2 --limits none,2048,512

Generates a corpus (bench/corpus.py, seed 5) and indexes it into an empty store once per limit,
against the loopback test server (tests/embedserver.py, 384-d hashed vectors) slowed by `--slow`
seconds per request so embedding is the bottleneck, as with a real model. The pipeline is the
embedded engine (2 ingest threads, 1 writer, `concurrency` 2) with its ledger in Redis
(RedisLedger on a fresh namespace), so the bytes are Redis's own: every `--every` seconds the
run's keys are listed and summed with MEMORY USAGE. Prints one JSON line per limit: peak pending
chunks, peak documents staged for vectors (d-* fields of the run's `staged` hash), peak bytes of the run's
keys (and of the `staged` hash alone), wall time and the share of full requests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import redis  # noqa: E402
from corpus import generate  # noqa: E402

from config.loader import settings_from_mapping  # noqa: E402
from config.observability import configure_logging  # noqa: E402
from tests.embedserver import EmbedServer  # noqa: E402
from workers.ledger.redis_ledger import RedisLedger  # noqa: E402
from workers.run import EmbeddedEngine, RunRequest  # noqa: E402

UNLIMITED = 10**9


class Sampler(threading.Thread):
    """Samples the newest run's backlog and Redis footprint until stopped (bounded by timeout)."""

    def __init__(self, ledger: RedisLedger, every: float, timeout: float) -> None:
        super().__init__(daemon=True)
        self.ledger, self.every, self.timeout = ledger, every, timeout
        self.stop = threading.Event()
        self.peak: dict[str, int] = {"pending": 0, "staged_docs": 0, "bytes": 0, "stage_bytes": 0}
        self.samples = 0

    def run(self) -> None:
        client, deadline, run_id = self.ledger.client, time.monotonic() + self.timeout, None
        while not self.stop.is_set() and time.monotonic() < deadline:
            if run_id is None:
                recent = self.ledger.recent(1)
                run_id = recent[0].run_id if recent else None
                continue
            prefix = f"{self.ledger.namespace}:run:{run_id}:"
            keys = list(client.scan_iter(match=prefix + "*", count=2000))
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.memory_usage(key, samples=0)
            sizes = [s or 0 for s in pipe.execute()]
            stage = [s for k, s in zip(keys, sizes) if k.decode() == prefix + "staged"]
            docs = sum(1 for f in client.hkeys(prefix + "staged") if f.decode().startswith("d-"))
            state = self.ledger.backlog.backlog_state(run_id, "")
            for name, value in (("pending", state.pending), ("staged_docs", docs), ("bytes", sum(sizes)),
                                ("stage_bytes", sum(stage))):
                self.peak[name] = max(self.peak[name], value)
            self.samples += 1
            self.stop.wait(self.every)


def one_run(corpus: Path, work: Path, url: str, limit: int, slow: float, every: float) -> dict[str, Any]:
    """Index corpus into a fresh store with max_pending=limit; return the peaks."""
    store = work / f"store-{limit}"
    shutil.rmtree(store, ignore_errors=True)
    client = redis.Redis.from_url(url)
    ledger = RedisLedger(client, f"knowledge-bench:{uuid.uuid4().hex[:10]}")
    with EmbedServer(dim=384) as server:
        emb = {"base_url": server.base_url, "model": "hashed-bow", "timeout": 30, "max_pending": limit}
        settings = settings_from_mapping({"paths": [str(corpus)], "embeddings": emb}, store_base=store)
        engine = EmbeddedEngine(settings)
        engine.ledger = ledger  # the same contract, held in Redis
        with engine:
            server.faults.slow = slow
            sampler = Sampler(ledger, every, timeout=3600)
            sampler.start()
            start = time.perf_counter()
            summary = engine.run(RunRequest())
            wall = time.perf_counter() - start
            sampler.stop.set()
            sampler.join(timeout=30)
        sizes = [len(r) for r in server.requests if r != ["knowledge embeddings probe"]]
    for key in client.scan_iter(match=f"{ledger.namespace}:*", count=2000):
        client.delete(key)
    client.close()
    return {"limit": None if limit == UNLIMITED else limit, "files": summary.counts["added"],
            "failed": summary.counts["failed"], "chunks": sum(sizes), "wall_s": round(wall, 1),
            "requests": len(sizes), "full": sizes.count(64), "samples": sampler.samples,
            "peak_pending_chunks": sampler.peak["pending"], "peak_staged_docs": sampler.peak["staged_docs"],
            "peak_run_bytes": sampler.peak["bytes"], "peak_stage_bytes": sampler.peak["stage_bytes"]}


def main() -> None:
    """Parse arguments, build the corpus, run once per limit, print JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--slow", type=float, default=0.2, help="seconds the test server sleeps per request")
    parser.add_argument("--limits", default="none,2048,512", help="max_pending values; none = unlimited")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between samples")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "backpressure")
    args = parser.parse_args()
    configure_logging("WARNING")
    corpus = args.work / f"corpus-{args.files}"
    if not corpus.exists():
        generate(corpus, args.files, seed=5)
    for raw in args.limits.split(","):
        limit = UNLIMITED if raw.strip() == "none" else int(raw)
        print(json.dumps(one_run(corpus, args.work, args.redis, limit, args.slow, args.every)), flush=True)


if __name__ == "__main__":
    main()
