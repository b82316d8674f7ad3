"""`knowledge` against a peer, qmd (npm `@tobilu/qmd`), measured in one interleaved run on the same corpus.

    .venv/bin/python -m bench.bench_peer                          # 5,000 generated files + Cranfield
    .venv/bin/python -m bench.bench_peer --files 1000 --cli-queries 20 --skip-quality --markdown

qmd (and the Node >= 22 it needs, from the npm package `node@22`) is installed into a scratch
directory outside the repository (`--scratch`, default ~/.cache/knowledge-bench/qmd) when missing;
when npm or its registry cannot be reached the script prints a skip with the reason and exits 0.
Each qmd run gets its own HOME/XDG directories under `--out`, so its index and config never touch
the user's. Both tools run lexical-only: `knowledge` with no embeddings configured, qmd without
`qmd embed` (its `search` is BM25 with no model). Measured, each tool in turn and alternating which
goes first:

- first index (`knowledge index` vs `qmd collection add`) into an empty store, and a no-change
  re-index (`knowledge index` vs `qmd update`), `--rounds` times each; wall time and peak RSS of
  the command's process tree (wait4's rusage: the child and its waited-for descendants);
- store size on disk (every file of the store directory, WAL included);
- CLI query latency: one process per query (`knowledge search Q --top-k 10 --json` vs
  `qmd search Q -n 10 --format json`), median and p90 over `--cli-queries` generated queries;
- server query latency over loopback keep-alive HTTP: `knowledge serve` GET /v1/search vs
  `qmd mcp --http` POST /search (its REST endpoint: one `lex` search, rerank off, limit 10);
- start-up: `python -c pass` vs `node -e 0` (each tool's bare runtime) and `knowledge --version` vs
  `qmd --version`, interleaved; and `python -X importtime` of `import cli` and of every import one
  `knowledge search --json` makes (median and minimum of 9 runs);
- nDCG@10 / Recall@10 / MRR@10 on ../shared/eval/cranfield (1,400 abstracts as `<id>.md`): every
  query through each CLI as it ships (top 20 results, documents deduplicated), which is also a
  second CLI latency sample.

The project's bytecode is compiled first (what `pip install` or a first run leaves), since a
sandbox with PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module on every query.
`--realtime` runs the measured one-shot processes of both tools under `chrt -f 10`, so that on a
shared, loaded machine neither waits for a CPU while it runs.

The 1-minute load average is sampled at every phase; the figures are only comparable within one
run. Prints one JSON object; --markdown also prints the table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lib import cranfield
from bench.lib.corpus import generate, sample_queries
from bench.lib.paths import KNOWLEDGE, OUT, ROOT
from bench.lib.processes import free_port
from bench.lib.stats import pct

QMD_PACKAGE = "@tobilu/qmd"
NODE_PACKAGE = "node@22"
LOADS: list[float] = []
# `chrt -f 10` with --realtime: the one-shot processes measured (queries, start-up, imports) run first-in-first-out
# at a real-time priority, so a busy shared machine delays neither tool while it runs (it still shares the caches).
REALTIME: list[str] = []


@dataclass(frozen=True)
class Proc:
    """One finished command: wall seconds, peak RSS (MiB) of its tree, exit code and stdout."""

    seconds: float
    rss_mib: float
    code: int
    out: str


def load() -> float:
    """Sample the 1-minute load average (kept for the summary) and return it."""
    value = os.getloadavg()[0]
    LOADS.append(value)
    return value


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Proc:
    """Run a command to completion (killed after `timeout` s); wall time and peak RSS via wait4."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    expired = threading.Event()

    def kill() -> None:
        expired.set()
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, kill)
    timer.start()
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read() if proc.stdout else b""))
    reader.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(timeout=30)
    code = proc.returncode
    if code != 0:
        why = f"killed after {timeout} s" if expired.is_set() else f"exited {code}"
        raise RuntimeError(f"{' '.join(args[:4])}... {why}")
    return Proc(seconds, usage.ru_maxrss / 1024, code, b"".join(chunks).decode("utf-8", "replace"))


