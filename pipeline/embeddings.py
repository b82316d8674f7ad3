"""The client of an OpenAI-compatible embeddings server: one POST per batch, strictly validated.

Transport and HTTP failures are translated here: transient ones (connection refused or reset,
timeouts, 429, 408, 5xx) become EmbeddingUnavailable after bounded retries; permanent ones (any
other 4xx, a malformed body) become EmbeddingRejected; both are raised `from` the httpx error.
A response is accepted only whole: one bad item fails the batch and no vector is placed.
The API key is read from the environment variable named by `api_key_env` and appears in nothing
but the Authorization header: not in reprs, logs or error messages.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import TypeVar

import httpx
import tenacity

from config.errors import (
    ConfigError,
    EmbeddingError,
    EmbeddingRejected,
    EmbeddingUnavailable,
    VectorIdentityMismatch,
)
from config.settings import EmbeddingsSettings
from pipeline.embedding_input import document_text, query_text

T = TypeVar("T")
PROBE_TEXT = "knowledge embeddings probe"
_DETAIL_CHARS = 200


@dataclass(frozen=True)
class Probe:
    """What one probe request revealed about the configured model."""

    model: str  # the configured model, the name pinned in the index
    served_model: str  # the name the server answered with (may carry a path or tag)
    dimension: int
    normalized: bool  # whether the raw output was already unit length


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds of the retries of transient failures: attempts and the waits between them."""

    attempts: int = 3
    initial_wait: float = 0.5  # first backoff; doubles each attempt
    max_wait: float = 4.0  # cap of one backoff, and of an honoured Retry-After
    sleep: Callable[[float], None] = time.sleep


class _Transient(Exception):
    """Internal: a retryable failure carrying the error to raise once retries run out."""

    def __init__(self, error: EmbeddingUnavailable, cause: Exception, retry_after: float | None = None):
        super().__init__(str(error))
        self.error, self.cause, self.retry_after = error, cause, retry_after


