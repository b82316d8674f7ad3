"""Published snapshots (issue 22): what `knowledge publish` costs, and what a generation swap does to a replica's
query latency.

    .venv/bin/python -m bench.bench_publish --files 10000,100000 [--rounds 3] [--swaps 5] [--out DIR]

For each size, a generated corpus indexed once by `knowledge index` (bench/lib/stores.py, reused):

  cost: `--rounds` times, alternating, (a) the floor: the store's file copied (shutil.copyfile, the
        kernel's copy) and hashed (SHA-256), as a plain file copy would need; (b) `knowledge publish
        --to DIR --keep 2 --json` as a process: its wall time, CPU seconds (rusage), the seconds it
        reports, and the generation's bytes against the store's (knowledge.db + WAL). The ratio
        publish / floor of the same round is the figure that survives the machine's load.

  swap (at the largest size): `knowledge serve --snapshots DIR` (poll 0.5 s) searched back to back by one
        keep-alive client, in one run alternating `--steady-queries` queries with nothing happening
        and a swap: a `knowledge publish` process running on the same host (`publishing`), then,
        once it has exited, until the replica answers from the new generation (`swapping`: the
        replica verifies the file's SHA-256, warms a Reader and swaps). p50/p99 of each phase, and
        their ratio to the steady state around them.

Prints one JSON line per measurement and the RESULTS.md section (markdown) at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.lib.corpus import sample_queries
from bench.lib.machine import machine
from bench.lib.paths import KNOWLEDGE, OUT
from bench.lib.processes import clean_env, free_port
from bench.lib.stats import pct
from bench.lib.stores import CHUNKS_PER_FILE, lexical_store

SWAP_TIMEOUT_S = 600.0
PUBLISH_TIMEOUT_S = 3600


def store_file(base: Path) -> Path:
    """The store file of a bench store's base directory."""
    return base / "knowledge" / "default" / "knowledge.db"


def store_bytes(base: Path) -> int:
    """knowledge.db plus its WAL."""
    db = store_file(base)
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