def dir_bytes(path: Path) -> int:
    """Bytes of every file under path."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def summary(values: list[float], scale: float = 1.0) -> dict[str, float]:
    """Median, p90, min and count of values (times scale)."""
    return {"median": round(statistics.median(values) * scale, 2), "p90": round(pct(values, 0.9) * scale, 2),
            "min": round(min(values) * scale, 2), "n": len(values)}


# --- qmd install ---------------------------------------------------------------------------------

def qmd_ready(scratch: Path, version: str) -> bool:
    """True when the scratch directory holds qmd `version` and a Node 22 binary."""
    manifest = scratch / "node_modules" / "@tobilu" / "qmd" / "package.json"
    node = scratch / "node_modules" / ".bin" / "node"
    if not manifest.is_file() or not node.exists():
        return False
    if json.loads(manifest.read_text()).get("version") != version:
        return False
    probe = subprocess.run([str(node), "--version"], check=False, capture_output=True, text=True, timeout=30)
    return probe.returncode == 0 and probe.stdout.startswith("v22.")


def ensure_qmd(scratch: Path, version: str) -> str | None:
    """Install qmd and node@22 into scratch when missing; the reason to skip, or None when ready."""
    if qmd_ready(scratch, version):
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        ping = subprocess.run([npm, "ping"], check=False, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "the npm registry did not answer `npm ping` within 60 s"
    if ping.returncode != 0:
        return f"the npm registry is unreachable: {(ping.stderr or ping.stdout).strip()[-300:]}"
    print(f"installing {QMD_PACKAGE}@{version} and {NODE_PACKAGE} into {scratch}", file=sys.stderr)
    try:
        done = subprocess.run([npm, "install", "--prefix", str(scratch), "--no-audit", "--no-fund",
                               NODE_PACKAGE, f"{QMD_PACKAGE}@{version}"],
                              check=False, capture_output=True, text=True, timeout=900, cwd=scratch)
    except subprocess.TimeoutExpired:
        return "npm install did not finish within 900 s"
    if done.returncode != 0:
        return f"npm install failed: {done.stderr.strip()[-500:]}"
    return None if qmd_ready(scratch, version) else "qmd or Node 22 is still missing after npm install"


# --- the two tools -------------------------------------------------------------------------------

class Knowledge:
    """`knowledge` with one config file and store under workdir."""

    name = "knowledge"

    def __init__(self, workdir: Path, docs: Path, port: int) -> None:
        self.workdir = workdir
        self.store = workdir / "store"
        self.port = port
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "knowledge.yaml"
        self.config.write_text(json.dumps({"knowledge": {
            "paths": [str(docs)], "directory": str(self.store),
            "expose": {"mcp": {"builtins": ["knowledge_search"], "host": "127.0.0.1", "port": port}}}}))

    def cmd(self, *args: str) -> list[str]:
        return [KNOWLEDGE, "--config", str(self.config), *args]

    def reset(self) -> None:
        shutil.rmtree(self.store, ignore_errors=True)

    def first_index(self) -> Proc:
        return run(self.cmd("index", "--json"), self.env, self.workdir, 3600)

    def reindex(self) -> Proc:
        return run(self.cmd("index", "--json"), self.env, self.workdir, 3600)

    def store_bytes(self) -> int:
        return dir_bytes(self.store)

    def search(self, query: str, k: int) -> tuple[Proc, list[str]]:
        done = run([*REALTIME, *self.cmd("search", "--top-k", str(k), "--json", "--", query)], self.env, self.workdir,
                   120)
        return done, [hit["path"] for hit in json.loads(done.out).get("results", [])]

    def serve_args(self) -> list[str]:
        return self.cmd("serve")

    def http_query(self, conn: http.client.HTTPConnection, query: str) -> int:
        conn.request("GET", "/v1/search?" + urllib.parse.urlencode({"q": query, "top_k": 10}))
        body = json.loads(conn.getresponse().read())
        return len(body.get("results", []))

    health = "/healthz"


class Qmd:
    """qmd with its own HOME/XDG directories under workdir (index, config and caches)."""

    name = "qmd"

    def __init__(self, workdir: Path, docs: Path, port: int, scratch: Path) -> None:
        self.workdir = workdir
        self.docs = docs
        self.port = port
        self.bin = str(scratch / "node_modules" / ".bin" / "qmd")
        self.home = workdir / "home"
        self.env = {**os.environ, "PATH": f"{scratch / 'node_modules' / '.bin'}:{os.environ.get('PATH', '')}",
                    "HOME": str(self.home), "XDG_CACHE_HOME": str(self.home / ".cache"),
                    "XDG_CONFIG_HOME": str(self.home / ".config"), "NO_COLOR": "1"}
        for key in ("INDEX_PATH", "QMD_CONFIG_DIR", "QMD_HOST"):
            self.env.pop(key, None)
        workdir.mkdir(parents=True, exist_ok=True)

    def reset(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)

    def first_index(self) -> Proc:
        return run([self.bin, "collection", "add", str(self.docs), "--name", "bench"], self.env, self.workdir, 3600)

    def reindex(self) -> Proc:
        return run([self.bin, "update"], self.env, self.workdir, 3600)

    def store_bytes(self) -> int:
        return dir_bytes(self.home / ".cache" / "qmd")

    def search(self, query: str, k: int) -> tuple[Proc, list[str]]:
        done = run([*REALTIME, self.bin, "search", "-n", str(k), "--format", "json", "--", query], self.env,
                   self.workdir, 120)
        text = done.out.strip()
        hits = json.loads(text[text.find("["):]) if "[" in text else []
        return done, [hit["file"] for hit in hits]

    def serve_args(self) -> list[str]:
        return [self.bin, "mcp", "--http", "--port", str(self.port)]

    def http_query(self, conn: http.client.HTTPConnection, query: str) -> int:
        payload = {"searches": [{"type": "lex", "query": query}], "limit": 10, "rerank": False}
        conn.request("POST", "/search", body=json.dumps(payload), headers={"Content-Type": "application/json"})
        body = json.loads(conn.getresponse().read())
        return len(body.get("results", []))

    health = "/health"


Tool = Knowledge | Qmd


def group_hwm_mib(pgid: int) -> float:
    """Summed peak RSS (VmHWM) of the live processes in a process group, in MiB."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total / 1024


