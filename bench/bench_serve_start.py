"""`knowledge serve`'s start: this tree against another commit's, interleaved round by round.

```
.venv/bin/python -m bench.bench_serve_start --baseline main --rounds 6
```

Each round spawns `knowledge serve` of both checkouts in turn (the order alternating), each over the same
generated store (bench/lib/stores.py, about `--chunks` chunks), and times from the spawn: /healthz answering,
the first GET /v1/search answer (bench_lexical.Served) and then the first MCP initialize answered at /mcp; with
the server's CPU seconds (every thread) when its first search was answered. Both run as `python -P -c "import
cli; cli.run()"` with their tree first on the path (bench/lib/checkout.py), so they pay the same start. Then,
per round and checkout, `python -X importtime -c "import query.serve.http_api"`: the sum of the top-level
modules' cumulative import times and how many modules it imported. Prints JSON (medians and every sample) and
a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.bench_lexical import Served
from bench.lib.checkout import baseline_tree, tree_python
from bench.lib.machine import machine
from bench.lib.paths import OUT, ROOT
from bench.lib.procfs import cpu_seconds
from bench.lib.samples import sample_queries
from bench.lib.stores import lexical_store
from config.loader import settings_from_mapping

RUN = "import cli; cli.run()"
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def start(tree: Path, base: Path, query: str) -> dict[str, float]:
    """One spawn of tree's `knowledge serve`: seconds to /healthz, to the first search, to the first MCP answer."""
    command, env = tree_python(tree, "-c", RUN)
    served = Served(base, query, command, env, settle=False)
    try:
        cpu = cpu_seconds(served.proc.pid)
        served.conn.request("POST", "/mcp", INITIALIZE, MCP_HEADERS)
        response = served.conn.getresponse()
        body = json.loads(response.read())
        if response.status != 200 or body["result"]["serverInfo"]["name"] != "knowledge":
            raise RuntimeError(f"/mcp answered {response.status}: {body}")
        mcp_s = time.perf_counter() - served.started
    finally:
        served.close()
    return {"healthz_s": served.health_s, "first_search_s": served.first_answer_s, "first_mcp_s": mcp_s,
            "cpu_at_first_search_s": cpu}


def import_time(tree: Path) -> dict[str, float]:
    """`-X importtime` of `import query.serve.http_api` with tree's code: seconds of the top-level imports, modules."""
    command, env = tree_python(tree, "-X", "importtime", "-c", "import query.serve.http_api")
    lines = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stderr.splitlines()
    rows = [line.split("|") for line in lines if line.startswith("import time:") and "cumulative" not in line]
    top = sum(int(row[1]) for row in rows if not row[2].startswith("  "))
    return {"import_s": top / 1e6, "modules": len(rows)}


def medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(s[key] for s in samples), 3) for key in samples[0]}


def markdown(result: dict[str, Any]) -> str:
    rows = ["| checkout | /healthz s | first /v1/search s | first /mcp s | CPU s at first search | "
            "import http_api s | modules |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, m in result["medians"].items():
        rows.append(f"| {name} | {m['healthz_s']:.2f} | {m['first_search_s']:.2f} | {m['first_mcp_s']:.2f} | "
                    f"{m['cpu_at_first_search_s']:.2f} | {m['import_s']:.2f} | {m['modules']:.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", default="main", help="the commit to compare with (default main)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--chunks", type=int, default=2000, help="generated store size in chunks (about)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT / "serve-start")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = lexical_store(out, args.chunks, args.seed)
    query = sample_queries(settings_from_mapping({"directory": str(base / "knowledge" / "default")}), 1, args.seed)[0]
    trees = {"this tree": ROOT, args.baseline: baseline_tree(args.baseline, out)}
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    loads = [os.getloadavg()[0]]
    for i in range(args.rounds):
        for name in list(trees)[:: 1 if i % 2 == 0 else -1]:
            samples[name].append(start(trees[name], base, query) | import_time(trees[name]))
        loads.append(os.getloadavg()[0])
    result = {"machine": machine(), "chunks": args.chunks, "rounds": args.rounds, "load": loads,
              "medians": {name: medians(s) for name, s in samples.items()}, "samples": samples}
    print(json.dumps(result, indent=2))
    print(markdown(result))


if __name__ == "__main__":
    main()
