"""The CISI collection (and any collection in its SMART layout) converted to the BEIR layout `knowledge eval` reads.

CISI (1,460 library-science abstracts, 112 queries, 76 of them judged) ships as three files in the
SMART layout of the Glasgow test collections: CISI.ALL and CISI.QRY are records opened by `.I <id>`
whose fields open with `.T` (title), `.A` (author), `.W` (text), `.B` (source) and `.X`
(cross-references); CISI.REL holds `query-id doc-id 0 0.0` lines, each a relevant pair. The
converter writes, into one directory,

    corpus.jsonl   {"_id", "title", "text"} per document (the text is the `.W` field)
    queries.jsonl  {"_id", "text"} per query (its `.W`, and its `.T` when it has one)
    qrels.tsv      query-id, corpus-id, score (1) under BEIR's header line

so bench/lib/cranfield.write_corpus writes the documents as `<id>.md` and `knowledge eval --qrels
qrels.tsv --queries queries.jsonl` scores them. The data itself is public but not committed: the
command fetches nothing and reads the three files from a directory given on the command line.

    .venv/bin/python -m bench.lib.cisi /path/to/cisi_raw /tmp/evidence/cisi
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

_RECORD = re.compile(r"^\.I\s+(\d+)\s*$")
_FIELD = re.compile(r"^\.([TAWBXK])\s*(.*)$")


def records(text: str) -> dict[str, dict[str, str]]:
    """{id: {field letter: text}} of a SMART file; fields' lines joined by spaces, blanks collapsed."""
    out: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    field: str | None = None
    for line in text.splitlines():
        if (opened := _RECORD.match(line)) is not None:
            current = out.setdefault(opened.group(1), {})
            field = None
            continue
        if current is None:
            continue
        if (named := _FIELD.match(line)) is not None:
            field = named.group(1)
            current.setdefault(field, []).append(named.group(2))
        elif field is not None:
            current[field].append(line)
    return {rid: {f: " ".join(" ".join(lines).split()) for f, lines in fields.items()} for rid, fields in out.items()}


def judgments(text: str) -> dict[str, set[str]]:
    """{query id: relevant document ids} of a SMART .REL file (`qid docid ...` per line)."""
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            out.setdefault(parts[0], set()).add(parts[1])
    return out


def convert(raw: Path, out: Path, name: str = "CISI") -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl and qrels.tsv of raw/<name>.ALL, .QRY, .REL into out; the counts."""
    def read(suffix: str) -> str:
        return (raw / f"{name}.{suffix}").read_text(encoding="latin-1")

    documents = records(read("ALL"))
    queries = records(read("QRY"))
    relevant = judgments(read("REL"))
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as corpus:
        for did, fields in documents.items():
            corpus.write(json.dumps({"_id": did, "title": fields.get("T", ""), "text": fields.get("W", "")}) + "\n")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as lines:
        for qid, fields in queries.items():
            text = " ".join(p for p in (fields.get("T", ""), fields.get("W", "")) if p)
            lines.write(json.dumps({"_id": qid, "text": text}) + "\n")
    pairs = 0
    with open(out / "qrels.tsv", "w", encoding="utf-8") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for qid in sorted(relevant, key=int):
            for did in sorted(relevant[qid], key=int):
                if did in documents:
                    qrels.write(f"{qid}\t{did}\t1\n")
                    pairs += 1
    return {"documents": len(documents), "queries": len(queries), "judged_queries": len(relevant), "pairs": pairs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("raw", type=Path, help="the directory holding CISI.ALL, CISI.QRY and CISI.REL")
    parser.add_argument("out", type=Path, help="where corpus.jsonl, queries.jsonl and qrels.tsv go")
    parser.add_argument("--name", default="CISI", help="the files' common name (CISI, CACM, MED, ...)")
    args = parser.parse_args(argv)
    print(json.dumps(convert(args.raw, args.out, args.name)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
