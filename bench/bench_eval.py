"""Every judged collection at hand, one table: nDCG@10, Recall@100, MRR@10 per collection and ranking.

    .venv/bin/python -m bench.bench_eval --baseline main --realtree /tmp/realtree --markdown

Collections: Cranfield, CISI and SciFact-train from `--eval-dir` (each of them present there;
shared/eval beside the checkout by default), and, with `--realtree DIR` (the tree
bench/realtree/README.md builds), the real-tree cases of bench/realtree/fastapi_cases.jsonl (each
case judged by its one English page: nDCG@10 and MRR@10 of that page's rank, Recall@100 whether it is
in the first 100 documents, and `top5` how many cases find it in the top 5). Each collection is
written as `<id>.md` files and indexed once by this tree's pipeline into `--out` (kept between runs;
`--fresh` rebuilds), and both checkouts rank over the same stores.

Rows, per collection:

- `lexical`: this tree's lexical ranking (search_deep, the shipped stages, `--depth` sections deep);
  the difference columns are against `baseline`, the same ranking by `--baseline REF`'s code run
  from a detached worktree (bench/lib/checkout.py) in the same run;
- `- <stage>`: this tree's lexical ranking with one stage of query/rank/stages.py STAGES left out
  (query.rank.stages.without), its differences against `lexical`: a stage is worth its place when
  leaving it out costs the mean and gains nowhere more than 0.005;
- `set NAME=VALUE` (each `--set`): this tree's lexical ranking with a module constant set, e.g.
  `--set query.rank.evidence.DOCUMENT_WEIGHT=0.1` (a stage shipped at weight 0, measured switched on),
  its differences against `lexical`;
- `fts5 bm25 (whole documents)`: the reference: one FTS5 row per document (title + text, porter
  tokenizer), an OR of the query's words, ranked by FTS5's bm25.

The vector and hybrid rankings need the model environment (bench/setup_model_env.sh, bench/.venv);
without it the run says so and measures the lexical rows only. Prints one JSON object, and with
--markdown the table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lib import cranfield
from bench.lib.checkout import baseline_tree, tree_python
from bench.lib.embedding import MODEL
from bench.lib.machine import machine
from bench.lib.paths import BENCH, CRANFIELD, OUT, ROOT
from config.loader import settings_from_mapping
from workers.engine import InProcessEngine
from workers.run import RunRequest

EVAL_DIR = CRANFIELD.parent
JUDGED = ("cranfield", "cisi", "scifact-train")
REALTREE = "realtree"
REALTREE_PROJECTS = ("fastapi", "pydantic", "sqlmodel", "typer")
CASES = BENCH / "realtree" / "fastapi_cases.jsonl"
WORKER = BENCH / "lib" / "evalrun.py"
METRICS = ("ndcg@10", "recall@100", "mrr@10")
NOISE = 0.005
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Collection:
    """One judged collection: its store, its queries, its judgments ({qid: {docid: gain}}), how a path maps."""

    name: str
    store: Path
    queries: dict[str, str]
    qrels: cranfield.Qrels
    root: str = ""  # the real tree's directory and a slash: its judged ids are the stored paths under it
    embeddings: dict[str, str] | None = None  # the store's embeddings block (--embed-url): hybrid is ranked too

    def docids(self, paths: list[str]) -> list[str]:
        """The judged ids of a ranking's stored paths."""
        if self.root:
            return [p.removeprefix(self.root) for p in paths]
        return cranfield.dedupe(Path(p).stem for p in paths)


def _index(paths: list[Path], store: Path, embeddings: dict[str, str] | None) -> None:
    """Index paths into store with this tree's pipeline (with vectors when an embeddings block is given)."""
    settings = settings_from_mapping({"paths": [str(p) for p in paths], "directory": str(store),
                                      **({"embeddings": embeddings} if embeddings else {})})
    with InProcessEngine(settings) as engine:
        engine.run(RunRequest())


