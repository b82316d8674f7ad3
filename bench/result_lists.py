"""Result lists compared between two versions of the code: the query code on one store, or the index code.

    .venv/bin/python -m bench.result_lists record --code /tmp/main-ref --store bench/out/query/store-100000 \\
        --out bench/out/lists-main.json
    .venv/bin/python -m bench.result_lists record --code . --store bench/out/query/store-100000 \\
        --out bench/out/lists-branch.json
    .venv/bin/python -m bench.result_lists compare bench/out/lists-main.json bench/out/lists-branch.json
    .venv/bin/python -m bench.result_lists time --code /tmp/main-ref --store bench/out/query/store-100000
    .venv/bin/python -m bench.result_lists stores --baseline 210d0cd --files 10000 --queries 300

`record` runs the query package of --code (a checkout, e.g. main's tree from `git archive`) in a child
process with that checkout first on the path (bench/lib/lists.py), so two recordings of the same
store compare two versions of the code. The queries are bench_query.py's (bench/lib/samples.py: the
same seed gives the same 300 text and 300 keyword queries), plus each text query with its first
word excluded (`-word`), so the exclusion path is covered. Recorded per query:

- lexical candidates: query.lexical.search_ids at the user fan-out (50), ids in order and scores;
- search: query.search.search (lexical, top_k 10), the hits' ids, refs, sections and scores;
- match: query.enumerate.enumerate_documents with no limit, every matching document in order with
  its counts and first section, the total, and the per-term reports.

`time` prints the p50/p95 (wall) and CPU p50 of the text queries through --code's lexical search
(warm reader, top 5) and match (a reader per call, limit 50), as bench_query.py measures them;
alternate two codes (main, branch, main, branch) to compare them at the same load.

`compare` reports every difference: ids or order differ, a score differs by more than 1e-9
(relative), a match set or count differs. It exits 1 when anything differs.

`stores`: a change to how the writer fills the store must not change any answer. It builds one
store with the baseline commit's `knowledge index` (from a detached `git worktree` of it, as
bench_index.py --baseline does) and one with this tree's, from the same corpus: the bench corpus
(bench/lib/corpus.py, seed 1) plus a small mixed tree made here (CJK sentences, identifiers, front
matter, so the trigram table and phrases are exercised). Then this tree's query code answers the
same queries from both stores and the answers are compared whole:

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
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.lib.checkout import baseline_tree, tree_python
from bench.lib.corpus import generate
from bench.lib.paths import BENCH, OUT, ROOT
from bench.lib.samples import keyword_queries, sample_queries
from config.loader import settings_from_mapping
from config.settings import Settings
from query import enumerate as enumerate_module
from query import search as search_module
from query import words as words_module
from query.reader import Reader

TOLERANCE = 1e-9
CJK = ["数据库索引", "全文检索系统", "東京都の天気", "검색 엔진", "向量数据库", "分词器", "日本語の文章", "索引"]
IDENTIFIERS = ["ERR_CONN_RESET", "kube-proxy", "config.yaml", "sha256sum", "HTTP_PROXY", "v1.2.3", "max_pending"]


def in_checkout(code: Path, verb: str, store: Path, queries: int, seed: int, *rest: str) -> str:
    """Run bench/lib/lists.py's verb with code's packages first over this tree's queries; its stdout."""
    settings = settings_from_mapping({}, store_base=store.resolve())
    text = sample_queries(settings, queries, seed)
    asked = {"text": text, "keyword": keyword_queries(settings, queries, seed),
             "excluding": [f"{q} -{q.split()[0]}" for q in text if len(q.split()) > 1]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(asked, handle)
    try:
        command, env = tree_python(code, str(BENCH / "lib" / "lists.py"), verb, str(store.resolve()), handle.name,
                                   *rest)
        return subprocess.run(command, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
    finally:
        Path(handle.name).unlink()


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Every way new's lists differ from old's, one line each."""
    out: list[str] = []
    if old.keys() != new.keys():
        out.append(f"query sets differ: {len(old.keys() ^ new.keys())} queries in one recording only")
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        for part in ("candidates", "search"):
            ids_a = [row[:-1] for row in a[part]]
            ids_b = [row[:-1] for row in b[part]]
            if ids_a != ids_b:
                out.append(f"{key}: {part} ids or order differ")
            elif not all(_close(x[-1], y[-1]) for x, y in zip(a[part], b[part])):
                out.append(f"{key}: {part} scores differ beyond {TOLERANCE}")
        if a["search_note"] != b["search_note"]:
            out.append(f"{key}: search notes differ")
        if a.get("match") != b.get("match"):
            out.append(f"{key}: match answers differ")
    return out


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
    command, env = tree_python(tree or ROOT, "-c", "import cli; cli.main()", "--store-dir", str(base), "index",
                               corpus.name, "--json")
    proc = subprocess.run(command, cwd=corpus.parent, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(proc.stdout))


def store_totals(base: Path) -> dict[str, Any]:
    """The documents and chunks of a store built by an earlier run (--reuse)."""
    with Reader(settings_from_mapping({}, store_base=base)) as reader:
        files, chunks = reader.conn.execute("SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents").fetchone()
    return {"files": int(files), "chunks": int(chunks)}


def _sample_bodies(reader: Reader, rng: random.Random, top: int, count: int) -> list[list[str]]:
    """count sections' words (alphabetic, over two letters; four or more a section) from random chunk ids."""
    bodies: list[list[str]] = []
    while len(bodies) < count:
        at = rng.randint(1, top)
        row = reader.conn.execute("SELECT body FROM chunks WHERE id >= ? LIMIT 1", (at,)).fetchone()
        words = [w.strip(".,;:()`*") for w in row[0].split()]
        words = [w for w in words if w.isalpha() and len(w) > 2]
        if len(words) >= 4:
            bodies.append(words)
    return bodies


def store_queries(settings: Settings, n: int, seed: int) -> tuple[list[str], list[str], list[str]]:
    """n search queries, n match queries and n word patterns drawn from the store's own text and vocabulary."""
    rng = random.Random(seed)
    with Reader(settings) as reader:
        top = int(reader.conn.execute("SELECT max(id) FROM chunks").fetchone()[0])
        vocab = [str(t) for (t,) in reader.conn.execute("SELECT term FROM chunks_vocab WHERE doc >= 2 ORDER BY term")]
        bodies = _sample_bodies(reader, rng, top, n * 2)
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
            out["words"].append(words_module.list_words(settings, pattern, None, reader=reader).to_json())
    return out


def rows(settings: Settings) -> list[tuple[Any, ...]]:
    """Every chunk's id, document path, ordinal and text hash: the ids the answers name."""
    with Reader(settings) as reader:
        return list(reader.conn.execute("SELECT c.id, d.path, c.ordinal, c.text_hash FROM chunks c"
                                        " JOIN documents d ON d.id = c.document_id ORDER BY c.id"))


def stores(args: argparse.Namespace) -> int:
    """`stores`: build both stores, answer the same queries from each, print the comparison."""
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
    search, match, patterns = store_queries(stores["baseline"], args.queries, 7)
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
    return 1 if differences or not summary["same_chunk_rows"] else 0




def compare(args: argparse.Namespace) -> int:
    """`compare`: print every difference between two recordings; 1 when any."""
    old, new = json.loads(args.old.read_text()), json.loads(args.new.read_text())
    found = differences(old, new)
    kinds: dict[str, int] = {}
    for key in old:
        kinds[key.split(":")[0]] = kinds.get(key.split(":")[0], 0) + 1
    documents = sum(len(v["match"]["documents"]) for v in old.values() if "match" in v)
    print(f"{len(old)} queries ({', '.join(f'{n} {k}' for k, n in kinds.items())}); "
          f"{documents} matched documents listed in all")
    for line in found[:50]:
        print(line)
    print("identical" if not found else f"{len(found)} differences")
    return 1 if found else 0


def main() -> int:
    """record, time, compare or stores."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    rec = verbs.add_parser("record", help="the lists of --code's search and match over one store")
    rec.add_argument("--code", type=Path, required=True, help="the checkout whose query package answers")
    rec.add_argument("--store", type=Path, required=True, help="the store's base directory (bench_query's store-N)")
    rec.add_argument("--queries", type=int, default=300)
    rec.add_argument("--seed", type=int, default=1)
    rec.add_argument("--out", type=Path, required=True)
    tim = verbs.add_parser("time", help="p50/p95 of text search and match with --code (run it ABAB for two codes)")
    tim.add_argument("--code", type=Path, required=True)
    tim.add_argument("--store", type=Path, required=True)
    tim.add_argument("--queries", type=int, default=300)
    tim.add_argument("--seed", type=int, default=1)
    cmp = verbs.add_parser("compare", help="every difference between two recordings")
    cmp.add_argument("old", type=Path)
    cmp.add_argument("new", type=Path)
    sto = verbs.add_parser("stores", help="answers from a store built by --baseline's index against this tree's")
    sto.add_argument("--baseline", required=True, help="the commit whose `knowledge index` builds the other store")
    sto.add_argument("--files", type=int, default=10_000)
    sto.add_argument("--mixed", type=int, default=300, help="files of the mixed tree (CJK, identifiers)")
    sto.add_argument("--queries", type=int, default=300)
    sto.add_argument("--out", type=Path, default=OUT / "result-lists")
    sto.add_argument("--reuse", action="store_true", help="compare the stores an earlier run built under --out")
    args = parser.parse_args()
    if args.verb == "record":
        sys.stderr.write(in_checkout(args.code, "record", args.store, args.queries, args.seed, str(args.out.resolve())))
        return 0
    if args.verb == "time":
        found = json.loads(in_checkout(args.code, "time", args.store, args.queries, args.seed))
        print(json.dumps({"code": str(args.code), **found}), flush=True)
        return 0
    if args.verb == "compare":
        return compare(args)
    return stores(args)


if __name__ == "__main__":
    sys.exit(main())
