"""The vector run against the embeddings server: the server's own maximum, how busy the pipeline keeps it,
and what a run holds in Redis while embedding lags.

    python -m bench.bench_embed max --spawn --duration 30        # starts and stops bench/embed_server.py
    python -m bench.bench_embed max --url http://127.0.0.1:8199  # a server you started
    python -m bench.bench_embed pipeline                         # generated corpus, 150 files
    python -m bench.bench_embed pipeline --small 1500            # 1,500 one-section files
    python -m bench.bench_embed backpressure --files 300 --slow 0.2 --limits none,2048,512

`max` sends full batches (default 64) of realistic ~800-byte chunks from `corpus.sample_chunks`
over `--concurrency` keep-alive connections (2, so the model never waits for the next request) for
`--duration` seconds after a short warm-up, and prints one JSON line: chunks/s, requests/s,
latency percentiles and the server's busy fraction from GET /stats. Stdlib only on the client
side; --spawn needs bench/.venv (bench/setup_model_env.sh).

`pipeline` spawns bench/embed_server.py (all-MiniLM-L6-v2, bench/.venv). The stats are reset, a
fresh store is indexed by the embedded engine (walk, ingest, embed with `embeddings.concurrency`
requests in flight, write), and GET /stats gives the server's busy seconds over the run's wall
time. The server's own maximum is measured on exactly the same texts (full batches of 64 over two
connections, nothing else running) just before and just after the pipeline, because the machine
is shared, plus `max`'s figure on its ~800-byte sample chunks for reference. Prints one JSON line:
requests/s, chunks/s, mean inputs per request, the busy fraction, and the pipeline's chunks/s as a
fraction of the maximum on the same texts.

`backpressure` generates a corpus (bench/lib/corpus.py, seed 5) and indexes it into an empty store once
per `embeddings.max_pending` limit, against the loopback test server (tests/embedserver.py, 384-d
hashed vectors) slowed by `--slow` seconds per request so embedding is the bottleneck, as with a
real model. The pipeline is the embedded engine (2 ingest threads, 1 writer, `concurrency` 2) with
its ledger in Redis (RedisLedger on a fresh namespace), so the bytes are Redis's own: every
`--every` seconds the run's keys are listed and summed with MEMORY USAGE. Prints one JSON line per
limit: peak pending chunks, peak documents staged for vectors (d-* fields of the run's `staged` hash),
peak bytes of the run's keys (and of the `staged` hash alone), wall time and the share of full requests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import redis

from bench.lib.corpus import generate, sample_chunks
from bench.lib.embedding import MODEL, Client, measure, spawn_server, stop_server
from bench.lib.paths import MODEL_PYTHON, OUT
from config.loader import settings_from_mapping
from config.observability import configure_logging
from tests.embedserver import EmbedServer
from workers.engine import InProcessEngine
from workers.ledger.redis_ledger import RedisLedger
from workers.run import RunRequest

UNLIMITED = 10**9


def server_call(url: str, method: str, path: str) -> dict[str, Any]:
    """One control request to the bench server (url is its /v1 base)."""
    root = url.removesuffix("/v1")
    request = urllib.request.Request(root + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def write_small(out: Path, count: int) -> None:
    """count files of one ~800-byte section each (the size `max` sends)."""
    out.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(sample_chunks(count, seed=3, size=800)):
        (out / f"s{i:05d}.md").write_text(f"# Note {i}\n\n{text}\n", encoding="utf-8")


def measure_same(url: str, texts: list[str], batch: int = 64, concurrency: int = 2) -> dict[str, Any]:
    """The server flat out on exactly the pipeline's inputs: full batches over `concurrency` connections."""
    batches = [texts[i:i + batch] for i in range(0, len(texts), batch)]
    control = Client(url)
    control.embed(batches[0])  # warm-up, not counted
    control.call("POST", "/stats/reset")
    lock = threading.Lock()
    pending = list(range(len(batches)))

    def worker() -> None:
        client = Client(url)
        try:
            while True:
                with lock:
                    if not pending:
                        return
                    index = pending.pop(0)
                client.embed(batches[index])
        finally:
            client.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(3600)
    wall = time.perf_counter() - start
    stats = control.call("GET", "/stats")
    control.close()
    return {"chunks": len(texts), "requests": len(batches), "wall_s": round(wall, 2),
            "chunks_per_s": round(len(texts) / wall, 2), "requests_per_s": round(len(batches) / wall, 3),
            "server_busy_fraction": round(stats["busy_seconds"] / wall, 4)}


def corpus_texts(docs: Path) -> list[str]:
    """The texts the pipeline will send: every section of every file, as the chunker cuts them."""
    from pipeline.chunker import chunk_text
    from pipeline.embedding_input import document_text

    texts: list[str] = []
    for path in sorted(docs.rglob("*.md")):
        for chunk in chunk_text(path.read_text(encoding="utf-8")).chunks:
            texts.append(document_text(chunk.body, chunk.heading_path, ""))
    return texts


