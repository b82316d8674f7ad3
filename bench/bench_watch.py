"""`knowledge watch`, in-process default: time from a save to the edit being searchable, and CPU while idle.

On a generated corpus of `--files` files (bench/lib/corpus.py) with `knowledge.paths: [docs]`:
  1. start `knowledge watch` (a real process) and wait for its first full run and its "watching" line;
  2. idle: read the process's utime+stime from /proc/<pid>/stat, wait `--idle` seconds with no
     change to the tree, read it again: CPU seconds per wall second (threads included);
  3. latency, `--edits` times: write a new unique word into one existing file (a save: write to a
     temporary name, rename over the file, as editors do), then poll the real read path
     (query.search.search, a fresh reader each time, every 5 ms, at most 10 s) until a hit for the
     word comes back; the time from the rename to that hit.
  4. a burst, as a `git checkout` makes: `--burst` files rewritten at once; how many runs the
     watcher made for them and the time from the first write until they were all applied.
Prints one JSON object with the figures; RESULTS.md records them with the command and machine.

    .venv/bin/python -m bench.bench_watch --files 10000 --idle 30 --edits 30 --burst 5000 [--out bench/out/watch]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.lib.corpus import generate
from bench.lib.paths import OUT, ROOT
from bench.lib.procfs import cpu_seconds
from config.loader import settings_from_mapping
from query.requests import SearchRequest
from query.service import QueryService

START_TIMEOUT_S = 600.0
HIT_TIMEOUT_S = 10.0


def measure_burst(files: list[Path], lines: queue.Queue[dict[str, Any]]) -> dict[str, Any]:
    """Rewrite every file at once; the runs the watcher made for them and the time until the last ends."""
    while not lines.empty():
        lines.get_nowait()
    started = time.monotonic()
    for path in files:
        path.write_bytes(path.read_bytes() + b"\n\nzqburst\n")
    written = time.monotonic() - started
    runs: list[dict[str, Any]] = []
    applied = 0
    while applied < len(files) and time.monotonic() - started < START_TIMEOUT_S:
        try:
            record = lines.get(timeout=5.0)
        except queue.Empty:
            continue
        if record.get("event") == "run":
            runs.append(record)
            applied += int(record.get("updated") or 0) + int(record.get("added") or 0)
    return {"burst_files": len(files), "burst_write_s": round(written, 2), "burst_runs": len(runs),
            "burst_applied": applied, "burst_until_applied_s": round(time.monotonic() - started, 2),
            "burst_run_kinds": [r.get("full") or f"{r.get('changed')} paths" for r in runs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--burst", type=int, default=5_000, help="files rewritten at once, as a checkout does")
    parser.add_argument("--out", type=Path, default=OUT / "watch")
    args = parser.parse_args(argv)
    base: Path = args.out
    shutil.rmtree(base, ignore_errors=True)
    (base / "docs").mkdir(parents=True)
    stats = generate(base / "docs", args.files, seed=1)
    (base / "knowledge.yaml").write_text("knowledge:\n  paths: [docs]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    knowledge = Path(sys.executable).with_name("knowledge")
    proc = subprocess.Popen([str(knowledge), "watch"], cwd=base, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("{"):
                lines.put(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    started = time.monotonic()
    first_run: dict[str, Any] = {}
    while True:
        record = lines.get(timeout=max(1.0, START_TIMEOUT_S - (time.monotonic() - started)))
        if record.get("event") == "run":
            first_run = record
        if record.get("event") == "watching":
            break
    try:
        cpu0, wall0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(args.idle)
        cpu1, wall1 = cpu_seconds(proc.pid), time.monotonic()
        settings = settings_from_mapping({}, store_base=base)
        files = sorted((base / "docs").rglob("*.md"))
        latencies: list[float] = []
        for i in range(args.edits):
            target = files[(i * 997) % len(files)]
            word = f"zqwatch{i:04d}x"
            temporary = target.with_name(f".{target.name}.tmp")
            temporary.write_bytes(target.read_bytes() + f"\n\nA saved edit: {word}.\n".encode())
            os.replace(temporary, target)
            saved = time.monotonic()
            while time.monotonic() - saved < HIT_TIMEOUT_S:
                if QueryService(settings).search(SearchRequest(word, 1)).hits:
                    latencies.append(time.monotonic() - saved)
                    break
                time.sleep(0.005)
            else:
                latencies.append(float("inf"))
            time.sleep(0.3)  # one save at a time: the next one is not coalesced with this one
        burst = measure_burst(files[:args.burst], lines) if args.burst else {}
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finite = sorted(x for x in latencies if x != float("inf"))
    result = {
        "files": stats.files, "bytes": stats.total_bytes, "first_run": first_run,
        "idle_seconds": round(wall1 - wall0, 2), "idle_cpu_seconds": round(cpu1 - cpu0, 3),
        "idle_cpu_percent": round(100 * (cpu1 - cpu0) / (wall1 - wall0), 3),
        "edits": args.edits, "missed": len(latencies) - len(finite),
        "save_to_searchable_p50_s": round(statistics.median(finite), 3) if finite else None,
        "save_to_searchable_p95_s": round(finite[int(0.95 * (len(finite) - 1))], 3) if finite else None,
        "save_to_searchable_max_s": round(finite[-1], 3) if finite else None,
        **burst,
        "sigterm_exit_code": code,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
