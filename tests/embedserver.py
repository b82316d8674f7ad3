"""A loopback server speaking the OpenAI embeddings protocol, with faults switchable at run time.

Vectors are a hashed bag of words (each lowercase word adds a signed weight of 1.5-2.5 to one of
`dim` buckets), deliberately not unit length, so texts sharing words are near and the client's normalisation shows.
Use it as a context manager in tests, or run `python -m tests.embedserver --port N --dim D`; a
subprocess is steered over `POST /_control` ({"faults": {...}, "dim": 48, "reset": true}) and
read over `GET /_requests`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import re
import signal
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

_WORD = re.compile(r"\w+")
_EMBED_PATHS = ("/embeddings", "/v1/embeddings")


def hashed_vector(text: str, dim: int) -> list[float]:
    """The server's deterministic, unnormalised bag-of-words vector for `text`."""
    vector = [0.0] * dim
    for token in _WORD.findall(text.lower()) or [text]:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "big") % dim
        weight = 1.5 + digest[5] / 256  # uneven weights: two words rarely cancel out
        vector[bucket] += weight if digest[4] & 1 else -weight
    return vector


@dataclass
class Faults:
    """Switchable misbehaviour; every field off by default."""

    fail_above: int | None = None  # batches larger than this are refused with fail_status
    fail_status: int = 500
    poison: str | None = None  # a batch holding an input containing this answers 500
    fail_next: int = 0  # the next N requests answer 500
    throttle: int = 0  # the next N requests answer 429
    retry_after: str | None = None  # Retry-After header sent with 429
    shuffle: bool = False  # items in reverse order, indices still correct
    duplicate_index: bool = False
    drop_item: bool = False
    out_of_range: bool = False
    empty_vector: bool = False
    wrong_dim: bool = False  # one item one dimension short
    non_numeric: bool = False
    nan_value: bool = False
    zero_vector: bool = False
    error_in_body: bool = False  # 200 with an {"error": {...}} object
    slow: float = 0.0  # seconds to sleep before answering
    slow_per_input: float = 0.0  # and this many more per input (a CPU model behind a serialising server)
    serialise: bool = False  # answer one request at a time (the slow part waits for the one before)
    hang_up: bool = False  # close the connection without answering
    model: str | None = None  # model name to answer with instead of the requested one


