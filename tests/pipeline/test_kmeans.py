"""Two-level spherical k-means: coarse cells, fine lists in each by its share, nearest-of-nearest filing."""

from __future__ import annotations

import numpy as np

from pipeline import kmeans


def _unit_rows(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _clustered(seed: int, clusters: int, each: int, dim: int = 16) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = _unit_rows(rng.standard_normal((clusters, dim)))
    return _unit_rows(np.repeat(centres, each, axis=0) + 0.05 * rng.standard_normal((clusters * each, dim)))


def test_training_yields_the_lists_asked_for_spread_over_the_cells_by_their_share() -> None:
    sample = _clustered(1, 12, 50)
    trained = kmeans.train(sample, 40, 6, seed=1, per_cell=4095)
    assert len(trained.coarse) == 6 and trained.count == 40 and all(len(cell) >= 1 for cell in trained.fine)
    assert np.allclose(np.linalg.norm(trained.coarse, axis=1), 1, atol=1e-5)
    assert all(np.allclose(np.linalg.norm(cell, axis=1), 1, atol=1e-5) for cell in trained.fine)
    owner = np.argmax(sample @ trained.coarse.T, axis=1)
    shares = np.bincount(owner, minlength=6) * 40 / len(sample)
    assert all(abs(len(cell) - share) <= 1 for cell, share in zip(trained.fine, shares))  # largest remainders


def test_a_cell_never_gets_more_lists_than_its_rows_or_the_cap() -> None:
    sample = _clustered(2, 3, 4)  # 12 rows
    trained = kmeans.train(sample, 50, 3, seed=2, per_cell=2)
    assert all(1 <= len(cell) <= 2 for cell in trained.fine) and trained.count <= 6


def test_each_vector_goes_to_the_nearest_fine_centroid_of_its_nearest_cell() -> None:
    sample = _clustered(3, 10, 30)
    trained = kmeans.train(sample, 25, 5, seed=3, per_cell=4095)
    vectors = _clustered(4, 10, 7)
    cells, fine = kmeans.assign(trained, vectors)
    for v, c, f in zip(vectors, cells, fine):
        assert c == int(np.argmax(trained.coarse @ v))
        assert f == int(np.argmax(trained.fine[c] @ v))
    # the clusters are well apart: the members of one training cluster share one coarse cell
    owner = np.argmax(sample @ trained.coarse.T, axis=1).reshape(10, 30)
    assert all(len(set(row.tolist())) == 1 for row in owner)
