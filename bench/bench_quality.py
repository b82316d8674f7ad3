"""Retrieval quality on Cranfield: nDCG@10, Recall@10, Recall@100 and MRR@10 for lexical, vector, hybrid.

    .venv/bin/python -m bench.bench_quality                  # spawns bench/embed_server.py (bench/.venv)
    .venv/bin/python -m bench.bench_quality --url http://127.0.0.1:8199/v1
    .venv/bin/python -m bench.bench_quality --lexical-only

The 1,400 abstracts are written as `<id>.md` (`# <title>`, then the text) and indexed by the real
pipeline (InProcessEngine: walk, chunk, embed through the server, one SQLite file). Each of the 225
queries is then ranked three ways with the query side's own building blocks: lexical (build_query
+ BM25 over the porter table, heading weight 2.0), vector (the query embedded with the index's
pinned identity, KNN over chunks_vec) and hybrid (RRF, k = 60, of those two lists). Lists go
`--depth` chunks deep (100, so Recall@100 is measurable; the shipped search fans out 50 per tier);
chunks map back to documents, each document counted once at its best rank. A last row runs
query.search.search() itself (top_k 20, fan-out 50) to show the @10 figures of the shipped path.
The "quantised" rows force the large-store KNN path (query.vector.knn_quantised: hamming
candidates re-scored exactly) that a store this small never takes, and `knn_recall` is its
recall@depth against exact KNN over the same queries.
Prints one JSON object; --markdown prints the table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from bench.lib import cranfield
from bench.lib.embedding import MODEL, spawn_server
from bench.lib.paths import CRANFIELD, OUT
from config.loader import settings_from_mapping
from config.settings import Settings
from query.fusion import rrf
from query.lexical import search_ids
from query.reader import Reader
from query.search import search
from query.terms import build_query
from query.vector import embed_query, knn, knn_exact, knn_quantised, query_identity
from workers.engine import InProcessEngine
from workers.run import RunRequest


def build_store(out: Path, url: str | None, document_prefix: str, fresh: bool,
                data: Path = CRANFIELD) -> tuple[Settings, dict[str, Any]]:
    """Write the corpus and index it; return the settings and the run's summary figures."""
    docs = out / "docs"
    if not docs.is_dir() or len(list(docs.glob("*.md"))) != 1400:
        cranfield.write_corpus(docs, data)
    block: dict[str, Any] = {"paths": [str(docs)], "directory": str(out / "store")}
    if url:
        block["embeddings"] = {"base_url": url, "model": MODEL, "timeout": 120,
                               "document_prefix": document_prefix}
    settings = settings_from_mapping(block, store_base=out)
    if fresh and settings.store_dir.exists():
        shutil.rmtree(settings.store_dir)
    started = time.monotonic()
    with InProcessEngine(settings) as engine:
        summary = engine.run(RunRequest())
    figures = {"index_seconds": round(time.monotonic() - started, 1), **{k: summary.to_json()[k] for k in
               ("added", "updated", "unchanged", "failed", "files", "chunks")}}
    return settings, figures


def doc_ranking(reader: Reader, chunk_ids: list[int]) -> list[str]:
    """Cranfield document ids of ranked chunk ids, each document once at its best rank."""
    if not chunk_ids:
        return []
    marks = ",".join("?" * len(chunk_ids))
    rows = dict(reader.conn.execute(
        f"SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id IN ({marks})",
        chunk_ids).fetchall())
    return cranfield.dedupe(cranfield.doc_id_from_path(rows[c]) for c in chunk_ids if c in rows)


