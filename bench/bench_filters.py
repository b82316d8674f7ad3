"""What a filter costs `/v1/search`: each filter against no filter, per query, on one server (and a baseline's).

    .venv/bin/python -m bench.bench_filters --chunks 100000 --queries 150
    .venv/bin/python -m bench.bench_filters --store /tmp/listings/tldr-store --baseline main --queries 150

Serves a store with `knowledge serve` (a generated corpus from bench/lib/corpus.py indexed once for
about --chunks chunks, or an existing store's base directory with --store). The filters are chosen
from the store's own paths: `all`, the deepest directory holding every document (a filter that
allows everything); `dir5`, the directory holding closest to 5% of the documents (a contiguous
subtree); `glob5`, that directory as a `**` glob; `name5`, a bare-name glob (`b*`, `*ou*`) matching
closest to 5% of the documents, spread across the whole tree (the rows of the span checked one by one). Each query
(running text from bench/lib/samples.py) is asked without a filter and with each filter, in an order
that rotates query by query, over one keep-alive connection. A server keeps a filter's documents for as long
as the store is unchanged, so `dir5_cold` and `name5_cold` add a path no document has, new each query:
the same documents, computed afresh every time (a filter's first query). With --baseline REF a second server
runs that commit's code over the same store, and its requests are interleaved with this tree's, so
before and after come from the same minutes of the same machine. Prints JSON and a markdown table
for bench/RESULTS.md: p50/p95 per variant and each filter's p50 as a ratio to the same server's
unfiltered p50.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.lib.checkout import baseline_tree, tree_python
from bench.lib.machine import machine
from bench.lib.paths import KNOWLEDGE, OUT
from bench.lib.processes import free_port
from bench.lib.samples import sample_queries
from bench.lib.stats import percentiles
from bench.lib.stores import lexical_store
from config.loader import settings_from_mapping
from query.reader import Reader


def choose_filters(settings: Any) -> dict[str, str]:
    """The path filters of the run, chosen from the store's paths (see the module's docstring)."""
    with Reader(settings) as reader:
        paths = [str(p) for (p,) in reader.conn.execute("SELECT path FROM documents")]
    total = len(paths)
    directories: Counter[str] = Counter()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directories["/".join(parts[:depth])] += 1
    everything = max((d for d, n in directories.items() if n == total), key=len, default="")
    five = min(directories, key=lambda d: (abs(directories[d] - total / 20), -len(d)))
    names = [p.rsplit("/", 1)[-1] for p in paths]
    globs: Counter[str] = Counter()
    for name in names:  # bare-name globs: a name's first 1-3 characters, or two characters anywhere in it
        globs.update({f"{name[:n]}*" for n in (1, 2, 3)} | {f"*{name[i:i + 2]}*" for i in range(len(name) - 1)})
    spread = min((g for g in globs if "/" not in g), key=lambda g: (abs(globs[g] - total / 20), g))
    return {"all": everything or "/", "dir5": five, "glob5": f"{five}/**", "name5": spread}


def serve(store: Path, workdir: Path, tree: Path | None) -> tuple[subprocess.Popen[bytes], str]:
    """`knowledge serve` (this tree's, or tree's code) on a free loopback port over store; once it answers."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "knowledge.yaml"
    config.write_text(yaml.safe_dump({"knowledge": {
        "directory": str(store), "expose": {"mcp": {"builtins": ["knowledge_search"], "port": port}}}}))
    args = ["--config", str(config), "serve"]
    if tree is None:
        command, env = [str(KNOWLEDGE), *args], {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    else:
        command, env = tree_python(tree, "-c", "import cli; cli.run()", *args)
    with open(workdir / "serve.err", "w") as err:
        proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"knowledge serve did not start; see {workdir / 'serve.err'}")