def batches(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """Consecutive slices of at most `size` items; raises ValueError when size < 1."""
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _malformed(text: str) -> EmbeddingRejected:
    """The error of an answer that is not a valid embeddings response."""
    return EmbeddingRejected(text, "malformed")


def is_server_error(error: EmbeddingError) -> bool:
    """True when the server answered 5xx: it processed the batch and failed, maybe on one input."""
    cause = error.__cause__
    return isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code >= 500


class EmbeddingsClient:
    """Embeds texts through `<base_url>/embeddings`; use as a context manager or call close()."""

    def __init__(
        self,
        settings: EmbeddingsSettings,
        *,
        environ: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy | None = None,
        expected_dim: int | None = None,
    ) -> None:
        """Build the client; raises ConfigError when `api_key_env` names an unset variable."""
        self.settings = settings
        self.retry = retry or RetryPolicy()
        self.expected_dim = expected_dim
        self.url = settings.base_url.rstrip("/") + "/embeddings"
        self._key = _read_key(settings.api_key_env, os.environ if environ is None else environ)
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._http = httpx.Client(headers=headers, timeout=httpx.Timeout(settings.timeout), transport=transport)

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return f"EmbeddingsClient(url={_safe(self.url)!r}, model={self.settings.model!r}, api_key={key})"

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> EmbeddingsClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Unit-length vectors for `texts` in order; raises EmbeddingUnavailable or EmbeddingRejected."""
        return [_normalised(vector, i) for i, vector in enumerate(self._embed_raw(texts))]

    def embed_halving(
        self, texts: list[str], on_split: Callable[[int], None] | None = None,
        on_request: Callable[[int, float, bool], None] | None = None,
    ) -> list[list[float] | EmbeddingError]:
        """Embed `texts`, halving failed batches down to single inputs; failures sit in their slot.

        Halving is for failures that may belong to one input: a rejected batch (4xx, malformed or
        invalid answer) or a 5xx the server answered; and for a batch that timed out, since a slow
        server (a CPU model behind a serialising server) answers a smaller one in time: a batch of
        more than one input is not retried at its size after a timeout, it is halved at once. Failures
        that say nothing about the inputs are raised at once instead of costing 2N requests: an
        unreachable or throttling server, a single input that still times out after the retries
        (EmbeddingUnavailable without a 5xx), and a dimension that differs from the pinned one
        (VectorIdentityMismatch). `on_split(size)` is called for each split batch, `on_request(inputs,
        seconds, ok)` after each request (its transient retries included).
        """
        pending: list[tuple[int, int]] = [(0, len(texts))]
        slots: dict[int, list[float] | EmbeddingError] = {}
        while pending:  # depth-first, left half first: bounded by 2N - 1 batches
            start, stop = pending.pop()
            answer = self._attempt(texts[start:stop], on_request)
            if isinstance(answer, list):
                for offset, vector in enumerate(answer):
                    slots[start + offset] = vector
                continue
            if stop - start == 1:
                slots[start] = answer
                continue
            if on_split is not None:
                on_split(stop - start)
            middle = (start + stop) // 2
            pending.extend([(middle, stop), (start, middle)])
        return [slots[i] for i in range(len(texts))]

    def _attempt(
        self, texts: list[str], on_request: Callable[[int, float, bool], None] | None,
    ) -> list[list[float]] | EmbeddingError:
        """One request of embed_halving: the vectors, or a failure halving may narrow down (others are raised)."""
        began = time.perf_counter()
        ok = False
        try:
            embedded = [_normalised(v, i) for i, v in enumerate(self._embed_raw(texts, halving=True))]
            ok = True
            return embedded
        except VectorIdentityMismatch:
            raise
        except EmbeddingUnavailable as error:
            if not is_server_error(error) and not (error.kind == "timeout" and len(texts) > 1):
                raise
            return error
        except EmbeddingRejected as error:
            return error
        finally:
            if on_request is not None:
                on_request(len(texts), time.perf_counter() - began, ok)

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of a search query: `query_prefix`, then its first 8,192 bytes (embedding_input.py)."""
        return self.embed([query_text(text, self.settings.query_prefix)])[0]

    def document_texts(self, texts: Sequence[str], titles: Sequence[str]) -> list[str]:
        """The chunk texts as sent to the server by the current recipe, `document_prefix` applied (embedding_input)."""
        if len(texts) != len(titles):
            raise ValueError(f"{len(texts)} texts but {len(titles)} titles")
        return [document_text(t, title, self.settings.document_prefix) for t, title in zip(texts, titles)]

    def embed_documents(self, texts: Sequence[str], titles: Sequence[str]) -> list[list[float]]:
        """Unit vectors of chunks, `document_prefix` applied; the whole batch fails together."""
        return self.embed(self.document_texts(texts, titles))

    def probe(self, text: str = PROBE_TEXT) -> Probe:
        """Embed one short text and report model, dimension and normalisation; pins expected_dim if unset."""
        body, served = self._request([text])
        raw = _validated(body, 1, None)[0]
        _normalised(raw, 0)
        norm = math.sqrt(math.fsum(x * x for x in raw))
        if self.expected_dim is None:
            self.expected_dim = len(raw)
        return Probe(self.settings.model, served or self.settings.model, len(raw), abs(norm - 1.0) <= 1e-3)

    def _embed_raw(self, texts: list[str], halving: bool = False) -> list[list[float]]:
        if not texts:
            return []
        body, _ = self._request(texts, halving)
        return _validated(body, len(texts), self.expected_dim)

    def _request(self, texts: list[str], halving: bool = False) -> tuple[object, str]:
        """POST texts with bounded retries of transient failures (halving: a timed-out batch of more than
        one input is not retried at its size; the caller halves it)."""

        def worth_retrying(error: BaseException) -> bool:
            if not isinstance(error, _Transient):
                return False
            return not (halving and len(texts) > 1 and error.error.kind == "timeout")

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(worth_retrying),
            stop=tenacity.stop_after_attempt(max(1, self.retry.attempts)),
            wait=self._wait,
            sleep=self.retry.sleep,
            reraise=True,
        )
        try:
            body = retrying(self._post, texts)
        except _Transient as transient:
            raise transient.error from transient.cause
        served = body.get("model") if isinstance(body, dict) else None
        return body, served if isinstance(served, str) else ""

    def _wait(self, state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, _Transient) and error.retry_after is not None:
            return min(max(error.retry_after, 0.0), self.retry.max_wait)
        return min(self.retry.initial_wait * 2.0 ** (state.attempt_number - 1), self.retry.max_wait)

    def _post(self, texts: list[str]) -> object:
        where = _safe(self.url)
        try:
            response = self._http.post(self.url, json={"model": self.settings.model, "input": texts})
        except httpx.TimeoutException as exc:
            reason = f"embeddings server at {where} timed out after {self.settings.timeout:g}s"
            raise _Transient(EmbeddingUnavailable(reason, "timeout"), exc) from exc
        except httpx.TransportError as exc:
            reason = self._scrub(f"cannot reach embeddings server at {where}: {str(exc) or type(exc).__name__}")
            raise _Transient(EmbeddingUnavailable(reason, "refused"), exc) from exc
        status = response.status_code
        if status >= 400:
            detail = self._scrub(_detail(response))
            cause = httpx.HTTPStatusError(f"HTTP {status}", request=response.request, response=response)
            reason = f"embeddings server at {where} answered HTTP {status}: {detail}"
            if status in (408, 429) or status >= 500:
                retry_after = _retry_after(response.headers.get("Retry-After"))
                raise _Transient(EmbeddingUnavailable(reason, "http_status"), cause, retry_after)
            raise EmbeddingRejected(reason, "http_status") from cause
        try:
            return response.json()
        except ValueError as exc:
            raise _malformed(f"embeddings server at {where} answered a body that is not JSON") from exc

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text


