"""Lexical indexing benchmark: the floor against `knowledge index` on the in-process default.

In one run, on one generated corpus:
  (a) floor: one process reads, hashes, chunks and inserts every file with the project's own
      chunker and Store (the documents of each BATCH_FILES files in one transaction, as the
      writer applies a staged batch), no queue, no threads;
  (b) `knowledge index` (the in-process default: Dramatiq StubBroker, ingest threads, one writer
      thread), first run into an empty store;
  (c) `knowledge index` again with nothing changed (the stat fast path).
Reports seconds and the ratios (b)/(a) and (c) in seconds. Usage:

    .venv/bin/python -m bench.bench_index --files 10000 [--out bench/out/index]

With --baseline REF (a commit, e.g. main) it also measures the floor of that commit's code, from a
detached `git worktree` of it under --out, in the same run (first), and reports (b) and (a)
against it: the figure to read when a change makes the writer itself faster. --rounds N repeats
the whole sequence N times (interleaved) and reports medians.

With --bound-rounds N and --baseline REF it measures instead the cost of a change to the run itself
(the extraction bound of pipeline/extraction.py: every file read in a reused child process): N
interleaved rounds of a first run of REF's `knowledge index` and of this tree's, reporting the
median wall and CPU seconds (the children's included) and their ratios.

With --metrics-rounds N it measures instead the cost of metrics on (b): N interleaved rounds of a
first run with no exporter configured, with the OTLP metrics exporter (every second, to a loopback
sink that accepts and drops the requests) and with OTLP traces and metrics; it reports the median
seconds of each and their ratios to the no-exporter runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.lib.checkout import baseline_tree, tree_python
from bench.lib.corpus import generate
from bench.lib.paths import OUT
from pipeline.files import ingest_file
from pipeline.models import Document, FileJob
from pipeline.store import Store
from pipeline.walker import walk_root

BATCH_FILES = 32  # knowledge.batch_files' default: the files of one ingest message, one write transaction

# The floor of another commit's code: the same loop, run by this interpreter with that tree first on
# the path (tree_python). It calls only Store.apply (one transaction per document), which every format has.
BASELINE_FLOOR = """
import sys, time
from pipeline.files import ingest_file
from pipeline.models import FileJob
from pipeline.store import Store
from pipeline.walker import walk_root
start = time.perf_counter()
store = Store(__import__("pathlib").Path(sys.argv[2]))
for found in walk_root(sys.argv[1]).files:
    store.apply(ingest_file(FileJob(found.path, found.root, found.size, found.mtime_ns, None)))
