"""The result lists and text-query timings of whichever query package comes first on the path.

Run as a file by bench/result_lists.py with another checkout first on the path
(bench.lib.checkout.tree_python): `python -P bench/lib/lists.py record|time STORE QUERIES.json [OUT]`.
It imports only the standard library at the top, so every project import is the checkout's.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def record(store: Path, queries: dict[str, list[str]], out: Path) -> None:
    """Run every query through search and match over store, and write the lists as JSON."""
    import query
    from config.loader import settings_from_mapping
    from query.enumerate import enumerate_documents
    from query.lexical.tier import FANOUT, search_ids
    from query.reader import Reader
    from query.search import search
    from query.terms import build_query

    print(f"query package from {Path(query.__path__[0]).resolve()}", file=sys.stderr)
    settings = settings_from_mapping({}, store_base=store.resolve())
    lists: dict[str, Any] = {}
    with Reader(settings) as reader:
        for kind in ("text", "keyword", "excluding"):
            for q in queries[kind]:
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


def timing(store: Path, text: list[str]) -> dict[str, dict[str, float]]:
    """p50/p95 wall and CPU ms of lexical search (warm reader, top 5) and match (reader per call, limit 50)."""
    from config.loader import settings_from_mapping
    from query.reader import Reader
    from query.requests import MatchRequest
    from query.search import search
    from query.service import QueryService

    settings = settings_from_mapping({}, store_base=store.resolve())

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
    found["match"] = run(lambda q: QueryService(settings).enumerate(MatchRequest(q, limit=50)).result)
    return found


if __name__ == "__main__":
    verb, store_arg, queries_arg = sys.argv[1:4]
    asked = json.loads(Path(queries_arg).read_text())
    if verb == "record":
        record(Path(store_arg), asked, Path(sys.argv[4]))
    else:
        print(json.dumps(timing(Path(store_arg), asked["text"])))
