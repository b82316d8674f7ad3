"""The vector tier against numpy brute force, on clustered vectors: KNN latency (interleaved), recall@50, memory.

    nice -n 10 .venv/bin/python -m bench.bench_vectors --chunks 100000 1000000 --queries 200
    .venv/bin/python -m bench.bench_vectors --chunks 100000 --sweep 0.05 0.1 --rescores 2 4  # recall by knob

For each size it builds (once, reused) a store of one-word sections (bench_query.vector_only_store)
whose chunks get seeded clustered unit vectors (bench/lib/clustered.py: a stand-in for text
embeddings, 384 dimensions; `--kind random` for uniform ones) and the quantised companions, and
keeps the same vectors as a float32 matrix in memory. Then, per query vector (drawn from the same
mixture, not in the store), in one loop alternating which goes first:

- brute: numpy brute force over the float matrix in memory (`X @ q`, top 50 by argpartition), the
  baseline the tier must match: exact, but it holds every vector in RAM (1.5 GB at a million);
- knn: query.vector.knn as shipped, on one warm read-only connection (the centroid cache filled);
- knn_cold (every 4th query): knn on a connection opened for the query with the process's centroid and
  list caches emptied first (what a one-shot CLI search pays, imports aside);
- hybrid: query.search.search with embeddings configured and the query embedding replaced by the
  query vector, on a warm Reader (the lexical side matches nothing on this store: KNN, feedback,
  fusion and hydration).

recall@50 counts a shipped result as found when its distance is within the exact 50th distance.
`--sweep` re-measures recall and latency with other PROBE_SHARE values. A child process reports a
reader's peak RSS over the run's queries (`--rss-child`). Prints one JSON object per size.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_query import vector_only_store
from bench.lib.clustered import Clustered, Uniform
from bench.lib.paths import OUT
from bench.lib.stats import percentiles
from config.loader import settings_from_mapping
from pipeline import db, schema, vector_codes, vectors
from query import list_scan
from query import search as search_module
from query import vector as vector_module
from query.reader import Reader

DIMENSION = 384
MODEL = "bench-clustered-384"
K = 50


KINDS = {"clustered": Clustered, "random": Uniform}


def build(out: Path, chunks: int, seed: int, kind: str) -> tuple[Path, np.ndarray]:
    """The store's base directory and its vectors as a matrix (row i is chunk id i + 1)."""
    base = vector_only_store(out / kind, chunks)
    path = base / "knowledge" / "default" / "knowledge.db"
    mixture = KINDS[kind](chunks, DIMENSION, seed)
    matrix = np.concatenate(list(mixture.batches(chunks)))
    conn = db.open_writer(path)
    try:
        have = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        if have != chunks:
            raise SystemExit(f"{path} holds {have} chunks, not {chunks} (an interrupted build?): remove {base}")
        if vectors.has_table(conn) and vector_codes.ready(conn) and schema.meta_value(conn, "model") == MODEL:
            return base, matrix
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        if vectors.has_table(conn):
            conn.execute(f"DELETE FROM {schema.VECTORS}")
        schema.drop_vector_codes(conn)
        vectors.install(conn, vectors.VectorIdentity(model=MODEL, dimension=DIMENSION))
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM chunks ORDER BY id")]
        for start in range(0, len(ids), 5000):
            conn.executemany(f"INSERT INTO {schema.VECTORS}(chunk_id, embedding) VALUES (?, ?)",
                             [(cid, matrix[cid - 1].tobytes()) for cid in ids[start : start + 5000]])
        print(f"stored {len(ids)} vectors in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        vector_codes.install(conn, DIMENSION)
        conn.execute("COMMIT")
        print(f"built the companions in {time.perf_counter() - started:.0f} s: {vector_codes.state(conn)}",
              file=sys.stderr)
    finally:
        conn.close()
    return base, matrix


def brute(matrix: np.ndarray, q: np.ndarray, k: int = K) -> list[tuple[int, float]]:
    """Exact top k by numpy over the float matrix: (chunk id, L2 distance), nearest first."""
    scores = matrix @ q
    best = np.argpartition(-scores, k - 1)[:k]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(int(i) + 1, math.sqrt(max(0.0, 2 - 2 * float(scores[i])))) for i in best]


def recall(found: list[tuple[int, float]], exact: list[tuple[int, float]]) -> float:
    """Share of the exact top k found (a result within the exact k-th distance counts)."""
    bound = exact[-1][1] + 1e-5
    return min(len(exact), sum(1 for _, d in found if d <= bound)) / len(exact)