def run_pipeline(url: str, docs: Path, store: Path, concurrency: int, workers: int) -> dict[str, Any]:
    """Index docs into a fresh store; return the run and server figures."""
    if store.exists():
        shutil.rmtree(store)
    block = {"paths": [str(docs)], "directory": str(store), "workers": workers,
             "embeddings": {"base_url": url, "model": MODEL, "timeout": 300, "concurrency": concurrency}}
    settings = settings_from_mapping(block, store_base=store.parent)
    server_call(url, "POST", "/stats/reset")
    started, cpu = time.perf_counter(), time.process_time()
    with InProcessEngine(settings) as engine:
        summary = engine.run(RunRequest())
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    stats = server_call(url, "GET", "/stats")
    data = summary.to_json()
    requests, inputs = stats["requests"] - 1, stats["inputs"] - 1  # less the planner's one-input probe
    return {
        "files": data["files"], "chunks": data["chunks"], "failed": data["failed"], "wall_s": round(wall, 2),
        "requests": requests, "inputs": inputs, "mean_inputs_per_request": round(inputs / max(requests, 1), 2),
        "requests_per_s": round(requests / wall, 3), "chunks_per_s": round(inputs / wall, 2),
        "server_busy_s": round(stats["busy_seconds"], 2),
        "server_busy_fraction": round(stats["busy_seconds"] / wall, 4),
        "pipeline_cpu_s": round(cpu, 2),  # this process's own CPU (ingest, HTTP, JSON, SQLite), taken from torch
    }


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
            fields = [f.decode() if isinstance(f, bytes) else str(f) for f in client.hkeys(prefix + "staged")]
            docs = sum(1 for f in fields if f.startswith("d-"))
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
        engine = InProcessEngine(settings)
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


def server_max(args: argparse.Namespace) -> int:
    """`max`: the server flat out on sample chunks; one JSON line."""
    proc = None
    url = args.url
    if args.spawn:
        proc, url = spawn_server(python=args.python)
        url = url.removesuffix("/v1")
    try:
        result = measure(url, args.duration, args.batch, args.concurrency, args.chunk_bytes)
    finally:
        if proc is not None:
            stop_server(proc)
    print(json.dumps({"url": url, **result}))
    return 1 if result["failures"] else 0


def pipeline(args: argparse.Namespace) -> int:
    """`pipeline`: the server's maximum on the pipeline's texts either side of the pipeline; one JSON line."""
    docs = args.out / ("small" if args.small else "corpus")
    if docs.exists():
        shutil.rmtree(docs)
    if args.small:
        write_small(docs, args.small)
    else:
        generate(docs, args.files, seed=5)
    server = None
    url = args.url
    try:
        if url is None:
            server, url = spawn_server()
        texts = corpus_texts(docs)
        before = measure_same(url.removesuffix("/v1"), texts)  # the maximum, measured either side of
        run = run_pipeline(url, docs, args.out / "store", args.concurrency, args.workers)
        after = measure_same(url.removesuffix("/v1"), texts)  # the pipeline: the machine is shared
        maximum = measure(url.removesuffix("/v1"), args.max_duration, 64, 2, 800)
    finally:
        if server is not None:
            stop_server(server)
    same = (before["chunks_per_s"] + after["chunks_per_s"]) / 2
    result = {"corpus": "small" if args.small else "generated", "pipeline": run,
              "max_same_texts_before": before, "max_same_texts_after": after, "max_sample_chunks": maximum,
              "fraction_of_max_same_texts": round(run["chunks_per_s"] / same, 4)}
    print(json.dumps(result))
    return 0


def backpressure(args: argparse.Namespace) -> int:
    """`backpressure`: build the corpus, run once per limit, print JSON lines."""
    configure_logging("WARNING")
    corpus = args.work / f"corpus-{args.files}"
    if not corpus.exists():
        generate(corpus, args.files, seed=5)
    for raw in args.limits.split(","):
        limit = UNLIMITED if raw.strip() == "none" else int(raw)
        print(json.dumps(one_run(corpus, args.work, args.redis, limit, args.slow, args.every)), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """max, pipeline or backpressure."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    top = verbs.add_parser("max", help="the server's own maximum throughput, no pipeline in front of it")
    where = top.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="base URL of a running server, e.g. http://127.0.0.1:8199")
    where.add_argument("--spawn", action="store_true", help="start bench/embed_server.py on a free port")
    top.add_argument("--python", type=Path, default=MODEL_PYTHON)
    top.add_argument("--duration", type=float, default=30.0)
    top.add_argument("--batch", type=int, default=64)
    top.add_argument("--concurrency", type=int, default=2)
    top.add_argument("--chunk-bytes", type=int, default=800)
    pipe = verbs.add_parser("pipeline", help="how busy the indexing pipeline keeps the server vs its maximum")
    pipe.add_argument("--out", type=Path, default=OUT / "throughput")
    pipe.add_argument("--files", type=int, default=150, help="generated corpus files (bench/lib/corpus.py)")
    pipe.add_argument("--small", type=int, default=0, help="instead: this many one-section files")
    pipe.add_argument("--max-duration", type=float, default=40.0, help="seconds of the maximum measurement")
    pipe.add_argument("--concurrency", type=int, default=2, help="embeddings.concurrency of the pipeline")
    pipe.add_argument("--workers", type=int, default=2, help="ingest threads of the embedded engine")
    pipe.add_argument("--url", help="a running bench/embed_server.py (its /v1 base); default: spawn one")
    back = verbs.add_parser("backpressure", help="peak staged work in Redis with and without max_pending")
    back.add_argument("--files", type=int, default=300)
    back.add_argument("--slow", type=float, default=0.2, help="seconds the test server sleeps per request")
    back.add_argument("--limits", default="none,2048,512", help="max_pending values; none = unlimited")
    back.add_argument("--every", type=float, default=0.05, help="seconds between samples")
    back.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    back.add_argument("--work", type=Path, default=OUT / "backpressure")
    args = parser.parse_args(argv)
    run = {"max": server_max, "pipeline": pipeline, "backpressure": backpressure}[args.verb]
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