def floor(base: Path, scratch: Path) -> dict[str, float]:
    """Seconds to copy the store file and hash the copy: what any copy of the bytes pays."""
    scratch.unlink(missing_ok=True)
    started, cpu = time.perf_counter(), time.process_time()
    shutil.copyfile(store_file(base), scratch)
    digest = hashlib.sha256()
    with open(scratch, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    scratch.unlink()
    return {"seconds": round(seconds, 3), "cpu": round(cpu, 3)}


def publish(base: Path, snaps: Path) -> dict[str, Any]:
    """One `knowledge publish` process: its JSON, wall seconds and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([KNOWLEDGE, "--store-dir", str(base), "publish", "--to", str(snaps), "--keep", "2",
                           "--json"], capture_output=True, text=True, env=clean_env(), timeout=PUBLISH_TIMEOUT_S)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"knowledge publish failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(proc.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**data, "wall": round(wall, 3), "cpu": round(cpu, 3)}


def cost(base: Path, snaps: Path, rounds: int, scratch: Path) -> dict[str, Any]:
    """The publish rounds alternating with the floor; medians and per-round ratios."""
    rows = []
    for round_ in range(rounds):
        pair = ([("floor", lambda: floor(base, scratch)), ("publish", lambda: publish(base, snaps))])
        if round_ % 2:
            pair.reverse()
        row: dict[str, Any] = {"load": round(os.getloadavg()[0], 2)}
        for name, run in pair:
            row[name] = run()
        row["ratio"] = round(row["publish"]["seconds"] / max(row["floor"]["seconds"], 1e-9), 2)
        row["cpu_ratio"] = round(row["publish"]["cpu"] / max(row["floor"]["cpu"], 1e-9), 2)
        rows.append(row)
        print(json.dumps({"round": round_, **row}), flush=True)
    last = rows[-1]["publish"]

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    return {"rounds": rows, "store_bytes": store_bytes(base), "bytes": last["bytes"], "documents": last["documents"],
            "chunks": last["chunks"], "wall_median": median([r["publish"]["wall"] for r in rows]),
            "seconds_median": median([r["publish"]["seconds"] for r in rows]),
            "floor_median": median([r["floor"]["seconds"] for r in rows]),
            "cpu_median": median([r["publish"]["cpu"] for r in rows]),
            "ratio_median": median([r["ratio"] for r in rows]),
            "cpu_ratio_median": median([r["cpu_ratio"] for r in rows]),
            "loads": [r["load"] for r in rows]}


def start_replica(snaps: Path, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`knowledge serve --snapshots SNAPS` on a free loopback port, once /healthz names a generation."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "knowledge.yaml"
    config.write_text(yaml.safe_dump({"knowledge": {"expose": {"mcp": {"builtins": ["knowledge_search"]}},
                                                    "publish": {"poll_interval": 0.5}}}))
    port = free_port()
    with open(work / "serve.err", "wb") as err:
        proc = subprocess.Popen([KNOWLEDGE, "--config", str(config), "serve", "--snapshots", str(snaps), "--port",
                                 str(port)], cwd=work, env=clean_env(), stdout=subprocess.DEVNULL, stderr=err)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=5).json().get("generation"):
                return proc, base
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the replica did not come up: {(work / 'serve.err').read_text()[-2000:]}")


class Client:
    """One keep-alive client searching the replica; each answer's latency recorded under a phase."""

    def __init__(self, base: str, queries: list[str]) -> None:
        self.http = httpx.Client(base_url=base, timeout=60)
        self.queries = queries
        self.n = 0
        self.samples: dict[str, list[float]] = {"steady": [], "publishing": [], "swapping": []}

    def ask(self, phase: str) -> int:
        """One search, timed under phase; the generation that answered it."""
        q = self.queries[self.n % len(self.queries)]
        self.n += 1
        started = time.perf_counter()
        reply = self.http.get("/v1/search", params={"q": q, "top_k": 10})
        elapsed = time.perf_counter() - started
        if reply.status_code != 200:
            raise SystemExit(f"the replica answered {reply.status_code}: {reply.text[:500]}")
        self.samples[phase].append(elapsed)
        return int(reply.json().get("generation") or 0)


def swaps(base: Path, snaps: Path, count: int, steady: int, work: Path) -> dict[str, Any]:
    """Steady windows alternating with publish-and-swap windows on one replica; p50/p99 per phase."""
    proc, url = start_replica(snaps, work)
    client = Client(url, sample_queries(500, seed=7))
    windows = []
    try:
        for _ in range(20):  # warm-up, not recorded
            client.ask("steady")
        client.samples["steady"].clear()
        for _ in range(count):
            for _ in range(steady):
                client.ask("steady")
            publisher = subprocess.Popen([KNOWLEDGE, "--store-dir", str(base), "publish", "--to", str(snaps),
                                          "--keep", "2", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=clean_env())
            started, asked = time.monotonic(), client.n
            while publisher.poll() is None:
                client.ask("publishing")
            out, err = publisher.communicate()
            if publisher.returncode != 0:
                raise SystemExit(f"knowledge publish failed: {err[-2000:]}")
            generation, published, during = json.loads(out)["generation"], time.monotonic(), client.n - asked
            while client.ask("swapping") < generation:
                if time.monotonic() - published > SWAP_TIMEOUT_S:
                    raise SystemExit(f"the replica never took generation {generation}")
            windows.append({"generation": generation, "publish_s": round(published - started, 2),
                            "swap_s": round(time.monotonic() - published, 2), "queries_publishing": during,
                            "load": round(os.getloadavg()[0], 2)})
            print(json.dumps(windows[-1]), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        client.http.close()
    phases = {name: {"n": len(v), "p50_ms": round(pct(v, 0.5) * 1000, 2), "p99_ms": round(pct(v, 0.99) * 1000, 2)}
              for name, v in client.samples.items() if v}
    return {"windows": windows, "phases": phases}


def markdown(sizes: dict[int, dict[str, Any]], swap: dict[str, Any] | None, swap_files: int) -> str:
    """The RESULTS.md section."""
    lines = ["| documents (chunks) | store | generation | publish: process wall / its own s / CPU s | copy+hash s | "
             "publish / copy+hash: wall, CPU (same round) | load |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in sizes.values():
        lines.append(f"| {c['documents']:,} ({c['chunks']:,}) | {c['store_bytes'] / 2**20:,.0f} MiB | "
                     f"{c['bytes'] / 2**20:,.0f} MiB | {c['wall_median']:.1f} / {c['seconds_median']:.1f} / "
                     f"{c['cpu_median']:.1f} | {c['floor_median']:.2f} | {c['ratio_median']:.1f}x, "
                     f"{c['cpu_ratio_median']:.1f}x | {min(c['loads']):.1f}-{max(c['loads']):.1f} |")
    if len(sizes) >= 2:
        ordered = sorted(sizes.values(), key=lambda c: int(c["bytes"]))
        a, b = ordered[0], ordered[-1]
        lines.append("")
        lines.append(f"Scaling {a['documents']:,} -> {b['documents']:,} documents ({b['chunks'] / a['chunks']:.1f}x "
                     "the chunks): publish's own seconds "
                     f"{b['seconds_median'] / a['seconds_median']:.1f}x, CPU {b['cpu_median'] / a['cpu_median']:.1f}x, "
                     f"bytes {b['bytes'] / a['bytes']:.1f}x.")
    if swap is None:
        return "\n".join(lines)
    phases = swap["phases"]
    steady = phases["steady"]
    lines += ["", f"Swap, the {swap_files:,}-file store, {len(swap['windows'])} publishes on the replica's host:", "",
              "| phase | queries | p50 ms | p99 ms | p50 / steady | p99 / steady |",
              "| --- | --- | --- | --- | --- | --- |"]
    for name, p in phases.items():
        lines.append(f"| {name} | {p['n']} | {p['p50_ms']} | {p['p99_ms']} | {p['p50_ms'] / steady['p50_ms']:.2f}x | "
                     f"{p['p99_ms'] / steady['p99_ms']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", default="10000,100000", help="comma-separated corpus sizes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--swaps", type=int, default=5, help="publish-and-swap windows (0: the cost part only)")
    parser.add_argument("--steady-queries", type=int, default=200)
    parser.add_argument("--swap-files", type=int, default=0, help="the size the swap runs at (default: the largest)")
    parser.add_argument("--out", type=Path, default=OUT / "publish")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"machine": machine()}), flush=True)
    files = [int(f) for f in args.files.split(",")]
    sizes: dict[int, dict[str, Any]] = {}
    bases = {}
    for n in files:
        bases[n] = lexical_store(args.out, round(n * CHUNKS_PER_FILE), 1)
        snaps = args.out / f"snaps-{n}"
        shutil.rmtree(snaps, ignore_errors=True)
        sizes[n] = cost(bases[n], snaps, args.rounds, args.out / "floor-copy.db")
        print(json.dumps({"files": n, **{k: v for k, v in sizes[n].items() if k != "rounds"}}), flush=True)
    swap_files = args.swap_files or max(files)
    swap = None
    if args.swaps:
        swap = swaps(bases[swap_files], args.out / f"snaps-{swap_files}", args.swaps, args.steady_queries,
                     args.out / "replica")
        print(json.dumps({"swap": swap}), flush=True)
    print(markdown(sizes, swap, swap_files))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
