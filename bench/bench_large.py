"""A large tree end to end through the distributed shape: 2 worker processes + 1 writer on a private Redis.

For one generated corpus (bench/corpus.py, kept and reused under --out), each phase starts its own
Redis (`redis-server --port P --save "" --appendonly no`, so its peak memory is the phase's) and
its own processes (scripts/run-local.sh --no-serve --workers 2 --threads 2), runs
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
Phases: `first` (an empty store) and `nochange` (the same tree again). Usage:

    .venv/bin/python bench/bench_large.py --files 10000 [--phases first,nochange] [--out bench/out/large]

The 100k run is lexical only: embedding ~1M chunks on a 2-core machine is out of reach.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import redis  # noqa: E402
from corpus import generate  # noqa: E402
from procfs import children_of, cpu_seconds  # noqa: E402

SAMPLE_S = 0.5


def knowledge_bin() -> str:
    """The console script next to this interpreter."""
    return str(Path(sys.executable).with_name("knowledge"))


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def status_kb(pid: int, field: str) -> int:
    """A VmXXX field of /proc/<pid>/status in KiB (0 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """Every SAMPLE_S: the peak RSS and CPU of each named process, the WAL size and the load average."""

    def __init__(self, pids: dict[str, int], wal: Path) -> None:
        super().__init__(daemon=True)
        self.pids = dict(pids)
        self.wal = wal
        self.hwm: dict[str, int] = {}
        self.cpu: dict[str, float] = {}
        self.wal_peak = 0
        self.loads: list[float] = []
        self.stopping = threading.Event()

    def sample(self) -> None:
        for name, pid in list(self.pids.items()):
            kb = status_kb(pid, "VmHWM")
            if kb:
                self.hwm[name] = max(self.hwm.get(name, 0), kb)
                self.cpu[name] = cpu_seconds(pid)
        with contextlib.suppress(OSError):
            self.wal_peak = max(self.wal_peak, self.wal.stat().st_size)
        self.loads.append(os.getloadavg()[0])

    def run(self) -> None:
        while not self.stopping.wait(SAMPLE_S):
            self.sample()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)
        self.sample()


def start_redis(out: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A private redis-server with no persistence; its process and URL."""
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("the private redis-server did not start") from None
            time.sleep(0.05)
    client.close()
    return proc, f"redis://127.0.0.1:{port}/0"


def env_for(store_base: Path, broker_url: str, run_dir: Path) -> dict[str, str]:
    """The deployment's environment: its store, broker and run directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    env.update(KNOWLEDGE_STORE_DIR=str(store_base), KNOWLEDGE_BIN=knowledge_bin(), PYTHONPATH=str(ROOT),
               KNOWLEDGE_BROKER_URL=broker_url, KNOWLEDGE_RUN_DIR=str(run_dir))
    return env


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
    env = env_for(base, url, run_dir)
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
        cli = subprocess.Popen([knowledge_bin(), "index", str(corpus), "--json"], env=env, cwd=base,
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


def main() -> None:
    """Run the phases and print one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--phases", default="first,nochange")
    parser.add_argument("--out", type=Path, default=None, help="default bench/out/large/<files>")
    args = parser.parse_args()
    out = (args.out or ROOT / "bench" / "out" / "large" / str(args.files)).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    corpus = corpus_dir(out.parent, args.files, args.seed)
    print(json.dumps({"corpus": str(corpus), "seconds": round(time.perf_counter() - started, 1),
                      "load": os.getloadavg()[0]}), flush=True)
    for name in args.phases.split(","):
        print(json.dumps({"files": args.files, **phase(name, corpus, out)}), flush=True)


if __name__ == "__main__":
    main()