@contextmanager
def server(tool: Tool, logdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Start the tool's server in its own process group, wait (60 s at most) for health, stop it after."""
    with open(logdir / f"{tool.name}-serve.log", "wb") as log:
        proc = subprocess.Popen(tool.serve_args(), cwd=tool.workdir, env=tool.env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", tool.port, timeout=2)
                conn.request("GET", tool.health, headers={"Host": f"localhost:{tool.port}"})
                if conn.getresponse().status == 200:
                    conn.close()
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tool.name} server did not start; see {logdir}/{tool.name}-serve.log")
            time.sleep(0.2)
        yield proc
    finally:
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue


# --- phases --------------------------------------------------------------------------------------

def interleaved(tools: tuple[Tool, Tool], step: int) -> tuple[Tool, Tool]:
    """The pair in the order of this step: each tool goes first every other step."""
    return tools if step % 2 == 0 else (tools[1], tools[0])


def index_phase(tools: tuple[Tool, Tool], rounds: int) -> dict[str, Any]:
    """First index and no-change re-index, `rounds` times, alternating which tool goes first."""
    out: dict[str, dict[str, list[float]]] = {t.name: {"first_s": [], "first_rss": [], "again_s": [],
                                                       "again_rss": []} for t in tools}
    sizes: dict[str, int] = {}
    for step in range(rounds):
        for tool in interleaved(tools, step):
            tool.reset()
            load()
            first = tool.first_index()
            again = tool.reindex()
            fig = out[tool.name]
            fig["first_s"].append(first.seconds)
            fig["first_rss"].append(first.rss_mib)
            fig["again_s"].append(again.seconds)
            fig["again_rss"].append(again.rss_mib)
            sizes[tool.name] = tool.store_bytes()
            print(f"  {tool.name} round {step + 1}: first {first.seconds:.1f} s, again {again.seconds:.2f} s,"
                  f" load {LOADS[-1]:.2f}", file=sys.stderr)
    return {name: {"first_index_s": round(statistics.median(f["first_s"]), 2),
                   "first_index_all_s": [round(x, 2) for x in f["first_s"]],
                   "reindex_s": round(statistics.median(f["again_s"]), 2),
                   "reindex_all_s": [round(x, 2) for x in f["again_s"]],
                   "index_peak_rss_mib": round(max(f["first_rss"]), 1),
                   "reindex_peak_rss_mib": round(max(f["again_rss"]), 1),
                   "store_mb": round(sizes[name] / 1e6, 2)} for name, f in out.items()}


def cli_phase(tools: tuple[Tool, Tool], queries: list[str], k: int,
              on_hits: Callable[[str, int, list[str]], None] | None = None) -> dict[str, Any]:
    """One process per query per tool, alternating which goes first; two warm-up queries each."""
    for tool in tools:
        for query in queries[:2]:
            tool.search(query, k)
    times: dict[str, list[float]] = {t.name: [] for t in tools}
    rss: dict[str, list[float]] = {t.name: [] for t in tools}
    hits: dict[str, list[int]] = {t.name: [] for t in tools}
    for i, query in enumerate(queries):
        if i % 20 == 0:
            load()
        for tool in interleaved(tools, i):
            done, paths = tool.search(query, k)
            times[tool.name].append(done.seconds)
            rss[tool.name].append(done.rss_mib)
            hits[tool.name].append(len(paths))
            if on_hits is not None:
                on_hits(tool.name, i, paths)
    return {name: {"ms": summary(times[name], 1000), "peak_rss_mib": round(statistics.median(rss[name]), 1),
                   "mean_hits": round(statistics.mean(hits[name]), 1)} for name in times}


def server_phase(tools: tuple[Tool, Tool], queries: list[str], logdir: Path) -> dict[str, Any]:
    """Both servers up at once; keep-alive requests alternating between them after 10 warm-ups each."""
    with server(tools[0], logdir) as first, server(tools[1], logdir) as second:
        conns = {t.name: http.client.HTTPConnection("127.0.0.1", t.port, timeout=30) for t in tools}
        times: dict[str, list[float]] = {t.name: [] for t in tools}
        hits: dict[str, list[int]] = {t.name: [] for t in tools}
        for tool in tools:
            for query in queries[:10]:
                tool.http_query(conns[tool.name], query)
        for i, query in enumerate(queries):
            if i % 100 == 0:
                load()
            for tool in interleaved(tools, i):
                started = time.perf_counter()
                count = tool.http_query(conns[tool.name], query)
                times[tool.name].append(time.perf_counter() - started)
                hits[tool.name].append(count)
        rss = {tools[0].name: group_hwm_mib(first.pid), tools[1].name: group_hwm_mib(second.pid)}
        for conn in conns.values():
            conn.close()
    return {name: {"ms": summary(times[name], 1000), "server_peak_rss_mib": round(rss[name], 1),
                   "mean_hits": round(statistics.mean(hits[name]), 1)} for name in times}


def quality_phase(tools: tuple[Tool, Tool], rounds: int, data_dir: Path, limit: int) -> dict[str, Any]:
    """Index Cranfield with both tools, run its queries (all 225 by default) through each CLI, score them."""
    index = index_phase(tools, rounds)
    queries = cranfield.load_queries(data_dir)
    qids = list(queries)[:limit]
    runs: dict[str, dict[str, list[str]]] = {t.name: {} for t in tools}

    def keep(name: str, i: int, paths: list[str]) -> None:
        runs[name][qids[i]] = cranfield.dedupe(cranfield.doc_id_from_path(p) for p in paths)

    latency = cli_phase(tools, [queries[q] for q in qids], 20, keep)
    qrels = cranfield.load_qrels(data_dir)
    qrels = {qid: gains for qid, gains in qrels.items() if qid in set(qids)}
    metrics = {name: {m: round(v, 4) for m, v in cranfield.evaluate(run, qrels).items() if m != "recall@100"}
               for name, run in runs.items()}
    return {"index": index, "cli": latency, "metrics": metrics}


PROJECT_PACKAGES = ("config", "pipeline", "workers", "query", "cli")


def compile_bytecode() -> str:
    """Write the project's .pyc files, as `pip install` (or a first run) leaves them; say how it was found.

    A process started with PYTHONDONTWRITEBYTECODE=1 (set in some sandboxes and containers) never
    writes them itself, so an editable checkout would compile every module of the CLI from source on
    every query: not how the tool runs once installed.
    """
    import compileall

    before = sum(1 for pkg in PROJECT_PACKAGES for _ in (ROOT / pkg).rglob("__pycache__/*.pyc"))
    ok = all(compileall.compile_dir(str(ROOT / pkg), quiet=1) for pkg in PROJECT_PACKAGES)
    env = "PYTHONDONTWRITEBYTECODE=1" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "writes bytecode"
    return f"{env}; {before} project .pyc before, compiled by the bench: {'ok' if ok else 'FAILED'}"


def _importtime(args: list[str], cwd: Path, env: dict[str, str] | None) -> dict[str, int]:
    """Cumulative microseconds per top-level import of one `python -X importtime` run."""
    done = subprocess.run([*REALTIME, sys.executable, "-X", "importtime", *args], check=False, capture_output=True,
                          text=True,
                          cwd=cwd, env=env, timeout=120)
    tops: dict[str, int] = {}
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            tops[parts[2].strip()] = int(parts[1])
    return tops


def import_times(tool: Knowledge, query: str, runs: int = 9) -> dict[str, float]:
    """Medians and minima over `runs` of -X importtime: `import cli`, and every import one `search --json` makes.

    The search path's figure is the sum of the cumulative times of the top-level imports of a whole
    in-process `knowledge search` (the CLI, its command module and what the command imports lazily),
    interpreter start-up (site and the encodings) left out.
    """
    startup = {"site", "encodings", "encodings.utf_8", "_frozen_importlib_external", "zipimport", "_signal", "io",
               "_io", "marshal", "posix", "time", "_codecs", "codecs", "_abc", "abc"}
    code = ("import sys\nfrom cli import main\n"
            f"main({['--config', str(tool.config), 'search', '--top-k', '10', '--json', '--', query]!r})")
    cli_ms, search_ms = [], []
    for _ in range(runs):
        cli_ms.append(_importtime(["-c", "import cli"], ROOT, None).get("cli", 0) / 1000)
        tops = _importtime(["-c", code], tool.workdir, tool.env)
        search_ms.append(sum(us for name, us in tops.items() if name not in startup) / 1000)
    return {"import_cli_ms": round(statistics.median(cli_ms), 1), "import_cli_min_ms": round(min(cli_ms), 1),
            "search_path_imports_ms": round(statistics.median(search_ms), 1),
            "search_path_imports_min_ms": round(min(search_ms), 1)}


def startup_phase(qmd: Qmd, rounds: int = 15) -> dict[str, dict[str, float]]:
    """Medians of bare runtimes and of each tool's --version, interleaved `rounds` times."""
    node = str(Path(qmd.bin).with_name("node"))
    commands = {"python -c pass": ([sys.executable, "-c", "pass"], None),
                "node -e 0": ([node, "-e", "0"], qmd.env),
                "knowledge --version": ([KNOWLEDGE, "--version"], None),
                "qmd --version": ([qmd.bin, "--version"], qmd.env)}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(rounds):
        if i % 5 == 0:
            load()
        for name, (args, env) in commands.items():
            times[name].append(run([*REALTIME, *args], env or dict(os.environ), ROOT, 60).seconds)
    return {name: summary(values, 1000) for name, values in times.items()}


def versions(qmd: Qmd) -> dict[str, str]:
    """Versions of the two tools and their runtimes."""
    def out(args: list[str], env: dict[str, str] | None = None) -> str:
        done = subprocess.run(args, check=False, capture_output=True, text=True, timeout=60, env=env)
        return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr) else "?"

    node = str(Path(qmd.bin).with_name("node"))
    probe = ("const D = require('better-sqlite3');"
             " console.log(new D(':memory:').prepare('select sqlite_version() v').get().v)")
    return {"knowledge": out([KNOWLEDGE, "--version"]), "qmd": out([qmd.bin, "--version"], qmd.env),
            "python": platform.python_version(), "node": out([node, "--version"]),
            "sqlite (knowledge)": out([sys.executable, "-c", "import pysqlite3.dbapi2 as s; print(s.sqlite_version)"]),
            "sqlite (qmd)": subprocess.run([node, "-e", probe], check=False, capture_output=True, text=True, timeout=60,
                                           cwd=Path(qmd.bin).parents[1].parent).stdout.strip() or "?"}


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def markdown(result: dict[str, Any]) -> str:
    """The RESULTS.md table: one row per figure, knowledge / qmd / ratio."""
    k, q = "knowledge", "qmd"
    idx, cli, srv = result["index"], result["cli"], result["server"]
    rows: list[tuple[str, float, float, str]] = [
        ("first index (s, median)", idx[k]["first_index_s"], idx[q]["first_index_s"], "{:.2f}"),
        ("no-change re-index (s, median)", idx[k]["reindex_s"], idx[q]["reindex_s"], "{:.2f}"),
        ("peak RSS, first index (MiB)", idx[k]["index_peak_rss_mib"], idx[q]["index_peak_rss_mib"], "{:.0f}"),
        ("peak RSS, re-index (MiB)", idx[k]["reindex_peak_rss_mib"], idx[q]["reindex_peak_rss_mib"], "{:.0f}"),
        ("store size (MB)", idx[k]["store_mb"], idx[q]["store_mb"], "{:.1f}"),
        ("CLI query, median (ms)", cli[k]["ms"]["median"], cli[q]["ms"]["median"], "{:.0f}"),
        ("CLI query, p90 (ms)", cli[k]["ms"]["p90"], cli[q]["ms"]["p90"], "{:.0f}"),
        ("CLI query process peak RSS (MiB, median)", cli[k]["peak_rss_mib"], cli[q]["peak_rss_mib"], "{:.0f}"),
        ("bare runtime start-up, median (ms): `python -c pass` / `node -e 0`",
         result["startup"]["python -c pass"]["median"], result["startup"]["node -e 0"]["median"], "{:.0f}"),
        ("`--version`, median (ms)", result["startup"]["knowledge --version"]["median"],
         result["startup"]["qmd --version"]["median"], "{:.0f}"),
        ("server query, median (ms)", srv[k]["ms"]["median"], srv[q]["ms"]["median"], "{:.2f}"),
        ("server query, p90 (ms)", srv[k]["ms"]["p90"], srv[q]["ms"]["p90"], "{:.2f}"),
        ("server peak RSS (MiB)", srv[k]["server_peak_rss_mib"], srv[q]["server_peak_rss_mib"], "{:.0f}"),
    ]
    if result.get("quality", {}).get("metrics"):
        qual = result["quality"]
        rows += [
            ("Cranfield first index (s, median)", qual["index"][k]["first_index_s"],
             qual["index"][q]["first_index_s"], "{:.2f}"),
            ("Cranfield CLI query, median (ms)", qual["cli"][k]["ms"]["median"], qual["cli"][q]["ms"]["median"],
             "{:.0f}"),
            ("Cranfield nDCG@10", qual["metrics"][k]["ndcg@10"], qual["metrics"][q]["ndcg@10"], "{:.3f}"),
            ("Cranfield Recall@10", qual["metrics"][k]["recall@10"], qual["metrics"][q]["recall@10"], "{:.3f}"),
            ("Cranfield MRR@10", qual["metrics"][k]["mrr@10"], qual["metrics"][q]["mrr@10"], "{:.3f}"),
        ]
    lines = ["| measurement | knowledge | qmd | knowledge / qmd |", "| --- | --- | --- | --- |"]
    lines += [f"| {label} | {fmt.format(a)} | {fmt.format(b)} | {ratio(a, b)} |" for label, a, b, fmt in rows]
    imports = result["imports"]
    lines.append(f"\nImports (-X importtime, median / min of 9 runs): `import cli` {imports['import_cli_ms']} / "
                 f"{imports['import_cli_min_ms']} ms; every import of one `knowledge search --json` "
                 f"{imports['search_path_imports_ms']} / {imports['search_path_imports_min_ms']} ms. "
                 f"Bytecode: {result['bytecode']}.")
    la = result["load"]
    realtime = f" Queries, start-up and imports run under `{result['realtime']}`." if result["realtime"] else ""
    lines.append(f"\nLoad average (1 min) during the run: min {la['min']}, mean {la['mean']}, max {la['max']}"
                 f" ({la['samples']} samples); CPUs: {os.cpu_count()}.{realtime}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Install qmd when missing, run every phase interleaved, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=5000, help="generated corpus size (bench/lib/corpus.py)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="first index + re-index repetitions per tool")
    parser.add_argument("--cli-queries", type=int, default=40, help="measured CLI queries per tool")
    parser.add_argument("--server-queries", type=int, default=300, help="measured server queries per tool")
    parser.add_argument("--skip-quality", action="store_true", help="no Cranfield nDCG phase")
    parser.add_argument("--cranfield", type=Path, default=cranfield.DATA_DIR,
                        help="Cranfield data (corpus.jsonl, queries.jsonl, qrels); default ../shared/eval/cranfield")
    parser.add_argument("--quality-queries", type=int, default=225, help="Cranfield queries to run (first N)")
    parser.add_argument("--qmd-version", default="2.8.3")
    parser.add_argument("--scratch", type=Path, default=Path.home() / ".cache" / "knowledge-bench" / "qmd",
                        help="where qmd and node@22 are installed (outside the repository)")
    parser.add_argument("--out", type=Path, default=OUT / "peer")
    parser.add_argument("--markdown", action="store_true", help="also print the markdown table")
    parser.add_argument("--realtime", action="store_true",
                        help="run the measured one-shot processes (CLI queries, start-up, imports) under `chrt -f 10` "
                             "(root or CAP_SYS_NICE): a loaded machine then delays neither tool's process")
    args = parser.parse_args(argv)
    if args.realtime:
        REALTIME[:] = ["chrt", "-f", "10"]

    reason = ensure_qmd(args.scratch, args.qmd_version)
    if reason is not None:
        print(json.dumps({"skipped": True, "reason": reason}))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    docs = args.out / f"corpus-{args.files}-{args.seed}"
    if not (docs / ".complete").exists():
        shutil.rmtree(docs, ignore_errors=True)
        generate(docs, args.files, args.seed)
        (docs / ".complete").touch()
    tools = (Knowledge(args.out / "knowledge", docs, free_port()), Qmd(args.out / "qmd", docs, free_port(),
                                                                       args.scratch))
    result: dict[str, Any] = {"corpus": {"files": args.files, "seed": args.seed, "mb": round(dir_bytes(docs) / 1e6, 1)},
                              "bytecode": compile_bytecode(), "versions": versions(tools[1]),
                              "realtime": " ".join(REALTIME) or None}
    started = time.monotonic()
    print("index ...", file=sys.stderr)
    result["index"] = index_phase(tools, args.rounds)
    print("cli ...", file=sys.stderr)
    cli_queries = sample_queries(args.cli_queries + 2, seed=args.seed + 100)
    result["cli"] = cli_phase(tools, cli_queries, 10)
    print("start-up ...", file=sys.stderr)
    result["startup"] = startup_phase(tools[1])
    result["imports"] = import_times(tools[0], cli_queries[0])
    print("server ...", file=sys.stderr)
    result["server"] = server_phase(tools, sample_queries(args.server_queries + 10, seed=args.seed + 200), args.out)
    if not args.skip_quality and not (args.cranfield / "corpus.jsonl").is_file():
        result["quality"] = {"skipped": f"no Cranfield data at {args.cranfield} (pass --cranfield DIR)"}
    elif not args.skip_quality:
        print("cranfield ...", file=sys.stderr)
        cdocs = args.out / "cranfield-docs"
        if len(list(cdocs.glob("*.md"))) != 1400:
            cranfield.write_corpus(cdocs, args.cranfield)
        ctools = (Knowledge(args.out / "cranfield-knowledge", cdocs, free_port()),
                  Qmd(args.out / "cranfield-qmd", cdocs, free_port(), args.scratch))
        result["quality"] = quality_phase(ctools, 1, args.cranfield, args.quality_queries)
    load()
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["load"] = {"min": round(min(LOADS), 2), "mean": round(statistics.mean(LOADS), 2),
                      "max": round(max(LOADS), 2), "samples": len(LOADS)}
    result["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
    print(json.dumps(result))
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    if args.markdown:
        print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
