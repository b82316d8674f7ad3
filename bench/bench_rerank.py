"""The reranking stage's cost: ms a search gains with a reranker configured, against fused-only, interleaved.

    nice -n 10 .venv/bin/python -m bench.bench_rerank --chunks 10000 --queries 200 --latency 0,10,50

One lexical store of the bench corpus (bench/lib/stores.py, about --chunks chunks, built once under
--out). For each fixed latency L, a loopback rerank server (tests/rerankserver.py, in its own
process, so its JSON work never shares this process's GIL; `reverse` scores, its cheapest) sleeps
L before answering; then every query is searched twice through query.search.search on one open
Reader, once fused-only and once with `knowledge.rerank` at the server's tei endpoint (top_n 30),
the two alternating which goes first from query to query. Per query it records both wall times,
both thread CPU times (this thread only: the client's own work, the server's sleep and scoring
excluded) and the exchange time the stage itself measured (request sent to answer read); the
figures are the medians and p95 of the per-query differences (rerank - fused), and the ratio of the
medians. The first row pairs fused-only with itself (the stage unconfigured: the noise of the
pairing); the last is a server slower than the budget (--skip-budget-ms, default 100): what a
skipped reranker costs a search (about the budget: the degrade is bounded).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.lib.corpus import sample_queries
from bench.lib.machine import machine
from bench.lib.paths import OUT, ROOT
from bench.lib.processes import free_port
from bench.lib.stats import pct
from bench.lib.stores import lexical_store
from config.loader import settings_from_mapping
from config.settings import Settings
from query.reader import Reader
from query.search import search

TOP_K = 10


@dataclass(frozen=True)
class Pair:
    """One query's two searches: wall and thread-CPU seconds, fused-only and reranked, and the outcome."""

    wall: tuple[float, float]
    cpu: tuple[float, float]
    skipped: bool
    exchange: float  # ms the stage measured for its exchange with the server (0 when skipped)


@contextlib.contextmanager
def rerank_server(slow: float) -> Iterator[str]:
    """A rerank server process answering after `slow` seconds; its tei endpoint URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.rerankserver", "--port", str(port), "--slow", str(slow),
                             "--scoring", "reverse"], cwd=ROOT)  # the cheapest scores: the server's floor
    url = f"http://127.0.0.1:{port}/rerank"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(url, json={"query": "q", "texts": ["t"]}, timeout=5 + slow)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the rerank server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def timed(settings: Settings, reader: Reader, query: str) -> tuple[float, float, bool, float]:
    """One search: wall seconds, this thread's CPU seconds, whether its reranker was skipped, its exchange ms."""
    wall, cpu = time.perf_counter(), time.thread_time()
    response = search(settings, query, TOP_K, reader=reader)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    outcome = response.rerank
    return wall, cpu, outcome is not None and outcome.skipped is not None, (outcome.ms or 0.0) if outcome else 0.0


def paired(fused: Settings, reranked: Settings, reader: Reader, queries: list[str]) -> list[Pair]:
    """Each query searched fused-only and reranked, the first of the two alternating query by query."""
    out: list[Pair] = []
    for i, query in enumerate(queries):
        if i % 2 == 0:
            a, b = timed(fused, reader, query), timed(reranked, reader, query)
        else:
            b, a = timed(reranked, reader, query), timed(fused, reader, query)
        out.append(Pair((a[0], b[0]), (a[1], b[1]), b[2], b[3]))
    return out


def summary(name: str, pairs: list[Pair]) -> dict[str, object]:
    """Medians and p95 of the per-query differences, in ms, and the ratio of the median walls."""
    added = [(p.wall[1] - p.wall[0]) * 1000 for p in pairs]
    cpu = [(p.cpu[1] - p.cpu[0]) * 1000 for p in pairs]
    fused = statistics.median(p.wall[0] for p in pairs) * 1000
    reranked = statistics.median(p.wall[1] for p in pairs) * 1000
    return {"case": name, "queries": len(pairs), "fused_p50_ms": round(fused, 2), "rerank_p50_ms": round(reranked, 2),
            "added_p50_ms": round(statistics.median(added), 2), "added_p95_ms": round(pct(added, 0.95), 2),
            "added_cpu_p50_ms": round(statistics.median(cpu), 2), "ratio": round(reranked / fused, 2),
            "exchange_p50_ms": round(statistics.median(p.exchange for p in pairs), 2),
            "skipped": sum(p.skipped for p in pairs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--latency", default="0,10,50", help="server latencies in ms, comma-separated")
    parser.add_argument("--top-n", type=int, default=30)
    parser.add_argument("--skip-budget-ms", type=int, default=100)
    parser.add_argument("--out", type=Path, default=OUT / "rerank")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    base = lexical_store(args.out, args.chunks, seed=1)
    fused = settings_from_mapping({}, store_base=base)
    queries = sample_queries(args.queries, seed=3)
    print(machine(), file=sys.stderr)
    rows = []
    reader = Reader(fused)
    try:
        rows.append(summary("no rerank block (A/A: the noise)", paired(fused, fused, reader, queries)))
        print(json.dumps(rows[-1]), flush=True)
        for ms in [float(x) for x in args.latency.split(",") if x.strip()] + [None]:
            slow = (args.skip_budget_ms * 3 if ms is None else ms) / 1000
            budget = args.skip_budget_ms if ms is None else 800
            with rerank_server(slow) as url:
                reranked = settings_from_mapping({"rerank": {"url": url, "shape": "tei", "top_n": args.top_n,
                                                             "budget_ms": budget}}, store_base=base)
                for query in queries[:10]:  # warm both paths (the pooled client, the page cache)
                    timed(reranked, reader, query)
                    timed(fused, reader, query)
                name = f"server {ms:g} ms" if ms is not None else f"server {slow * 1000:g} ms, budget {budget} ms"
                rows.append(summary(name, paired(fused, reranked, reader, queries)))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        reader.close()
    print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
