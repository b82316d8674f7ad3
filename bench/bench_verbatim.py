"""Exact-match protection (query/verbatim.py): where verbatim sections rank, lexical vs plain RRF vs hybrid.

Two query sets, each indexed through the real pipeline (`knowledge index` in a subprocess) with
the loopback hashed-bag-of-words embeddings server (tests/embedserver.py):
  fixture  tests/query/verbatim_set.py: 10 identifiers, error strings and quoted phrases;
  docs     this repository's docs/ folder, queried with every backticked identifier the detector
           marks (query/terms.py verbatim_phrases), up to --max-docs-queries of them.
Per verbatim section (a lexical candidate holding the query's phrase) it prints its rank in the
lexical tier, in plain RRF (the hybrid ranking before protection) and in the shipped hybrid
ranking, and a summary: how many rank below their lexical rank, and the mean rank. Usage:
    .venv/bin/python -m bench.bench_verbatim [--max-docs-queries 40]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.lib.paths import ROOT
from config.loader import settings_from_mapping
from config.settings import Settings
from query.reader import Reader
from query.terms import verbatim_phrases
from tests.embedserver import EmbedServer
from tests.query.verbatim_set import Placement, documents, placements

_BACKTICKED = re.compile(r"`([^`\s]{3,60})`")


def index(base: Path, server: EmbedServer) -> Settings:
    """Index base/docs with the loopback server through the CLI; the settings to query it."""
    (base / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {server.base_url}\n"
        "    model: hashed-bow\n    timeout: 5\n", encoding="utf-8")
    knowledge = Path(sys.executable).with_name("knowledge")
    subprocess.run([str(knowledge), "index"], cwd=base, check=True, capture_output=True)
    emb = {"base_url": server.base_url, "model": "hashed-bow", "timeout": 5}
    return settings_from_mapping({"paths": ["docs"], "embeddings": emb}, store_base=base)


def docs_queries(limit: int) -> list[str]:
    """The distinct backticked identifiers of docs/*.md that the detector marks, in file order."""
    found: dict[str, None] = {}
    for path in sorted((ROOT / "docs").glob("*.md")):
        for token in _BACKTICKED.findall(path.read_text(encoding="utf-8")):
            if verbatim_phrases(token) and not token.startswith(("-", "knowledge")):
                found[token] = None
    return list(found)[:limit]


def summary(name: str, found: list[Placement]) -> str:
    """One line: sections measured, how many rank below lexical in plain RRF and in hybrid, mean ranks."""
    def below(which: str) -> int:
        return sum(1 for p in found if p.lexical and (getattr(p, which) or 10**6) > p.lexical)

    def mean(which: str) -> float:
        ranks = [getattr(p, which) or 101 for p in found]
        return sum(ranks) / len(ranks) if ranks else 0.0

    return (f"{name}: {len({p.query for p in found})} queries, {len(found)} verbatim sections; below lexical: "
            f"plain RRF {below('plain_rrf')}, hybrid {below('hybrid')}; mean rank lexical {mean('lexical'):.2f}, "
            f"plain RRF {mean('plain_rrf'):.2f}, hybrid {mean('hybrid'):.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-docs-queries", type=int, default=40)
    args = parser.parse_args(argv)
    with EmbedServer(dim=24) as server, tempfile.TemporaryDirectory() as tmp:
        fixture, repo_docs = Path(tmp) / "fixture", Path(tmp) / "repo"
        for path, text in documents().items():
            (fixture / path).parent.mkdir(parents=True, exist_ok=True)
            (fixture / path).write_text(text, encoding="utf-8")
        shutil.copytree(ROOT / "docs", repo_docs / "docs", ignore=shutil.ignore_patterns("images"))
        lines: list[str] = []
        sets = (("fixture", fixture, None), ("docs", repo_docs, docs_queries(args.max_docs_queries)))
        for name, base, queries in sets:
            settings = index(base, server)
            with Reader(settings) as reader:
                found = placements(settings, reader, queries)
            print(f"== {name}")
            for p in found:
                print(f"  {p.query!r:40} chunk {p.chunk_id:5}  lexical {p.lexical}  plain RRF {p.plain_rrf}"
                      f"  hybrid {p.hybrid}")
            lines.append(summary(name, found))
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
