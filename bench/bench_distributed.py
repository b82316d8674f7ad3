"""Distributed indexing: Redis with 2 worker processes and one writer, against the in-process default and on
large trees.

    .venv/bin/python -m bench.bench_distributed compare --files 10000 [--repeat 1]
    .venv/bin/python -m bench.bench_distributed large --files 10000 [--phases first,nochange] [--out DIR]

`compare`, in one run on one generated corpus (bench/lib/corpus.py), each into an empty store:
  (a) `knowledge index CORPUS` on the in-process default (StubBroker, ingest threads, one writer thread);
  (b) the same through Redis: scripts/run-local.sh starts `knowledge writer` and
      `knowledge worker --processes 2`, then `knowledge index CORPUS` walks, enqueues and follows;
      the CPU seconds of every process (and Redis's) are read before they stop;
  (c) per-message queue overhead: no-op messages carrying a real 32-file ingest payload through
      the same RedisBroker and middleware, one consumer thread: producer and consumer CPU per
      message, compared with the per-message work of (b) (batch_files x CPU per file).
It prints one JSON line per run and the RESULTS.md section.

`large`, for one generated corpus (kept and reused under --out): each phase starts its own Redis
(`redis-server --port P --save "" --appendonly no`, so its peak memory is the phase's) and its own
processes (scripts/run-local.sh --no-serve --workers 2 --threads 2), runs
`knowledge index CORPUS --json`, and reports:
  - wall seconds of the command (the walk, enqueue and follow; the processes start before it);
  - peak RSS of every process: the CLI (wait4 rusage), the writer, the worker supervisor and each
    worker process, and redis-server (VmHWM from /proc/<pid>/status, read every 0.5 s and last
    just before the processes stop);
  - CPU seconds of each process;
  - Redis INFO memory used_memory_peak, and used_memory and the key count left after the run
    (what the run ledger keeps for its TTL);
  - the store's size after the writer stops (knowledge.db + WAL) and the largest WAL seen during the run;
  - the 1-minute load average, sampled through the phase.
Phases: `first` (an empty store) and `nochange` (the same tree again). The 100k run is lexical
only: embedding ~1M chunks on a 2-core machine is out of reach.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import dramatiq
import redis

from bench.lib.corpus import generate
from bench.lib.machine import Sampler, machine
from bench.lib.paths import KNOWLEDGE, OUT, ROOT
from bench.lib.processes import deployment_env, start_redis
from bench.lib.procfs import children_of, cpu_seconds
from config.loader import settings_from_mapping
from config.observability import configure_logging
from pipeline.walker import walk_root
from workers.broker import WORKER_TIMEOUT_MS, build_redis_broker, namespace

NOTES = """
Notes. The writer is the critical path: its CPU is the embedded process's writer share, and the
distributed run wins by taking reads, chunking and payload packing (at nice 10) off the writer's
process. With Dramatiq's default prefetch (2 per thread) the one-thread writer idled between
batches while its consumer backed off (1.13-1.53x the in-process default on this corpus); the
writer's prefetch of 8 removed that. One consumer thread (~270 msg/s, bounded by the poll back-off)
is far above what a run needs (~12 write messages/s at 32 files each).""".rstrip()


def index(corpus: Path, env: dict[str, str], cwd: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds and JSON summary of `knowledge index CORPUS --json`."""
    start = time.perf_counter()
    proc = subprocess.run([KNOWLEDGE, "index", str(corpus), "--json"], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=3600)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"knowledge index failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed, json.loads(proc.stdout)


