"""First byte of a search-page results page against the /v1/search latency, in one run of one server.

    .venv/bin/python -m bench.bench_page --chunks 10000 --queries 200

Generates a corpus with bench/lib/corpus.py (about 13 chunks a file; reused under --out when built),
indexes it with `knowledge index` (lexical), starts `knowledge serve` on a loopback port with both
tools exposed, and then, for each query (1-4 consecutive words from random chunks, as in
bench_query.py), interleaves in alternating order: GET /v1/search?q= read to its end (the JSON
API's latency) and GET /?q= timed to the first byte of its body (the results page, rendered on the
server). Both go through the same keep-alive client. The target (issue 14) is a page's first byte
within 2x the /v1/search latency; the ratio of the medians and of the p95s is printed with the
figures, as JSON and as a markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.lib.paths import KNOWLEDGE, OUT
from bench.lib.samples import sample_queries
from bench.lib.stats import percentiles
from bench.lib.stores import lexical_store
from config.loader import settings_from_mapping


def build(out: Path, chunks: int, seed: int) -> Path:
    """A lexical store of about `chunks` chunks under out (reused when built); its store directory."""
    return lexical_store(out, chunks, seed) / "knowledge" / "default"


def serve(store: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`knowledge serve` on a free loopback port over store; (process, base URL) once it answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = workdir / "knowledge.yaml"
    config.write_text(yaml.safe_dump({"knowledge": {
        "directory": str(store),
        "expose": {"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate"], "port": port}},
    }}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    with open(workdir / "serve.err", "w") as err:
        proc = subprocess.Popen([KNOWLEDGE, "--config", str(config), "serve"], cwd=workdir, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.terminate()
            raise RuntimeError(f"knowledge serve did not start; see {workdir / 'serve.err'}")
        time.sleep(0.1)


def api_latency(client: httpx.Client, query: str) -> float:
    """Seconds for GET /v1/search, read to its end."""
    start = time.perf_counter()
    response = client.get("/v1/search", params={"q": query})
    response.read()
    assert response.status_code == 200 and response.json()["status"] == "ok", response.text[:200]
    return time.perf_counter() - start


def page_first_byte(client: httpx.Client, query: str) -> float:
    """Seconds until the first byte of the body of GET /?q= (the rest is then read and checked)."""
    start = time.perf_counter()
    with client.stream("GET", "/", params={"q": query}) as response:
        chunks = response.iter_raw()
        first = next(chunks, b"")
        elapsed = time.perf_counter() - start
        rest = first + b"".join(chunks)
    assert response.status_code == 200 and b'id="results-heading"' in rest, rest[:200]
    return elapsed


def measure(url: str, queries: list[str], warmup: int = 10) -> dict[str, Any]:
    """Both latencies over the queries, interleaved in alternating order after a warm-up."""
    api: list[float] = []
    page: list[float] = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for q in queries[:warmup]:
            api_latency(client, q)
            page_first_byte(client, q)
        for i, q in enumerate(queries):
            if i % 2:
                page.append(page_first_byte(client, q))
                api.append(api_latency(client, q))
            else:
                api.append(api_latency(client, q))
                page.append(page_first_byte(client, q))
    result: dict[str, Any] = {"v1_search": percentiles(api), "page_first_byte": percentiles(page)}
    result["ratio_p50"] = round(result["page_first_byte"]["p50_ms"] / result["v1_search"]["p50_ms"], 2)
    result["ratio_p95"] = round(result["page_first_byte"]["p95_ms"] / result["v1_search"]["p95_ms"], 2)
    return result


def markdown(result: dict[str, Any]) -> str:
    """The figures as a bench/RESULTS.md table."""
    lines = ["| measurement | p50 ms | p95 ms | mean ms |", "| --- | --- | --- | --- |"]
    for label, key in (("`GET /v1/search?q=` (read to the end)", "v1_search"),
                       ("`GET /?q=` results page, first byte of the body", "page_first_byte")):
        row = result[key]
        lines.append(f"| {label} | {row['p50_ms']} | {row['p95_ms']} | {row['mean_ms']} |")
    lines.append(f"| page / API | {result['ratio_p50']}x | {result['ratio_p95']}x | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10000, help="corpus size in chunks (about)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT / "page")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    store = build(args.out.resolve(), args.chunks, args.seed)
    settings = settings_from_mapping({"directory": str(store)})
    queries = sample_queries(settings, args.queries, args.seed)
    workdir = args.out.resolve() / f"serve-{args.chunks}"  # its knowledge.yaml must not be where index runs
    workdir.mkdir(exist_ok=True)
    proc, url = serve(store, workdir)
    try:
        result = {"chunks": args.chunks, "queries": len(queries), **measure(url, queries)}
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    print(json.dumps(result, indent=2))
    print(markdown(result))


if __name__ == "__main__":
    main()
