"""The client of a `/rerank` endpoint: one POST per search, both shapes servers speak, strictly validated.

Two shapes exist. text-embeddings-inference (`tei`) takes `POST /rerank {query, texts}` and answers
`[{index, score}]`; Infinity, Cohere and Jina (`cohere`) take `POST /v1/rerank {model, query,
documents, top_n}` and answer `{results: [{index, relevance_score}]}`. With `shape: auto` the URL's
path guesses (`/v<N>/rerank` is cohere, any other tei); a server that refuses the body as the wrong
shape (400, 404, 405, 415 or 422) is asked once more in the other shape within the same budget, and
the shape that answered is kept for the URL for the rest of the process.

The whole exchange is held to one deadline: each wait (connect, send, every read) gets what is left
of it and the body is read in pieces, checked against it, so a slow server, or one sending its answer
a byte at a time, costs about the budget. An answer is accepted only whole: one score per text sent,
each index once and in range, every score a finite number; anything else is a RerankError naming the
fault, and the caller keeps its order. The API key is read from the variable `api_key_env` names
and appears only in the Authorization header, never in an error message.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from config.errors import RerankError
from config.settings import RerankSettings
from pipeline.embedding_input import utf8_head

TEI = "tei"
COHERE = "cohere"
QUERY_BYTES = 2048  # of the query text sent: a reranker reads a few hundred tokens of it at most
MAX_ANSWER_BYTES = 1 << 20  # a longer answer is refused as malformed rather than read on
WRONG_SHAPE = frozenset({400, 404, 405, 415, 422})  # what a server answers a body of the other shape
_VERSIONED = re.compile(r"/v\d+/rerank$")
_DETAIL_CHARS = 160

CLIENTS = 4  # pooled clients kept (one per API key and scheme)


class Rerankers:
    """What a read side keeps of its rerank endpoints: one pooled client per API key (a search reuses the
    connection of the one before) and the shape each `auto` URL answered; kept by the ReadIndex
    (query/caches.py)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.learned: dict[str, str] = {}  # url -> the shape it answered, for `auto`
        self.clients: OrderedDict[tuple[str | None, bool], httpx.Client] = OrderedDict()

    def client(self, key: str | None, secure: bool) -> httpx.Client:
        """The pooled client for an API key (made on first use; the least recently used closed past CLIENTS)."""
        with self.lock:
            found = self.clients.get((key, secure))
            if found is not None:
                self.clients.move_to_end((key, secure))
                return found
        made = _client(key, secure)
        with self.lock:
            self.clients[(key, secure)] = made
            while len(self.clients) > CLIENTS:
                self.clients.popitem(last=False)[1].close()
        return made

    def close(self) -> None:
        """Close every pooled client."""
        with self.lock:
            clients, self.clients = list(self.clients.values()), OrderedDict()
        for client in clients:
            client.close()


@dataclass(frozen=True)
class Reranked:
    """The scores of one exchange (one per text, in the order the texts were sent) and how they came."""

    scores: list[float]
    shape: str
    seconds: float


def scores(settings: RerankSettings, query: str, texts: Sequence[str], deadline: float | None = None,
           environ: Mapping[str, str] | None = None, kept: Rerankers | None = None) -> Reranked:
    """The endpoint's score of each text for query, by time.monotonic() deadline (default: budget_ms from now).

    The deadline bounds the exchange with the server; building the pooled client kept (once per
    ReadIndex: for https that loads the CA certificates) comes before it. kept: the Reader's (None: a
    client for this call only). Raises RerankError (timeout, refused, http_status, malformed, config).
    """
    key = _read_key(settings.api_key_env, os.environ if environ is None else environ)
    kept = kept if kept is not None else Rerankers()
    client = kept.client(key, settings.url.lower().startswith("https:"))
    began = time.monotonic()
    deadline = began + settings.budget_ms / 1000 if deadline is None else deadline
    shapes = planned_shapes(settings, kept)
    for at, shape in enumerate(shapes):
        try:
            body = _exchange(client, settings, shape, query, texts, deadline, key)
        except RerankError as error:
            if at + 1 < len(shapes) and error.status in WRONG_SHAPE:
                continue  # auto guessed wrong: the other shape, within what is left of the budget
            raise
        found = read_scores(body, len(texts))
        if settings.shape == "auto":
            with kept.lock:
                kept.learned[settings.url] = shape
        return Reranked(found, shape, time.monotonic() - began)
    raise AssertionError("unreachable: planned_shapes is never empty")  # pragma: no cover


