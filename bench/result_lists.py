"""Record the result lists of search and match over one store, and compare two recordings.

    .venv/bin/python bench/result_lists.py record --code /tmp/main-ref --store bench/out/query/store-100000 \
        --out bench/out/lists-main.json
    .venv/bin/python bench/result_lists.py record --code . --store bench/out/query/store-100000 \
        --out bench/out/lists-branch.json
    .venv/bin/python bench/result_lists.py compare bench/out/lists-main.json bench/out/lists-branch.json

`record` imports the query package from --code (a checkout, e.g. main's tree from `git archive`),
so two recordings of the same store compare two versions of the code. The queries are
bench_query.py's (the same seed gives the same 300 text and 300 keyword queries), plus each
text query with its first word excluded (`-word`), so the exclusion path is covered. Recorded per
query:

- lexical candidates: query.lexical.search_ids at the user fan-out (50), ids in order and scores;
- search: query.search.search (lexical, top_k 10), the hits' ids, refs, sections and scores;
- match: query.enumerate.enumerate_documents with no limit, every matching document in order with
  its counts and first section, the total, and the per-term reports.

`time` prints the p50/p95 (wall) and CPU p50 of the text queries through --code's lexical search
(warm reader, top 5) and match (a reader per call, limit 50), as bench_query.py measures them;
alternate two codes (main, branch, main, branch) to compare them at the same load.

`compare` reports every difference: ids or order differ, a score differs by more than 1e-9
(relative), a match set or count differs. It exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
TOLERANCE = 1e-9


def record(code: Path, store: Path, queries: int, seed: int, out: Path) -> None:
    """Run every query through code's search and match over store, and write the lists as JSON."""
    sys.path.insert(0, str(BENCH))
    from bench_query import keyword_queries, sample_queries  # queries from this tree: the same for every code

    from config.loader import settings_from_mapping

    settings = settings_from_mapping({}, store_base=store.resolve())
    text = sample_queries(settings, queries, seed)
    keywords = keyword_queries(settings, queries, seed)
    excluding = [f"{q} -{q.split()[0]}" for q in text if len(q.split()) > 1]
    for name in [m for m in sys.modules if m.split(".")[0] in ("query", "pipeline", "config")]:
        del sys.modules[name]
    sys.path.insert(0, str(code.resolve()))
    import query
    from config.loader import settings_from_mapping as code_settings
    from query.enumerate import enumerate_documents
    from query.lexical import FANOUT, search_ids
    from query.reader import Reader
    from query.search import search
    from query.terms import build_query
    print(f"query package from {Path(query.__path__[0]).resolve()}", file=sys.stderr)
    settings = code_settings({}, store_base=store.resolve())
    lists: dict[str, Any] = {}
    with Reader(settings) as reader:
        for kind, mix in (("text", text), ("keyword", keywords), ("excluding", excluding)):
            for q in mix:
                key = f"{kind}:{q}"
                if key in lists:
                    continue
                candidates = search_ids(reader.conn, build_query(q), FANOUT)
                response = search(settings, q, 10, reader)
                entry: dict[str, Any] = {
                    "candidates": [[cid, score] for cid, score in candidates],
                    "search": [[h.chunk_id, h.index_ref, h.section, h.score] for h in response.hits],
                    "search_note": response.note,
                }
                if kind != "excluding":
                    found = enumerate_documents(settings, q, None, reader=reader)
                    entry["match"] = {
                        "status": found.status, "matched": found.matched, "note": found.note,
                        "terms": [t.to_json() for t in found.terms],
                        "documents": [[d.path, d.body_matches, d.heading_matches, d.ordinal, d.section]
                                      for d in found.documents],
                    }
                lists[key] = entry
    out.write_text(json.dumps(lists))
    print(f"recorded {len(lists)} queries into {out}", file=sys.stderr)


