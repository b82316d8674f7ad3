"""`knowledge eval` through the real CLI on a real store: cases, judged queries, compare, JSON, exit codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import bounded_knowledge, write_tree
from tests.embedserver import EmbedServer

Run = Callable[..., tuple[int, str, str]]
TIER = "tier: lexical (FTS5) - no embeddings configured"
DOCS = {
    "docs/1.md": "# Wing flutter\n\nFlutter of thin wings at supersonic speed.\n",
    "docs/2.md": "# Boundary layer\n\nLaminar boundary layer transition on a flat plate.\n",
    "docs/3.md": "# Heat transfer\n\nHeat transfer in hypersonic flow near the stagnation point.\n",
    "docs/4.md": "# Shock waves\n\nShock waves and boundary layer interaction.\n",
}
CASES = (
    "# search checks for the aerodynamics notes\n"
    '{"query": "wing flutter", "expect": "SUPERSONIC"}\n'
    "\n"
    '{"query": "boundary layer", "expect": "docs/2.md"}\n'
    '{"query": "heat transfer", "expect": "words nowhere in the notes"}\n'
)
# Three judged queries: q1 and q2 are answered at rank 1; q3's only relevant document is never retrieved.
QUERIES_TSV = "q1\tflutter of wings\nq2\tboundary layer\nq3\tnothing zzz\n"
QRELS_TREC = "q1 0 1 2\nq2 0 2 2\nq2 0 4 1\nq3 0 3 1\n"
QUERIES_JSONL = ('{"_id": "q1", "text": "flutter of wings"}\n{"_id": "q2", "text": "boundary layer"}\n'
                 '{"_id": "q3", "text": "nothing zzz"}\n{"_id": "q9", "text": "an unjudged query"}\n')
QRELS_BEIR = "query-id\tcorpus-id\tscore\nq1\t1\t2\nq2\t2\t2\nq2\t4\t1\nq3\t3\t1\n"


@pytest.fixture
def store(workdir: Path, run_cli: Run) -> Path:
    write_tree(workdir, DOCS | {"eval/cases.jsonl": CASES, "eval/queries.tsv": QUERIES_TSV,
                                "eval/qrels.txt": QRELS_TREC, "eval/queries.jsonl": QUERIES_JSONL,
                                "eval/test.tsv": QRELS_BEIR})
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    return workdir


def test_cases_print_pass_or_fail_per_case_then_recall_at_k(store: Path, run_cli: Run) -> None:
    code, out, _ = run_cli("eval", "--cases", "eval/cases.jsonl")
    lines = out.splitlines()
    assert code == 0 and lines[0] == TIER
    assert lines[1] == "PASS  wing flutter  -> docs/1.md#0 (rank 1)"
    assert lines[2].startswith("PASS  boundary layer  -> docs/2.md#0")
    assert lines[3] == "FAIL  heat transfer  (line 5: no top-5 hit contains 'words nowhere in the notes')"
    assert lines[4] == "recall@5: lexical 0.667 (2 of 3)"


def test_cases_exit_1_below_min_recall_and_0_at_or_above(store: Path, run_cli: Run) -> None:
    code, _, err = run_cli("eval", "--cases", "eval/cases.jsonl", "--min-recall", "0.9")
    assert code == 1 and "recall@5 of lexical is 0.667, below --min-recall 0.9" in err
    code, _, _ = run_cli("eval", "--cases", "eval/cases.jsonl", "--min-recall", "0.6")
    assert code == 0


def test_verbose_cases_show_what_ranked_instead_of_a_failing_case(store: Path, run_cli: Run) -> None:
    code, out, _ = run_cli("eval", "--cases", "eval/cases.jsonl", "--verbose")
    lines = out.splitlines()
    failing = lines.index("FAIL  heat transfer  (line 5: no top-5 hit contains 'words nowhere in the notes')")
    assert code == 0 and lines[failing + 1].startswith("      ranked instead: docs/3.md#0")
    data = json.loads(run_cli("eval", "--cases", "eval/cases.jsonl", "--verbose", "--json")[1])
    assert data["rankings"]["lexical"]["cases"][2]["top"][0] == "docs/3.md#0"
    assert "top" not in json.loads(run_cli("eval", "--cases", "eval/cases.jsonl", "--json")[1])["rankings"][
        "lexical"]["cases"][2]


def test_cases_json_carries_each_case_and_the_verdict(store: Path, run_cli: Run) -> None:
    code, out, err = run_cli("eval", "--cases", "eval/cases.jsonl", "--json", "-k", "1", "--min-recall", "0.9")
    data = json.loads(out)
    assert code == 1 and err.splitlines()[0] == TIER
    assert data["mode"] == "cases" and data["k"] == 1 and data["ok"] is False and data["min_recall"] == 0.9
    lexical = data["rankings"]["lexical"]
    assert (lexical["passed"], lexical["total"], lexical["recall"]) == (2, 3, 0.6667)
    assert lexical["cases"][0] == {"line": 2, "query": "wing flutter", "expect": "SUPERSONIC", "pass": True,
                                   "rank": 1, "citation": "docs/1.md#0"}
    assert lexical["cases"][2]["pass"] is False and lexical["cases"][2]["rank"] is None


def test_a_malformed_case_is_a_usage_error_naming_file_and_line(store: Path, run_cli: Run) -> None:
    write_tree(store, {"eval/bad.jsonl": '{"query": "a", "expect": "b"}\n{"query": "no expectation"}\n'})
    code, out, err = run_cli("eval", "--cases", "eval/bad.jsonl")
    assert code == 2 and "eval/bad.jsonl:2: 'expect' must be a non-empty string" in err
    assert "PASS" not in out and "Traceback" not in err


@pytest.mark.parametrize(("option", "name", "content"), [
    ("--cases", "eval/deep.jsonl", '{"query": "a", "expect": "b"}\n' + "[" * 100_000 + "]" * 100_000 + "\n"),
    ("--cases", "eval/nested.jsonl",
     '{"query": "a", "expect": "b"}\n{"query": "a", "expect": "b", "more": ' + "[" * 100 + "]" * 100 + "}\n"),
    ("--cases", "eval/long.jsonl", '{"query": "a", "expect": "b"}\n{"query": "' + "x" * (2 << 20) + '"}\n'),
    ("--qrels", "/dev/zero", ""),
], ids=["nested-100000", "nested-100", "line-2MiB", "dev-zero"])
def test_hostile_eval_input_is_a_usage_error_naming_file_and_line(store: Path, option: str, name: str,
                                                                   content: str) -> None:
    if content:
        write_tree(store, {name: content})
    extra = ("--queries", "eval/queries.tsv") if option == "--qrels" else ()
    done = bounded_knowledge(store, "eval", option, name, *extra, memory=1 << 30, timeout=60)
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr, done.stderr[-400:]
    line = 1 if name == "/dev/zero" else 2
    assert done.returncode == 2 and done.stderr.startswith(f"knowledge: error: {name}:{line}: "), done.stderr[-400:]
    assert done.stderr.count("\n") == 1, done.stderr


def test_qrels_print_ndcg_recall_and_mrr_over_the_judged_queries(store: Path, run_cli: Run) -> None:
    code, out, _ = run_cli("eval", "--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv")
    lines = out.splitlines()
    assert code == 0 and lines[0] == TIER
    assert "judged queries: 3 evaluated" in lines
    assert "judged documents in the store (--docid stem): 4 of 4; depth 100 chunks per query" in lines
    assert lines[-2].split() == ["ranking", "queries", "nDCG@10", "Recall@10", "Recall@100", "MRR@10"]
    assert lines[-1].split() == ["lexical", "3", "0.667", "0.667", "0.667", "0.667"]


def test_beir_files_give_the_same_figures_as_trec_ones(store: Path, run_cli: Run) -> None:
    trec = json.loads(run_cli("eval", "--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv", "--json")[1])
    beir = json.loads(run_cli("eval", "--qrels", "eval/test.tsv", "--queries", "eval/queries.jsonl", "--json")[1])
    assert beir["rankings"] == trec["rankings"] == {"lexical": {
        "ndcg@10": 0.6667, "recall@10": 0.6667, "recall@100": 0.6667, "mrr@10": 0.6667, "queries": 3}}
    assert beir["judged_documents_in_store"] == beir["judged_documents"] == 4 and beir["docid"] == "stem"


def test_verbose_names_the_relevant_documents_missing_from_the_top_10(store: Path, run_cli: Run) -> None:
    code, out, _ = run_cli("eval", "--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv", "--verbose")
    misses = [line for line in out.splitlines() if line.startswith("lexical query")]
    expected = ("lexical query q3 'nothing zzz': nDCG@10 0.000, 1 of 1 relevant not in the top 10: "
                "3 (relevance 1, not retrieved)")
    assert code == 0 and misses == [expected]
    data = json.loads(run_cli("eval", "--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv", "-v",
                              "--json")[1])
    per_query = {q["qid"]: q for q in data["rankings"]["lexical"]["per_query"]}
    assert per_query["q3"]["misses"] == [{"docid": "3", "relevance": 1, "rank": None}]
    assert per_query["q2"] == {"qid": "q2", "ndcg@10": 1.0, "recall@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0,
                               "relevant": 2, "misses": []}


def test_qrels_thresholds_decide_the_exit_code(store: Path, run_cli: Run) -> None:
    args = ("eval", "--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv")
    assert run_cli(*args, "--min-ndcg", "0.6", "--min-recall", "0.6")[0] == 0
    code, _, err = run_cli(*args, "--min-ndcg", "0.7")
    assert code == 1 and "nDCG@10 of lexical is 0.667, below --min-ndcg 0.7" in err


def test_documents_map_to_judged_ids_by_path_or_title_too(store: Path, run_cli: Run) -> None:
    write_tree(store, {"eval/by-path.txt": "q1 0 docs/1.md 1\n", "eval/by-title.tsv": "q1\tWing flutter\t1\n"})
    for qrels, scheme in (("eval/by-path.txt", "path"), ("eval/by-title.tsv", "title")):
        code, out, _ = run_cli("eval", "--qrels", qrels, "--queries", "eval/queries.tsv", "--docid", scheme, "--json")
        data = json.loads(out)
        assert code == 0 and data["docid"] == scheme and data["rankings"]["lexical"]["ndcg@10"] == 1.0, scheme


def test_judged_ids_that_name_no_stored_document_are_a_usage_error(store: Path, run_cli: Run) -> None:
    code, _, err = run_cli("eval", "--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv", "--docid", "path")
    assert code == 2 and "no judged document id names a stored document under --docid path" in err
    assert "try --docid stem or title" in err


def test_compare_without_embeddings_runs_lexical_and_says_why_the_others_are_skipped(store: Path, run_cli: Run) -> None:
    code, out, _ = run_cli("eval", "--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv", "--compare")
    assert code == 0 and "vector: skipped, no embeddings configured (knowledge.embeddings)" in out
    code, out, _ = run_cli("eval", "--cases", "eval/cases.jsonl", "--compare", "--json")
    data = json.loads(out)
    assert list(data["rankings"]) == ["lexical"] and set(data["skipped"]) == {"vector", "hybrid"}


@pytest.mark.parametrize("args, message", [
    ((), "give either --cases FILE or --qrels FILE --queries FILE"),
    (("--cases", "eval/cases.jsonl", "--qrels", "eval/qrels.txt"), "give either"),
    (("--qrels", "eval/qrels.txt"), "--qrels needs --queries FILE"),
    (("--cases", "eval/cases.jsonl", "--depth", "50"), "--depth does not apply to --cases"),
    (("--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv", "-k", "3"), "--top-k does not apply to --qrels"),
    (("--cases", "eval/cases.jsonl", "--compare", "--tier", "lexical"), "leave out --tier"),
    (("--cases", "eval/cases.jsonl", "--tier", "vector"), "the vector ranking needs embeddings configured"),
])
def test_contradictory_or_incomplete_flags_are_usage_errors(store: Path, run_cli: Run, args: tuple[str, ...],
                                                            message: str) -> None:
    code, _, err = run_cli("eval", *args)
    assert code == 2 and message in err and "Traceback" not in err


def test_eval_without_an_index_exits_1_naming_the_fix(workdir: Path, run_cli: Run) -> None:
    write_tree(workdir, {"cases.jsonl": '{"query": "a", "expect": "b"}\n'})
    code, _, err = run_cli("eval", "--cases", "cases.jsonl")
    assert code == 1 and "knowledge index" in err


def test_compare_with_embeddings_ranks_lexical_vector_and_hybrid_side_by_side(workdir: Path, run_cli: Run) -> None:
    with EmbedServer(dim=24) as server:
        write_tree(workdir, DOCS | {"eval/queries.tsv": QUERIES_TSV, "eval/qrels.txt": QRELS_TREC,
                                    "eval/cases.jsonl": CASES,
                                    "knowledge.yaml": f"knowledge:\n  paths: [docs]\n  embeddings:\n"
                                                      f"    base_url: {server.base_url}\n    model: hashed-bow\n"
                                                      "    timeout: 1\n"})
        assert run_cli("index")[0] == 0
        code, out, _ = run_cli("eval", "--qrels", "eval/qrels.txt", "--queries", "eval/queries.tsv", "--compare")
        rows = [line.split()[0] for line in out.splitlines()[-3:]]
        assert code == 0 and rows == ["lexical", "vector", "hybrid"] and "skipped" not in out
        code, out, _ = run_cli("eval", "--cases", "eval/cases.jsonl", "--compare")
        lines = out.splitlines()
        assert code == 0 and lines[1].split() == ["lexical", "vector", "hybrid", "case"]
        assert lines[-1].startswith("recall@5: lexical 0.667 (2 of 3), vector ")
        code, out, _ = run_cli("eval", "--cases", "eval/cases.jsonl", "--json")
        assert code == 0 and list(json.loads(out)["rankings"]) == ["hybrid"]  # as configured
        server.faults.fail_next = 100
        code, _, err = run_cli("eval", "--cases", "eval/cases.jsonl", "--tier", "vector")
        assert code == 1 and "Traceback" not in err  # an evaluation never degrades silently
