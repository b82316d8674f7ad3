"""Issue 33's crafted files, each indexed beside ordinary ones by a baseline commit and by this tree.

For each case (the files of tests/faults/hostile_files.py at the issue's sizes): a tree of 20
generated markdown files and the crafted file, `knowledge index TREE --json` run as a user runs it
(in-process default, a fresh store), capped at --cap seconds of wall time (a run past it is killed:
"stalled"). Reports per case and tree the wall seconds, the peak RSS of the run's processes (MiB),
the exit, how many documents landed and what became of the crafted file. Usage:

    .venv/bin/python -m bench.bench_stalls --baseline 833466d [--cap 120] [--cases adoc-heading-4000-spaces,...]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.lib.checkout import baseline_tree, tree_python
from bench.lib.corpus import generate
from bench.lib.paths import OUT, ROOT
from tests.faults import hostile_files as hostile

# One run, measured from a process of its own so its peak RSS is the run's (its waited-for descendants').
MEASURE = """
import json, resource, subprocess, sys, time
cap = float(sys.argv[1])
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    out, err = proc.communicate(timeout=cap)
    code = proc.returncode
except subprocess.TimeoutExpired:
    proc.kill()
    out, err = proc.communicate()
    code = None
wall = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"wall_s": round(wall, 2), "rss_mib": round(rss), "exit": code, "out": out, "err": err[-400:]}))
"""


def measure(command: list[str], env: dict[str, str], cap: float) -> dict[str, Any]:
    """Wall, peak RSS, exit and output of command, killed past cap seconds."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(cap), *command], env=env, capture_output=True,
                          text=True, check=True)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def outcome(result: dict[str, Any], name: str) -> dict[str, Any]:
    """The row of one run: its figures and what became of the crafted file name."""
    row = {k: result[k] for k in ("wall_s", "rss_mib", "exit")}
    if result["exit"] is None:
        return {**row, "landed": None, "crafted": "stalled (killed at the cap)"}
    try:
        summary = json.loads(result["out"])
    except ValueError:
        return {**row, "landed": None, "crafted": f"no summary: {result['err'][-200:]}"}
    skipped = {Path(s["path"]).name: s["reason"] for s in summary.get("skipped", [])}
    failed = {Path(f["path"]).name: f["reason"] for f in summary.get("failures", [])}
    crafted = skipped.get(name) or failed.get(name) or "indexed"
    return {**row, "landed": summary.get("added"), "crafted": crafted}


# name -> (file name, its bytes)
CASES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "pdf-5000-pages-one-blank-stream": ("shared.pdf", lambda: hostile.pdf_pages(5000, hostile.blank_stream(200_000))),
    "docx-10M-empty-paragraphs": ("paragraphs.docx", lambda: hostile.docx_paragraphs(10_000_000)),
    "docx-3.3M-empty-cells": ("cells.docx", lambda: hostile.docx_paragraphs(0, cells=3_300_000)),
    "adoc-heading-4000-spaces": ("heading.adoc", lambda: hostile.adoc_heading(4000)),
    "html-unclosed-tags": ("tags.html", lambda: hostile.html_open_tags(200_000)),
    "org-unclosed-drawers": ("drawers.org", lambda: hostile.org_drawers(250_000)),
    "org-heading-64000-spaces": ("heading.org", lambda: hostile.org_heading(64_000)),
    "mdx-174k-code-spans": ("spans.mdx", lambda: hostile.mdx_code_spans(174_000)),
    "rst-150k-row-table": ("table.rst", lambda: hostile.rst_table(150_000)),
    "rst-20000-character-line": ("line.rst", lambda: hostile.rst_long_line(20_000)),
    "pdf-100k-pages": ("pages.pdf", lambda: hostile.pdf_pages(100_000)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the commit to compare with (e.g. main)")
    parser.add_argument("--cap", type=float, default=120.0, help="wall seconds before a run is killed")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--out", type=Path, default=OUT / "stalls")
    args = parser.parse_args()
    tree = baseline_tree(args.baseline, args.out)
    rows: dict[str, dict[str, Any]] = {}
    for case in args.cases.split(","):
        name, make = CASES[case]
        corpus = args.out / "trees" / case
        shutil.rmtree(corpus, ignore_errors=True)
        generate(corpus, 20, seed=3)
        data = make()
        (corpus / name).write_bytes(data)
        rows[case] = {"bytes": len(data)}
        for label, code_tree in (("baseline", tree), ("this_tree", ROOT)):
            store = args.out / "stores" / f"{case}-{label}"
            shutil.rmtree(store, ignore_errors=True)
            command, env = tree_python(code_tree, "-c", "import cli; cli.run()", "index", str(corpus), "--json")
            env["KNOWLEDGE_STORE_DIR"] = str(store)
            rows[case][label] = outcome(measure(command, env, args.cap), name)
            print(case, label, json.dumps(rows[case][label]), file=sys.stderr, flush=True)
    print(json.dumps({"machine": f"{platform.node()} Python {platform.python_version()}",
                      "when": time.strftime("%Y-%m-%d %H:%M"), "baseline": args.baseline, "cap_s": args.cap,
                      "cases": rows}))


if __name__ == "__main__":
    main()
