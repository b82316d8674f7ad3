"""Recall of list layouts on real vectors, in numpy: how many lists, probed how, for recall@k >= 0.95.

    .venv/bin/python bench/list_recall.py bench/out/query-real/store-40000 --embed-url http://127.0.0.1:8317/v1 \
        --lists 40 160 --probes 1 2 4 8 16 --k 50 2

Loads the chunk vectors bench/embed_chunks.py wrote (`<store>/vectors.f32`, any prefix of the store),
embeds bench_query's 100 text and 100 keyword queries (seed 1) with the server, trains the lists
exactly as the store does (pipeline/kmeans.py: two-level spherical k-means over the vectors, every
vector filed under the nearest fine centroid of its nearest coarse cell) and, for each probe count,
ranks the fine centroids by distance to the query (`flat`, what query/vector.py does) and reports
the share of the vectors scanned and recall@k against the exact top k (a result counts when its
distance is within the exact k-th). The int8 scan and the re-scoring of the best RESCORE * k are
not simulated: on the store they lose nothing when every list is scanned (bench/RESULTS.md).

Density-matched estimate for a larger store of N vectors with the same lists and probes: recall@k'
here with k' = k * n / N (n vectors here) stands for recall@k there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from bench_query import DIMENSION, embed_texts, keyword_queries, sample_queries  # noqa: E402

from config.loader import settings_from_mapping  # noqa: E402
from pipeline import kmeans, vector_codes  # noqa: E402


def load(path: Path, limit: int | None) -> np.ndarray:
    """The unit vectors of an embed_chunks.py file (its first `limit`)."""
    record = np.dtype([("id", "<i8"), ("v", "<f4", (DIMENSION,))])
    data = np.fromfile(path, dtype=record)
    return np.ascontiguousarray(data["v"][:limit])


def queries(store: Path, url: str, n: int, cache: Path) -> np.ndarray:
    """bench_query's text and keyword queries (n each, seed 1), embedded once and cached."""
    if cache.exists():
        return np.load(cache)
    settings = settings_from_mapping({}, store_base=store)
    texts = sample_queries(settings, n, 1)[:n] + keyword_queries(settings, n, 1)[:n]
    vectors = np.asarray(embed_texts(url, texts, "queries")[1], dtype=np.float32)
    np.save(cache, vectors)
    return vectors


def recall(vectors: np.ndarray, probes_q: np.ndarray, lists: int, probe_counts: list[int], ks: list[int],
           seed: int, cells: int = 0) -> list[dict[str, object]]:
    """Recall@k for each probe count with `lists` lists trained on (and filing) all of vectors."""
    trained = kmeans.train(vectors, lists, vector_codes.coarse_for(lists), seed, vector_codes.FINE_SPAN - 1)
    cell_of, fine_of = kmeans.assign(trained, vectors)
    filed = np.array([vector_codes.list_id(c, j) for c, j in zip(cell_of.tolist(), fine_of.tolist())])
    pairs = [(c, vector_codes.list_id(c, j)) for c, cell in enumerate(trained.fine) for j in range(len(cell))]
    ids = np.array([fid for _, fid in pairs])
    fine = np.concatenate(trained.fine)
    sizes = {int(i): int(n) for i, n in zip(*np.unique(filed, return_counts=True))}
    dots = probes_q @ vectors.T
    order = np.argsort(-dots, axis=1)
    fine_dots = probes_q @ fine.T
    if cells:  # two-level ranking: the fine centroids of the `cells` nearest coarse cells only
        owner = np.array([c for c, _ in pairs])
        near = np.argsort(-(probes_q @ trained.coarse.T), axis=1)[:, :cells]
        fine_dots = np.where(np.stack([np.isin(owner, near[q]) for q in range(len(probes_q))]), fine_dots, -9.0)
    rank = np.argsort(-fine_dots, axis=1)
    out: list[dict[str, object]] = []
    for p in probe_counts:
        row: dict[str, object] = {"lists": len(ids), "coarse": len(trained.coarse), "cells": cells or "all",
                                  "probes": p}
        scanned = []
        hits = {k: [] for k in ks}
        for qi in range(len(probes_q)):
            chosen = set(ids[rank[qi, :p]].tolist())
            mask = np.isin(filed, list(chosen))
            scanned.append(mask.mean())
            for k in ks:
                kth = dots[qi, order[qi, k - 1]]
                true = order[qi, :k]
                inside = dots[qi][mask]
                found = np.sort(inside)[::-1][:k]
                hits[k].append(min(1.0, float((found >= kth - 1e-6).sum()) / k) if len(true) else 1.0)
        row["scanned"] = round(float(np.mean(scanned)), 4)
        row["max_list"] = max(sizes.values())
        for k in ks:
            row[f"recall@{k}"] = round(float(np.mean(hits[k])), 3)
            row[f"min@{k}"] = round(float(np.min(hits[k])), 2)
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def main() -> None:
    """Train and measure each layout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--embed-url", required=True)
    parser.add_argument("--limit", type=int, help="use the first N vectors only")
    parser.add_argument("--lists", type=int, nargs="+", required=True)
    parser.add_argument("--probes", type=int, nargs="+", required=True)
    parser.add_argument("--k", type=int, nargs="+", default=[50])
    parser.add_argument("--queries", type=int, default=100, help="per query set (two sets)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cells", type=int, nargs="+", default=[0],
                        help="rank the fine centroids of this many nearest coarse cells only (0: all of them)")
    args = parser.parse_args()
    vectors = load(args.store / "vectors.f32", args.limit)
    probes_q = queries(args.store, args.embed_url, args.queries, args.store / f"queries-{args.queries}.npy")
    print(json.dumps({"vectors": len(vectors), "queries": len(probes_q)}), flush=True)
    for lists in args.lists:
        for cells in args.cells:
            recall(vectors, probes_q, lists, args.probes, args.k, args.seed, cells)


if __name__ == "__main__":
    main()
