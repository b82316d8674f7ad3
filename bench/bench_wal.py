"""The WAL after `knowledge index --reindex` while serve's readers stay open: does it shrink?

On one generated corpus, for this tree's code (and with --baseline REF, that commit's code too, from a
detached worktree under --out): a first `knowledge index` into an empty store; then `--searchers`
threads of this process search the store in a loop through one ReadIndex (serve's pool of Readers)
and, with --hold S, one more connection holds a read transaction for the first S seconds of the run (a
long query, an export), while `knowledge index --reindex` rewrites every document. Reports the WAL's
peak during the run, its size once the run has ended (the readers still open), the store's size,
the run's seconds and the searches answered. Usage:

    .venv/bin/python -m bench.bench_wal --files 3000 --hold 5 [--baseline main] [--out bench/out/wal]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.lib.checkout import baseline_tree, tree_python
from bench.lib.corpus import generate
from bench.lib.paths import ROOT
from config.loader import settings_from_mapping
from pipeline import db
from query.read_index import ReadIndex
from query.requests import SearchRequest
from query.service import QueryService

WORDS = ("the", "procedure", "configuration", "install", "error", "release", "backup", "network")


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _knowledge(tree: Path, store: Path, *args: str) -> subprocess.Popen[bytes]:
    command, env = tree_python(tree, "-c", "import sys, cli; sys.argv[0] = 'knowledge'; cli.run()", *args)
    env["KNOWLEDGE_STORE_DIR"] = str(store)
    return subprocess.Popen(command, env=env, cwd=store.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def measure(tree: Path, corpus: Path, out: Path, searchers: int, hold: float) -> dict[str, Any]:
    """One first index then one re-index under readers, by tree's code; the figures."""
    store = out / f"store-{tree.name}"
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True)
    first = _knowledge(tree, store, "index", str(corpus))
    if first.wait() != 0:
        raise SystemExit(f"the first index failed: {first.stderr.read().decode() if first.stderr else ''}")
    settings = settings_from_mapping({}, store_base=store)
    wal = Path(f"{settings.db_path}-wal")
    index = ReadIndex(settings, searchers)
    service = QueryService(settings, index)
    stop = threading.Event()
    answered = [0] * searchers

    def search(slot: int) -> None:
        while not stop.is_set():
            service.search(SearchRequest(WORDS[answered[slot] % len(WORDS)], 10))
            answered[slot] += 1

    threads = [threading.Thread(target=search, args=(i,), daemon=True) for i in range(searchers)]
    for thread in threads:
        thread.start()
    pin = db.connect_readonly(settings.db_path)
    if hold > 0:
        pin.execute("BEGIN")
        pin.execute("SELECT count(*) FROM chunks").fetchone()
    started = time.monotonic()
    run = _knowledge(tree, store, "index", str(corpus), "--reindex")
    peak = 0
    while run.poll() is None:
        peak = max(peak, _size(wal))
        if pin.in_transaction and time.monotonic() - started > hold:
            pin.execute("COMMIT")
        time.sleep(0.05)
    seconds = time.monotonic() - started
    if pin.in_transaction:
        pin.execute("COMMIT")
    after = _size(wal)  # the readers are still open and searching
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    pin.close()
    index.close()
    return {"code": tree.name, "exit": run.returncode, "reindex_s": round(seconds, 1),
            "wal_peak_mb": round(peak / 1e6, 1), "wal_after_mb": round(after / 1e6, 1),
            "store_mb": round(_size(settings.db_path) / 1e6, 1),
            "searches": sum(answered)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--searchers", type=int, default=4)
    parser.add_argument("--hold", type=float, default=0.0, help="seconds one reader holds a read transaction")
    parser.add_argument("--baseline", default=None, help="also measure this commit's code (first)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "wal")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = args.out / f"corpus-{args.files}-{args.seed}"
    if not corpus.exists():
        generate(corpus, args.files, args.seed)
    trees = ([baseline_tree(args.baseline, args.out)] if args.baseline else []) + [ROOT]
    for tree in trees:
        print(json.dumps(measure(tree, corpus, args.out, args.searchers, args.hold)), flush=True)


if __name__ == "__main__":
    main()
