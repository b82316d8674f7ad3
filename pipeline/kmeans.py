"""Two-level spherical k-means for the vector codes' lists (numpy; the writer's build path only).

The quantised companions (pipeline/vector_codes.py) file every vector under one of many small
lists. Finding the nearest of thousands of centroids costs one distance per centroid, so the
lists are trained in two levels: about sqrt(lists) coarse centroids over a sample of the store,
then, inside each coarse cell, fine centroids over the cell's own sample vectors, as many as the
cell's share of the sample asks for. A vector is filed under the nearest fine centroid of its
nearest coarse cell: about 2 * sqrt(lists) distances, in numpy for a build, in SQL for a vector
written later (the same rule). All vectors and centroids are unit length, so the nearest by L2
is the one of largest dot product.

numpy is imported by this module alone, and only the writer imports it (lazily, when it trains or
files a whole store): the read commands never load it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]

ROUNDS = 8  # k-means rounds at each level
_CHUNK = 8192  # vectors whose dot products with the centroids are computed at once


@dataclass(frozen=True)
class Lists:
    """Trained centroids: coarse (a row per coarse cell), fine[c] the fine centroids of coarse cell c."""

    coarse: Matrix
    fine: list[Matrix]

    @property
    def count(self) -> int:
        """The number of fine lists."""
        return sum(len(cell) for cell in self.fine)


def train(sample: Matrix, lists: int, cells: int, seed: int, per_cell: int) -> Lists:
    """Two-level spherical k-means of the unit rows of sample: `cells` coarse cells, `lists` fine lists in all
    (when the sample allows), at most per_cell in a cell."""
    rng = np.random.default_rng(seed)
    coarse = _kmeans(sample, cells, rng)
    owner = _nearest(sample, coarse)
    sizes = np.bincount(owner, minlength=len(coarse))
    fine: list[Matrix] = []
    for c, want in enumerate(_shares(sizes, lists, per_cell)):
        members = sample[owner == c]
        fine.append(_kmeans(members, want, rng) if len(members) else coarse[c : c + 1].copy())
    return Lists(coarse, fine)


def _shares(sizes: npt.NDArray[np.int64], lists: int, per_cell: int) -> list[int]:
    """Fine lists per coarse cell, in proportion to its sample rows (largest remainders), `lists` in all when
    the cells can hold them: at least 1 and at most per_cell and its rows each."""
    cap = np.maximum(1, np.minimum(per_cell, sizes))
    exact = lists * sizes / max(1, int(sizes.sum()))
    counts = np.clip(np.floor(exact).astype(np.int64), 1, cap)
    for c in np.argsort(-(exact - np.floor(exact)), kind="stable"):
        if int(counts.sum()) >= lists:
            break
        if counts[c] < cap[c]:
            counts[c] += 1
    return [int(n) for n in counts]


def assign(trained: Lists, vectors: Matrix) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(coarse cell, fine centroid within it) of each unit row: its nearest cell's nearest fine centroid."""
    cells = _nearest(vectors, trained.coarse)
    fine = np.zeros(len(vectors), dtype=np.int64)
    for c in np.unique(cells):
        rows = np.flatnonzero(cells == c)
        fine[rows] = _nearest(vectors[rows], trained.fine[int(c)])
    return cells, fine


def _kmeans(data: Matrix, k: int, rng: np.random.Generator) -> Matrix:
    """k unit centroids of the unit rows of data: each the normalised mean of the rows nearest it."""
    k = max(1, min(k, len(data)))
    centroids = data[rng.choice(len(data), size=k, replace=False)].copy()
    for _ in range(ROUNDS):
        nearest = _nearest(data, centroids)
        counts = np.bincount(nearest, minlength=k)
        order = np.argsort(nearest, kind="stable")
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        sums = np.zeros_like(centroids)
        full = counts > 0
        sums[full] = np.add.reduceat(data[order], starts[full], axis=0)
        empty = ~full
        if empty.any():  # an empty cell restarts at a random row
            sums[empty] = data[rng.choice(len(data), size=int(empty.sum()))]
        centroids = _unit(sums)
    return centroids


def _nearest(data: Matrix, centroids: Matrix) -> npt.NDArray[np.int64]:
    """Index of the nearest centroid (largest dot product) of each row."""
    out = np.empty(len(data), dtype=np.int64)
    for start in range(0, len(data), _CHUNK):
        out[start : start + _CHUNK] = np.argmax(data[start : start + _CHUNK] @ centroids.T, axis=1)
    return out


def _unit(rows: Matrix) -> Matrix:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1)).astype(np.float32)