def judged_collection(name: str, data: Path, out: Path, fresh: bool,
                      embeddings: dict[str, str] | None = None) -> Collection:
    """A BEIR-layout collection written as `<id>.md` and indexed (once) under out/name."""
    home = out / name
    if fresh:
        shutil.rmtree(home, ignore_errors=True)
    if not (home / "indexed").exists():
        cranfield.write_corpus(home / "docs", data)
        _index([home / "docs"], home / "store", embeddings)
        (home / "indexed").write_text("", encoding="utf-8")
    qrels = {q: gains for q, gains in cranfield.load_qrels(data).items() if any(g > 0 for g in gains.values())}
    queries = {q: t for q, t in cranfield.load_queries(data).items() if q in qrels}
    return Collection(name, home / "store", queries, qrels, embeddings=embeddings)


def realtree_collection(tree: Path, out: Path, fresh: bool, cases: Path,
                        embeddings: dict[str, str] | None = None) -> Collection:
    """The real tree's cases over its store (indexed once under out/realtree); judged by each case's page."""
    home = out / REALTREE
    if fresh:
        shutil.rmtree(home, ignore_errors=True)
    if not (home / "indexed").exists():
        _index([tree.resolve() / p for p in REALTREE_PROJECTS if (tree / p).is_dir()], home / "store", embeddings)
        (home / "indexed").write_text("", encoding="utf-8")
    lines = [json.loads(line) for line in cases.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    queries = {str(i): case["query"] for i, case in enumerate(lines, start=1)}
    return Collection(REALTREE, home / "store", queries,
                      {str(i): {case["expect"]: 1} for i, case in enumerate(lines, start=1)}, f"{tree.resolve()}/",
                      embeddings)


def _documents(collection: Collection, data: Path | None, tree: Path | None) -> Iterator[tuple[str, str]]:
    """(judged id, whole text) of every document of a collection."""
    if data is not None:
        with open(data / "corpus.jsonl", encoding="utf-8") as lines:
            for doc in map(json.loads, lines):
                yield str(doc["_id"]), f"{doc['title']}\n{doc['text']}"
    elif tree is not None:
        for project in REALTREE_PROJECTS:
            for path in sorted((tree / project).rglob("*.md")):
                yield path.relative_to(tree).as_posix(), path.read_text(encoding="utf-8", errors="replace")


def fts5_reference(collection: Collection, data: Path | None, tree: Path | None, depth: int) -> cranfield.Run:
    """Plain FTS5 over whole documents: one porter row each, an OR of the query's words, bm25 order."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE d USING fts5(id UNINDEXED, body, tokenize='porter unicode61')")
    conn.executemany("INSERT INTO d(id, body) VALUES (?, ?)", _documents(collection, data, tree))
    run: cranfield.Run = {}
    for qid, text in collection.queries.items():
        words = dict.fromkeys(w.lower() for w in _WORD.findall(text))
        expression = " OR ".join(f'"{w}"' for w in words)
        rows = conn.execute("SELECT id FROM d WHERE d MATCH ? ORDER BY bm25(d) LIMIT ?",
                            (expression, depth)).fetchall() if expression else []
        run[qid] = [str(r[0]) for r in rows]
    conn.close()
    return run


def checkout_rankings(tree: Path, collections: list[Collection], depth: int,
                      variants: list[tuple[str, list[str], dict[str, Any]]], out: Path, label: str) -> dict[str, Any]:
    """The worker's rankings (bench/lib/evalrun.py) with tree's code first on the path."""
    spec = {"collections": [{"name": c.name, "store": str(c.store), "queries": c.queries, "embeddings": c.embeddings}
                            for c in collections],
            "depth": depth, "variants": variants,
            "tiers": ["lexical", "hybrid"] if any(c.embeddings for c in collections) else ["lexical"]}
    spec_file, out_file = out / f"spec-{label}-{os.getpid()}.json", out / f"rankings-{label}-{os.getpid()}.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    command, env = tree_python(tree, str(WORKER), str(spec_file), str(out_file))
    subprocess.run(command, env=env, check=True)
    result: dict[str, Any] = json.loads(out_file.read_text(encoding="utf-8"))
    return result


def _embeddings(args: argparse.Namespace) -> dict[str, str] | None:
    """The stores' embeddings block: the server --embed-url names, serving all-MiniLM-L6-v2; None: lexical."""
    return {"base_url": args.embed_url, "model": MODEL} if args.embed_url else None


def scores(collection: Collection, run: dict[str, list[str]], docids: bool = True) -> dict[str, float]:
    """The collection's mean metrics of a run of stored paths (docids False: already judged ids), and top5."""
    mapped = {q: collection.docids(paths) if docids else paths for q, paths in run.items()}
    means = cranfield.evaluate(mapped, collection.qrels)
    top5 = sum(any(collection.qrels[q].get(d, 0) > 0 for d in mapped.get(q, [])[:5]) for q in collection.qrels)
    return {m: round(means[m], 4) for m in METRICS} | {"top5": top5, "queries": len(collection.qrels)}


def table(result: dict[str, Any]) -> str:
    """The markdown table: per collection, each row's metrics and its difference from the row it is read against."""
    lines = ["| collection | ranking | nDCG@10 | Δ | Recall@100 | Δ | MRR@10 | Δ | top 5 | against |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, rows in result["collections"].items():
        for label, row in rows.items():
            against = row.get("against")
            base = rows.get(against) if against else None
            cells = []
            for m in METRICS:
                cells.append(f"{row[m]:.3f}")
                cells.append(f"{row[m] - base[m]:+.3f}" if base else "")
            top5 = f"{row['top5']} of {row['queries']}"
            lines.append(f"| {name} | {label} | {' | '.join(cells)} | {top5} | {against or ''} |")
    return "\n".join(lines)


def gather(args: argparse.Namespace) -> tuple[list[Collection], dict[str, tuple[Path | None, Path | None]]]:
    """The collections at hand (their stores built once) and where each one's documents are read from."""
    chosen = None if args.only is None else set(args.only.split(","))
    sources: dict[str, tuple[Path | None, Path | None]] = {}
    collections: list[Collection] = []
    for name in JUDGED:
        data = args.eval_dir / name
        if (data / "qrels.tsv").exists() and (chosen is None or name in chosen):
            collections.append(judged_collection(name, data, args.out, args.fresh, _embeddings(args)))
            sources[name] = (data, None)
    if args.realtree is not None and (chosen is None or REALTREE in chosen):
        collections.append(realtree_collection(args.realtree, args.out, args.fresh, args.cases, _embeddings(args)))
        sources[REALTREE] = (None, args.realtree)
    return collections, sources


def means(out: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each row's metrics averaged over the collections (top 5: summed), for the rows every collection has."""
    first = next(iter(out.values()))
    mean: dict[str, dict[str, Any]] = {}
    for label, row in first.items():
        if all(label in rows for rows in out.values()):
            mean[label] = {m: round(sum(rows[label][m] for rows in out.values()) / len(out), 4) for m in METRICS}
            mean[label] |= {"top5": sum(rows[label]["top5"] for rows in out.values()),
                            "queries": sum(rows[label]["queries"] for rows in out.values())}
            if "against" in row:
                mean[label]["against"] = row["against"]
    return mean


def _rows(c: Collection, runs: dict[str, Any], variants: list[tuple[str, list[str], dict[str, Any]]],
          source: tuple[Path | None, Path | None], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """One collection's rows: this tree's lexical (and hybrid), the baseline's, each ablation, plain FTS5."""
    rows: dict[str, dict[str, Any]] = {}
    rows["lexical"] = scores(c, runs["this"]["lexical"][c.name]) | ({"against": "baseline"} if args.baseline else {})
    if args.baseline:
        rows["baseline"] = scores(c, runs["baseline"]["lexical"][c.name])
    if "hybrid" in runs["this"]:
        rows["hybrid"] = scores(c, runs["this"]["hybrid"][c.name]) | (
            {"against": "baseline hybrid"} if args.baseline else {})
        if args.baseline:
            rows["baseline hybrid"] = scores(c, runs["baseline"]["hybrid"][c.name])
    for label, _, _ in variants[1:]:
        rows[label] = scores(c, runs["this"][label][c.name]) | {"against": "lexical"}
    data, tree_dir = source
    rows["fts5 bm25 (whole documents)"] = scores(c, fts5_reference(c, data, tree_dir, args.depth), False) | {
        "against": "lexical"}
    return rows


def main(argv: list[str] | None = None) -> int:
    """Build the stores, rank with both checkouts and every ablation, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR, help="holds cranfield/, cisi/, scifact-train/")
    parser.add_argument("--realtree", type=Path, help="the real tree (bench/realtree/README.md): fastapi/, ...")
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("--baseline", metavar="REF", help="also rank with this commit's code (detached worktree)")
    parser.add_argument("--out", type=Path, default=OUT / "eval")
    parser.add_argument("--fresh", action="store_true", help="rebuild the stores")
    parser.add_argument("--depth", type=int, default=100, help="sections ranked per query (Recall@100 needs 100)")
    parser.add_argument("--ablate", default=None,
                        help="comma-separated stages to leave out one at a time (default: every stage but fusion)")
    parser.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                        help="a row with a constant set to a JSON value (query.rank.evidence.DOCUMENT_WEIGHT=0.1)")
    parser.add_argument("--only", default=None, help="comma-separated collections to run (default: all at hand)")
    parser.add_argument("--markdown", action="store_true", help="also print the markdown table")
    parser.add_argument("--embed-url", default=None,
                        help="an OpenAI-compatible /v1 serving all-MiniLM-L6-v2 (bench/embed_server.py): the stores "
                             "get vectors (under OUT/vectors) and hybrid is ranked too, by both checkouts")
    args = parser.parse_args(argv)
    if args.embed_url:
        args.out = args.out / "vectors"
    from query.rank.stages import STAGES

    args.out.mkdir(parents=True, exist_ok=True)
    described = machine()  # the load average at the start
    started = time.monotonic()
    collections, sources = gather(args)
    indexed = time.monotonic() - started
    stages = [s.__name__ for s in STAGES if s.__name__ != "fusion"] if args.ablate is None else \
        [s for s in args.ablate.split(",") if s]
    variants: list[tuple[str, list[str], dict[str, Any]]] = [("lexical", [], {})]
    variants += [(f"- {s}", [s], {}) for s in stages]
    for setting in args.set:
        name, value = setting.split("=", 1)
        variants.append((f"set {setting}", [], {name: json.loads(value)}))
    runs = {"this": checkout_rankings(ROOT, collections, args.depth, variants, args.out, "this")}
    if args.baseline:
        tree = baseline_tree(args.baseline, args.out)
        runs["baseline"] = checkout_rankings(tree, collections, args.depth, [("lexical", [], {})], args.out, "baseline")
    out = {c.name: _rows(c, runs, variants, sources[c.name], args) for c in collections}
    if collections:
        out["mean"] = means(out)
    tiers = "lexical and hybrid (all-MiniLM-L6-v2)" if args.embed_url else (
        "lexical; hybrid with --embed-url (bench/embed_server.py under bench/.venv: bench/setup_model_env.sh)")
    result = {"machine": described, "load_at_end": round(os.getloadavg()[0], 2), "depth": args.depth,
              "baseline": args.baseline, "tiers": tiers,
              "seconds": {"index": round(indexed, 1), "total": round(time.monotonic() - started, 1)},
              "collections": out}
    print(json.dumps(result))
    if args.markdown:
        print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