def ask(client: httpx.Client, query: str, paths: list[str]) -> tuple[float, int]:
    """Seconds for GET /v1/search (read to its end) and the number of hits."""
    params: list[tuple[str, str | int | float | bool | None]] = [("q", query), ("top_k", "10")]
    params += [("path", p) for p in paths]
    start = time.perf_counter()
    response = client.get("/v1/search", params=params)
    body = response.read()
    elapsed = time.perf_counter() - start
    data = json.loads(body)
    assert response.status_code == 200 and data["status"] == "ok", body[:200]
    return elapsed, len(data["results"])


def _paths(filters: dict[str, str], name: str, i: int) -> list[str]:
    """The path parameters of a variant: a `_cold` one adds a path no document has, new each query, so the
    server cannot answer the filter from what it kept (the same documents, computed afresh)."""
    if name == "none":
        return []
    if name.endswith("_cold"):
        return [filters[name.removesuffix("_cold")], f"no-such-directory-{i}"]
    return [filters[name]]


def measure(servers: dict[str, str], filters: dict[str, str], queries: list[str], warmup: int) -> dict[str, Any]:
    """Every (server, filter) variant per query, the order rotating query by query."""
    names = ("none", *filters, *(f"{f}_cold" for f in ("dir5", "name5")))
    variants = [(s, f) for s in servers for f in names]
    times: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
    hits: dict[tuple[str, str], int] = dict.fromkeys(variants, 0)
    clients = {s: httpx.Client(base_url=url, timeout=120) for s, url in servers.items()}
    try:
        for i, query in enumerate(queries[:warmup] + queries):
            turn = i % len(variants)
            for server, name in variants[turn:] + variants[:turn]:
                elapsed, found = ask(clients[server], query, _paths(filters, name, i))
                if i >= warmup:
                    times[(server, name)].append(elapsed)
                    hits[(server, name)] += found
    finally:
        for client in clients.values():
            client.close()
    out: dict[str, Any] = {}
    for server, name in variants:
        row = percentiles(times[(server, name)])
        row["mean_hits"] = round(hits[(server, name)] / len(queries), 2)
        out[f"{server}:{name}"] = row
    for server, name in variants:
        row = out[f"{server}:{name}"]
        row["ratio_p50"] = round(row["p50_ms"] / out[f"{server}:none"]["p50_ms"], 2)
    return out


def markdown(result: dict[str, Any]) -> str:
    """The figures as a bench/RESULTS.md table."""
    lines = ["| server | filter | path= | p50 ms | p95 ms | p50 / unfiltered | mean hits |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, row in result["variants"].items():
        server, name = key.split(":")
        path = result["filters"].get(name.removesuffix("_cold"), "") + (" + a new path" if "_cold" in name else "")
        lines.append(f"| {server} | {name} | `{path}` | {row['p50_ms']} | {row['p95_ms']} | {row['ratio_p50']}x "
                     f"| {row['mean_hits']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000, help="generated corpus size in chunks (about)")
    parser.add_argument("--store", type=Path, help="an existing store's base directory (its --store-dir)")
    parser.add_argument("--baseline", help="also serve this commit's code over the store, interleaved")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT / "filters")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = args.store.resolve() if args.store else lexical_store(out, args.chunks, args.seed)
    store = base / "knowledge" / "default"
    settings = settings_from_mapping({"directory": str(store)})
    filters = choose_filters(settings)
    queries = sample_queries(settings, args.queries, args.seed)
    trees: dict[str, Path | None] = {"head": None}
    if args.baseline:
        trees["base"] = baseline_tree(args.baseline, out)
    procs: list[subprocess.Popen[bytes]] = []
    servers: dict[str, str] = {}
    try:
        for name, tree in trees.items():
            proc, url = serve(store, out / f"serve-{name}", tree)
            procs.append(proc)
            servers[name] = url
        variants = measure(servers, filters, queries, args.warmup)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
    result = {"store": str(store), "machine": machine(), "baseline": args.baseline, "queries": len(queries),
              "filters": filters, "variants": variants, "load_after": os.getloadavg()[0]}
    print(json.dumps(result, indent=2))
    print(markdown(result))


if __name__ == "__main__":
    main()