def timing(code: Path, store: Path, queries: int, seed: int) -> None:
    """Print p50/p95 wall and CPU ms of code's lexical search (warm reader) and match (reader per call)."""
    import statistics
    import time

    sys.path.insert(0, str(BENCH))
    from bench_query import sample_queries

    from config.loader import settings_from_mapping

    text = sample_queries(settings_from_mapping({}, store_base=store.resolve()), queries, seed)
    for name in [m for m in sys.modules if m.split(".")[0] in ("query", "pipeline", "config")]:
        del sys.modules[name]
    sys.path.insert(0, str(code.resolve()))
    from config.loader import settings_from_mapping as code_settings
    from query.enumerate import enumerate_documents
    from query.reader import Reader
    from query.search import search

    settings = code_settings({}, store_base=store.resolve())

    def run(fn: Any) -> dict[str, float]:
        for q in text[:10]:
            fn(q)
        wall, cpu = [], []
        for q in text:
            w, c = time.perf_counter(), time.thread_time()
            fn(q)
            cpu.append(time.thread_time() - c)
            wall.append(time.perf_counter() - w)
        p95 = max(0, -(-len(text) * 95 // 100) - 1)
        return {"p50_ms": round(statistics.median(wall) * 1000, 2), "p95_ms": round(sorted(wall)[p95] * 1000, 2),
                "cpu_p50_ms": round(statistics.median(cpu) * 1000, 2)}

    with Reader(settings) as reader:
        found = {"search_lexical_warm": run(lambda q: search(settings, q, 5, reader))}
    found["match"] = run(lambda q: enumerate_documents(settings, q, 50))
    print(json.dumps({"code": str(code), **found}), flush=True)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Every way new's lists differ from old's, one line each."""
    out: list[str] = []
    if old.keys() != new.keys():
        out.append(f"query sets differ: {len(old.keys() ^ new.keys())} queries in one recording only")
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        for part in ("candidates", "search"):
            ids_a = [row[:-1] for row in a[part]]
            ids_b = [row[:-1] for row in b[part]]
            if ids_a != ids_b:
                out.append(f"{key}: {part} ids or order differ")
            elif not all(_close(x[-1], y[-1]) for x, y in zip(a[part], b[part])):
                out.append(f"{key}: {part} scores differ beyond {TOLERANCE}")
        if a["search_note"] != b["search_note"]:
            out.append(f"{key}: search notes differ")
        if a.get("match") != b.get("match"):
            out.append(f"{key}: match answers differ")
    return out


def main() -> None:
    """record or compare."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    rec = verbs.add_parser("record")
    rec.add_argument("--code", type=Path, required=True, help="the checkout whose query package answers")
    rec.add_argument("--store", type=Path, required=True, help="the store's base directory (bench_query's store-N)")
    rec.add_argument("--queries", type=int, default=300)
    rec.add_argument("--seed", type=int, default=1)
    rec.add_argument("--out", type=Path, required=True)
    tim = verbs.add_parser("time", help="p50/p95 of text search and match with --code (run it ABAB for two codes)")
    tim.add_argument("--code", type=Path, required=True)
    tim.add_argument("--store", type=Path, required=True)
    tim.add_argument("--queries", type=int, default=300)
    tim.add_argument("--seed", type=int, default=1)
    cmp = verbs.add_parser("compare")
    cmp.add_argument("old", type=Path)
    cmp.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.verb == "record":
        record(args.code, args.store, args.queries, args.seed, args.out)
        return
    if args.verb == "time":
        timing(args.code, args.store, args.queries, args.seed)
        return
    old, new = json.loads(args.old.read_text()), json.loads(args.new.read_text())
    found = differences(old, new)
    kinds: dict[str, int] = {}
    for key in old:
        kinds[key.split(":")[0]] = kinds.get(key.split(":")[0], 0) + 1
    documents = sum(len(v["match"]["documents"]) for v in old.values() if "match" in v)
    print(f"{len(old)} queries ({', '.join(f'{n} {k}' for k, n in kinds.items())}); "
          f"{documents} matched documents listed in all")
    for line in found[:50]:
        print(line)
    print("identical" if not found else f"{len(found)} differences")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
