"""Lexical search at scale against tantivy and a raw FTS5 OR query, interleaved per query in one run.

```
.venv/bin/python -m bench.bench_lexical --chunks 100000 --queries 300
.venv/bin/python -m bench.bench_lexical --chunks 1000000 --queries 300 --out /tmp/lexical
.venv/bin/python -m bench.bench_lexical --chunks 1000000 --agreement 800   # top-10 agreement only
```

The store is bench/lib/stores.py's generated corpus (Zipf vocabulary) for about `--chunks` chunks,
built once under `--out` and reused. tantivy (PyPI `tantivy`, `--tantivy-version`) is installed into
a scratch virtualenv (`--scratch`, default ~/.cache/knowledge-bench/tantivy) when it is not there,
never into the project's; bench/tantivy_side.py runs in it, indexes the same chunk texts (one
document per chunk, English stemming, the heading boosted 2x) and times each query inside its
process. Queries: half running text of 1-4 words (`sample_queries`), half mid-frequency keywords
(`keyword_queries`). Each query goes to every system in turn, the order rotating per query:

- `serve`: `knowledge serve`'s GET /v1/search?q=&top_k=10 on one keep-alive connection (the
  server keeps its Readers: warm), round trip as the client sees it;
- `fresh`: `search()` in this process with a Reader opened per call, as the CLI does;
- `warm`: `search()` in this process on one kept Reader;
- `fts5_or`: the terms OR-ed, `ORDER BY bm25 LIMIT 10` on a kept connection (the unpruned plan);
- `tantivy`: parse and search inside the tantivy process.

It also times `serve`'s start: from spawning the process to /healthz answering and to the first
/v1/search answer. `--agreement N` compares the lexical tier's top 10 (query/lexical.py's
search_ids at the fan-out of 50) with the exact BM25 top 10 of the full OR query over N queries.
Prints one JSON document (also written to `--out/lexical-<chunks>.json`) with p50/p95 and ratios.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib.machine import machine
from bench.lib.paths import KNOWLEDGE
from bench.lib.processes import clean_env, free_port
from bench.lib.samples import keyword_queries, sample_queries
from bench.lib.stats import percentiles
from bench.lib.stores import lexical_store
from config.loader import settings_from_mapping
from config.settings import Settings
from query import search as search_module
from query.lexical import FANOUT, WEIGHTS, search_ids
from query.reader import Reader
from query.requests import SearchRequest
from query.service import QueryService
from query.terms import build_query

SIDE = Path(__file__).with_name("tantivy_side.py")
FULL = (f"SELECT rowid, bm25(chunks_fts, {WEIGHTS}) AS s FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY s, rowid LIMIT ?")
SYSTEMS = ("serve", "fresh", "warm", "fts5_or", "tantivy")


def ensure_tantivy(scratch: Path, version: str) -> Path:
    """The scratch virtualenv's python with tantivy installed (made once)."""
    python = scratch / "bin" / "python"
    probe = [str(python), "-c", "import tantivy"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(scratch)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"tantivy=={version}"], check=True, timeout=600)
    return python


def export_chunks(settings: Settings, path: Path) -> int:
    """Write every chunk's id, body and heading path as JSON lines (once); the count."""
    if path.exists():
        return sum(1 for _ in path.open(encoding="utf-8"))
    count = 0
    with Reader(settings) as reader, path.open("w", encoding="utf-8") as out:
        for cid, body, heading in reader.conn.execute("SELECT id, body, heading_path FROM chunks ORDER BY id"):
            out.write(json.dumps({"id": int(cid), "body": body, "heading": heading}) + "\n")
            count += 1
    return count