def redis_cpu(client: redis.Redis) -> float:
    """Redis server CPU seconds so far (the whole server: other users of it add noise)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def embedded(corpus: Path, work: Path) -> dict[str, Any]:
    """(a): a first run and a no-change run on the in-process default."""
    base = work / "embedded"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    env = deployment_env(base, None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    first, summary = index(corpus, env, base)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    again, _ = index(corpus, env, base)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": first, "cpu": cpu, "no_change_seconds": again, "summary": summary}


def distributed(corpus: Path, work: Path, broker_url: str) -> dict[str, Any]:
    """(b): the same through Redis with 2 worker processes and one writer."""
    base = work / "distributed"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    run_dir = base / "run"
    env = deployment_env(base, broker_url, run_dir)
    client = redis.Redis.from_url(broker_url)
    start = time.perf_counter()
    subprocess.run([str(ROOT / "scripts" / "run-local.sh"), "--no-serve", "--workers", "2", "--threads", "2"],
                   env=env, cwd=base, check=True, capture_output=True, timeout=120)
    startup = time.perf_counter() - start
    time.sleep(1.0)  # let both worker processes finish booting
    writer = int((run_dir / "writer.pid").read_text())
    workers = children_of(int((run_dir / "worker.pid").read_text()))
    pids = {"writer": [writer], "workers": workers}
    cpu0 = {role: sum(cpu_seconds(p) for p in ps) for role, ps in pids.items()}
    redis0 = redis_cpu(client)
    cli0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        first, summary = index(corpus, env, base)
        cli1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = {role: sum(cpu_seconds(p) for p in ps) - cpu0[role] for role, ps in pids.items()}
        cpu["redis"] = redis_cpu(client) - redis0
        cpu["cli"] = (cli1.ru_utime - cli0.ru_utime) + (cli1.ru_stime - cli0.ru_stime)
        again, _ = index(corpus, env, base)
    finally:
        subprocess.run([str(ROOT / "scripts" / "stop-local.sh")], env=env, cwd=base, capture_output=True, timeout=120)
        settings = settings_from_mapping({"broker": {"url": broker_url}}, store_base=base)
        keys = list(client.scan_iter(match=f"{namespace(settings)}:*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
        client.close()
    return {"seconds": first, "startup_seconds": startup, "no_change_seconds": again, "cpu": cpu,
            "summary": summary}


def queue_overhead(corpus: Path, work: Path, broker_url: str, messages: int, batch_files: int) -> dict[str, Any]:
    """(c): CPU per message of send and of consume+ack for no-op messages with a real ingest payload."""
    base = work / "overhead"
    base.mkdir(parents=True, exist_ok=True)
    settings = settings_from_mapping({"broker": {"url": broker_url}, "name": f"bench-{uuid.uuid4().hex[:6]}"},
                                     store_base=base)
    files = walk_root(str(corpus)).files[:batch_files]
    payload = [[f.path, f.root, f.size, f.mtime_ns, None] for f in files]
    broker = build_redis_broker(settings)
    done = threading.Event()
    count = [0]

    def noop(run_id: str, batch: list[list[Any]], force: bool = False) -> None:
        count[0] += 1
        if count[0] >= messages:
            done.set()

    actor = dramatiq.actor(broker=broker, actor_name="noop", queue_name="bench-noop", max_retries=0)(noop)
    redis0 = redis_cpu(broker.client)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(messages):
        actor.send("bench-run", payload, False)
    send_cpu, send_wall = time.process_time() - cpu0, time.perf_counter() - wall0
    redis1 = redis_cpu(broker.client)
    worker = dramatiq.Worker(broker, queues={"bench-noop"}, worker_threads=1, worker_timeout=WORKER_TIMEOUT_MS)
    cpu1, wall1 = time.process_time(), time.perf_counter()
    worker.start()
    finished = done.wait(timeout=600)
    consume_cpu, consume_wall = time.process_time() - cpu1, time.perf_counter() - wall1
    redis2 = redis_cpu(broker.client)
    worker.stop()
    keys = list(broker.client.scan_iter(match=f"{broker.namespace}:*", count=1000))
    if keys:
        broker.client.delete(*keys)
    broker.close()
    if not finished:
        raise SystemExit("the overhead run did not drain")
    return {
        "messages": messages,
        "payload_bytes": len(json.dumps(payload)),
        "send_us": send_cpu / messages * 1e6,
        "send_per_s": messages / send_wall,
        "consume_us": consume_cpu / messages * 1e6,
        "consume_per_s": messages / consume_wall,
        "redis_us": ((redis1 - redis0) + (redis2 - redis1)) / messages * 1e6,
    }


def render(args: argparse.Namespace, stats: Any, rows: list[dict[str, Any]], over: dict[str, Any]) -> str:
    """The RESULTS.md section."""
    emb = [r["embedded"] for r in rows]
    dis = [r["distributed"] for r in rows]
    best_e = min(r["seconds"] for r in emb)
    best_d = min(r["seconds"] for r in dis)
    files = dis[0]["summary"]["files"]
    last = dis[-1]
    per_file_cpu = (last["cpu"]["workers"] + last["cpu"]["writer"]) / files
    per_message_work_us = per_file_cpu * args.batch_files * 1e6
    overhead_us = over["send_us"] + over["consume_us"] + over["redis_us"]
    lines = [
        "## Distributed",
        "",
        f"Command: `.venv/bin/python -m bench.bench_distributed compare --files {args.files} --repeat {args.repeat}`",
        f"({time.strftime('%Y-%m-%d')}; the sides alternate which goes first). Machine: {args.machine}.",
        f"Corpus: bench/lib/corpus.py seed {args.seed}, {stats.files} files, {stats.total_bytes / 1e6:.0f} MB;"
        f" {dis[0]['summary']['chunks']} chunks. Each run into an empty store; batch_files={args.batch_files}.",
        "",
        "| run | embedded (StubBroker, 1 process) | Redis, 2 worker processes + 1 writer | ratio |",
        "| --- | --- | --- | --- |",
    ]
    for i, row in enumerate(rows, 1):
        e, d = row["embedded"], row["distributed"]
        ratio = d["seconds"] / e["seconds"]
        lines.append(f"| first run #{i} | {e['seconds']:.1f} s | {d['seconds']:.1f} s | {ratio:.2f} |")
    lines.append(f"| best first run | {best_e:.1f} s ({files / best_e:.0f} files/s) | {best_d:.1f} s "
                 f"({files / best_d:.0f} files/s) | {best_d / best_e:.2f} |")
    med_e = statistics.median(r["seconds"] for r in emb)
    med_d = statistics.median(r["seconds"] for r in dis)
    lines.append(f"| median first run | {med_e:.1f} s | {med_d:.1f} s | {med_d / med_e:.2f} |")
    lines.append(f"| no-change re-run | {emb[-1]['no_change_seconds']:.2f} s | {last['no_change_seconds']:.2f} s | |")
    cpu = last["cpu"]
    lines += [
        "",
        f"CPU seconds of the last distributed run: writer {cpu['writer']:.1f}, the 2 worker processes "
        f"{cpu['workers']:.1f}, Redis {cpu['redis']:.1f}, the CLI (walk, enqueue, follow) {cpu['cli']:.1f}; "
        f"the embedded process used {emb[-1]['cpu']:.1f}. Starting the processes (run-local.sh, not in the "
        f"times above) took {last['startup_seconds']:.1f} s.",
        "",
        f"Per-message queue overhead ({over['messages']} no-op messages carrying a real {args.batch_files}-file "
        f"ingest payload of {over['payload_bytes']} bytes through the same RedisBroker and middleware, one "
        f"consumer thread): send {over['send_us']:.0f} us CPU ({over['send_per_s']:.0f} msg/s), consume+ack "
        f"{over['consume_us']:.0f} us CPU ({over['consume_per_s']:.0f} msg/s), Redis {over['redis_us']:.0f} us; "
        f"total {overhead_us:.0f} us per message. The work a message carries in the run above is "
        f"{args.batch_files} files x {per_file_cpu * 1e3:.2f} ms CPU (workers + writer) = "
        f"{per_message_work_us / 1e3:.0f} ms, so the queue costs **{overhead_us / per_message_work_us * 100:.2f}%** of"
        f" the per-file work (target < 10%). An ingest batch takes two messages (ingest, then write), so the"
        f" run's queue share is about twice that.",
        NOTES,
    ]
    return "\n".join(lines) + "\n"


def compare(args: argparse.Namespace) -> None:
    """`compare`: run the comparison and print the figures and the RESULTS.md section."""
    configure_logging("WARNING")
    args.machine = machine()
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = args.out / f"corpus-{args.files}-{args.seed}"
    shutil.rmtree(corpus, ignore_errors=True)
    stats = generate(corpus, args.files, args.seed)
    past = int((time.time() - 60) * 1e9)
    for path in corpus.rglob("*.md"):
        os.utime(path, ns=(past, past))
    rows = []
    for i in range(args.repeat):
        # Alternate which side goes first, so drift in the machine's load does not favour one side.
        if i % 2 == 0:
            row = {"embedded": embedded(corpus, args.out), "distributed": distributed(corpus, args.out, args.redis)}
        else:
            dis = distributed(corpus, args.out, args.redis)
            row = {"embedded": embedded(corpus, args.out), "distributed": dis}
        print(json.dumps({"run": i + 1, **{k: {kk: vv for kk, vv in v.items() if kk != "summary"}
                                           for k, v in row.items()}}), flush=True)
        rows.append(row)
    over = queue_overhead(corpus, args.out, args.redis, args.messages, args.batch_files)
    print(json.dumps({"overhead": over}), flush=True)
    section = render(args, stats, rows, over)
    print(section)


def corpus_dir(out: Path, files: int, seed: int) -> Path:
    """The corpus, generated once (a marker file says it is whole) with mtimes a minute in the past."""
    corpus = out / f"corpus-{files}-{seed}"
    marker = out / f"corpus-{files}-{seed}.done"
    if not marker.exists():
        shutil.rmtree(corpus, ignore_errors=True)
        stats = generate(corpus, files, seed)
        past = int((time.time() - 60) * 1e9)
        for path in corpus.rglob("*.md"):
            os.utime(path, ns=(past, past))
        marker.write_text(json.dumps({"files": stats.files, "bytes": stats.total_bytes}))
    return corpus


def store_bytes(store_base: Path) -> int:
    """knowledge.db and its sidecars."""
    return sum(p.stat().st_size for p in store_base.rglob("knowledge.db*") if p.is_file())


def phase(name: str, corpus: Path, out: Path) -> dict[str, Any]:
    """One `knowledge index` through a fresh private Redis and freshly started processes."""
    base = out / "store"
    if name == "first":
        shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True, exist_ok=True)
    run_dir = out / "run"
    server, url = start_redis(out)
    env = deployment_env(base, url, run_dir)
    client = redis.Redis.from_url(url)
    result: dict[str, Any] = {"phase": name}
    sampler: Sampler | None = None
    try:
        subprocess.run([str(ROOT / "scripts" / "run-local.sh"), "--no-serve", "--workers", "2", "--threads", "2"],
                       env=env, cwd=base, check=True, capture_output=True, timeout=120)
        time.sleep(1.5)  # both worker processes boot
        writer = int((run_dir / "writer.pid").read_text())
        supervisor = int((run_dir / "worker.pid").read_text())
        pids = {"writer": writer, "worker supervisor": supervisor, "redis-server": server.pid}
        for i, pid in enumerate(sorted(children_of(supervisor)), 1):
            pids[f"worker {i}"] = pid
        cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
        wal = next(iter(base.rglob("knowledge.db-wal")), base / ".knowledge" / "knowledge.db-wal")
        sampler = Sampler(pids, wal)
        sampler.start()
        started = time.perf_counter()
        cli = subprocess.Popen([KNOWLEDGE, "index", str(corpus), "--json"], env=env, cwd=base,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sampler.pids["cli"] = cli.pid
        stdout_chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: stdout_chunks.append(cli.stdout.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        err = cli.stderr.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(cli.pid, 0)
        seconds = time.perf_counter() - started
        reader.join(timeout=10)
        cli.returncode = os.waitstatus_to_exitcode(status)
        if cli.returncode != 0:
            raise SystemExit(f"knowledge index failed ({cli.returncode}): {err.decode()[-2000:]}")
        summary = json.loads(b"".join(stdout_chunks))
        sampler.pids.pop("cli")
        sampler.stop()
        memory = client.info("memory")
        result.update(
            seconds=round(seconds, 2),
            summary={k: summary.get(k) for k in ("added", "updated", "unchanged", "removed", "failed", "files",
                                                  "chunks")},
            peak_rss_mb={**{k: round(v / 1024, 1) for k, v in sampler.hwm.items()},
                         "cli": round(usage.ru_maxrss / 1024, 1)},
            cpu_s={**{k: round(sampler.cpu.get(k, 0.0) - cpu0.get(k, 0.0), 1) for k in pids},
                   "cli": round(usage.ru_utime + usage.ru_stime, 1)},
            redis_peak_mb=round(int(memory["used_memory_peak"]) / 2**20, 1),
            redis_after_mb=round(int(memory["used_memory"]) / 2**20, 1),
            redis_keys_after=int(client.dbsize()),
            wal_peak_mb=round(sampler.wal_peak / 2**20, 1),
            load=[round(min(sampler.loads), 2), round(max(sampler.loads), 2)] if sampler.loads else [],
        )
    finally:
        if sampler is not None and sampler.is_alive():
            sampler.stop()
        subprocess.run([str(ROOT / "scripts" / "stop-local.sh")], env=env, cwd=base, capture_output=True,
                       timeout=180)
        client.close()
        server.terminate()
        server.wait(timeout=30)
    result["store_mb"] = round(store_bytes(base) / 2**20, 1)
    return result


def large(args: argparse.Namespace) -> None:
    """`large`: run the phases and print one JSON line each."""
    out = (args.out or OUT / "large" / str(args.files)).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    corpus = corpus_dir(out.parent, args.files, args.seed)
    print(json.dumps({"corpus": str(corpus), "seconds": round(time.perf_counter() - started, 1),
                      "load": os.getloadavg()[0]}), flush=True)
    for name in args.phases.split(","):
        print(json.dumps({"files": args.files, **phase(name, corpus, out)}), flush=True)


def main() -> None:
    """compare or large."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    cmp = verbs.add_parser("compare", help="Redis with 2 worker processes vs the in-process default; queue overhead")
    cmp.add_argument("--files", type=int, default=10_000)
    cmp.add_argument("--seed", type=int, default=1)
    cmp.add_argument("--repeat", type=int, default=1)
    cmp.add_argument("--batch-files", type=int, default=32)
    cmp.add_argument("--messages", type=int, default=3000)
    cmp.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    cmp.add_argument("--out", type=Path, default=OUT / "distributed")
    big = verbs.add_parser("large", help="a large tree through a private Redis: time, peak RSS, Redis, WAL, store")
    big.add_argument("--files", type=int, default=10_000)
    big.add_argument("--seed", type=int, default=1)
    big.add_argument("--phases", default="first,nochange")
    big.add_argument("--out", type=Path, default=None, help="default bench/out/large/<files>")
    args = parser.parse_args()
    if args.verb == "compare":
        compare(args)
    else:
        large(args)


if __name__ == "__main__":
    main()