def rank_all(settings: Settings, depth: int, data: Path = CRANFIELD) -> dict[str, Any]:
    """Run every query through each tier; return the runs and the per-query latencies."""
    queries = cranfield.load_queries(data)
    runs: dict[str, dict[str, list[str]]] = {"lexical": {}, "vector": {}, "hybrid": {}, "search()": {},
                                             "vector (quantised)": {}, "hybrid (quantised)": {}}
    recalls: list[float] = []
    timing: dict[str, float] = {"lexical": 0.0, "embed": 0.0, "knn": 0.0, "search()": 0.0}
    emb = settings.embeddings
    with Reader(settings) as reader:
        identity = query_identity(emb, reader.meta, settings.db_path) if emb else None
        for qid, text in queries.items():
            t0 = time.perf_counter()
            lexical = [cid for cid, _ in search_ids(reader.conn, build_query(text), depth)]
            timing["lexical"] += time.perf_counter() - t0
            runs["lexical"][qid] = doc_ranking(reader, lexical)
            if emb is None or identity is None:
                continue
            t0 = time.perf_counter()
            vector = embed_query(emb, identity, text)
            t1 = time.perf_counter()
            nearest = [cid for cid, _ in knn(reader.conn, vector, depth)]
            timing["embed"] += t1 - t0
            timing["knn"] += time.perf_counter() - t1
            runs["vector"][qid] = doc_ranking(reader, nearest)
            runs["hybrid"][qid] = doc_ranking(reader, [cid for cid, _ in rrf([lexical, nearest])][:depth])
            quantised = knn_quantised(reader.conn, vector, depth)
            exact = knn_exact(reader.conn, vector, depth)
            recalls.append(min(depth, sum(1 for _, d in quantised if d <= exact[-1][1] + 1e-6)) / depth)
            runs["vector (quantised)"][qid] = doc_ranking(reader, [cid for cid, _ in quantised])
            runs["hybrid (quantised)"][qid] = doc_ranking(
                reader, [cid for cid, _ in rrf([lexical, [c for c, _ in quantised]])][:depth])
            t0 = time.perf_counter()
            hits = search(settings, text, 20, reader).hits
            timing["search()"] += time.perf_counter() - t0
            runs["search()"][qid] = cranfield.dedupe(cranfield.doc_id_from_path(h.path) for h in hits)
    count = len(queries)
    return {"runs": {k: v for k, v in runs.items() if v},
            "ms_per_query": {k: round(1000 * v / count, 2) for k, v in timing.items() if v},
            "knn_recall": round(sum(recalls) / len(recalls), 4) if recalls else None}


def markdown(result: dict[str, Any]) -> str:
    """The metrics as a markdown table."""
    lines = ["| tier | nDCG@10 | Recall@10 | Recall@100 | MRR@10 |", "| --- | --- | --- | --- | --- |"]
    for tier, m in result["metrics"].items():
        r100 = "n/a (top 20)" if tier == "search()" else f"{m['recall@100']:.3f}"
        lines.append(f"| {tier} | {m['ndcg@10']:.3f} | {m['recall@10']:.3f} | {r100} | {m['mrr@10']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Index Cranfield, rank every query per tier, print the metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=OUT / "quality")
    parser.add_argument("--data", type=Path, default=CRANFIELD, help="the Cranfield directory (bench/lib/cranfield.py)")
    parser.add_argument("--url", help="an OpenAI-compatible base URL serving all-MiniLM-L6-v2 (default: spawn one)")
    parser.add_argument("--lexical-only", action="store_true", help="no embeddings: the lexical row only")
    parser.add_argument("--document-prefix", default="", help="embeddings.document_prefix ({title} = breadcrumb)")
    parser.add_argument("--depth", type=int, default=100, help="candidates per tier (Recall@100 needs 100)")
    parser.add_argument("--keep", action="store_true", help="reuse an existing store instead of rebuilding it")
    parser.add_argument("--markdown", action="store_true", help="also print the markdown table")
    args = parser.parse_args(argv)
    server = None
    url = None if args.lexical_only else args.url
    try:
        if not args.lexical_only and url is None:
            server, url = spawn_server()
        settings, figures = build_store(args.out, url, args.document_prefix, fresh=not args.keep, data=args.data)
        ranked = rank_all(settings, args.depth, args.data)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    qrels = cranfield.load_qrels(args.data)
    metrics = {tier: {k: round(v, 4) for k, v in cranfield.evaluate(run, qrels).items()}
               for tier, run in ranked["runs"].items()}
    result = {"index": figures, "document_prefix": args.document_prefix, "depth": args.depth,
              "metrics": metrics, "ms_per_query": ranked["ms_per_query"], "knn_recall": ranked["knn_recall"]}
    print(json.dumps(result))
    if args.markdown:
        print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
