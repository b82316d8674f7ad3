"""Interleaved A/B of query/topk.py's pruned top k: another checkout's exact_top_k against this tree's.

    .venv/bin/python bench/topk_ab.py --code /tmp/main-ref --store bench/out/query/store-100000
    .venv/bin/python bench/topk_ab.py --code /tmp/main-ref --store <1.32M store base> --first 30 --count 90

For each of bench_query.py's text queries (seed 1) that keeps two or more terms after
query/frequency.py drops the common ones, both versions answer it twice, alternately (old, new,
old, new) on one warm reader, each including the full query it falls back to when it declines to
prune; the faster of each pair's CPU time (`time.thread_time`) is kept. Both answers must be equal
(rows, order and scores) or the run stops. Prints one line per query (old ms, new ms, terms) and
the p50 and sum of each: read them as ratios of one sitting, the load moves both alike.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from bench_query import sample_queries  # noqa: E402

from config.loader import settings_from_mapping  # noqa: E402
from query import topk  # noqa: E402
from query.frequency import without_common  # noqa: E402
from query.lexical import FANOUT, WEIGHTS  # noqa: E402
from query.reader import Reader  # noqa: E402
from query.terms import build_query  # noqa: E402

FULL = (f"SELECT rowid, bm25(chunks_fts, {WEIGHTS}) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
        " ORDER BY score, rowid LIMIT ?")


def main() -> None:
    """Time both versions over the multi-term text queries and print the per-query and overall figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", type=Path, required=True, help="the checkout whose query/topk.py is the old one")
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--first", type=int, default=0, help="skip this many of the 300 text queries")
    parser.add_argument("--count", type=int, default=300)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("old_topk", args.code / "query" / "topk.py")
    assert spec is not None and spec.loader is not None
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    settings = settings_from_mapping({}, store_base=args.store.resolve())
    queries = sample_queries(settings, 300, 1)[args.first : args.first + args.count]
    found: list[tuple[float, float]] = []
    with Reader(settings) as reader:
        conn = reader.conn
        for text in queries:
            query = without_common(conn, build_query(text), FANOUT)
            if len(query.terms) < 2:
                continue
            cpu: list[float] = []
            answers = []
            for version in (old, topk, old, topk):
                began = time.thread_time()
                answer = version.exact_top_k(conn, query, FANOUT, WEIGHTS)
                if answer is None:
                    answer = [(int(r[0]), float(r[1])) for r in conn.execute(FULL, (query.expression, FANOUT))]
                cpu.append(time.thread_time() - began)
                answers.append(answer)
            assert answers[0] == answers[1] == answers[2] == answers[3], text
            found.append((min(cpu[0], cpu[2]) * 1000, min(cpu[1], cpu[3]) * 1000))
            print(f"{found[-1][0]:.1f} {found[-1][1]:.1f} {' '.join(query.terms)}", flush=True)
    for name, i in (("old", 0), ("new", 1)):
        print(f"{name}: p50 {statistics.median(f[i] for f in found):.1f} ms CPU, sum {sum(f[i] for f in found):.0f} ms"
              f" over {len(found)} queries")


if __name__ == "__main__":
    main()