def _clock(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def interleaved(base: Path, matrix: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    """brute, knn (warm and cold) and hybrid per query, alternating the order; recall of knn against brute."""
    path = base / "knowledge" / "default" / "knowledge.db"
    settings = settings_from_mapping({"embeddings": {"base_url": "http://127.0.0.1:9/v1", "model": MODEL}},
                                     store_base=base)
    by_text = {f"q{i}": [float(x) for x in q] for i, q in enumerate(queries)}
    original = vector_module.embed_query
    vector_module.embed_query = lambda s, identity, text: by_text[text]  # type: ignore[assignment, misc]
    times: dict[str, list[float]] = {"brute": [], "knn": [], "knn_cold": [], "hybrid": []}
    recalls: list[float] = []
    conn = db.connect_readonly(path)
    try:
        with Reader(settings) as reader:
            for i, (text, q) in enumerate(by_text.items()):
                vec = np.asarray(q, dtype=np.float32)
                steps = [("brute", partial(brute, matrix, vec)), 
                         ("knn", partial(vector_module.knn, conn, q, caches=reader.caches)),
                         ("hybrid", partial(search_module.search, settings, text, 10, reader))]
                results: dict[str, Any] = {}
                for name, fn in (steps if i % 2 else steps[::-1]):
                    spent, results[name] = _clock(fn)
                    times[name].append(spent)
                if i % 4 == 0:  # a new process's first query: no cached centroids or lists
                    reader.caches.of(list_scan.VectorLists).forget()
                    cold = db.connect_readonly(path)
                    spent, _ = _clock(partial(vector_module.knn, cold, q))
                    cold.close()
                    times["knn_cold"].append(spent)
                recalls.append(recall(results["knn"], results["brute"]))
                assert results["hybrid"].tier.startswith("tier: hybrid"), results["hybrid"].tier
    finally:
        conn.close()
        vector_module.embed_query = original
    out: dict[str, Any] = {name: percentiles(values[10:] or values) for name, values in times.items()}
    out["knn_over_brute_p50"] = round(out["knn"]["p50_ms"] / out["brute"]["p50_ms"], 3)
    out["recall_at_50"] = _summary(recalls)
    return out


def _summary(recalls: list[float]) -> dict[str, float]:
    ordered = sorted(recalls)
    return {"mean": round(statistics.fmean(ordered), 4), "min": ordered[0],
            "p5": ordered[max(0, math.ceil(0.05 * len(ordered)) - 1)], "n": len(ordered)}


def sweep(base: Path, matrix: np.ndarray, queries: np.ndarray, shares: list[float],
          rescores: list[int]) -> dict[str, Any]:
    """recall@50 and p50 (alternating with brute) of knn at other PROBE_SHARE and RESCORE values, no row floor."""
    path = base / "knowledge" / "default" / "knowledge.db"
    shipped = vector_module.PROBE_SHARE, vector_module.RESCORE, vector_module.MIN_PROBE_ROWS
    out: dict[str, Any] = {}
    conn = db.connect_readonly(path)
    try:
        for share, rescore in [(s, r) for s in shares for r in rescores]:
            vector_module.PROBE_SHARE, vector_module.RESCORE, vector_module.MIN_PROBE_ROWS = share, rescore, 0
            spent: dict[str, list[float]] = {"brute": [], "knn": []}
            recalls = []
            for q in queries:
                vec = np.asarray(q, dtype=np.float32)
                tb, exact = _clock(partial(brute, matrix, vec))
                tk, found = _clock(partial(vector_module.knn, conn, [float(x) for x in q]))
                spent["brute"].append(tb)
                spent["knn"].append(tk)
                recalls.append(recall(found, exact))
            out[f"share {share} rescore {rescore}"] = {"recall_at_50": _summary(recalls),
                                                        "knn": percentiles(spent["knn"]),
                                                        "brute": percentiles(spent["brute"])}
    finally:
        vector_module.PROBE_SHARE, vector_module.RESCORE, vector_module.MIN_PROBE_ROWS = shipped
        conn.close()
    return out


def reader_rss(base: Path, queries: np.ndarray) -> dict[str, Any]:
    """Peak RSS of a child process running every query's KNN and hybrid search on one warm Reader."""
    probe = base / "rss-vectors.json"
    probe.write_text(json.dumps([[float(x) for x in q] for q in queries]))
    done = subprocess.run([sys.executable, "-m", "bench.bench_vectors", "--rss-child", str(base)],
                          capture_output=True, text=True, check=True, timeout=1800)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def rss_child(base: Path) -> None:
    """The child of reader_rss."""
    queries = json.loads((base / "rss-vectors.json").read_text())
    settings = settings_from_mapping({"embeddings": {"base_url": "http://127.0.0.1:9/v1", "model": MODEL}},
                                     store_base=base)
    by_text = {f"q{i}": q for i, q in enumerate(queries)}
    vector_module.embed_query = lambda s, identity, text: by_text[text]  # type: ignore[assignment, misc]
    before = _vm("VmRSS")
    with Reader(settings) as reader:
        for text in by_text:
            search_module.search(settings, text, 10, reader)
        after = _vm("VmRSS")
    print(json.dumps({"rss_before_open_mib": round(before / 1024, 1), "rss_after_queries_mib": round(after / 1024, 1),
                      "peak_rss_mib": round(_vm("VmHWM") / 1024, 1),
                      "queries": len(queries)}))


def _vm(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def main() -> None:
    """Build, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kind", choices=sorted(KINDS), default="clustered",
                        help="the vectors (bench/lib/clustered.py)")
    parser.add_argument("--out", type=Path, default=OUT / "vectors")
    parser.add_argument("--sweep", type=float, nargs="*", default=[], help="PROBE_SHARE values to re-measure")
    parser.add_argument("--rescores", type=int, nargs="*", default=[2, 4], help="RESCORE values to sweep")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for chunks in args.chunks:
        base, matrix = build(args.out.resolve(), chunks, args.seed, args.kind)
        queries = KINDS[args.kind](chunks, DIMENSION, args.seed).queries(args.queries)
        with open("/proc/loadavg") as f:
            load = f.read().split()[:3]
        result: dict[str, Any] = {"chunks": chunks, "vectors": args.kind, "load_at_start": load,
                                  "probe_share": vector_module.PROBE_SHARE, "rescore": vector_module.RESCORE,
                                  "codes": vars(vector_codes.state(db.connect_readonly(
                                      base / "knowledge" / "default" / "knowledge.db")))}
        result.update(interleaved(base, matrix, queries))
        if args.sweep:
            result["sweep"] = sweep(base, matrix, queries[: max(50, args.queries // 2)], args.sweep,
                                    args.rescores)
        if not args.skip_rss:
            result["reader_rss"] = reader_rss(base, queries)
            result["brute_force_matrix_mib"] = round(matrix.nbytes / 2**20, 1)
        with open("/proc/loadavg") as f:
            result["load_at_end"] = f.read().split()[:3]
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