@dataclass(frozen=True)
class Recorded:
    """One embeddings request as the server saw it."""

    path: str
    model: str
    inputs: list[str]
    authorization: str | None


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay quiet."""

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null")

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        """Serve the model list and the request log."""
        state = self.server.owner
        if self.path in ("/models", "/v1/models"):
            self._send(200, {"object": "list", "data": [{"id": "hashed-bow", "object": "model"}]})
        elif self.path == "/_requests":
            self._send(200, {"requests": [dataclasses.asdict(r) for r in state.recorded]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        """Answer embeddings requests and control messages."""
        try:
            body = self._body()
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        if self.path == "/_control":
            self._control(body)
        elif self.path in _EMBED_PATHS:
            self._embeddings(body)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def _control(self, body: dict[str, Any]) -> None:
        state = self.server.owner
        if body.get("reset"):
            state.reset()
        for name, value in (body.get("faults") or {}).items():
            setattr(state.faults, name, value)
        state.dim = int(body.get("dim", state.dim))
        state.normalize = bool(body.get("normalize", state.normalize))
        self._send(200, {"ok": True})

    def _embeddings(self, body: Any) -> None:
        state = self.server.owner
        if not isinstance(body, dict) or "input" not in body:
            self._send(400, {"error": {"message": "expected {model, input}"}})
            return
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        with state.lock:
            state.log.append(
                Recorded(self.path, str(body.get("model")), list(inputs), self.headers.get("Authorization"))
            )
            faults = dataclasses.replace(state.faults)
            dim, normalize = state.dim, state.normalize
            if state.faults.throttle > 0:
                state.faults.throttle -= 1
            elif state.faults.fail_next > 0:
                state.faults.fail_next -= 1
        with state.lock:
            state.in_flight += 1
            state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
        try:
            if faults.slow or faults.slow_per_input:
                with state.serial if faults.serialise else contextlib.nullcontext():
                    state.stopping.wait(faults.slow + faults.slow_per_input * len(inputs))  # cut short by stop()
        finally:
            with state.lock:
                state.in_flight -= 1
        if faults.hang_up:
            self.close_connection = True
            return
        refusal = _refusal(faults, inputs)
        if refusal is not None:
            self._send(*refusal)
            return
        self._send(200, _answer(inputs, dim, normalize, faults, str(body.get("model"))))


def _refusal(faults: Faults, inputs: list[Any]) -> tuple[int, dict[str, Any], dict[str, Any]] | None:
    """The injected error answer (status, body, headers) for a request, or None to answer it."""
    if faults.throttle > 0:
        headers = {"Retry-After": faults.retry_after} if faults.retry_after is not None else {}
        return 429, {"error": {"message": "slow down"}}, headers
    if faults.fail_next > 0:
        return 500, {"error": {"message": "injected failure"}}, {}
    if faults.fail_above is not None and len(inputs) > faults.fail_above:
        return faults.fail_status, {"error": {"message": f"batch over {faults.fail_above}"}}, {}
    if faults.poison and any(faults.poison in str(text) for text in inputs):
        return 500, {"error": {"message": "model crashed on an input"}}, {}
    if faults.error_in_body:
        return 200, {"error": {"message": "context length exceeded", "type": "invalid_request"}}, {}
    return None


def _answer(inputs: list[Any], dim: int, normalize: bool, faults: Faults, model: str) -> dict[str, Any]:
    vectors = [hashed_vector(str(text), dim) for text in inputs]
    if normalize:
        vectors = [[v / (math.sqrt(sum(x * x for x in vec)) or 1.0) for v in vec] for vec in vectors]
    items: list[dict[str, Any]] = [
        {"object": "embedding", "index": i, "embedding": vec} for i, vec in enumerate(vectors)
    ]
    if items:
        _damage_last(items, faults, dim)
    if faults.shuffle:
        items.reverse()
    usage = {"prompt_tokens": 0, "total_tokens": 0}
    return {"object": "list", "data": items, "model": faults.model or model, "usage": usage}


def _damage_last(items: list[dict[str, Any]], faults: Faults, dim: int) -> None:
    """Apply the faults that damage the last item of an answer."""
    last = items[-1]
    if faults.duplicate_index and len(items) > 1:
        last["index"] = 0
    if faults.out_of_range:
        last["index"] = len(items)
    if faults.empty_vector:
        last["embedding"] = []
    if faults.wrong_dim:
        last["embedding"] = last["embedding"][:-1]
    if faults.non_numeric:
        last["embedding"][0] = "x"
    if faults.nan_value:
        last["embedding"][0] = math.nan
    if faults.zero_vector:
        last["embedding"] = [0.0] * dim
    if faults.drop_item:
        items.remove(last)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: EmbedServer


class EmbedServer:
    """A running loopback embeddings server; `faults`, `dim` and `normalize` may change any time."""

    def __init__(self, dim: int = 32, port: int = 0, host: str = "127.0.0.1") -> None:
        self.dim, self.normalize, self.faults = dim, False, Faults()
        self.host, self.port = host, port
        self.log: list[Recorded] = []
        self.lock = threading.Lock()
        self.serial = threading.Lock()  # held through the slow part of a request when faults.serialise
        self.in_flight = 0
        self.peak_in_flight = 0  # the most requests answered at once since the start or reset()
        self.stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>, answering /embeddings."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base, <url>/v1."""
        return self.url + "/v1"

    @property
    def recorded(self) -> list[Recorded]:
        """A copy of every embeddings request received, oldest first."""
        with self.lock:
            return list(self.log)

    @property
    def requests(self) -> list[list[str]]:
        """The input list of every embeddings request, oldest first."""
        return [r.inputs for r in self.recorded]

    def reset(self) -> None:
        """Clear faults and the request log."""
        with self.lock:
            self.faults = Faults()
            self.log.clear()
            self.peak_in_flight = self.in_flight

    def start(self) -> EmbedServer:
        """Listen (again on the same port after stop()) and serve in a daemon thread."""
        self.stopping.clear()
        self._httpd = _HTTPServer((self.host, self.port), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listening socket; connections are refused until start()."""
        if self._httpd is None:
            return
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> EmbedServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Run the server in the foreground until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dim", type=int, default=32)
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with EmbedServer(dim=args.dim, port=args.port) as server:
        print(f"listening on {server.url}", flush=True)
        try:
            while not done.wait(0.2):
                pass
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
