"""Measure the embeddings server's own maximum throughput, with no pipeline in front of it.

    python bench/embed_server_max.py --spawn                 # starts bench/embed_server.py itself
    python bench/embed_server_max.py --url http://127.0.0.1:8199

Sends full batches (default 64) of realistic ~800-byte chunks from `corpus.sample_chunks`,
over `--concurrency` keep-alive connections (2 by default, so the model never waits for the
next request), for `--duration` seconds after a short warm-up, and prints one JSON line:
chunks/s, requests/s, latency percentiles and the server's busy fraction from GET /stats.
Stdlib only on the client side; --spawn needs bench/.venv (bench/setup_model_env.sh).
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from corpus import sample_chunks

BENCH = Path(__file__).resolve().parent
MAX_REQUESTS = 100_000


class Client:
    """One keep-alive HTTP connection to the embeddings server."""

    def __init__(self, url: str, timeout: float = 120.0) -> None:
        parts = urlsplit(url)
        self.prefix = parts.path.rstrip("/")
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)

    def call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return the decoded JSON answer; raise RuntimeError on non-200."""
        body = json.dumps(payload).encode("utf-8") if payload is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.conn.request(method, self.prefix + path, body=body, headers=headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: HTTP {response.status}: {data[:200]!r}")
        return json.loads(data)

    def embed(self, texts: list[str]) -> None:
        """Embed texts and check the answer has one 384-d vector per input, indexed in order."""
        answer = self.call("POST", "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": texts})
        data = answer["data"]
        if [d["index"] for d in data] != list(range(len(texts))) or any(len(d["embedding"]) != 384 for d in data):
            raise RuntimeError("malformed embeddings answer")

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def spawn_server(python: Path, startup_timeout: float = 180.0) -> tuple[subprocess.Popen[str], str]:
    """Start bench/embed_server.py on a free loopback port; return (process, base url)."""
    proc = subprocess.Popen(
        [str(python), str(BENCH / "embed_server.py"), "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    result: dict[str, str] = {}
    reader = threading.Thread(target=lambda: result.update(json.loads(proc.stdout.readline() or "{}")), daemon=True)
    reader.start()
    reader.join(startup_timeout)
    if "listening" not in result:
        proc.kill()
        raise RuntimeError("embeddings server did not start")
    return proc, result["listening"]


def measure(url: str, duration: float, batch: int, concurrency: int, chunk_bytes: int) -> dict[str, Any]:
    """Drive the server flat out for `duration` seconds; return the figures."""
    chunks = sample_chunks(batch * 40, seed=7, size=chunk_bytes)
    batches = [chunks[i : i + batch] for i in range(0, len(chunks), batch)]
    control = Client(url)
    for texts in batches[:2]:  # warm-up, not counted
        control.embed(texts)
    control.call("POST", "/stats/reset")
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = time.perf_counter()
    deadline = start + duration

    def worker(k: int) -> None:
        client = Client(url)
        i = k
        try:
            while time.perf_counter() < deadline and len(latencies) < MAX_REQUESTS:
                t = time.perf_counter()
                client.embed(batches[i % len(batches)])
                with lock:
                    latencies.append(time.perf_counter() - t)
                i += concurrency
        except Exception as exc:  # report, do not hide: a failure voids the figure
            failures.append(repr(exc))
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(duration + 300)
    wall = time.perf_counter() - start
    stats = control.call("GET", "/stats")
    control.close()
    latencies.sort()
    n = len(latencies)
    return {
        "chunks_per_s": round(n * batch / wall, 2),
        "requests_per_s": round(n / wall, 3),
        "requests": n,
        "chunks": n * batch,
        "wall_s": round(wall, 2),
        "batch": batch,
        "concurrency": concurrency,
        "chunk_bytes": chunk_bytes,
        "latency_p50_s": round(latencies[n // 2], 3) if n else None,
        "latency_p95_s": round(latencies[min(n - 1, int(n * 0.95))], 3) if n else None,
        "server_busy_s": stats["busy_seconds"],
        "server_busy_fraction": round(stats["busy_seconds"] / wall, 4),
        "server_chunks_per_busy_s": (
            round(stats["inputs"] / stats["busy_seconds"], 2) if stats["busy_seconds"] else None
        ),
        "failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: print the measurement as one JSON line."""
    parser = argparse.ArgumentParser(description="embeddings server maximum throughput")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="base URL of a running server, e.g. http://127.0.0.1:8199")
    where.add_argument("--spawn", action="store_true", help="start bench/embed_server.py on a free port")
    parser.add_argument("--python", type=Path, default=BENCH / ".venv" / "bin" / "python")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--chunk-bytes", type=int, default=800)
    args = parser.parse_args(argv)
    proc = None
    url = args.url
    if args.spawn:
        proc, url = spawn_server(args.python)
    try:
        result = measure(url, args.duration, args.batch, args.concurrency, args.chunk_bytes)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    print(json.dumps({"url": url, **result}))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