store.close()
print(time.perf_counter() - start)
"""


def floor(corpus: Path, store_dir: Path) -> float:
    """Seconds for a single process to walk, read, hash, chunk and insert every file."""
    shutil.rmtree(store_dir, ignore_errors=True)
    start = time.perf_counter()
    store = Store(store_dir / "knowledge.db")
    batch: list[Document] = []
    for found in walk_root(str(corpus)).files:
        doc = ingest_file(FileJob(found.path, found.root, found.size, found.mtime_ns, None))
        batch.append(doc)  # type: ignore[arg-type]
        if len(batch) == BATCH_FILES:
            store.apply_group(batch)
            batch = []
    store.apply_group(batch)
    store.close()
    return time.perf_counter() - start


def baseline_floor(tree: Path, corpus: Path, store_dir: Path) -> float:
    """The floor of the code in tree (one process, one transaction per document), in seconds."""
    shutil.rmtree(store_dir, ignore_errors=True)
    store_dir.mkdir(parents=True)
    command, env = tree_python(tree, "-c", BASELINE_FLOOR, str(corpus), str(store_dir / "knowledge.db"))
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return float(proc.stdout.strip())


def knowledge_index(corpus: Path, store_base: Path,
                    extra_env: dict[str, str] | None = None) -> tuple[float, dict[str, Any]]:
    """Seconds and JSON summary of `knowledge index CORPUS --json` as a user runs it."""
    exe = Path(sys.executable).with_name("knowledge")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"KNOWLEDGE_STORE_DIR": str(store_base), **(extra_env or {})})
    env.pop("KNOWLEDGE_BROKER_URL", None)
    start = time.perf_counter()
    proc = subprocess.run([str(exe), "index", str(corpus), "--json"], capture_output=True, text=True, env=env,
                          check=True)
    return time.perf_counter() - start, json.loads(proc.stdout)


class Sink:
    """A loopback OTLP/HTTP endpoint that answers 200 to every export and counts them."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
                size = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(size)
                sink.requests += 1
                sink.bytes += size
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def metrics_overhead(corpus: Path, out: Path, rounds: int) -> dict[str, Any]:
    """Median first-run seconds without an exporter, with OTLP metrics, with OTLP traces and metrics."""
    sink = Sink()
    conditions = {
        "no_exporter": {},
        "otlp_metrics": {"OTEL_METRICS_EXPORTER": "otlp", "OTEL_TRACES_EXPORTER": "none",
                         "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{sink.url}/v1/metrics",
                         "OTEL_METRIC_EXPORT_INTERVAL": "1000"},
        "otlp_traces_and_metrics": {"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_METRIC_EXPORT_INTERVAL": "1000"},
    }
    seconds: dict[str, list[float]] = {name: [] for name in conditions}
    cpu: dict[str, list[float]] = {name: [] for name in conditions}
    for _ in range(rounds):
        for name, env in conditions.items():
            store_base = out / f"metrics-{name}"
            shutil.rmtree(store_base, ignore_errors=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            took, summary = knowledge_index(corpus, store_base, env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            assert summary["state"] == "complete", summary
            seconds[name].append(took)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    sink.server.shutdown()

    def report(values: dict[str, list[float]]) -> dict[str, object]:
        base = statistics.median(values["no_exporter"])
        return {"median_s": {name: round(statistics.median(v), 2) for name, v in values.items()},
                "all_s": {name: [round(x, 2) for x in v] for name, v in values.items()},
                "ratio_to_no_exporter": {name: round(statistics.median(v) / base, 3) for name, v in values.items()}}

    return {"rounds": rounds, "wall": report(seconds), "cpu": report(cpu),
            "sink_requests": sink.requests, "sink_megabytes": round(sink.bytes / 1e6, 2)}


def baseline_index(tree: Path, corpus: Path, store_base: Path) -> float:
    """Seconds of a first `knowledge index CORPUS --json` run by tree's code."""
    command, env = tree_python(tree, "-c", "import cli; cli.run()", "index", str(corpus), "--json")
    env["KNOWLEDGE_STORE_DIR"] = str(store_base)
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    took = time.perf_counter() - start
    assert json.loads(proc.stdout)["state"] == "complete", proc.stdout
    return took


def run_cost(tree: Path, corpus: Path, out: Path, rounds: int) -> dict[str, Any]:
    """Median first-run wall and CPU seconds of tree's code and this tree's, interleaved, and their ratios."""
    seconds: dict[str, list[float]] = {"baseline": [], "this_tree": []}
    cpu: dict[str, list[float]] = {"baseline": [], "this_tree": []}
    for _ in range(rounds):
        for name in ("baseline", "this_tree"):
            store_base = out / f"cost-{name}"
            shutil.rmtree(store_base, ignore_errors=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            if name == "baseline":
                took = baseline_index(tree, corpus, store_base)
            else:
                took, summary = knowledge_index(corpus, store_base)
                assert summary["state"] == "complete", summary
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            seconds[name].append(took)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)

    def report(values: dict[str, list[float]]) -> dict[str, object]:
        base = statistics.median(values["baseline"])
        return {"median_s": {name: round(statistics.median(v), 2) for name, v in values.items()},
                "all_s": {name: [round(x, 2) for x in v] for name, v in values.items()},
                "this_over_baseline": round(statistics.median(values["this_tree"]) / base, 3)}

    return {"rounds": rounds, "wall": report(seconds), "cpu": report(cpu)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=OUT / "index")
    parser.add_argument("--baseline", default=None, help="also measure the floor of this commit (e.g. main)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the sequence, reporting medians")
    parser.add_argument("--bound-rounds", type=int, default=0,
                        help="with --baseline: interleaved first runs of that commit and this tree instead")
    parser.add_argument("--metrics-rounds", type=int, default=0,
                        help="measure the metrics overhead over this many interleaved rounds instead")
    args = parser.parse_args()
    corpus = args.out / "corpus"
    if not (corpus.exists() and sum(1 for _ in corpus.rglob("*.md")) == args.files):
        shutil.rmtree(corpus, ignore_errors=True)
        generate(corpus, args.files, 1)
    mb = sum(p.stat().st_size for p in corpus.rglob("*.md")) / 1e6
    if args.metrics_rounds:
        machine = f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"
        print(json.dumps({"machine": machine, "files": args.files, "megabytes": round(mb, 1),
                          **metrics_overhead(corpus, args.out, args.metrics_rounds)}))
        return
    tree = baseline_tree(args.baseline, args.out) if args.baseline else None
    if args.bound_rounds and tree is not None:
        machine = f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}"
        print(json.dumps({"machine": machine, "files": args.files, "megabytes": round(mb, 1),
                          "baseline": args.baseline, **run_cost(tree, corpus, args.out, args.bound_rounds)}))
        return
    runs: dict[str, list[float]] = {"baseline_floor_s": [], "floor_s": [], "first_run_s": [], "no_change_s": []}
    first: dict[str, Any] = {}
    again: dict[str, Any] = {}
    for _ in range(max(1, args.rounds)):
        if tree is not None:
            runs["baseline_floor_s"].append(baseline_floor(tree, corpus, args.out / "baseline-floor"))
        runs["floor_s"].append(floor(corpus, args.out / "floor"))
        store_base = args.out / "embedded"
        shutil.rmtree(store_base, ignore_errors=True)
        took, first = knowledge_index(corpus, store_base)
        runs["first_run_s"].append(took)
        took, again = knowledge_index(corpus, store_base)
        runs["no_change_s"].append(took)
    med = {name: statistics.median(v) for name, v in runs.items() if v}
    result = {
        "machine": f"{platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "files": args.files, "megabytes": round(mb, 1), "chunks": first["chunks"], "rounds": max(1, args.rounds),
        **{name: round(v, 2) for name, v in med.items()},
        "first_run_over_floor": round(med["first_run_s"] / med["floor_s"], 2),
        "first_added": first["added"], "no_change_unchanged": again["unchanged"],
    }
    if tree is not None:
        result.update({
            "baseline": f"{args.baseline} ({tree.name.removeprefix('baseline-')})",
            "floor_over_baseline_floor": round(med["floor_s"] / med["baseline_floor_s"], 2),
            "first_run_over_baseline_floor": round(med["first_run_s"] / med["baseline_floor_s"], 2),
            "all_s": {name: [round(x, 2) for x in v] for name, v in runs.items() if v},
        })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
