"""Fusion variants on Cranfield, computed offline over each tier's ranked lists of one indexed store.

    .venv/bin/python -m bench.bench_fusion --store bench/out/rank/body            # lists cached once
    .venv/bin/python -m bench.bench_fusion --store bench/out/rank/body --markdown

`--store DIR` is a directory holding a knowledge.yaml with embeddings (as `knowledge eval` uses it,
built as bench/HISTORY.md "knowledge eval on Cranfield" describes) and its embeddings server must
answer. Each of the 225 queries is ranked once per tier through the query side's own code (lexical:
build_query + bm25, without the excluded-word step no Cranfield query uses; vector: the query
embedded under the pinned identity, KNN), DEPTH (100) chunks deep with their scores, and cached in
DIR/tiers.json. Every fusion variant below is then computed from those lists in memory (no server,
no store access beyond the chunk -> document map), and scored at document level as `knowledge eval`
scores (a document once, at its best chunk's rank): nDCG@10, Recall@10, MRR@10.

This is the exploration behind query/fusion.py's choice; the shipped ranking is measured by
`knowledge eval` itself (bench/RESULTS.md, "Quality").
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.lib.paths import CRANFIELD
from config.loader import load_settings
from pipeline import schema
from pipeline.vectors import from_blob
from query import metrics
from query.judgments import read_qrels, read_queries
from query.lexical import search_ids
from query.reader import Reader
from query.terms import build_query
from query.vector import embed_query, knn, query_identity

DEPTH = 100
DATA = CRANFIELD  # --data
Scored = list[tuple[int, float]]  # (chunk id, score) best first, higher better
Fuser = Callable[[Scored, Scored], list[int]]


def cache_tiers(store: Path, data_dir: Path = DATA) -> dict[str, Any]:
    """{"docs": {chunk id: doc id}, "queries": {qid: {"lexical": [[cid, bm25]], "vector": [[cid, distance]]}}}."""
    cached = store / "tiers.json"
    if cached.is_file():
        data: dict[str, Any] = json.loads(cached.read_text())
        return data
    settings = load_settings(str(store / "knowledge.yaml"))
    emb = settings.embeddings
    assert emb is not None, "the store's knowledge.yaml must configure embeddings"
    queries = read_queries(data_dir / "queries.jsonl")
    out: dict[str, Any] = {"docs": {}, "queries": {}}
    with Reader(settings) as reader:
        identity = query_identity(emb, reader.meta, settings.db_path)
        rows = reader.conn.execute("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.document_id")
        out["docs"] = {str(cid): Path(str(path)).stem for cid, path in rows}
        for qid, text in queries.items():
            lexical = search_ids(reader.conn, build_query(text), DEPTH)
            qvec = embed_query(emb, identity, text)
            vector = knn(reader.conn, qvec, DEPTH)
            out["queries"][qid] = {"lexical": lexical, "vector": vector, "qvec": qvec}
    cached.write_text(json.dumps(out))
    return out


# --- the variants: each maps (lexical, vector) scored lists (higher better) to chunk ids best first ---


def rrf(k: float = 60, fanout: int = 50, w_lex: float = 1.0, w_vec: float = 1.0) -> Fuser:
    def fuse(lex: Scored, vec: Scored) -> list[int]:
        scores: dict[int, float] = {}
        for weight, ranked in ((w_lex, lex[:fanout]), (w_vec, vec[:fanout])):
            for rank, (cid, _) in enumerate(ranked, start=1):
                scores[cid] = scores.get(cid, 0.0) + weight / (k + rank)
        return [cid for cid, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
    return fuse


def minmax(scored: Scored) -> dict[int, float]:
    values = [s for _, s in scored]
    low, high = min(values), max(values)
    return {cid: (s - low) / (high - low) if high > low else 1.0 for cid, s in scored}


def zscore(scored: Scored) -> dict[int, float]:
    values = [s for _, s in scored]
    mean, std = statistics.fmean(values), statistics.pstdev(values) or 1.0
    return {cid: (s - mean) / std for cid, s in scored}


def dbsf(scored: Scored) -> dict[int, float]:
    """Distribution-based: mean +- 3 standard deviations mapped to 0..1, clipped."""
    values = [s for _, s in scored]
    mean, std = statistics.fmean(values), statistics.pstdev(values) or 1.0
    low, high = mean - 3 * std, mean + 3 * std
    return {cid: min(1.0, max(0.0, (s - low) / (high - low))) for cid, s in scored}


def theoretical(lexical: bool) -> Callable[[Scored], dict[int, float]]:
    """Theoretical-min-max: bm25's minimum is 0, cosine's -1; the list's best is the maximum."""
    def norm(scored: Scored) -> dict[int, float]:
        low = 0.0 if lexical else -1.0
        high = max(s for _, s in scored)
        return {cid: (s - low) / (high - low) if high > low else 1.0 for cid, s in scored}
    return norm


