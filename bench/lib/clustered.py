"""Clustered unit vectors: a seeded stand-in for text embeddings when too few can be embedded.

Text embeddings are not uniform on the sphere: they share a common direction, group by topic and,
within a topic, by sub-topic, with topics of very different sizes. The generator draws each vector
as unit(COMMON * m + TOPIC * t + SUB * s + LEAF * f + NOISE * e), where m is one direction shared by
all, t its topic's direction (topics drawn with Zipf-like weights), s its sub-topic's, f its leaf's
(a handful of vectors, fewer than a list holds, so a query's neighbours straddle list boundaries) and
e its own noise, all random unit directions. With the default weights two vectors of one leaf have
cosine ~0.6, of one sub-topic ~0.5, of one topic ~0.3, of two topics ~0.06, about what
all-MiniLM-L6-v2 gives for one passage, its section, its document's subject and unrelated text.
`queries` are drawn the same way but are not in the store.

Deterministic: the same (n, dimension, seed) gives the same float32 rows, in batches, so a million
vectors never need to be in memory at once unless the caller keeps them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

COMMON, TOPIC, SUB, LEAF, NOISE = 0.25, 0.5, 0.45, 0.35, 0.6
PER_TOPIC = 2000  # vectors per topic on average
SUBS = 20  # sub-topics per topic
LEAVES = 10  # leaves per sub-topic (~10 vectors each)
ZIPF = 0.7  # topic i has weight 1 / (i + 1) ** ZIPF
MIXED = 0.4  # share of vectors placed between two places
BATCH = 50_000

Matrix = npt.NDArray[np.float32]


def _unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1)


class Clustered:
    """The mixture for a store of about n vectors (its topics scale with n)."""

    def __init__(self, n: int, dimension: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.dimension = dimension
        topics = max(4, n // PER_TOPIC)
        self.common = _unit(rng.standard_normal(dimension))
        self.topics = _unit(rng.standard_normal((topics, dimension)))
        self.subs = _unit(rng.standard_normal((topics, SUBS, dimension)))
        self.leaves = _unit(rng.standard_normal((topics, SUBS, LEAVES, dimension)))
        weights = 1 / (np.arange(topics) + 1) ** ZIPF
        self.weights = weights / weights.sum()
        self.seed = seed

    def _place(self, count: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
        """The topic, sub-topic and leaf part of count vectors."""
        topic = rng.choice(len(self.topics), size=count, p=self.weights)
        sub = rng.integers(0, SUBS, size=count)
        leaf = rng.integers(0, LEAVES, size=count)
        return TOPIC * self.topics[topic] + SUB * self.subs[topic, sub] + LEAF * self.leaves[topic, sub, leaf]

    def draw(self, count: int, rng: np.random.Generator) -> Matrix:
        """count vectors of the mixture; a MIXED share of them sit between two places (a text on two subjects)."""
        place = self._place(count, rng)
        blend = rng.uniform(0.3, 0.7, size=(count, 1)) * (rng.random((count, 1)) < MIXED)
        place = (1 - blend) * place + blend * self._place(count, rng)
        noise = _unit(rng.standard_normal((count, self.dimension)))
        return _unit(COMMON * self.common + place + NOISE * noise).astype(np.float32)

    def batches(self, n: int) -> Iterator[Matrix]:
        """The store's n vectors, BATCH rows at a time (the same rows for the same seed)."""
        rng = np.random.default_rng(self.seed + 1)
        for start in range(0, n, BATCH):
            yield self.draw(min(BATCH, n - start), rng)

    def queries(self, count: int) -> Matrix:
        """count query vectors of the same mixture, none of them in the store."""
        return self.draw(count, np.random.default_rng(self.seed + 2))


class Uniform(Clustered):
    """Uniform random unit vectors (no structure at all: the hardest case for any list-based search)."""

    def draw(self, count: int, rng: np.random.Generator) -> Matrix:
        """count uniform unit vectors."""
        return _unit(rng.standard_normal((count, self.dimension))).astype(np.float32)
