"""Result lists of two stores built from one corpus: this tree's `knowledge index` against another commit's.

    .venv/bin/python bench/bench_result_lists.py --baseline 210d0cd --files 10000 --queries 300

A change to how the writer fills the store (bench/RESULTS.md, "The writer floor") must not change
any answer. This builds one store with the baseline commit's `knowledge index` (from a detached
`git worktree` of it, as bench_index.py --baseline does) and one with this tree's, from the same
corpus: the bench corpus (bench/corpus.py, seed 1) plus a small mixed tree made here (CJK
sentences, identifiers, front matter, so the trigram table and phrases are exercised). Then this
tree's query code answers the same queries from both stores and the answers are compared whole:

- search: --queries free-text queries (running text of 1-4 words, keyword sets, quoted phrases,
  identifiers, `-word` exclusions, CJK runs), top 10, lexical: the chunk ids in order and the
  `search --json` shape (scores, sections, contents);
- match: --queries match queries (words, phrases, `heading:`/`body:` scopes, exclusions, CJK), no
  limit: the `match --json` shape (every matching document, counts, term reports);
- words: --queries patterns (prefixes, infixes, suffixes), as `knowledge words PATTERN --json` answers
  them (document counts for lists of up to 20 words).

Both stores are built with one ingest thread (knowledge.workers: 1), so documents reach the
writer in walk order and get the same ids in both (with two threads the order, and so the ids that
break score ties, varies from run to run of the same code). Prints the counts compared and the
first differences (none expected) as one JSON object; exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from bench_index import baseline_tree  # noqa: E402
from corpus import generate  # noqa: E402

from config.loader import settings_from_mapping  # noqa: E402
from config.settings import Settings  # noqa: E402
from query import enumerate as enumerate_module  # noqa: E402
from query import search as search_module  # noqa: E402
from query import words as words_module  # noqa: E402
from query.reader import Reader  # noqa: E402

# Run another tree's CLI with this interpreter: that tree first on sys.path.
TREE_CLI = "import sys; sys.path.insert(0, sys.argv.pop(1)); import cli; cli.main()"
CJK = ["数据库索引", "全文检索系统", "東京都の天気", "검색 엔진", "向量数据库", "分词器", "日本語の文章", "索引"]
IDENTIFIERS = ["ERR_CONN_RESET", "kube-proxy", "config.yaml", "sha256sum", "HTTP_PROXY", "v1.2.3", "max_pending"]


def mixed_tree(root: Path, files: int, seed: int) -> None:
    """files small documents mixing English, CJK sentences, identifiers and front matter."""
    rng = random.Random(seed)
    words = "alpha beta gamma delta retention policy index search vector budget writer segment merge".split()
    for i in range(files):
        lines = ["---", f"title: mixed {i}", f"tags: [t{i % 5}]", "---", ""] if i % 3 == 0 else []
        lines.append(f"# {' '.join(rng.sample(words, 2)).title()} {i}")
        for j in range(rng.randint(1, 4)):
            lines += ["", f"## {rng.choice(words)} {rng.choice(CJK)} {j}", ""]
            body = [*rng.sample(words, 5), rng.choice(CJK), rng.choice(IDENTIFIERS), *rng.sample(words, 3)]
            rng.shuffle(body)
            lines.append(" ".join(body) + ".")
        path = root / f"m{i // 50:02d}" / f"mixed-{i:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def index(tree: Path | None, corpus: Path, base: Path) -> dict[str, Any]:
    """`knowledge index` of tree's code (this tree's when None) into store base; its JSON summary."""
    shutil.rmtree(base, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWLEDGE_", "OTEL_"))}
    command = [sys.executable, "-c", TREE_CLI, str(tree or ROOT), "--store-dir", str(base), "index", corpus.name,
               "--json"]
    proc = subprocess.run(command, cwd=corpus.parent, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(proc.stdout))


def store_totals(base: Path) -> dict[str, Any]:
    """The documents and chunks of a store built by an earlier run (--reuse)."""
    with Reader(settings_from_mapping({}, store_base=base)) as reader:
        files, chunks = reader.conn.execute("SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents").fetchone()
    return {"files": int(files), "chunks": int(chunks)}


def queries(settings: Settings, n: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    """n search queries, n match queries and n word patterns drawn from the store's own text and vocabulary."""
    rng = random.Random(seed)
    with Reader(settings) as reader:
        top = int(reader.conn.execute("SELECT max(id) FROM chunks").fetchone()[0])
        vocab = [str(t) for (t,) in reader.conn.execute("SELECT term FROM chunks_vocab WHERE doc >= 2 ORDER BY term")]
        bodies = []
        while len(bodies) < n * 2:
            at = rng.randint(1, top)
            row = reader.conn.execute("SELECT body FROM chunks WHERE id >= ? LIMIT 1", (at,)).fetchone()
            words = [w.strip(".,;:()`*") for w in row[0].split()]
            words = [w for w in words if w.isalpha() and len(w) > 2]
            if len(words) >= 4:
                bodies.append(words)
    plain = [w for w in vocab if w.isalpha() and len(w) > 2]

    def run(words: list[str]) -> str:
        size = rng.randint(1, 4)
        start = rng.randrange(len(words) - size + 1)
        return " ".join(words[start : start + size])

    search: list[str] = []
    match: list[str] = []
    for i in range(n):
        words = bodies[i]
        shape = i % 6
        if shape == 0:
            search.append(run(words).lower())
            match.append(" ".join(rng.sample(words, min(2, len(words)))))
        elif shape == 1:
            search.append(" ".join(rng.sample(plain, rng.randint(1, 3))))
            match.append(rng.choice(plain))
        elif shape == 2:
            search.append(f'"{" ".join(words[:2])}" {rng.choice(plain)}')
            match.append(f'"{" ".join(words[1:3])}"')
        elif shape == 3:
            search.append(f"{rng.choice(IDENTIFIERS)} {rng.choice(plain)}")
            match.append(f"heading:{rng.choice(words)} body:{rng.choice(plain)}")
        elif shape == 4:
            search.append(f"{run(words)} -{rng.choice(plain)}")
            match.append(f"{rng.choice(words)} -{rng.choice(plain)}")
        else:
            search.append(f"{rng.choice(CJK)} {rng.choice(plain)}")
            match.append(rng.choice(CJK))
    patterns = []
    for i in range(n):
        word = rng.choice(plain)
        patterns.append([f"^{word[:3]}", f"{word[1:4]}", f"{word[-3:]}$", f"^{word}$"][i % 4])
    return search, match, patterns


