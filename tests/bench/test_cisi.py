"""The SMART-layout converter (bench/lib/cisi.py): records, judgments and the BEIR files `knowledge eval` reads."""

from __future__ import annotations

import json
from pathlib import Path

from bench.lib.cisi import convert, judgments, records
from query.judgments import read_qrels

ALL = """.I 1
.T
18 Editions of the Dewey Decimal Classifications
.A
Comaromi, J.P.
.W
   The present study is a history of the DEWEY Decimal
Classification.
.X
1	5	1
.I 2
.T 
Use Made of Technical Libraries
.W
This report is an analysis of 6300 acts of use.
"""
QRY = """.I 1
.W
What problems and concerns are there in making up descriptive titles?
.I 2
.T
Library use
.W
How are technical libraries used?
"""
REL = """     1     2	0	0.000000
     2     1	0	0.000000
     2     2	0	0.000000
     2     9	0	0.000000
"""


def test_a_record_keeps_each_field_on_one_line_and_a_record_opens_only_at_dot_i() -> None:
    found = records(ALL)
    assert list(found) == ["1", "2"]
    assert found["1"]["T"] == "18 Editions of the Dewey Decimal Classifications"
    assert found["1"]["W"] == "The present study is a history of the DEWEY Decimal Classification."
    assert found["2"]["W"] == "This report is an analysis of 6300 acts of use."
    assert judgments(REL) == {"1": {"2"}, "2": {"1", "2", "9"}}


def test_the_converted_files_are_the_beir_layout_eval_reads(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    for suffix, text in (("ALL", ALL), ("QRY", QRY), ("REL", REL)):
        (raw / f"CISI.{suffix}").write_text(text, encoding="latin-1")
    counts = convert(raw, tmp_path / "out")
    assert counts == {"documents": 2, "queries": 2, "judged_queries": 2, "pairs": 3}  # doc 9 is not in the corpus
    corpus = [json.loads(line) for line in (tmp_path / "out" / "corpus.jsonl").read_text().splitlines()]
    assert corpus[1] == {"_id": "2", "title": "Use Made of Technical Libraries",
                         "text": "This report is an analysis of 6300 acts of use."}
    queries = [json.loads(line) for line in (tmp_path / "out" / "queries.jsonl").read_text().splitlines()]
    assert queries[1]["text"] == "Library use How are technical libraries used?"
    qrels = read_qrels(tmp_path / "out" / "qrels.tsv")
    assert qrels == {"1": {"2": 1}, "2": {"1": 1, "2": 1}}
