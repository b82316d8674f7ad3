"""A loopback server speaking both rerank protocols, with deterministic scores and switchable faults.

`POST /rerank` speaks text-embeddings-inference ({query, texts} -> [{index, score}]) and `POST
/v1/rerank` the Infinity/Cohere/Jina shape ({model, query, documents, top_n} -> {results: [{index,
relevance_score}]}); with `cohere_at_rerank` the bare `/rerank` speaks the second shape too, as
Infinity's does. Each route refuses a body of the other shape with 422, as real servers do.

Scores are deterministic, by `scoring`: `overlap` (default: the query's words found in the text,
a little less for a longer text), `reverse` (the i-th text of n scores i: the order sent, reversed),
or `hashed` (a hash of query and text: a fixed permutation). Faults (`slow`, `status`, `garbage`)
make it misbehave; every request is recorded with its path, body and Authorization header.
Run `python -m tests.rerankserver --port N --slow 0.01` for a server in its own process (the bench).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import signal
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

_WORD = re.compile(r"\w+")
GARBAGE = ("short", "nan", "out_of_range", "duplicate", "not_json", "not_a_list", "string_score")


@dataclass(frozen=True)
class Recorded:
    """One rerank request as the server saw it."""

    path: str
    body: dict[str, Any]
    authorization: str | None


def overlap_score(query: str, text: str) -> float:
    """How many of the query's words the text holds, less a little for its length (ties broken by brevity)."""
    words = set(_WORD.findall(query.lower()))
    found = _WORD.findall(text.lower())
    return sum(1 for w in set(found) if w in words) - len(found) / 100_000


def hashed_score(query: str, text: str) -> float:
    """A score in [0, 1) fixed by query and text: orders any list by a permutation unrelated to it."""
    digest = hashlib.blake2b(f"{query}\x00{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def scored(scoring: str, query: str, texts: list[str]) -> list[float]:
    """The server's score of each text, in order."""
    if scoring == "reverse":
        return [float(i) for i in range(len(texts))]
    if scoring == "hashed":
        return [hashed_score(query, t) for t in texts]
    return [overlap_score(query, t) for t in texts]


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers: the client reuses its connection

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay quiet."""

    def setup(self) -> None:
        """No Nagle delay, as real servers: the headers and the body go out as written (else 40 ms a request)."""
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client's budget ran out first
            self.wfile.write(payload)

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        """Answer a rerank request in the route's shape."""
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            self._send(400, b'{"error": "body is not JSON"}')
            return
        owner.record(Recorded(self.path, body if isinstance(body, dict) else {}, self.headers.get("Authorization")))
        shape = owner.shape_of(self.path)
        if shape is None:
            self._send(404, b'{"error": "no such route"}')
            return
        key = "texts" if shape == "tei" else "documents"
        if not isinstance(body, dict) or not isinstance(body.get("query"), str) or not isinstance(body.get(key), list):
            self._send(422, json.dumps({"error": f"expected query and {key}"}).encode())
            return
        if owner.slow:
            time.sleep(owner.slow)
        if owner.status:
            self._send(owner.status, owner.error_body)
            return
        values = scored(owner.scoring, body["query"], [str(t) for t in body[key]])
        self._send(200, owner.answer(shape, values))


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: RerankServer


class RerankServer:
    """The rerank server on 127.0.0.1 (an ephemeral port unless given), run in a thread while used as a context."""

    def __init__(self, port: int = 0, scoring: str = "overlap", cohere_at_rerank: bool = False) -> None:
        self.scoring = scoring
        self.cohere_at_rerank = cohere_at_rerank
        self.slow = 0.0  # seconds to sleep before answering
        self.status = 0  # answer this HTTP status instead of scores
        self.error_body = b'{"error": "the reranker failed"}'  # with that status
        self.garbage: str | None = None  # one of GARBAGE: an answer of the right status but wrong content
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._http = _HTTPServer(("127.0.0.1", port), _Handler)
        self._http.owner = self
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:<port>"""
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    @property
    def tei_url(self) -> str:
        """The text-embeddings-inference endpoint."""
        return f"{self.base_url}/rerank"

    @property
    def cohere_url(self) -> str:
        """The Infinity/Cohere/Jina endpoint."""
        return f"{self.base_url}/v1/rerank"

    def shape_of(self, path: str) -> str | None:
        """The shape a route speaks (None: no such route)."""
        if path == "/v1/rerank":
            return "cohere"
        if path == "/rerank":
            return "cohere" if self.cohere_at_rerank else "tei"
        return None

    def record(self, request: Recorded) -> None:
        """Keep a request for the test to read."""
        with self._lock:
            self.requests.append(request)

    def answer(self, shape: str, values: list[float]) -> bytes:
        """The body of a 200 answer in the shape, spoiled as `garbage` says."""
        if self.garbage == "not_json":
            return b"<html>rerank</html>"
        items = [{"index": i, "score": v} for i, v in enumerate(values)]
        items.sort(key=lambda item: -item["score"])  # servers answer best first
        items = _spoiled(items, self.garbage)
        if self.garbage == "not_a_list":
            return json.dumps({"scores": items}).encode()
        if shape == "tei":
            return json.dumps(items).encode()
        results = [{"index": it["index"], "relevance_score": it["score"]} for it in items]
        return json.dumps({"results": results, "model": "loopback-reranker"}).encode()

    def __enter__(self) -> RerankServer:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)


def _spoiled(items: list[dict[str, Any]], garbage: str | None) -> list[dict[str, Any]]:
    """The items with one fault: a missing one, a NaN, an index out of range, an index twice, a string score."""
    if garbage == "short":
        return items[:-1]
    if garbage == "nan":
        return [{**items[0], "score": float("nan")}, *items[1:]]
    if garbage == "out_of_range":
        return [{**items[0], "index": len(items)}, *items[1:]]
    if garbage == "duplicate" and len(items) > 1:
        return [items[0], {**items[1], "index": items[0]["index"]}, *items[2:]]
    if garbage == "string_score":
        return [{**items[0], "score": "high"}, *items[1:]]
    return items



def main(argv: list[str] | None = None) -> int:
    """Serve on 127.0.0.1 until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(description="A loopback rerank server speaking the tei and cohere shapes.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slow", type=float, default=0.0, help="seconds to sleep before each answer")
    parser.add_argument("--scoring", choices=("overlap", "reverse", "hashed"), default="overlap")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with RerankServer(args.port, args.scoring) as server:
        server.slow = args.slow
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