def _read_key(name: str | None, environ: Mapping[str, str]) -> str | None:
    if not name:
        return None
    key = environ.get(name)
    if not key:
        raise ConfigError(f"embeddings.api_key_env names ${name}, which is not set; export it or drop the key")
    return key


def _safe(url: str) -> str:
    """The URL without any user:password part."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(userinfo=b"")) if parsed.userinfo else url


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:_DETAIL_CHARS] or response.reason_phrase
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", body["error"]))[:_DETAIL_CHARS]
    return str(body)[:_DETAIL_CHARS]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _validated(body: object, count: int, expected_dim: int | None) -> list[list[float]]:
    """The raw vectors of a response in input order, or EmbeddingRejected naming the first fault."""
    if not isinstance(body, dict):
        raise _malformed("malformed response: the body is not a JSON object")
    if body.get("error"):
        error = body["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise _malformed(f"the server answered 200 with an error: {str(message)[:_DETAIL_CHARS]}")
    data = body.get("data")
    if not isinstance(data, list):
        raise _malformed("malformed response: `data` is missing or not a list")
    placed = _placed(data, count)
    missing = sorted(set(range(count)) - placed.keys())
    if missing:
        raise _malformed(f"{len(data)} vectors for {count} inputs: no vector for index {missing[0]}")
    vectors = [placed[i] for i in range(count)]
    dims = {len(v) for v in vectors}
    if len(dims) > 1:
        raise _malformed(f"vectors of mixed dimensions {sorted(dims)} in one batch")
    dim = dims.pop()
    if expected_dim is not None and dim != expected_dim:
        raise VectorIdentityMismatch(
            f"the embeddings server now answers {dim}-dimensional vectors but {expected_dim} are "
            "expected (model changed?); run `knowledge index --reindex` to rebuild the vectors"
        )
    return vectors


def _placed(data: list[object], count: int) -> dict[int, list[float]]:
    """The vectors of a response's items by their index, each index once and in range."""
    placed: dict[int, list[float]] = {}
    for position, item in enumerate(data):
        fields = item if isinstance(item, dict) else {}
        index = fields.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise _malformed(f"malformed response: item {position} has no integer index")
        if not 0 <= index < count:
            raise _malformed(f"index {index} out of range for a batch of {count}")
        if index in placed:
            raise _malformed(f"index {index} appears twice")
        placed[index] = _vector(fields.get("embedding"), index)
    return placed


def _vector(value: object, index: int) -> list[float]:
    if not isinstance(value, list):
        raise _malformed(f"malformed response: the embedding at index {index} is not a list")
    if not value:
        raise _malformed(f"empty vector at index {index}")
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise _malformed(f"non-numeric or non-finite value {x!r} in the vector at index {index}")
    return [float(x) for x in value]


def _normalised(vector: list[float], index: int) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:
        raise _malformed(f"zero vector at index {index} cannot be normalised")
    return [x / norm for x in vector]
