"""Read what an evaluation is judged against: a cases file, TREC or BEIR qrels, and query texts.

- cases (JSON lines): `{"query": "...", "expect": "..."}` per line; blank lines and lines starting
  with `#` are skipped; other keys are allowed and ignored.
- qrels: TREC `qid 0 docid rel` (four fields) or BEIR `query-id<TAB>corpus-id<TAB>score` (three
  fields, usually under that header line). A first line whose last field is not an integer is a
  header. Fields are split on tabs when the line has one, else on whitespace.
- queries: BEIR `queries.jsonl` (`{"_id", "text"}` per line; other keys ignored) or TSV
  `qid<TAB>text`; the first line that is not blank decides which.

Every malformed line is a UsageError naming `file:line` and what is wrong with it. Files are read
a line at a time, and bounded: a line of at most MAX_LINE_BYTES, a JSON line nested at most
MAX_DEPTH deep, at most MAX_LINES lines (so /dev/zero or a cases line of 100,000 `[` is one
`file:line` error, not a RecursionError or a process growing until the kernel kills it).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from config.errors import UsageError

# {query id: {document id: graded relevance}}
Qrels = dict[str, dict[str, int]]

MAX_LINE_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_LINES = 10_000_000


@dataclass(frozen=True)
class Case:
    """One expectation: some top-k hit for `query` contains `expect` (case-insensitive)."""

    line: int
    query: str
    expect: str


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, stripped text) of the lines of path that are neither blank nor `#` comments.

    Streamed; UsageError naming file:line for a line over MAX_LINE_BYTES, past MAX_LINES, or not UTF-8.
    """
    try:
        with Path(path).open("rb") as handle:
            yield from _numbered(path, handle)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc


def _numbered(path: Path, handle: BinaryIO) -> Iterator[tuple[int, str]]:
    for number in range(1, MAX_LINES + 2):
        raw = handle.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if number > MAX_LINES:
            raise UsageError(f"{path}:{number}: more than {MAX_LINES:,} lines")
        if len(raw) > MAX_LINE_BYTES:
            raise UsageError(f"{path}:{number}: line longer than {MAX_LINE_BYTES:,} bytes")
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}:{number}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
        if line and not line.startswith("#"):
            yield number, line


def _in_string(char: str, escaped: bool) -> tuple[bool, bool]:
    """After char inside a JSON string: whether still inside it, and whether the next char is escaped."""
    if escaped:
        return True, False
    if char == "\\":
        return True, True
    return char != '"', False


def _depth(line: str) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings not counted)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in line:
        if in_string:
            in_string, escaped = _in_string(char, escaped)
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def _json_object(path: Path, number: int, line: str) -> dict[str, object]:
    if _depth(line) > MAX_DEPTH:
        raise UsageError(f"{path}:{number}: JSON nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(line)
    except RecursionError:
        raise UsageError(f"{path}:{number}: JSON nested too deep") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{number}: not a JSON object ({exc.msg})") from exc
    if not isinstance(value, dict):
        raise UsageError(f"{path}:{number}: not a JSON object")
    return value


def _text_field(path: Path, number: int, value: dict[str, object], key: str) -> str:
    field = value.get(key)
    if isinstance(field, int) and not isinstance(field, bool) and key == "_id":
        return str(field)
    if not isinstance(field, str) or not field.strip():
        raise UsageError(f"{path}:{number}: {key!r} must be a non-empty string")
    return field


def read_cases(path: Path) -> list[Case]:
    """The cases of a JSON-lines file, in order; UsageError naming file:line for a malformed line or none at all."""
    cases = []
    for number, line in _lines(path):
        value = _json_object(path, number, line)
        cases.append(Case(number, _text_field(path, number, value, "query").strip(),
                          _text_field(path, number, value, "expect").strip()))
    if not cases:
        raise UsageError(f"{path}: no cases (one {{\"query\": ..., \"expect\": ...}} object per line)")
    return cases


def _split(line: str) -> list[str]:
    return [f.strip() for f in line.split("\t")] if "\t" in line else line.split()


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def read_qrels(path: Path) -> Qrels:
    """{query id: {document id: relevance}} of a TREC or BEIR qrels file (a repeated pair keeps its last grade)."""
    qrels: Qrels = {}
    for index, (number, line) in enumerate(_lines(path)):
        fields = _split(line)
        relevance = _int(fields[-1])
        if relevance is None and index == 0 and len(fields) in (3, 4):
            continue  # a header, such as BEIR's `query-id corpus-id score`
        if len(fields) not in (3, 4) or not all(fields):
            raise UsageError(f"{path}:{number}: expected `qid 0 docid relevance` (TREC) or "
                             f"`query-id<TAB>corpus-id<TAB>score` (BEIR), found {len(fields)} "
                             f"field{'' if len(fields) == 1 else 's'}")
        if relevance is None:
            raise UsageError(f"{path}:{number}: relevance {fields[-1]!r} is not an integer")
        qrels.setdefault(fields[0], {})[fields[-2]] = relevance
    if not qrels:
        raise UsageError(f"{path}: no judgments")
    return qrels


def read_queries(path: Path) -> dict[str, str]:
    """{query id: text} of a BEIR queries.jsonl or a `qid<TAB>text` file."""
    queries: dict[str, str] = {}
    as_json: bool | None = None
    for number, line in _lines(path):
        if as_json is None:
            as_json = line.startswith("{")
        if as_json:
            value = _json_object(path, number, line)
            qid, text = _text_field(path, number, value, "_id"), _text_field(path, number, value, "text")
        else:
            qid, tab, text = line.partition("\t")
            if not tab or not qid.strip() or not text.strip():
                raise UsageError(f"{path}:{number}: expected `qid<TAB>text` (or a JSON line with _id and text)")
        queries[qid.strip()] = text.strip()
    if not queries:
        raise UsageError(f"{path}: no queries")
    return queries
