"""The tantivy side of bench_lexical.py, run as a file by the scratch virtualenv's python (stdlib + tantivy).

`python bench/tantivy_side.py INDEX_DIR CHUNKS_JSONL` indexes the chunk texts once (one document per
chunk: id, body, heading; English stemming; the index is reused when INDEX_DIR holds one), prints
`{"ready": true, "docs": N, "index_s": S}`, then answers one JSON line per query read on stdin,
`{"q": "words", "k": 10}`, with `{"ids": [...], "ms": M, "cpu_ms": C}`: the top k chunk ids by tantivy's BM25 over
body and heading (the heading boosted 2x, as knowledge weights it), terms OR-ed, and the wall and
process CPU time of parsing and searching measured inside this process. An empty line ends it.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import tantivy  # type: ignore[import-not-found]

TERM = re.compile(r"[^\W_]{2,}")


def schema() -> Any:
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("id", stored=True, indexed=True)
    builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
    builder.add_text_field("heading", stored=False, tokenizer_name="en_stem")
    return builder.build()


def build(index_dir: Path, chunks: Path) -> tuple[Any, float]:
    """The index at index_dir, made from chunks when absent; and the seconds indexing took (0 when reused)."""
    fresh = not (index_dir / "meta.json").exists()
    index_dir.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(schema(), path=str(index_dir))
    if not fresh:
        return index, 0.0
    started = time.perf_counter()
    writer = index.writer(heap_size=256_000_000, num_threads=1)
    with chunks.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            writer.add_document(tantivy.Document(id=row["id"], body=row["body"], heading=row["heading"]))
    writer.commit()
    writer.wait_merging_threads()
    return index, time.perf_counter() - started


def main() -> int:
    index, took = build(Path(sys.argv[1]), Path(sys.argv[2]))
    index.reload()
    searcher = index.searcher()
    print(json.dumps({"ready": True, "docs": searcher.num_docs, "index_s": round(took, 1)}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        ask = json.loads(line)
        words = " ".join(TERM.findall(ask["q"].lower()))
        started = time.perf_counter()
        cpu = time.process_time()
        ids: list[int] = []
        if words:
            query = index.parse_query(words, ["body", "heading"], field_boosts={"heading": 2.0})
            found = searcher.search(query, int(ask["k"]))
            ids = [int(searcher.doc(address)["id"][0]) for _, address in found.hits]
        ms = (time.perf_counter() - started) * 1000
        cpu_ms = (time.process_time() - cpu) * 1000
        print(json.dumps({"ids": ids, "ms": ms, "cpu_ms": cpu_ms}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
