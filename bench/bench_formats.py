"""Ingest cost of each format against the markdown path: read, extract and chunk, no store, no embeddings.

For each directory given, walk it as `knowledge index` does (every format on), run ingest_file on
each file the walk finds (best of --repeat passes, CPU time of this process), and print files,
bytes, chunks, CPU seconds, MB/s by format, and the skips by reason. Usage:

    .venv/bin/python bench/bench_formats.py DIR [DIR ...] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from config.errors import FileSkipped  # noqa: E402
from pipeline import formats  # noqa: E402
from pipeline.files import ingest_file  # noqa: E402
from pipeline.models import Document, FileJob  # noqa: E402
from pipeline.walker import walk_root  # noqa: E402


def _reason_class(reason: str) -> str:
    return reason.split(" (")[0].split(":")[0] if "not an indexed format" not in reason else reason


def measure(directory: str, repeat: int) -> dict[str, Any]:
    """Figures of one tree, by format."""
    walked = walk_root(directory)
    by_format: dict[str, dict[str, float]] = defaultdict(lambda: {"files": 0, "bytes": 0, "chunks": 0, "cpu": 0.0})
    skipped = Counter(_reason_class(s.reason) for s in walked.skipped)
    for found in walked.files:
        fmt = formats.format_of(found.path)
        name = fmt.name if fmt is not None else "?"
        best = float("inf")
        outcome: Document | str | None = None
        for _ in range(repeat):
            start = time.process_time()
            try:
                outcome = ingest_file(FileJob(found.path, found.root, found.size, found.mtime_ns))
            except FileSkipped as exc:
                outcome = f"skipped: {_reason_class(str(exc))}"
            best = min(best, time.process_time() - start)
        row = by_format[name]
        row["files"] += 1
        row["bytes"] += found.size
        row["cpu"] += best
        if isinstance(outcome, Document):
            row["chunks"] += len(outcome.chunks)
        elif isinstance(outcome, str):
            skipped[outcome] += 1
    return {"tree": directory, "formats": dict(by_format), "skipped": dict(skipped)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(d, args.repeat) for d in args.dirs]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("| tree | format | files | MB | chunks | CPU s | MB/s |")
    print("|---|---|---|---|---|---|---|")
    for result in results:
        for name, row in sorted(result["formats"].items()):
            mb = row["bytes"] / 1e6
            rate = mb / row["cpu"] if row["cpu"] else 0.0
            print(f"| {result['tree']} | {name} | {row['files']:.0f} | {mb:.2f} | {row['chunks']:.0f} | "
                  f"{row['cpu']:.2f} | {rate:.1f} |")
    for result in results:
        print(f"skipped in {result['tree']}: " + "; ".join(f"{n} {r}" for r, n in sorted(result["skipped"].items())))


if __name__ == "__main__":
    main()
