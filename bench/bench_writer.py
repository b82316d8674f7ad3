"""What the single writer's time goes to: FTS tables, tokenizers, detail, merge settings, pragmas, statements.

    .venv/bin/python bench/bench_writer.py --files 3000 [--rounds 2] [--only NAME ...]

The floor of a lexical run is the writer's FTS5 inserts (bench_index.py). This reads, hashes and
chunks --files files of the bench corpus once, in memory, then writes them into a fresh store once
per variant and reports the writer's CPU and wall seconds, each as a ratio to the baseline variant
of the same round (CPU seconds are the figure to read on a shared machine: wall time includes the
waits for a core). The baseline is the store as format 3 defines it written as the writer did
before issue 13: one transaction per document and one INSERT statement per chunk, the FTS tables
kept by triggers. Each variant changes one thing:

- tables: without the porter, exact or CJK table, or without any (the documents and chunks alone);
- `detail=column`/`none` and `columnsize=0` (what the query side would lose: see bench/RESULTS.md),
  a `prefix='2 3'` index on the exact table;
- FTS5 settings of every table: `automerge`, `crisismerge`, `pgsz`;
- pragmas of the writer connection: `synchronous=OFF`, a 200 MB `cache_size`, `page_size=8192`;
- statements: the FTS rows inserted directly (no triggers, one INSERT ... SELECT per table and
  document); one INSERT per document for its chunks (triggers kept); and the documents of a staged
  batch (N files) in one transaction with one INSERT for their chunks, as Store.apply_group does
  (`store.apply_group`, this tree's code, and `batch N` for other sizes); and 32 documents a
  transaction with one statement per chunk still (the transaction size alone).

Prints one JSON line per variant and round, then a markdown table of the medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from corpus import generate  # noqa: E402

from pipeline import db  # noqa: E402
from pipeline.files import ingest_file  # noqa: E402
from pipeline.models import Document, FileJob  # noqa: E402
from pipeline.store import Store  # noqa: E402
from pipeline.walker import walk_root  # noqa: E402

# The FTS tables of format 3 (pipeline/schema.py), re-created here per variant.
FTS = {
    "porter": ("chunks_fts", "body, heading_path, content='chunks', content_rowid='id', tokenize='porter unicode61'"),
    "exact": ("chunks_fts_exact", "body, heading_path, content='chunks', content_rowid='id', tokenize='unicode61'"),
    "cjk": ("chunks_fts_cjk", "cjk, content='chunks', content_rowid='id', tokenize='trigram', columnsize=0"),
}
COLUMNS = {"porter": "body, heading_path", "exact": "body, heading_path", "cjk": "cjk"}
DOCUMENT_SQL = ("INSERT INTO documents(root, source, title, sha256, size, mtime_ns, chunk_count, indexed_at,"
                " indexed_ns, fields, path) VALUES (?, ?, ?, ?, ?, ?, ?, '', 0, NULL, ?)")
CHUNK_SQL = "INSERT INTO chunks(document_id, ordinal, heading_path, body, text_hash, cjk) VALUES "
ROW = "(?, ?, ?, ?, ?, ?)"


@dataclass(frozen=True)
class Variant:
    """One way of writing the documents: tables and their options, FTS settings, pragmas, statements."""

    name: str
    tables: tuple[str, ...] = ("porter", "exact", "cjk")
    options: dict[str, str] = field(default_factory=dict)  # table -> extra fts5 options
    settings: dict[str, int] = field(default_factory=dict)  # automerge, crisismerge, pgsz
    pragmas: dict[str, str] = field(default_factory=dict)
    statements: str = "chunk"  # chunk | document | direct | batch
    batch: int = 1
    store: bool = False  # this tree's Store.apply_group, schema untouched


VARIANTS = [
    Variant("baseline: format 3, a statement per chunk, a transaction per document"),
    Variant("without the porter table", tables=("exact", "cjk")),
    Variant("without the exact table", tables=("porter", "cjk")),
    Variant("without the CJK table", tables=("porter", "exact")),
    Variant("without any FTS table", tables=()),
    Variant("porter detail=column", options={"porter": "detail=column"}),
    Variant("exact detail=column", options={"exact": "detail=column"}),
    Variant("exact detail=none", options={"exact": "detail=none"}),
    Variant("porter columnsize=0", options={"porter": "columnsize=0"}),
    Variant("exact prefix='2 3'", options={"exact": "prefix='2 3'"}),
    Variant("automerge=2", settings={"automerge": 2}),
    Variant("automerge=16", settings={"automerge": 16}),
    Variant("crisismerge=64", settings={"crisismerge": 64}),
    Variant("pgsz=8000", settings={"pgsz": 8000}),
    Variant("synchronous=OFF", pragmas={"synchronous": "OFF"}),
    Variant("cache_size=200 MB", pragmas={"cache_size": "-200000"}),
    Variant("page_size=8192", pragmas={"page_size": "8192"}),
    Variant("FTS rows inserted directly (no triggers), a statement per table and document", statements="direct"),
    Variant("a statement per document (triggers kept)", statements="document"),
    Variant("32 documents a transaction, still a statement per chunk", batch=32),
    Variant("batch 8: one transaction, one statement", statements="batch", batch=8),
    Variant("store.apply_group, 32 files (this tree)", store=True, batch=32),
    Variant("batch 32 + automerge=16", statements="batch", batch=32, settings={"automerge": 16}),
    Variant("batch 128", statements="batch", batch=128),
]


def documents(corpus: Path, files: int) -> list[Document]:
    """The first files documents of the corpus, read, hashed and chunked."""
    found = sorted(walk_root(str(corpus)).files, key=lambda f: f.path)[:files]
    docs = [ingest_file(FileJob(f.path, f.root, f.size, f.mtime_ns, None)) for f in found]
    return [d for d in docs if isinstance(d, Document)]


def prepare(path: Path, variant: Variant) -> Store:
    """A fresh store with the variant's tables, triggers, settings and pragmas."""
    shutil.rmtree(path.parent, ignore_errors=True)
    store = Store(path)
    conn = store.conn
    for name, value in variant.pragmas.items():
        if name == "page_size":  # not in WAL mode: rewrite the empty store with it, then back to WAL
            conn.execute("PRAGMA journal_mode = DELETE").fetchall()
            conn.execute(f"PRAGMA page_size = {value}")
            conn.execute("VACUUM")
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            assert int(conn.execute("PRAGMA page_size").fetchone()[0]) == int(value)
        else:
            conn.execute(f"PRAGMA {name} = {value}").fetchall()
    if variant.store:
        return store
    conn.execute("BEGIN IMMEDIATE")
    for trigger in ("chunks_ai", "chunks_ad", "chunks_au"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE chunks_vocab")
    for key, (table, body) in FTS.items():
        conn.execute(f"DROP TABLE {table}")
        if key in variant.tables:
            extra = variant.options.get(key)
            conn.execute(f"CREATE VIRTUAL TABLE {table} USING fts5({body}{', ' + extra if extra else ''})")
            for setting, value in variant.settings.items():
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES (?, ?)", (setting, value))
    inserts = [_fts_insert(key, "new.") for key in variant.tables]
    if inserts and variant.statements != "direct":
        conn.execute("CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN " + " ".join(inserts) + " END")
    conn.execute("COMMIT")
    return store


def _fts_insert(key: str, prefix: str) -> str:
    table = FTS[key][0]
    columns = COLUMNS[key]
    values = ", ".join(prefix + c.strip() for c in columns.split(","))
    where = f" WHERE {prefix}cjk != ''" if key == "cjk" else ""
    return f"INSERT INTO {table}(rowid, {columns}) SELECT {prefix}id, {values}{where};"


def write(store: Store, docs: list[Document], variant: Variant) -> None:
    """Write every document the variant's way."""
    if variant.store:
        for start in range(0, len(docs), variant.batch):
            store.apply_group(docs[start : start + variant.batch])
        return
    conn = store.conn
    step = variant.batch
    for start in range(0, len(docs), step):
        conn.execute("BEGIN IMMEDIATE")
        rows: list[tuple[object, ...]] = []
        for doc in docs[start : start + step]:
            cur = conn.execute(DOCUMENT_SQL, (doc.root, doc.source, doc.title, doc.sha256, doc.size, doc.mtime_ns,
                                              len(doc.chunks), doc.path))
            rows += [(cur.lastrowid, c.ordinal, c.heading_path, c.body, c.text_hash, c.cjk) for c in doc.chunks]
            if variant.statements == "chunk":
                conn.executemany(CHUNK_SQL + ROW, rows)
                rows = []
            elif variant.statements in ("document", "direct"):
                _insert(conn, rows)
                rows = []
            if variant.statements == "direct":
                for key in variant.tables:
                    table, columns = FTS[key][0], COLUMNS[key]
                    where = " AND cjk != ''" if key == "cjk" else ""
                    conn.execute(f"INSERT INTO {table}(rowid, {columns}) SELECT id, {columns} FROM chunks"
                                 f" WHERE document_id = ?{where}", (cur.lastrowid,))
        _insert(conn, rows)
        conn.execute("COMMIT")


def _insert(conn: db.Connection, rows: list[tuple[object, ...]]) -> None:
    for start in range(0, len(rows), 500):
        part = rows[start : start + 500]
        conn.execute(CHUNK_SQL + ", ".join([ROW] * len(part)), [v for row in part for v in row])


def measure(docs: list[Document], variant: Variant, out: Path) -> dict[str, float]:
    """CPU and wall seconds of writing docs the variant's way, and the store's size."""
    path = out / "store" / "knowledge.db"
    store = prepare(path, variant)
    started, cpu = time.perf_counter(), time.process_time()
    write(store, docs, variant)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    store.close()
    size = sum(p.stat().st_size for p in path.parent.iterdir())
    return {"cpu_s": cpu, "wall_s": wall, "megabytes": size / 1e6}


def table(results: dict[str, list[dict[str, float]]]) -> str:
    """The medians as a markdown table, ratios to the baseline."""
    med: Callable[[str, str], float] = lambda name, key: statistics.median(r[key] for r in results[name])  # noqa: E731
    base = VARIANTS[0].name
    lines = ["| variant | CPU s | CPU / baseline | wall s | wall / baseline | store MB |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name in results:
        lines.append(f"| {name} | {med(name, 'cpu_s'):.2f} | {med(name, 'cpu_s') / med(base, 'cpu_s'):.2f}x"
                     f" | {med(name, 'wall_s'):.2f} | {med(name, 'wall_s') / med(base, 'wall_s'):.2f}x"
                     f" | {med(name, 'megabytes'):.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--corpus", type=Path, default=BENCH / "out" / "index" / "corpus",
                        help="a bench corpus (generated here with 10,000 files, seed 1, when missing)")
    parser.add_argument("--out", type=Path, default=BENCH / "out" / "writer")
    parser.add_argument("--only", nargs="*", default=None, help="variants whose name contains one of these")
    args = parser.parse_args()
    if not args.corpus.exists():
        generate(args.corpus, 10_000, 1)
    docs = documents(args.corpus, args.files)
    chosen = [v for v in VARIANTS if v is VARIANTS[0] or not args.only or any(s in v.name for s in args.only)]
    results: dict[str, list[dict[str, float]]] = {v.name: [] for v in chosen}
    for _ in range(max(1, args.rounds)):
        for variant in chosen:
            got = measure(docs, variant, args.out)
            results[variant.name].append(got)
            print(json.dumps({"variant": variant.name, **{k: round(v, 2) for k, v in got.items()}}), flush=True)
    print(f"\n{len(docs)} documents, {sum(len(d.chunks) for d in docs)} chunks\n")
    print(table(results))


if __name__ == "__main__":
    main()