def convex(alpha: float, norm: str = "minmax", fanout: int = 50) -> Fuser:
    """alpha * vector + (1 - alpha) * lexical, each normalised over its own list; absent = the list's floor."""
    norms: dict[str, tuple[Callable[[Scored], dict[int, float]], Callable[[Scored], dict[int, float]]]] = {
        "minmax": (minmax, minmax), "z": (zscore, zscore), "dbsf": (dbsf, dbsf),
        "tmm": (theoretical(True), theoretical(False)),
    }
    lex_norm, vec_norm = norms[norm]

    def fuse(lex: Scored, vec: Scored) -> list[int]:
        lex, vec = lex[:fanout], vec[:fanout]
        parts = []
        for weight, ranked, normalise in ((1 - alpha, lex, lex_norm), (alpha, vec, vec_norm)):
            values = normalise(ranked) if ranked else {}
            floor = min(values.values()) if values else 0.0
            parts.append((weight, values, floor))
        ids = {cid for _, values, _ in parts for cid in values}
        scores = {cid: sum(w * values.get(cid, floor) for w, values, floor in parts) for cid in ids}
        return [cid for cid, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
    return fuse


def diversify(ids: Sequence[int], docs: dict[str, str], cap: int) -> list[int]:
    """At most cap chunks per document in order; the rest after them, in order."""
    seen: dict[str, int] = {}
    first: list[int] = []
    rest: list[int] = []
    for cid in ids:
        doc = docs[str(cid)]
        seen[doc] = seen.get(doc, 0) + 1
        (first if seen[doc] <= cap else rest).append(cid)
    return first + rest


def doc_rrf(k: float = 60, fanout: int = 50) -> Fuser:
    """RRF over each tier's document ranking (a document at its best chunk), chunks grouped under their document."""
    def fuse(lex: Scored, vec: Scored) -> list[int]:
        chunk_order = rrf(k, fanout)(lex, vec)
        scores: dict[str, float] = {}
        for ranked in (lex[:fanout], vec[:fanout]):
            docs_seen = list(dict.fromkeys(DOCS[str(cid)] for cid, _ in ranked))
            for rank, doc in enumerate(docs_seen, start=1):
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
        place = {doc: i for i, (doc, _) in enumerate(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])))}
        return sorted(chunk_order, key=lambda cid: place[DOCS[str(cid)]])
    return fuse


DOCS: dict[str, str] = {}
VECTORS: dict[int, list[float]] = {}
CONN: list[Any] = []


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def prf(feedback: int = 3, beta: float = 0.5, k: float = 60, fanout: int = 50, source: str = "hybrid") -> Fuser:
    """Rocchio: q + beta * mean(top `feedback` chunks of the first hybrid ranking), KNN again, RRF."""
    def fuse(lex: Scored, vec: Scored, qvec: Sequence[float] = ()) -> list[int]:
        first = rrf(k, fanout)(lex, vec) if source == "hybrid" else [c for c, _ in vec]
        top = first[:feedback]
        mean = [sum(VECTORS[c][i] for c in top) / len(top) for i in range(len(qvec))]
        moved = unit([q + beta * m for q, m in zip(qvec, mean)])
        again = [(cid, 1.0 - d * d / 2) for cid, d in knn(CONN[0], moved, fanout)]
        return rrf(k, fanout)(lex, again)
    fuse.wants_qvec = True  # type: ignore[attr-defined]
    return fuse


