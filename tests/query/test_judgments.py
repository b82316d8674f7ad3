"""Reading cases, TREC and BEIR qrels, and query texts; a malformed line names file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import UsageError
from query.judgments import Case, read_cases, read_qrels, read_queries


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_cases_skip_comments_and_blank_lines_and_keep_their_line_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, "cases.jsonl", '# how we rotate keys\n\n{"query": " rotate keys ", "expect": "vault", '
                 '"note": "extra keys are ignored"}\n  # indented comment\n{"query": "b", "expect": "c"}\n')
    assert read_cases(path) == [Case(3, "rotate keys", "vault"), Case(5, "b", "c")]


@pytest.mark.parametrize("line, reason", [
    ('{"query": "x"}', "'expect' must be a non-empty string"),
    ('{"query": "x", "expect": ""}', "'expect' must be a non-empty string"),
    ('{"query": 3, "expect": "y"}', "'query' must be a non-empty string"),
    ('["x", "y"]', "not a JSON object"),
    ('{"query": "x", "expect": "y"', "not a JSON object"),
])
def test_a_malformed_case_names_its_file_and_line(tmp_path: Path, line: str, reason: str) -> None:
    path = write(tmp_path, "cases.jsonl", '{"query": "a", "expect": "b"}\n# note\n' + line + "\n")
    with pytest.raises(UsageError) as caught:
        read_cases(path)
    assert f"{path}:3: " in str(caught.value) and reason in str(caught.value)


def test_a_cases_file_without_cases_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no cases"):
        read_cases(write(tmp_path, "cases.jsonl", "# nothing yet\n"))


def test_trec_qrels_have_four_fields_and_beir_three_under_a_header(tmp_path: Path) -> None:
    trec = write(tmp_path, "qrels.trec", "1 0 184 2\n1 0 29 -1\n2 Q0 12 1\n")
    beir = write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\n1\t184\t2\n1\t29\t-1\n2\t12\t1\n")
    expected = {"1": {"184": 2, "29": -1}, "2": {"12": 1}}
    assert read_qrels(trec) == expected
    assert read_qrels(beir) == expected


def test_a_beir_corpus_id_may_hold_spaces_when_the_file_is_tab_separated(tmp_path: Path) -> None:
    path = write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq1\tWing flutter\t1\n")
    assert read_qrels(path) == {"q1": {"Wing flutter": 1}}


@pytest.mark.parametrize("text, line, reason", [
    ("1 0 184 2\n1 184\n", 2, "found 2 fields"),
    ("1 0 184 2\n1 0 29 high\n", 2, "relevance 'high' is not an integer"),
    ("query-id\tcorpus-id\tscore\nq1\td1\tx\n", 2, "relevance 'x' is not an integer"),
    ("only-one-field\n", 1, "found 1 field"),
])
def test_a_malformed_judgment_names_its_file_and_line(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = write(tmp_path, "qrels", text)
    with pytest.raises(UsageError) as caught:
        read_qrels(path)
    assert f"{path}:{line}: " in str(caught.value) and reason in str(caught.value)


def test_queries_come_from_beir_jsonl_or_tab_separated_text(tmp_path: Path) -> None:
    jsonl = write(tmp_path, "queries.jsonl", '{"_id": "1", "text": "what similarity laws", "metadata": {}}\n'
                  '{"_id": 2, "text": "boundary layer"}\n')
    tsv = write(tmp_path, "queries.tsv", "1\twhat similarity laws\n2\tboundary layer\n")
    expected = {"1": "what similarity laws", "2": "boundary layer"}
    assert read_queries(jsonl) == expected
    assert read_queries(tsv) == expected


def test_a_malformed_query_names_its_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "queries.tsv", "1\tfirst\n2 no tab here\n")
    with pytest.raises(UsageError, match=f"{path}:2: expected `qid<TAB>text`"):
        read_queries(path)
    path = write(tmp_path, "queries.jsonl", '{"_id": "1", "text": "x"}\n{"_id": "2"}\n')
    with pytest.raises(UsageError, match=f"{path}:2: 'text' must be a non-empty string"):
        read_queries(path)
