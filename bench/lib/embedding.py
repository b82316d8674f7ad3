"""The bench embeddings server (bench/embed_server.py under bench/.venv): starting it, a client, its maximum."""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.lib.corpus import sample_chunks
from bench.lib.paths import BENCH, MODEL_PYTHON

MODEL = "all-MiniLM-L6-v2"
MAX_REQUESTS = 100_000


def spawn_server(port: int = 0, threads: int = 0, python: Path = MODEL_PYTHON) -> tuple[subprocess.Popen[str], str]:
    """Start bench/embed_server.py under bench/.venv; return the process and its /v1 base URL."""
    if not python.exists():
        raise SystemExit("bench/.venv is missing: run `bash bench/setup_model_env.sh` first")
    args = [str(python), str(BENCH / "embed_server.py"), "--host", "127.0.0.1", "--port", str(port)]
    if threads:
        args += ["--threads", str(threads)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("{") and "listening" in line:
            return proc, json.loads(line)["listening"] + "/v1"
    proc.kill()
    raise SystemExit("the embeddings server did not start")


def stop_server(proc: subprocess.Popen[str]) -> None:
    """Terminate a spawned server, killing it after 30 s."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


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
        answer: dict[str, Any] = json.loads(data)
        return answer

    def embed(self, texts: list[str]) -> None:
        """Embed texts and check the answer has one 384-d vector per input, indexed in order."""
        answer = self.call("POST", "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": texts})
        data = answer["data"]
        if [d["index"] for d in data] != list(range(len(texts))) or any(len(d["embedding"]) != 384 for d in data):
            raise RuntimeError("malformed embeddings answer")

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


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
        except Exception as exc:  # noqa: BLE001 - report, do not hide: a failure voids the figure
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
