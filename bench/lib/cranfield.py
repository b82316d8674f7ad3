"""Cranfield retrieval-quality helpers: corpus export, queries, judgments and IR metrics.

Data: shared/eval/cranfield beside the repository (see its README). A run is
{query_id: [doc_id, ...]} in rank order; several hits of one document count once, at their
best rank. Metrics are averaged over the judged queries (a judged query missing from the run
scores 0): nDCG@10 with graded linear gains and a log2(rank + 1) discount, the ideal ranking
built from all judged documents of the query; Recall@10, Recall@100 and MRR@10 count a
document as relevant when its judged gain is > 0.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from bench.lib.paths import CRANFIELD

DATA_DIR = CRANFIELD

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[str]]

_DOC_FILE = re.compile(r"^(\d+)\.md$")


def write_corpus(out_dir: Path, data_dir: Path = DATA_DIR) -> int:
    """Write each document as <_id>.md ('# <title>', blank line, text); return how many."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(data_dir / "corpus.jsonl", encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            text = f"# {doc['title']}\n\n{doc['text']}\n"
            (out_dir / f"{doc['_id']}.md").write_text(text, encoding="utf-8")
            count += 1
    return count


def load_queries(data_dir: Path = DATA_DIR) -> dict[str, str]:
    """Return {query_id: query text} for all 225 queries."""
    with open(data_dir / "queries.jsonl", encoding="utf-8") as lines:
        return {q["_id"]: q["text"] for q in map(json.loads, lines) if q}


def load_qrels(data_dir: Path = DATA_DIR) -> Qrels:
    """Return {query_id: {doc_id: gain}} from qrels.tsv (gain 4 = most relevant)."""
    qrels: Qrels = {}
    with open(data_dir / "qrels.tsv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return qrels


def doc_id_from_path(path: str | Path) -> str:
    """Return the document id of a citation path like '.../184.md' (a '#' or ':' suffix is ignored)."""
    name = re.split(r"[#:]", Path(str(path)).name, maxsplit=1)[0]
    match = _DOC_FILE.match(name)
    if match is None:
        raise ValueError(f"not a Cranfield document path: {path!r}")
    return match.group(1)


def dedupe(doc_ids: Iterable[str]) -> list[str]:
    """Return doc ids in order, each kept only at its first (best) rank."""
    return list(dict.fromkeys(doc_ids))


def ndcg_at(ranked: Sequence[str], gains: dict[str, int], k: int = 10) -> float:
    """Return nDCG@k: sum gain/log2(rank+1) over the top k, divided by the ideal ranking's."""
    dcg = sum(gains.get(d, 0) / math.log2(r + 2) for r, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], gains: dict[str, int], k: int) -> float:
    """Return the fraction of relevant documents (gain > 0) found in the top k."""
    relevant = {d for d, g in gains.items() if g > 0}
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], gains: dict[str, int], k: int = 10) -> float:
    """Return 1/rank of the first relevant document in the top k, or 0."""
    for r, d in enumerate(ranked[:k]):
        if gains.get(d, 0) > 0:
            return 1.0 / (r + 1)
    return 0.0


def evaluate(run: Run, qrels: Qrels | None = None) -> dict[str, float]:
    """Return mean nDCG@10, Recall@10, Recall@100 and MRR@10 of `run` over the judged queries."""
    qrels = load_qrels() if qrels is None else qrels
    judged = [q for q, gains in qrels.items() if any(g > 0 for g in gains.values())]
    totals = {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for qid in judged:
        ranked = dedupe(run.get(qid, []))
        gains = qrels[qid]
        totals["ndcg@10"] += ndcg_at(ranked, gains, 10)
        totals["recall@10"] += recall_at(ranked, gains, 10)
        totals["recall@100"] += recall_at(ranked, gains, 100)
        totals["mrr@10"] += mrr_at(ranked, gains, 10)
    n = len(judged)
    return {name: (total / n if n else 0.0) for name, total in totals.items()} | {"queries": float(n)}
