"""`match` of two common words at scale: this tree against a baseline revision and a raw FTS5 AND, interleaved.

```
.venv/bin/python -m bench.bench_match --base /tmp/match/store-1000000 --queries 60
.venv/bin/python -m bench.bench_match --base /tmp/match/store-100000 --baseline main
```

`--base` is a store base dir (bench_lexical's generated Zipf store, `--store-dir` of `knowledge`).
Queries are pairs of the corpus's most common words (query/match_sets.py's common_words: the impact
lists' terms). Systems, each timed by this thread's CPU time, the order rotating per query:

- `kept`: this tree's enumerate_documents (limit 50) after a server's warm-up (query/enumerate.py's
  warm), as `knowledge serve` answers once it has started;
- `baseline`: the `--baseline` revision's query/enumerate.py (read with `git show`), its per-term
  documents kept too (every query is run once untimed first, as a server's repeated words are);
- `fts5_and`: the raw FTS5 AND query's complete set, every chunk id holding both words.

Every query's answer (matched count and the 50 listed documents with their counts) is checked equal
between `kept` and `baseline`; a difference stops the run. Also timed: the warm-up itself and the
first match of a pair on an empty cache (two pairs outside the timed ones, one in each order).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from bench.lib.machine import machine
from bench.lib.stats import percentiles
from config.loader import settings_from_mapping
from query import enumerate as enumerate_module
from query import generation
from query.match_sets import common_words
from query.reader import Reader

AND = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?"


def baseline_module(revision: str) -> ModuleType:
    """query/enumerate.py as it is at revision, loaded as a module of its own."""
    root = Path(__file__).resolve().parent.parent
    text = subprocess.run(["git", "show", f"{revision}:query/enumerate.py"], cwd=root, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="bench-match-")) / "baseline_enumerate.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("baseline_enumerate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_enumerate"] = module
    spec.loader.exec_module(module)
    return module


def answer(result: Any) -> tuple[int, list[tuple[str, int, int, int]]]:
    """What two answers must agree on: the matched count and each listed document's path, counts, first chunk."""
    return result.matched, [(d.path, d.body_matches, d.heading_matches, d.ordinal) for d in result.documents]


def thread_cpu(fn: Any, *args: Any) -> tuple[float, Any]:
    started = time.thread_time()
    value = fn(*args)
    return time.thread_time() - started, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    settings = settings_from_mapping({}, store_base=args.base)
    base = baseline_module(args.baseline)
    generation.MAX_HELD *= 2  # both systems keep their columns in the one per-file cache: room for the two
    result: dict[str, Any] = {"machine": machine(), "base": str(args.base), "baseline": args.baseline,
                              "load_start": os.getloadavg()[0]}
    with Reader(settings) as reader, Reader(settings) as other, Reader(settings) as raw:
        result["chunks"] = int(reader.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        words = common_words(reader.conn)
        rng = random.Random(args.seed)
        pairs = [" ".join(rng.sample(words[:12], 2)) for _ in range(args.queries)]
        cold = {"kept": lambda q: enumerate_module.enumerate_documents(settings, q, 50, "matches", reader=reader),
                "baseline": lambda q: base.enumerate_documents(settings, q, 50, "matches", other)}
        result["first_match_cold_s"] = {}  # words outside the timed pairs, each order once (then pages are warm)
        for first, second, text in (("kept", "baseline", " ".join(words[12:14])),
                                    ("baseline", "kept", " ".join(words[14:16]))):
            result["first_match_cold_s"][f"{text}: {first} first"] = {
                name: round(thread_cpu(cold[name], text)[0], 3) for name in (first, second)}
        spent, result["warm_up_words"] = thread_cpu(enumerate_module.warm, reader)
        result["warm_up_cpu_s"] = round(spent, 2)
        for text in dict.fromkeys(pairs):  # the baseline keeps its words as a server would after one query
            base.enumerate_documents(settings, text, 50, "matches", other)
        systems: dict[str, Any] = {
            **cold,
            "fts5_and": lambda q: raw.conn.execute(AND, (" AND ".join(f'"{w}"' for w in q.split()),)).fetchall(),
        }
        cpu: dict[str, list[float]] = {name: [] for name in systems}
        names = list(systems)
        for i, text in enumerate(pairs):
            answers = {}
            for name in names[i % len(names):] + names[:i % len(names)]:
                spent, answers[name] = thread_cpu(systems[name], text)
                cpu[name].append(spent)
            if answer(answers["kept"]) != answer(answers["baseline"]):
                raise SystemExit(f"answers differ for {text!r}")
    found = {name: percentiles(values) for name, values in cpu.items()}
    result["cpu"] = found
    result["ratios"] = {f"kept/{b}": round(found["kept"]["p50_ms"] / max(found[b]["p50_ms"], 1e-3), 3)
                        for b in ("baseline", "fts5_and")}
    result["identical_answers"] = len(pairs)
    result["load_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
