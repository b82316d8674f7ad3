"""Lexical indexing benchmark: the floor against `knowledge index` on the embedded default.

In one run, on one generated corpus:
  (a) floor: one process reads, hashes, chunks and inserts every file with the project's own
      chunker and Store (one transaction per document), no queue, no threads;
  (b) `knowledge index` (the embedded default: Dramatiq StubBroker, ingest threads, one writer
      thread), first run into an empty store;
  (c) `knowledge index` again with nothing changed (the stat fast path).
Reports seconds and the ratios (b)/(a) and (c) in seconds. Usage:

    .venv/bin/python bench/bench_index.py --files 10000 [--out bench/out/index]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from corpus import generate  # noqa: E402

from pipeline.files import ingest_file  # noqa: E402
from pipeline.models import FileJob  # noqa: E402
from pipeline.store import Store  # noqa: E402
from pipeline.walker import walk_root  # noqa: E402


def floor(corpus: Path, store_dir: Path) -> float:
    """Seconds for a single process to walk, read, hash, chunk and insert every file."""
    shutil.rmtree(store_dir, ignore_errors=True)
    start = time.perf_counter()
    store = Store(store_dir / "knowledge.db")
    for found in walk_root(str(corpus)).files:
        doc = ingest_file(FileJob(found.path, found.root, found.size, found.mtime_ns, None))
        store.apply(doc)  # type: ignore[arg-type]
    store.close()
    return time.perf_counter() - start


def knowledge_index(corpus: Path, store_base: Path) -> tuple[float, dict]:
    """Seconds and JSON summary of `knowledge index CORPUS --json` as a user runs it."""
    exe = Path(sys.executable).with_name("knowledge")
    env = {**os.environ, "KNOWLEDGE_STORE_DIR": str(store_base)}
    env.pop("KNOWLEDGE_BROKER_URL", None)
    start = time.perf_counter()
    proc = subprocess.run([str(exe), "index", str(corpus), "--json"], capture_output=True, text=True, env=env,
                          check=True)
    return time.perf_counter() - start, json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "index")
    args = parser.parse_args()
    corpus = args.out / "corpus"
    if not (corpus.exists() and sum(1 for _ in corpus.rglob("*.md")) == args.files):
        shutil.rmtree(corpus, ignore_errors=True)
        generate(corpus, args.files, 1)
    mb = sum(p.stat().st_size for p in corpus.rglob("*.md")) / 1e6
    floor_s = floor(corpus, args.out / "floor")
    store_base = args.out / "embedded"
    shutil.rmtree(store_base, ignore_errors=True)
    first_s, first = knowledge_index(corpus, store_base)
    again_s, again = knowledge_index(corpus, store_base)
    result = {
        "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "files": args.files, "megabytes": round(mb, 1), "chunks": first["chunks"],
        "floor_s": round(floor_s, 2), "first_run_s": round(first_s, 2), "no_change_s": round(again_s, 2),
        "first_run_over_floor": round(first_s / floor_s, 2),
        "first_added": first["added"], "no_change_unchanged": again["unchanged"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
