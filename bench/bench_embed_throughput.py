"""How busy the indexing pipeline keeps the embeddings server, against the server's own maximum.

    .venv/bin/python bench/bench_embed_throughput.py                 # generated corpus, 150 files
    .venv/bin/python bench/bench_embed_throughput.py --small 1500    # 1,500 one-section files

Spawns bench/embed_server.py (all-MiniLM-L6-v2, bench/.venv). First the pipeline: the stats are
reset, a fresh store is indexed by the embedded engine (walk, ingest, embed with
`embeddings.concurrency` requests in flight, write), and GET /stats gives the server's busy seconds
over the run's wall time. The server's own maximum is measured on exactly the same texts (full
batches of 64 over two connections, nothing else running) just before and just after the
pipeline, because the machine is shared, plus embed_server_max.measure's figure on its ~800-byte
sample chunks for reference. Prints one JSON line: requests/s, chunks/s, mean inputs per
request, the busy fraction, and the pipeline's chunks/s as a fraction of the maximum on the same
texts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(1, str(BENCH.parent))

from bench_quality import MODEL, spawn_server  # noqa: E402
from corpus import generate  # noqa: E402
from embed_server_max import Client, measure  # noqa: E402

from config.loader import settings_from_mapping  # noqa: E402
from workers.engine import InProcessEngine  # noqa: E402
from workers.run import RunRequest  # noqa: E402


def server_call(url: str, method: str, path: str) -> dict[str, Any]:
    """One control request to the bench server (url is its /v1 base)."""
    root = url.removesuffix("/v1")
    request = urllib.request.Request(root + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def write_small(out: Path, count: int) -> None:
    """count files of one ~800-byte section each (the size embed_server_max sends)."""
    from corpus import sample_chunks

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
    from pipeline.embedded_text import document_text

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


def main(argv: list[str] | None = None) -> int:
    """Measure the server's maximum, then the pipeline; print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=BENCH / "out" / "throughput")
    parser.add_argument("--files", type=int, default=150, help="generated corpus files (bench/corpus.py)")
    parser.add_argument("--small", type=int, default=0, help="instead: this many one-section files")
    parser.add_argument("--max-duration", type=float, default=40.0, help="seconds of the maximum measurement")
    parser.add_argument("--concurrency", type=int, default=2, help="embeddings.concurrency of the pipeline")
    parser.add_argument("--workers", type=int, default=2, help="ingest threads of the embedded engine")
    parser.add_argument("--url", help="a running bench/embed_server.py (its /v1 base); default: spawn one")
    args = parser.parse_args(argv)
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
        pipeline = run_pipeline(url, docs, args.out / "store", args.concurrency, args.workers)
        after = measure_same(url.removesuffix("/v1"), texts)  # the pipeline: the machine is shared
        maximum = measure(url.removesuffix("/v1"), args.max_duration, 64, 2, 800)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    same = (before["chunks_per_s"] + after["chunks_per_s"]) / 2
    result = {"corpus": "small" if args.small else "generated", "pipeline": pipeline,
              "max_same_texts_before": before, "max_same_texts_after": after, "max_sample_chunks": maximum,
              "fraction_of_max_same_texts": round(pipeline["chunks_per_s"] / same, 4)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
