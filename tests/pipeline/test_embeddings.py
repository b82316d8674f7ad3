"""The embeddings client end to end against the loopback server in tests/embedserver.py."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from config.errors import (
    ConfigError,
    EmbeddingRejected,
    EmbeddingUnavailable,
    VectorIdentityMismatch,
)
from config.settings import EmbeddingsSettings
from pipeline.embeddings import EmbeddingsClient, RetryPolicy, batches, is_server_error
from tests.embedserver import EmbedServer, hashed_vector

FAST = RetryPolicy(attempts=3, initial_wait=0.01, max_wait=0.05)
SECRET = "sk-test-7f3a9c0e1d"
TEXTS = [f"note {i} about topic{i} and more" for i in range(8)]


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dim=32) as running:
        yield running


def make_client(server: EmbedServer, retry: RetryPolicy = FAST, **overrides: Any) -> EmbeddingsClient:
    environ = overrides.pop("environ", {})
    expected_dim = overrides.pop("expected_dim", None)
    settings = EmbeddingsSettings(base_url=server.base_url, model="hashed-bow", **overrides)
    return EmbeddingsClient(settings, environ=environ, retry=retry, expected_dim=expected_dim)


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def assert_close(got: list[float], want: list[float]) -> None:
    assert len(got) == len(want)
    assert all(abs(a - b) < 1e-9 for a, b in zip(got, want))


def sizes(server: EmbedServer) -> list[int]:
    return [len(inputs) for inputs in server.requests]


def test_vectors_come_back_in_input_order_at_unit_length(server: EmbedServer) -> None:
    with make_client(server) as client:
        vectors = client.embed(TEXTS)
    assert sizes(server) == [8]
    for text, vector in zip(TEXTS, vectors):
        assert_close(vector, unit(hashed_vector(text, 32)))
        assert abs(math.sqrt(sum(x * x for x in vector)) - 1.0) < 1e-9


def test_the_server_output_is_not_unit_length_and_shared_words_bring_texts_closer() -> None:
    raw = hashed_vector("the writer holds the lock", 32)
    assert abs(math.sqrt(sum(x * x for x in raw)) - 1.0) > 0.1
    a, b, c = (unit(hashed_vector(t, 64)) for t in ("writer lock held", "the writer lock", "purple bananas"))
    assert sum(x * y for x, y in zip(a, b)) > sum(x * y for x, y in zip(a, c))


def test_an_empty_list_sends_no_request(server: EmbedServer) -> None:
    with make_client(server) as client:
        assert client.embed([]) == []
    assert server.requests == []


def test_shuffled_items_are_placed_by_their_own_index(server: EmbedServer) -> None:
    server.faults.shuffle = True
    with make_client(server) as client:
        vectors = client.embed(TEXTS)
    for text, vector in zip(TEXTS, vectors):
        assert_close(vector, unit(hashed_vector(text, 32)))


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("duplicate_index", "appears twice"),
        ("drop_item", "no vector for index 7"),
        ("out_of_range", "out of range"),
        ("empty_vector", "empty vector"),
        ("wrong_dim", "mixed dimensions"),
        ("non_numeric", "non-numeric"),
        ("nan_value", "non-finite"),
        ("zero_vector", "zero vector"),
        ("error_in_body", "answered 200 with an error"),
    ],
)
def test_a_malformed_response_fails_the_whole_batch(server: EmbedServer, fault: str, reason: str) -> None:
    setattr(server.faults, fault, True)
    with make_client(server) as client, pytest.raises(EmbeddingRejected, match=reason):
        client.embed(TEXTS)
    assert sizes(server) == [8], "a malformed answer is permanent: not retried"


def test_a_vector_dimension_other_than_the_pinned_one_is_an_identity_mismatch(server: EmbedServer) -> None:
    server.dim = 48
    with make_client(server, expected_dim=32) as client, pytest.raises(VectorIdentityMismatch, match="--reindex"):
        client.embed_halving(TEXTS)
    assert sizes(server) == [8], "a model change is not halved"


def test_halving_isolates_a_poisoned_input_and_everything_else_lands_in_order(server: EmbedServer) -> None:
    texts = list(TEXTS)
    texts[5] = "this chunk holds POISON for the model"
    server.faults.poison = "POISON"
    splits: list[int] = []
    with make_client(server) as client:
        results = client.embed_halving(texts, on_split=splits.append)
    failed = results[5]
    assert isinstance(failed, EmbeddingUnavailable) and is_server_error(failed)
    for i, (text, result) in enumerate(zip(texts, results)):
        if i != 5:
            assert isinstance(result, list)
            assert_close(result, unit(hashed_vector(text, 32)))
    # 5xx is retried 3 times at each failing level; the halves holding index 5 fail, the rest pass.
    assert sizes(server) == [8, 8, 8, 4, 4, 4, 4, 2, 2, 2, 1, 1, 1, 1, 2]
    assert splits == [8, 4, 2]


def test_a_size_limit_forces_splits_without_retrying_a_413(server: EmbedServer) -> None:
    server.faults.fail_above, server.faults.fail_status = 2, 413
    with make_client(server) as client:
        results = client.embed_halving(TEXTS)
    assert sizes(server) == [8, 4, 2, 2, 4, 2, 2]
    for text, result in zip(TEXTS, results):
        assert isinstance(result, list)
        assert_close(result, unit(hashed_vector(text, 32)))


def test_a_single_input_rejected_alone_keeps_its_error_in_its_slot(server: EmbedServer) -> None:
    server.faults.fail_above, server.faults.fail_status = 0, 400
    with make_client(server) as client:
        results = client.embed_halving(TEXTS[:2])
    assert all(isinstance(r, EmbeddingRejected) for r in results)
    assert "HTTP 400" in str(results[0])


def test_a_throttled_request_is_retried_and_then_succeeds(server: EmbedServer) -> None:
    server.faults.throttle, server.faults.retry_after = 2, "0"
    with make_client(server) as client:
        vectors = client.embed(TEXTS[:3])
    assert len(vectors) == 3 and sizes(server) == [3, 3, 3]


def test_a_passing_server_error_is_retried_on_the_bare_embeddings_path(server: EmbedServer) -> None:
    server.faults.fail_next = 2
    settings = EmbeddingsSettings(base_url=server.url + "/", model="m")
    with EmbeddingsClient(settings, environ={}, retry=FAST) as client:
        assert len(client.embed(["a", "b"])) == 2
    assert [r.path for r in server.recorded] == ["/embeddings"] * 3


def test_retry_after_is_honoured_and_capped(server: EmbedServer) -> None:
    slept: list[float] = []
    server.faults.throttle, server.faults.retry_after = 1, "0.3"
    with make_client(server, RetryPolicy(attempts=2, initial_wait=0.0, max_wait=1.0, sleep=slept.append)) as client:
        client.embed(["one"])
    assert slept == [0.3]
    server.faults.throttle, server.faults.retry_after = 1, "3600"
    with make_client(server, RetryPolicy(attempts=2, initial_wait=0.0, max_wait=0.1, sleep=slept.append)) as client:
        client.embed(["one"])
    assert slept == [0.3, 0.1]


def test_throttling_past_the_retries_is_unavailable_and_not_halved(server: EmbedServer) -> None:
    server.faults.throttle = 100
    with make_client(server) as client, pytest.raises(EmbeddingUnavailable, match="HTTP 429"):
        client.embed_halving(TEXTS)
    assert sizes(server) == [8, 8, 8]


def test_a_down_server_is_unavailable_after_the_bounded_retries_without_halving(server: EmbedServer) -> None:
    server.stop()
    slept: list[float] = []
    with make_client(server, RetryPolicy(attempts=3, initial_wait=0.01, max_wait=0.05, sleep=slept.append)) as client:
        with pytest.raises(EmbeddingUnavailable, match="cannot reach") as caught:
            client.embed_halving(TEXTS)
    assert slept == [0.01, 0.02]  # three attempts of the whole batch: no halving on a refused connection
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_a_server_back_up_on_the_same_port_answers_again(server: EmbedServer) -> None:
    with make_client(server) as client:
        server.stop()
        with pytest.raises(EmbeddingUnavailable):
            client.embed(["x"])
        server.start()
        assert len(client.embed(["x"])) == 1


def test_a_connection_closed_without_an_answer_is_unavailable(server: EmbedServer) -> None:
    server.faults.hang_up = True
    with make_client(server) as client, pytest.raises(EmbeddingUnavailable):
        client.embed(["x"])
    assert sizes(server) == [1, 1, 1]


def test_a_server_slower_than_the_timeout_is_unavailable_after_the_bounded_retries(server: EmbedServer) -> None:
    server.faults.slow = 5.0
    slept: list[float] = []
    with make_client(server, RetryPolicy(attempts=3, initial_wait=0.01, max_wait=0.05, sleep=slept.append),
                     timeout=0.2) as client:
        with pytest.raises(EmbeddingUnavailable, match=r"timed out after 0\.2s"):
            client.embed_halving(TEXTS)
    # a timed-out batch is halved at once; a single input that still times out is retried, then raised
    assert slept == [0.01, 0.02] and sizes(server) == [8, 4, 2, 1, 1, 1]


def test_a_batch_too_slow_for_the_timeout_is_halved_until_its_halves_answer_in_time(server: EmbedServer) -> None:
    """A CPU model behind a serialising server: 8 inputs take 0.8 s, past the 0.5 s timeout; 4 take 0.4 s."""
    server.faults.slow_per_input = 0.1
    splits: list[int] = []
    with make_client(server, timeout=0.5) as client:
        found = client.embed_halving(TEXTS, splits.append)
    assert sizes(server) == [8, 4, 4] and splits == [8]
    assert all(isinstance(v, list) for v in found) and len(found) == 8


def test_a_client_error_is_rejected_at_once(server: EmbedServer) -> None:
    settings = EmbeddingsSettings(base_url=server.url + "/nowhere", model="m")
    with EmbeddingsClient(settings, environ={}, retry=FAST) as client:
        with pytest.raises(EmbeddingRejected, match="HTTP 404") as caught:
            client.embed(["x"])
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)


def test_the_api_key_is_sent_as_bearer_and_shown_nowhere(server: EmbedServer) -> None:
    with make_client(server, api_key_env="EMBED_KEY", environ={"EMBED_KEY": SECRET}) as client:
        client.embed(["x"])
        assert server.recorded[0].authorization == f"Bearer {SECRET}"
        assert SECRET not in repr(client) and SECRET not in str(client)
        server.faults.error_in_body = True
        with pytest.raises(EmbeddingRejected) as rejected:
            client.embed(["x"])
        server.stop()
        with pytest.raises(EmbeddingUnavailable) as unavailable:
            client.embed(["x"])
    for error in (rejected.value, unavailable.value):
        assert SECRET not in str(error) and SECRET not in repr(error)


def test_a_key_echoed_by_the_server_is_scrubbed_from_the_error() -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": f"bad key {request.headers['Authorization']}"}})

    settings = EmbeddingsSettings(base_url="http://embed.test/v1", model="m", api_key_env="K")
    with EmbeddingsClient(settings, environ={"K": SECRET}, transport=httpx.MockTransport(echo)) as client:
        with pytest.raises(EmbeddingRejected) as caught:
            client.embed(["x"])
    assert SECRET not in str(caught.value) and "***" in str(caught.value)


def test_a_body_that_is_not_json_is_rejected() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>proxy</html>"))
    settings = EmbeddingsSettings(base_url="http://embed.test", model="m")
    with EmbeddingsClient(settings, environ={}, transport=transport) as client:
        with pytest.raises(EmbeddingRejected, match="not JSON"):
            client.embed(["x"])


def test_an_unset_key_variable_is_a_config_error_naming_it() -> None:
    settings = EmbeddingsSettings(base_url="http://127.0.0.1:9", model="m", api_key_env="MISSING_KEY")
    with pytest.raises(ConfigError, match=r"\$MISSING_KEY"):
        EmbeddingsClient(settings, environ={})


def test_prefixes_are_applied_to_queries_and_documents(server: EmbedServer) -> None:
    prefixes: dict[str, Any] = {"query_prefix": "task: search result | query: ",
                                "document_prefix": "title: {title} | text: "}
    with make_client(server, **prefixes) as client:
        query = client.embed_query("backpressure")
        client.embed_documents(["body one", "body two"], ["Guide > Queues", ""])
    assert server.requests == [
        ["task: search result | query: backpressure"],
        ["title: Guide > Queues | text: body one", "title: none | text: body two"],
    ]
    assert_close(query, unit(hashed_vector("task: search result | query: backpressure", 32)))


def test_a_probe_reports_dimension_normalisation_and_pins_the_dimension(server: EmbedServer) -> None:
    server.faults.model = "models/hashed-bow.gguf"
    with make_client(server) as client:
        probe = client.probe()
        assert (probe.model, probe.served_model, probe.dimension, probe.normalized) == (
            "hashed-bow", "models/hashed-bow.gguf", 32, False,
        )
        assert client.expected_dim == 32
        server.normalize = True
        assert client.probe().normalized is True
        server.dim = 16
        with pytest.raises(VectorIdentityMismatch):
            client.embed(["x"])


def test_batches_slices_in_order() -> None:
    assert list(batches([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]
    assert list(batches([], 3)) == []
    with pytest.raises(ValueError):
        list(batches([1], 0))


def test_the_server_runs_as_a_subprocess_steered_over_http() -> None:
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "tests.embedserver", "--port", "0", "--dim", "8"]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the server prints its address first, then nothing
        url = line.strip().removeprefix("listening on ")
        assert url.startswith("http://127.0.0.1:")
        settings = EmbeddingsSettings(base_url=url, model="m")
        with EmbeddingsClient(settings, environ={}, retry=FAST) as client:
            assert client.probe().dimension == 8
            httpx.post(url + "/_control", json={"faults": {"drop_item": True}}, timeout=5)
            with pytest.raises(EmbeddingRejected):
                client.embed(["a", "b"])
        logged = httpx.get(url + "/_requests", timeout=5).json()["requests"]
        assert [r["inputs"] for r in logged] == [["knowledge embeddings probe"], ["a", "b"]]
    finally:
        process.terminate()
        process.wait(timeout=10)