def answers(settings: Settings, search: list[str], match: list[str], patterns: list[str]) -> dict[str, list[Any]]:
    """Every answer of this tree's query code from one store, in a comparable form."""
    out: dict[str, list[Any]] = {"search": [], "match": [], "words": []}
    with Reader(settings) as reader:
        for text in search:
            response = search_module.search(settings, text, 10, reader)
            out["search"].append({"ids": [h.chunk_id for h in response.hits], **search_module.to_json(response)})
        for text in match:
            result = enumerate_module.enumerate_documents(settings, text, None, reader=reader)
            out["match"].append(enumerate_module.to_json(result))
        for pattern in patterns:
            out["words"].append(words_module.list_words(settings, pattern, None, reader).to_json())
    return out


def rows(settings: Settings) -> list[tuple[Any, ...]]:
    """Every chunk's id, document path, ordinal and text hash: the ids the answers name."""
    with Reader(settings) as reader:
        return list(reader.conn.execute("SELECT c.id, d.path, c.ordinal, c.text_hash FROM chunks c"
                                        " JOIN documents d ON d.id = c.document_id ORDER BY c.id"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the commit whose `knowledge index` builds the other store")
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--mixed", type=int, default=300, help="files of the mixed tree (CJK, identifiers)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=BENCH / "out" / "result-lists")
    parser.add_argument("--reuse", action="store_true", help="compare the stores an earlier run built under --out")
    args = parser.parse_args()
    corpus = args.out / "corpus"
    if not (corpus / "mixed").exists():
        shutil.rmtree(corpus, ignore_errors=True)
        generate(corpus / "bench", args.files, 1)
        mixed_tree(corpus / "mixed", args.mixed, 1)
    tree = baseline_tree(args.baseline, args.out)
    # One ingest thread: documents reach the writer in walk order, so both stores get the same ids.
    (args.out / "knowledge.yaml").write_text("knowledge:\n  workers: 1\n", encoding="utf-8")
    built = {name: store_totals(base) if args.reuse else index(code, corpus, base)
             for name, code, base in (("baseline", tree, args.out / "store-baseline"),
                                      ("this", None, args.out / "store-this"))}
    stores = {name: settings_from_mapping({}, store_base=args.out / f"store-{name}") for name in built}
    search, match, patterns = queries(stores["baseline"], args.queries, 7)
    got = {name: answers(settings, search, match, patterns) for name, settings in stores.items()}
    differences = [
        {"kind": kind, "query": asked, "baseline": a, "this": b}
        for kind, asked_list in (("search", search), ("match", match), ("words", patterns))
        for asked, a, b in zip(asked_list, got["baseline"][kind], got["this"][kind], strict=True) if a != b
    ]
    summary = {
        "baseline": f"{args.baseline} ({tree.name.removeprefix('baseline-')})",
        "documents": {name: b["files"] for name, b in built.items()},
        "chunks": {name: b["chunks"] for name, b in built.items()},
        "same_chunk_rows": rows(stores["baseline"]) == rows(stores["this"]),
        "compared": {"search": len(search), "match": len(match), "words": len(patterns)},
        "nonempty": {"search": sum(1 for r in got["this"]["search"] if r["results"]),
                     "match": sum(1 for r in got["this"]["match"] if r["matched"]),
                     "words": sum(1 for r in got["this"]["words"] if r["count"])},
        "differences": len(differences), "first_differences": differences[:3],
    }
    print(json.dumps(summary, ensure_ascii=False))
    sys.exit(1 if differences or not summary["same_chunk_rows"] else 0)


if __name__ == "__main__":
    main()