def prf_rescore(feedback: int = 3, beta: float = 1.0, k: float = 60, fanout: int = 50) -> Fuser:
    """As prf(), but the moved query only re-scores the candidates both tiers already listed (no second KNN)."""
    def fuse(lex: Scored, vec: Scored, qvec: Sequence[float] = ()) -> list[int]:
        top = rrf(k, fanout)(lex, vec)[:feedback]
        mean = [sum(VECTORS[c][i] for c in top) / len(top) for i in range(len(qvec))]
        moved = unit([q + beta * m for q, m in zip(qvec, mean)])
        pool = {c for c, _ in lex[:fanout]} | {c for c, _ in vec[:fanout]}
        again = sorted(((c, sum(a * b for a, b in zip(moved, VECTORS[c]))) for c in pool if c in VECTORS),
                       key=lambda kv: (-kv[1], kv[0]))[:fanout]
        return rrf(k, fanout)(lex, again)
    fuse.wants_qvec = True  # type: ignore[attr-defined]
    return fuse


def score(data: dict[str, Any], qrels: dict[str, dict[str, int]], fuse: Fuser, cap: int = 0) -> dict[str, float]:
    """Mean document-level metrics of one variant over the judged queries."""
    docs = data["docs"]
    per_query = []
    for qid, judged in qrels.items():
        tiers = data["queries"].get(qid)
        if tiers is None:
            per_query.append({"ndcg@10": 0.0, "recall@10": 0.0, "mrr@10": 0.0, "docs_in_10_sections": 0.0,
                              "recall_10_sections": 0.0})
            continue
        lex = [(int(c), -float(s)) for c, s in tiers["lexical"]]
        vec = [(int(c), 1.0 - float(d) ** 2 / 2) for c, d in tiers["vector"]]  # L2 of unit vectors -> cosine
        ids = fuse(lex, vec, tiers["qvec"]) if getattr(fuse, "wants_qvec", False) else fuse(lex, vec)  # type: ignore[call-arg]
        if cap:
            ids = diversify(ids, docs, cap)
        ranking = metrics.first_ranks(docs[str(c)] for c in ids)
        shown = metrics.first_ranks(docs[str(c)] for c in ids[:10])  # the documents of 10 sections
        per_query.append({"ndcg@10": metrics.ndcg_at(ranking, judged, 10),
                          "recall@10": metrics.recall_at(ranking, judged, 10),
                          "mrr@10": metrics.reciprocal_rank_at(ranking, judged, 10),
                          "docs_in_10_sections": float(len(shown)),
                          "recall_10_sections": metrics.recall_at(shown, judged, 10)})
    return {key: statistics.fmean(q[key] for q in per_query) for key in per_query[0]}


def variants() -> list[tuple[str, str, Fuser, int]]:
    """(group, name, fuser, diversity cap) of every variant measured."""
    out: list[tuple[str, str, Fuser, int]] = []
    out += [("fan-out (RRF k=60)", f"{f}", rrf(fanout=f), 0) for f in (10, 20, 30, 50, 100)]
    out += [("RRF k (fan-out 50)", f"{k}", rrf(k=k), 0) for k in (1, 5, 10, 20, 30, 60, 100, 200)]
    out += [("RRF vector weight (k=60, fan-out 50)", f"{w}", rrf(w_vec=w), 0) for w in (0.5, 0.75, 1.25, 1.5, 2.0)]
    for norm in ("minmax", "z", "dbsf", "tmm"):
        out += [(f"convex {norm} (fan-out 50), alpha = vector weight", f"{a}", convex(a, norm), 0)
                for a in (0.3, 0.4, 0.5, 0.6, 0.7)]
    out += [("convex minmax alpha 0.5, fan-out", f"{f}", convex(0.5, "minmax", f), 0) for f in (20, 30, 50, 100)]
    out += [("diversity cap (RRF k=60, fan-out 50)", f"{c}", rrf(), c) for c in (0, 1, 2, 3)]
    out += [("diversity cap (feedback fb=3 beta=1, then RRF)", f"{c}", prf(3, 1.0), c) for c in (0, 1, 2, 3)]
    out += [("document-level RRF", f"k={k}", doc_rrf(k), 0) for k in (30, 60)]
    out += [("dense PRF re-scoring the candidates only (no second KNN)", f"fb={fb} beta=1.0", prf_rescore(fb), 0)
            for fb in (1, 3, 5)]
    out += [("dense PRF (Rocchio) then RRF", f"fb={fb} beta={b} from {src}", prf(fb, b, source=src), 0)
            for src in ("hybrid", "vector") for fb in (1, 3, 5, 10) for b in (0.5, 1.0)]
    return out


