"""The listing commands on a large tree: time to the first line and to the last, this tree against a baseline's.

    .venv/bin/python -m bench.bench_listings --files 100000 --rounds 5
    .venv/bin/python -m bench.bench_listings --files 100000 --rounds 3 --baseline main

Builds (once, under --out) a tree of --files small markdown files in directories of 100 (a title,
a paragraph and a `tags` front-matter field, ~300 bytes each: a store with many documents, not many
chunks) and indexes it with `knowledge index`. Then each round runs, as separate processes and in a
rotating order: `knowledge stats` (the process start and a store open, the floor of any command),
`knowledge sources --limit 50`, `knowledge sources --json`, `knowledge sources --path DIR` (one
directory), `knowledge words '^zeta'` and `knowledge words --limit 50`; with --baseline REF the same
commands of that commit's code too (a command the baseline does not take is skipped for it). Each
is timed from its start to its first line of output and to its end (stdout read through a pipe), in
wall time and in the CPU time of the process (/proc at the first line, rusage at the end: what a
loaded machine does not stretch).
`check` is run once on a pseudo-terminal to record that its progress shows. Prints JSON and a
markdown table for bench/RESULTS.md: medians in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.lib.checkout import baseline_tree, tree_python
from bench.lib.machine import machine
from bench.lib.paths import KNOWLEDGE, OUT
from bench.lib.processes import clean_env
from bench.lib.procfs import cpu_seconds

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "omicron")


def build_tree(root: Path, files: int, seed: int) -> None:
    """files small markdown files under root, 100 a directory, the same bytes for the same arguments."""
    rng = random.Random(seed)
    for n in range(files):
        directory = root / f"d{n // 10000:02d}" / f"e{n // 100 % 100:02d}"
        directory.mkdir(parents=True, exist_ok=True)
        words = " ".join(f"{rng.choice(WORDS)}{rng.randint(0, 5000)}" for _ in range(30))
        (directory / f"note-{n:06d}.md").write_text(
            f"---\ntags: [{rng.choice(WORDS)}]\n---\n# Note {n}\n\n{words}\n", encoding="utf-8")


def store(out: Path, files: int, seed: int) -> Path:
    """The indexed store's base directory for the tree (built and indexed once)."""
    base = out / f"store-{files}"
    if (base / "knowledge" / "default" / "knowledge.db").exists():
        return base
    tree = out / f"tree-{files}"
    if not tree.exists():
        build_tree(tree, files, seed)
    started = time.perf_counter()
    subprocess.run([KNOWLEDGE, "--store-dir", str(base), "index", tree.name], cwd=out, check=True,
                   stdout=subprocess.DEVNULL, env=clean_env())
    print(f"indexed {files} files in {time.perf_counter() - started:.1f} s", flush=True)
    return base


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int, float, float]:
    """(seconds to the first line of stdout, seconds to the end, bytes of stdout, CPU seconds the process had used
    when its first line arrived, CPU seconds in all) of one process. CPU time is what a loaded machine does not
    stretch: the process's own work, not its wait for a core."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    first_cpu = cpu_seconds(proc.pid)
    to_first = time.perf_counter() - started
    rest = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {err.decode(errors='replace').strip().splitlines()[-1:]}")
    return to_first, elapsed, len(first) + len(rest), first_cpu, usage.ru_utime + usage.ru_stime


def commands(directory: str) -> dict[str, list[str]]:
    """The listing commands of a round, by name."""
    return {
        "stats": ["stats"],
        "sources --limit 50": ["sources", "--limit", "50"],
        "sources --json": ["sources", "--json"],
        "sources --path DIR": ["sources", "--path", directory],
        "words ^zeta": ["words", "^zeta"],
        "words --limit 50": ["words", "--limit", "50"],
    }


def run(base: Path, rounds: int, baseline: Path | None, out: Path) -> dict[str, Any]:
    """Every command of every code, rounds times, in a rotating order."""
    directory = f"tree-{base.name.split('-')[-1]}/d00/e00"
    codes: dict[str, tuple[list[str], dict[str, str]]] = {"head": ([KNOWLEDGE], clean_env())}
    if baseline is not None:
        prefix, env = tree_python(baseline, "-c", "import cli; cli.run()")
        codes["base"] = (prefix, env)
    variants = [(code, name) for code in codes for name in commands(directory)]
    samples: dict[tuple[str, str], list[tuple[float, float, int, float, float]]] = {v: [] for v in variants}
    skipped: dict[tuple[str, str], str] = {}
    for r in range(rounds):
        turn = r % len(variants)
        for code, name in variants[turn:] + variants[:turn]:
            if (code, name) in skipped:
                continue
            prefix, env = codes[code]
            try:
                samples[(code, name)].append(
                    timed([*prefix, "--store-dir", str(base), *commands(directory)[name]], env, out))
            except RuntimeError as exc:  # the baseline has no such option, or gave up
                skipped[(code, name)] = str(exc)
    result: dict[str, Any] = {}
    for code, name in variants:
        got = samples[(code, name)]
        if not got:
            result[f"{code}:{name}"] = {"failed": skipped.get((code, name), "")}
            continue
        result[f"{code}:{name}"] = {
            "first_line_ms": round(statistics.median(s[0] for s in got) * 1000, 1),
            "end_ms": round(statistics.median(s[1] for s in got) * 1000, 1),
            "first_line_cpu_ms": round(statistics.median(s[3] for s in got) * 1000, 1),
            "cpu_ms": round(statistics.median(s[4] for s in got) * 1000, 1),
            "bytes": got[0][2], "n": len(got)}
    for key, row in result.items():
        floor = result.get(key.split(":")[0] + ":stats", {})
        if "cpu_ms" in floor and "cpu_ms" in row:
            row["first_line_cpu_vs_stats"] = round(row["first_line_cpu_ms"] / floor["cpu_ms"], 2)
    return result


def check_on_terminal(base: Path) -> str:
    """The first progress text `knowledge check` writes to a terminal's stderr (a pseudo-terminal)."""
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([KNOWLEDGE, "--store-dir", str(base), "check"], stdout=subprocess.DEVNULL,
                                stderr=follower, env=clean_env())
        os.close(follower)
        seen = b""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                data = os.read(leader, 4096)
            except OSError:
                break
            if not data:
                break
            seen += data
        proc.wait(timeout=300)
    finally:
        os.close(leader)
    return seen.decode("utf-8", "replace")[:200]


def markdown(result: dict[str, Any]) -> str:
    """The figures as a bench/RESULTS.md table."""
    lines = ["| code | command | first line: CPU ms | all: CPU ms | first line: wall ms | all: wall ms | bytes |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, row in result.items():
        code, name = key.split(":", 1)
        if "failed" in row:
            lines.append(f"| {code} | `{name}` | failed: {row['failed']} | | | | |")
            continue
        lines.append(f"| {code} | `{name}` | {row['first_line_cpu_ms']} | {row['cpu_ms']} | {row['first_line_ms']} "
                     f"| {row['end_ms']} | {row['bytes']:,} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", help="also run this commit's commands, interleaved")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT / "listings")
    parser.add_argument("--build-only", action="store_true", help="build and index the tree, then stop")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = store(out, args.files, args.seed)
    if args.build_only:
        return
    baseline = baseline_tree(args.baseline, out) if args.baseline else None
    result = {"machine": machine(), "files": args.files, "baseline": args.baseline,
              "commands": run(base, args.rounds, baseline, out), "check_on_terminal": check_on_terminal(base),
              "load_after": os.getloadavg()[0]}
    print(json.dumps(result, indent=2))
    print(markdown(result["commands"]))


if __name__ == "__main__":
    main()
