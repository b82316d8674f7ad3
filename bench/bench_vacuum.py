"""Space after large deletions: `auto_vacuum = INCREMENTAL` + `incremental_vacuum` against a plain `VACUUM`.

On one generated corpus, twice (once per mode), with the project's own chunker and Store:
  1. index every file (one transaction per document) and record the time and the file size;
  2. remove `--remove` of the documents (one transaction each, as `knowledge rm` does);
  3. optionally merge the FTS5 segments (`optimize`: deleted rows stay as tombstones until a
     merge), then give the space back: INCREMENTAL runs `PRAGMA incremental_vacuum` (what knowledge does after
     a large deletion), NONE runs a full `VACUUM` (what a `knowledge vacuum` command would do);
  4. record the file size after the writer closes (WAL checkpointed), and the wall and CPU time
     (this process's) of steps 1, 2 and 3: CPU time is the steadier figure on a shared machine.
Usage:

    .venv/bin/python bench/bench_vacuum.py --files 2000 --remove 0.9 --repeat 3 [--out bench/out/vacuum]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from corpus import generate  # noqa: E402

from pipeline import db, schema  # noqa: E402
from pipeline.models import FileJob  # noqa: E402
from pipeline.reader import ingest_file  # noqa: E402
from pipeline.store import Store  # noqa: E402
from pipeline.walker import walk_root  # noqa: E402


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def measure(corpus: Path, store_dir: Path, mode: str, remove: float, optimize: bool) -> dict[str, object]:
    """Index, remove a share of the documents, give space back; sizes in bytes, times in seconds."""
    shutil.rmtree(store_dir, ignore_errors=True)
    path = store_dir / "knowledge.db"
    conn = db.open_writer(path)
    conn.execute(f"PRAGMA auto_vacuum = {mode}")  # before any table exists, as schema.create does
    conn.execute("VACUUM")  # the WAL switch already wrote the header: an empty file's VACUUM applies it
    conn.execute("BEGIN IMMEDIATE")
    schema.ensure(conn)
    conn.execute("INSERT INTO meta(key, value) VALUES ('format_version', ?)", (str(schema.FORMAT_VERSION),))
    conn.execute("COMMIT")
    conn.close()
    start, cpu = time.perf_counter(), time.process_time()
    store = Store(path)
    found = walk_root(str(corpus)).files
    for item in found:
        store.apply(ingest_file(FileJob(item.path, item.root, item.size, item.mtime_ns, None)))  # type: ignore[arg-type]
    store.close()
    index_s, index_cpu = time.perf_counter() - start, time.process_time() - cpu
    full = _size(path)
    store = Store(path)
    mode_now = int(store.conn.execute("PRAGMA auto_vacuum").fetchone()[0])
    doomed = [item.path for item in found[: int(len(found) * remove)]]
    start, cpu = time.perf_counter(), time.process_time()
    for doc_path in doomed:  # as Store.remove, without its own reclaim policy: the steps are measured apart
        with store.transaction() as conn:
            conn.execute("DELETE FROM documents WHERE path = ?", (doc_path,))
    remove_s, remove_cpu = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    if optimize:  # merge the FTS5 segments: deleted rows leave tombstones until a merge drops them
        for table in schema.FTS_TABLES:
            store.conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
    if mode == "INCREMENTAL":
        store.conn.execute("PRAGMA incremental_vacuum").fetchall()  # one step frees one page: run it out
    else:
        store.conn.execute("VACUUM")
    vacuum_s, vacuum_cpu = time.perf_counter() - start, time.process_time() - cpu
    store.close()
    return {"mode": mode, "optimize": optimize, "auto_vacuum": mode_now, "files": len(found), "removed": len(doomed),
            "index_s": round(index_s, 2), "index_cpu": round(index_cpu, 2), "bytes_full": full,
            "remove_s": round(remove_s, 2), "remove_cpu": round(remove_cpu, 2),
            "vacuum_s": round(vacuum_s, 3), "vacuum_cpu": round(vacuum_cpu, 3), "bytes_after": _size(path)}


def main() -> None:
    """Generate the corpus once and measure both modes on it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--remove", type=float, default=0.9)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the modes alternate within each round")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "vacuum")
    args = parser.parse_args()
    corpus = args.out / "corpus"
    if not corpus.is_dir():
        generate(corpus, args.files, seed=7)
    rows: dict[tuple[str, bool], list[dict[str, object]]] = {}
    for _ in range(args.repeat):
        for mode in ("NONE", "INCREMENTAL"):
            for optimize in (False, True):
                row = measure(corpus, args.out / f"store-{mode.lower()}", mode, args.remove, optimize)
                rows.setdefault((mode, optimize), []).append(row)
                print(json.dumps(row), flush=True)
    for (mode, optimize), runs in rows.items():
        medians = {k: statistics.median(float(r[k]) for r in runs)  # type: ignore[arg-type]
                   for k in ("index_s", "index_cpu", "remove_s", "remove_cpu", "vacuum_s", "vacuum_cpu",
                             "bytes_full", "bytes_after")}
        print(json.dumps({"median_of": len(runs), "mode": mode, "optimize": optimize, **medians}))


if __name__ == "__main__":
    main()