def planned_shapes(settings: RerankSettings, kept: Rerankers) -> tuple[str, ...]:
    """The shapes to try in order: the configured one, else the one this URL answered, else the path's guess first."""
    if settings.shape != "auto":
        return (settings.shape,)
    with kept.lock:
        known = kept.learned.get(settings.url)
    if known is not None:
        return (known,)
    guess = COHERE if _VERSIONED.search(urlsplit(settings.url).path.rstrip("/")) else TEI
    return (guess, TEI if guess == COHERE else COHERE)


def request_body(settings: RerankSettings, shape: str, query: str, texts: Sequence[str]) -> dict[str, Any]:
    """The JSON body of one request in the given shape (texts already cut to what the reranker reads)."""
    head = utf8_head(query, QUERY_BYTES)
    if shape == TEI:
        return {"query": head, "texts": list(texts), "truncate": True, "return_text": False}
    body: dict[str, Any] = {"query": head, "documents": list(texts), "top_n": len(texts)}
    if settings.model:
        body = {"model": settings.model, **body}
    return body


def read_scores(body: object, count: int) -> list[float]:
    """One finite score per text, in the order sent, from either shape's answer; RerankError naming the first fault."""
    if isinstance(body, list):
        items, name = body, "score"
    elif isinstance(body, dict) and isinstance(body.get("results"), list):
        items, name = body["results"], "relevance_score"
    else:
        raise _malformed("the answer is neither a list of {index, score} nor {results: [{index, relevance_score}]}")
    if len(items) != count:
        raise _malformed(f"{len(items)} scores for {count} texts")
    placed: dict[int, float] = {}
    for position, item in enumerate(items):
        index, value = _item(item, position, name, count)
        if index in placed:
            raise _malformed(f"index {index} appears twice")
        placed[index] = value
    return [placed[i] for i in range(count)]


def _item(item: object, position: int, name: str, count: int) -> tuple[int, float]:
    """The (index, score) of one answer item, checked."""
    fields = item if isinstance(item, dict) else {}
    index = fields.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise _malformed(f"item {position} has no integer index")
    if not 0 <= index < count:
        raise _malformed(f"index {index} is out of range for {count} texts")
    value = fields.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _malformed(f"the {name} of index {index} is {value!r}, not a finite number")
    return index, float(value)


def _exchange(client: httpx.Client, settings: RerankSettings, shape: str, query: str, texts: Sequence[str],
              deadline: float, key: str | None) -> object:
    """POST one request and read its JSON body, all before the deadline."""
    where = _safe(settings.url)
    left = deadline - time.monotonic()
    if left <= 0:
        raise _timeout(settings)
    try:
        with client.stream("POST", settings.url, json=request_body(settings, shape, query, texts),
                           timeout=httpx.Timeout(left)) as response:
            data = _read(response, deadline, settings)
            status = response.status_code
    except httpx.TimeoutException as exc:
        raise _timeout(settings) from exc
    except httpx.TransportError as exc:
        reason = f"cannot reach {where}: {str(exc) or type(exc).__name__}"
        raise RerankError(_scrub(reason, key), "refused") from exc
    if status >= 400:
        detail = _scrub(data[:_DETAIL_CHARS].decode("utf-8", "replace").strip(), key)
        raise RerankError(f"{where} answered HTTP {status}" + (f": {detail}" if detail else ""), "http_status", status)
    try:
        return json.loads(data)
    except ValueError as exc:
        raise _malformed("the answer is not JSON") from exc


def _read(response: httpx.Response, deadline: float, settings: RerankSettings) -> bytes:
    """The response body, read in pieces, each checked against the deadline and the size bound."""
    data = bytearray()
    for piece in response.iter_bytes():
        data += piece
        if len(data) > MAX_ANSWER_BYTES:
            raise _malformed(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
        if time.monotonic() > deadline:
            raise _timeout(settings)
    return bytes(data)


def _client(key: str | None, secure: bool) -> httpx.Client:
    """A pooled client for an API key (Rerankers keeps it: a search reuses the connection of the one before).

    A plain http endpoint never negotiates TLS, so its client skips loading the CA certificates
    (which costs a one-shot search a few hundred ms on a loaded machine); https verifies as usual.
    """
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(headers=headers, follow_redirects=False, verify=secure)


def _read_key(name: str | None, environ: Mapping[str, str]) -> str | None:
    if not name:
        return None
    key = environ.get(name, "").strip()
    if not key:
        raise RerankError(f"knowledge.rerank.api_key_env names ${name}, which is unset or empty", "config")
    return key


def _timeout(settings: RerankSettings) -> RerankError:
    return RerankError(f"timeout after {settings.budget_ms} ms", "timeout")


def _malformed(text: str) -> RerankError:
    return RerankError(f"malformed answer: {text}", "malformed")


def _scrub(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text


def _safe(url: str) -> str:
    """The URL without its query string (where a key might be passed by mistake)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
