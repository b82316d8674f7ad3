"""Fixtures shared by the query tests: a loopback embeddings server of 24 dimensions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.embedserver import EmbedServer


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    """A deterministic OpenAI-compatible embeddings server on 127.0.0.1 (hashed bag of words)."""
    with EmbedServer(dim=24) as running:
        yield running