def timing(store: Path, data: dict[str, Any], rounds: int = 3) -> dict[str, float]:
    """Mean ms per query of query.vector.knn_pinned alone and of query.feedback.nearest_with_feedback."""
    from pipeline.vectors import pinned_identity
    from query.feedback import nearest_with_feedback
    from query.vector import knn_pinned

    settings = load_settings(str(store / "knowledge.yaml"))
    with Reader(settings) as reader:
        identity = pinned_identity(reader.meta)
        assert identity is not None
        spent = {"knn": 0.0, "knn_with_feedback": 0.0}
        count = 0
        for _ in range(rounds):  # alternate, so load drifts hit both alike
            for tiers in data["queries"].values():
                lexical = [int(c) for c, _ in tiers["lexical"][:50]]
                t0 = time.perf_counter()
                knn_pinned(reader.conn, identity, tiers["qvec"], 50)
                t1 = time.perf_counter()
                nearest_with_feedback(reader.conn, identity, tiers["qvec"], 50, lexical, set())
                t2 = time.perf_counter()
                spent["knn"] += t1 - t0
                spent["knn_with_feedback"] += t2 - t1
                count += 1
    return {key: round(1000 * value / count, 3) for key, value in spent.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--data", type=Path, default=DATA, help="the Cranfield directory (qrels.tsv, queries.jsonl)")
    parser.add_argument("--timing", action="store_true",
                        help="time the shipped vector step per query: first KNN alone vs with the feedback pass")
    args = parser.parse_args(argv)
    data = cache_tiers(args.store, args.data)
    if args.timing:
        print(json.dumps(timing(args.store, data)))
        return 0
    DOCS.update(data["docs"])
    settings = load_settings(str(args.store / "knowledge.yaml"))
    reader = Reader(settings)
    CONN.append(reader.conn)
    VECTORS.update({int(cid): from_blob(bytes(blob)) for cid, blob in reader.conn.execute(
        f"SELECT chunk_id, embedding FROM {schema.VECTORS}")})  # the float copy of format 3 is gone
    qrels = read_qrels(args.data / "qrels.tsv")
    rows = []
    for group, name, fuse, cap in variants():
        rows.append({"group": group, "variant": name, **score(data, qrels, fuse, cap)})
    rows.insert(0, {"group": "single tier", "variant": "lexical",
                    **score(data, qrels, lambda lex, vec: [c for c, _ in lex])})
    rows.insert(1, {"group": "single tier", "variant": "vector",
                    **score(data, qrels, lambda lex, vec: [c for c, _ in vec])})
    if not args.markdown:
        print(json.dumps(rows, indent=1))
        return 0
    heading: object = None
    for row in rows:
        if row["group"] != heading:
            heading = row["group"]
            print(f"\n{heading}\n\n| variant | nDCG@10 | Recall@10 | MRR@10 | documents in the first 10 sections"
                  " | Recall over the first 10 sections |\n| --- | --- | --- | --- | --- | --- |")
        print(f"| {row['variant']} | {row['ndcg@10']:.4f} | {row['recall@10']:.4f} | {row['mrr@10']:.4f}"
              f" | {row['docs_in_10_sections']:.2f} | {row['recall_10_sections']:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
