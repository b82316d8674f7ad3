"""The real tree's English questions: how many find their page, and how English their top k is.

Over a store of the FastAPI/pydantic/sqlmodel/typer docs tree (bench/realtree/README.md) and the
cases of bench/realtree/fastapi_cases.jsonl (each an English question with its English page), it
prints per case whether the page is in the top k, how many of the k hits are English pages and how
many are a second (or third) language of a page already above, then the totals:

    passed 14 of 20 in the top 5
    English share of the top-5 hits: 0.750 (75 of 100)
    repeated translations in the top 5: 12

A hit is English unless its path is under `fastapi/docs/<lang>/` with another language (the other
three projects are English), and a page's languages are the paths that differ only in that
segment: both told from paths alone, so the same script measures a store built by any commit (run
it with that commit's code first on the path: PYTHONPATH=<checkout> python -P -m bench.bench_realtree).
It ranks through query.search.search with the store's default configuration (lexical without
embeddings). Usage:
    .venv/bin/python -m bench.bench_realtree --store-dir /tmp/lang/realtree/.k \\
        --cases bench/realtree/fastapi_cases.jsonl [-k 5] [--json] [--lang any] [--cost ROUNDS]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.loader import load_settings
from query.search import search

TRANSLATED = "fastapi/docs/"


def language_of(path: str) -> str:
    """The language a path is in: the segment after fastapi/docs/, else English."""
    if not path.startswith(TRANSLATED):
        return "en"
    parts = path.split("/")
    return parts[2] if len(parts) > 3 else "en"


def page_of(path: str) -> str:
    """The page a path is a language of (its language segment set aside)."""
    if not path.startswith(TRANSLATED):
        return path
    parts = path.split("/")
    return "/".join([*parts[:2], "*", *parts[3:]])


@dataclass(frozen=True)
class Outcome:
    """One case's top k: found its page, English hits, repeated translations."""

    query: str
    passed: bool
    english: int
    hits: int
    repeated: int


def measure(store_dir: Path, cases: list[dict[str, str]], k: int, lang: str | None = None) -> list[Outcome]:
    """Each case ranked once through search (the store's default configuration; `lang` as --lang takes it)."""
    settings = load_settings(None, str(store_dir))  # as `knowledge --store-dir DIR` reads it
    asked: dict[str, Any] = {} if lang is None else {"lang": lang}  # an older commit's search takes no lang
    out: list[Outcome] = []
    for case in cases:
        hits = search(settings, case["query"], top_k=k, **asked).hits[:k]
        paths = [h.path for h in hits]
        pages = [page_of(p) for p in dict.fromkeys(paths)]
        out.append(Outcome(case["query"], any(case["expect"].casefold() in p.casefold() for p in paths),
                           sum(language_of(p) == "en" for p in paths), len(paths), len(pages) - len(set(pages))))
    return out


def cost(store_dir: Path, cases: list[dict[str, str]], k: int, rounds: int) -> tuple[float, float]:
    """Mean thread CPU seconds of one search with the language stage and with `lang any`, the two interleaved
    query by query over `rounds` rounds on one open Reader (so both pay the same caches)."""
    from query.reader import Reader

    settings = load_settings(None, str(store_dir))
    spent = {None: 0.0, "any": 0.0}
    with Reader(settings) as reader:
        for _ in range(rounds):
            for case in cases:
                for lang in (None, "any"):
                    began = time.thread_time()
                    search(settings, case["query"], top_k=k, reader=reader, lang=lang)
                    spent[lang] += time.thread_time() - began
    runs = rounds * len(cases)
    return spent[None] / runs, spent["any"] / runs


def read_cases(path: Path) -> list[dict[str, str]]:
    """The cases of a JSON-lines file (comment lines start with #)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip() and not line.startswith("#")]


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store-dir", type=Path, required=True, help="as `knowledge --store-dir` takes it")
    parser.add_argument("--cases", type=Path, required=True)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the totals as one JSON object")
    parser.add_argument("--lang", default=None, help="search with this lang (`any`: no language stage)")
    parser.add_argument("--cost", type=int, default=0, metavar="ROUNDS",
                        help="also time the stage: CPU per search with and without it, interleaved, ROUNDS rounds")
    args = parser.parse_args(argv)
    found = measure(args.store_dir, read_cases(args.cases), args.k, args.lang)
    passed = sum(o.passed for o in found)
    english, hits = sum(o.english for o in found), sum(o.hits for o in found)
    repeated = sum(o.repeated for o in found)
    if args.json:
        print(json.dumps({"passed": passed, "cases": len(found), "k": args.k, "english": english, "hits": hits,
                          "english_share": round(english / hits, 3) if hits else None, "repeated": repeated}))
        return 0
    for o in found:
        print(f"{'pass' if o.passed else 'FAIL'}  english {o.english}/{o.hits}  repeated {o.repeated}  {o.query}")
    print(f"passed {passed} of {len(found)} in the top {args.k}")
    print(f"English share of the top-{args.k} hits: {english / hits if hits else 0:.3f} ({english} of {hits})")
    print(f"repeated translations in the top {args.k}: {repeated}")
    if args.cost:
        staged, off = cost(args.store_dir, read_cases(args.cases), args.k, args.cost)
        print(f"CPU per search: {staged * 1e3:.2f} ms with the language stage, {off * 1e3:.2f} ms with lang any "
              f"(ratio {staged / off:.2f}; {args.cost} rounds, interleaved)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