class Tantivy:
    """The tantivy side process: one JSON line per query, its own timing."""

    def __init__(self, python: Path, index_dir: Path, chunks: Path) -> None:
        self.proc = subprocess.Popen([str(python), str(SIDE), str(index_dir), str(chunks)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.ready = json.loads(self.proc.stdout.readline())

    def search(self, text: str, k: int = 10) -> tuple[list[int], float, float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"q": text, "k": k}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        return answer["ids"], float(answer["ms"]) / 1000, float(answer["cpu_ms"]) / 1000

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


class Served:
    """`knowledge serve` on the store, and the times of its start (to /healthz and to the first answer)."""

    def __init__(self, base: Path, first_query: str, command: Sequence[str] = (str(KNOWLEDGE),),
                 env: dict[str, str] | None = None, settle: bool = True) -> None:
        self.port = free_port()
        config = base.parent / f"{base.name}-serve.yaml"
        config.write_text(json.dumps({"knowledge": {"expose": {"mcp": {
            "builtins": ["knowledge_search"], "host": "127.0.0.1", "port": self.port}}}}))
        self.started = started = time.perf_counter()
        self.proc = subprocess.Popen([*command, "--config", str(config), "--store-dir", str(base), "serve"],
                                     env=clean_env() if env is None else env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            self.health_s = self._wait_health(started)
            if not self.search(first_query):
                raise RuntimeError(f"knowledge serve found nothing for {first_query!r}: is it serving {base}?")
        except BaseException:
            self.close()
            raise
        self.first_answer_s = time.perf_counter() - started
        self.settled_s = self._settle(started) if settle else 0.0

    def _settle(self, started: float, most_s: float = 300.0) -> float:
        """Wait until the server's warm-up (a background thread filling the caches the process keeps) is done:
        its CPU time grows by under 2% of a second in a second; the seconds from the start. Requests are
        answered meanwhile (the first answer is timed above), but a request's CPU figure would count the
        warm-up's too."""
        clock = process_clock(self.proc.pid)
        deadline = time.monotonic() + most_s
        last = time.clock_gettime(clock)
        while time.monotonic() < deadline:
            time.sleep(1.0)
            now = time.clock_gettime(clock)
            if now - last < 0.02:
                break
            last = now
        return time.perf_counter() - started

    def _wait_health(self, started: float) -> float:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                self.conn.request("GET", "/healthz")
                response = self.conn.getresponse()
                response.read()
                if response.status == 200:
                    return time.perf_counter() - started
            except OSError:
                self.conn.close()
                time.sleep(0.05)
        raise RuntimeError("knowledge serve did not answer /healthz within 120 s")

    def timed(self, text: str) -> tuple[None, float]:
        """(None: the caller times the round trip, the server's CPU seconds for the request: all its threads)."""
        clock = process_clock(self.proc.pid)
        before = time.clock_gettime(clock)
        self.search(text)
        return None, time.clock_gettime(clock) - before

    def search(self, text: str) -> int:
        path = "/v1/search?" + urllib.parse.urlencode({"q": text, "top_k": 10})
        try:
            self.conn.request("GET", path)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionError):  # the server's keep-alive ran out: once more
            self.conn.close()
            self.conn.request("GET", path)
            response = self.conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"/v1/search answered {response.status}: {body[:200]!r}")
        return len(json.loads(body).get("results", []))

    def close(self) -> None:
        self.conn.close()
        os.killpg(self.proc.pid, 15)
        self.proc.wait(timeout=30)


def process_clock(pid: int) -> int:
    """The CPU-time clock of another process (Linux: all its threads), for time.clock_gettime."""
    return ((~pid) << 3) | 2


def cpu_of(fn: Any) -> Any:
    """fn timed by this thread's CPU time (SQLite runs in the calling thread)."""
    def timed(text: str) -> float:
        started = time.thread_time()
        fn(text)
        return time.thread_time() - started
    return timed


def timed_round(systems: dict[str, Any], queries: list[str]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each query through every system, the order rotating per query: (wall seconds, CPU seconds) per system."""
    wall: dict[str, list[float]] = {name: [] for name in systems}
    cpu: dict[str, list[float]] = {name: [] for name in systems}
    names = list(systems)
    for i, text in enumerate(queries):
        for name in names[i % len(names):] + names[:i % len(names)]:
            started = time.perf_counter()
            inner_wall, inner_cpu = systems[name](text)
            wall[name].append(inner_wall if inner_wall is not None else time.perf_counter() - started)
            cpu[name].append(inner_cpu)
    return wall, cpu


def latency(base: Path, settings: Settings, queries: list[str], side: Tantivy) -> dict[str, Any]:
    served = Served(base, queries[0])
    try:
        with Reader(settings) as warm, Reader(settings) as raw:
            in_process = {
                "fresh": lambda q: QueryService(settings).search(SearchRequest(q, 10)).response,
                "warm": lambda q: search_module.search(settings, q, 10, warm),
                "fts5_or": lambda q: raw.conn.execute(FULL, (build_query(q).expression or '""', 10)).fetchall(),
            }
            systems: dict[str, Any] = {"serve": served.timed, "tantivy": lambda q: side.search(q)[1:]}
            systems.update({name: (lambda f: lambda q: (None, cpu_of(f)(q)))(fn) for name, fn in in_process.items()})
            timed_round(systems, queries[:10])  # warm-up, not counted
            wall, cpu = timed_round(systems, queries)
    finally:
        served.close()
    return {"start": {"healthz_s": round(served.health_s, 2), "first_answer_s": round(served.first_answer_s, 2),
                      "warm_up_done_s": round(served.settled_s, 2)},
            "wall": _summary(wall), "cpu": _summary(cpu)}


def _summary(samples: dict[str, list[float]]) -> dict[str, Any]:
    found = {name: percentiles(values) for name, values in samples.items()}
    ratios = {f"{a}/{b}": {"p50": round(found[a]["p50_ms"] / max(found[b]["p50_ms"], 1e-3), 2),
                           "p95": round(found[a]["p95_ms"] / max(found[b]["p95_ms"], 1e-3), 2)}
              for a in ("serve", "fresh", "warm") for b in ("tantivy", "fts5_or")}
    return {"latency": found, "ratios": ratios}


def agreement(settings: Settings, queries: list[str]) -> dict[str, Any]:
    """Top-10 agreement of the lexical tier with the exact BM25 top 10, and how many lists were equal."""
    total = same = 0.0
    counted = 0
    with Reader(settings) as reader:
        for text in queries:
            query = build_query(text)
            if not query.expression:
                continue
            exact = [int(r[0]) for r in reader.conn.execute(FULL, (query.expression, 10))]
            tier = [cid for cid, _ in search_ids(reader.conn, query, FANOUT)][:10]
            total += len(set(exact) & set(tier)) / max(1, len(exact))
            same += exact == tier
            counted += 1
    return {"queries": counted, "top10_agreement": round(total / max(1, counted), 4),
            "identical_top10": int(same)}


def queries_of(settings: Settings, n: int, seed: int) -> list[str]:
    return sample_queries(settings, n - n // 2, seed) + keyword_queries(settings, n // 2, seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--agreement", type=int, default=0, help="only the top-10 agreement over N queries")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/out/lexical"))
    parser.add_argument("--scratch", type=Path, default=Path.home() / ".cache" / "knowledge-bench" / "tantivy")
    parser.add_argument("--tantivy-version", default="0.27.0")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    base = lexical_store(args.out, args.chunks, args.seed)
    settings = settings_from_mapping({}, store_base=base)
    result: dict[str, Any] = {"machine": machine(), "chunks": args.chunks, "load_start": os.getloadavg()[0]}
    if args.agreement:
        result["agreement"] = agreement(settings, queries_of(settings, args.agreement, args.seed + 10))
    else:
        chunks = args.out / f"chunks-{args.chunks}.jsonl"
        result["exported"] = export_chunks(settings, chunks)
        side = Tantivy(ensure_tantivy(args.scratch, args.tantivy_version), args.out / f"tantivy-{args.chunks}", chunks)
        try:
            result["tantivy_index"] = side.ready
            result.update(latency(base, settings, queries_of(settings, args.queries, args.seed), side))
        finally:
            side.close()
    result["load_end"] = os.getloadavg()[0]
    text = json.dumps(result, indent=2)
    (args.out / f"lexical-{args.chunks}{'-agreement' if args.agreement else ''}.json").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
