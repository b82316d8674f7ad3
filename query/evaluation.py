"""Evaluate the store's rankings: expectation cases (recall@k) and judged queries (nDCG, recall, MRR).

Both modes rank through query.search.search_deep, the shipped search read past the user cap, so a
change to ranking shows here exactly as users get it. A ranking is LEXICAL, VECTOR or HYBRID; the
configured one is hybrid with embeddings, else lexical. A failing embedding raises: an evaluation
never degrades silently.

Judged mode maps each hit to a document id with a DOCID scheme: `stem` (the stored file name
without its last suffix: `docs/184.md` -> `184`, the BEIR/Cranfield convention when each document
is written as `<id>.md`), `path` (the stored path as cited) or `title` (the document's title). A
document counts once, at its best chunk's rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from config.errors import UsageError
from config.settings import Settings
from query import metrics
from query.citations import CitationMapper
from query.judgments import Case, Qrels
from query.reader import Hit, Reader
from query.search import HYBRID, LEXICAL, RANKINGS, search_deep

DOCID_SCHEMES = ("stem", "path", "title")
DEPTH = 100


def configured_ranking(settings: Settings) -> str:
    """The ranking `search` uses under these settings: hybrid with embeddings, else lexical."""
    return HYBRID if settings.embeddings is not None else LEXICAL


def available_rankings(settings: Settings) -> tuple[str, ...]:
    """Every ranking these settings can run (vector and hybrid need embeddings)."""
    return RANKINGS if settings.embeddings is not None else (LEXICAL,)


# --- expectation cases -------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    """One case under one ranking: the first top-k hit containing `expect`, if any."""

    case: Case
    rank: int | None
    citation: str | None
    top: tuple[str, ...] = ()  # the citation tokens of the top k hits, best first

    @property
    def passed(self) -> bool:
        """Whether some top-k hit contained the expected text."""
        return self.rank is not None


@dataclass(frozen=True)
class CasesReport:
    """Every case under one ranking at one k."""

    ranking: str
    k: int
    results: list[CaseResult]

    @property
    def passed(self) -> int:
        """How many cases passed."""
        return sum(1 for r in self.results if r.passed)

    @property
    def recall(self) -> float:
        """recall@k: the share of cases with the expected text in a top-k hit."""
        return self.passed / len(self.results) if self.results else 0.0


def hit_text(hit: Hit, mapper: CitationMapper | None = None) -> str:
    """What a case's `expect` is looked for in: section, content, citation token, path (and mapped citation)."""
    parts = [hit.section or "", hit.content, hit.index_ref, hit.path]
    if mapper is not None and mapper.configured:
        parts.append(mapper.map_chunk(hit.path, hit.ordinal, hit.section) or "")
    return "\n".join(parts)


def contains(haystack: str, expect: str) -> bool:
    """Whether expect occurs in haystack, ignoring case (Unicode case folding)."""
    return expect.casefold() in haystack.casefold()


def run_cases(settings: Settings, reader: Reader, cases: Sequence[Case], k: int, ranking: str) -> CasesReport:
    """Rank each case's query with `ranking` and look for its expected text in the top k hits."""
    mapper = CitationMapper.from_settings(settings)
    results = []
    for case in cases:
        hits = search_deep(settings, reader, case.query, k, ranking).hits[:k]
        found = next(((rank, hit) for rank, hit in enumerate(hits, start=1)
                      if contains(hit_text(hit, mapper), case.expect)), None)
        results.append(CaseResult(case, found[0] if found else None, found[1].index_ref if found else None,
                                  tuple(hit.index_ref for hit in hits)))
    return CasesReport(ranking, k, results)


# --- judged queries ----------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryOutcome:
    """One judged query under one ranking: its document ranking, scores and misses in the top 10."""

    qid: str
    text: str
    ranking: list[str]
    scores: dict[str, float]
    misses: list[tuple[str, int, int | None]]  # relevant documents not in the top 10: (id, grade, rank or None)
    relevant: int  # how many documents are judged relevant


@dataclass
class QrelsReport:
    """Judged queries under one ranking: the mean metrics and every query's outcome."""

    ranking: str
    depth: int
    outcomes: list[QueryOutcome] = field(default_factory=list)

    @property
    def means(self) -> dict[str, float]:
        """Mean nDCG@10, Recall@10, Recall@100 and MRR@10 over the evaluated queries."""
        return metrics.mean(o.scores for o in self.outcomes)


@dataclass(frozen=True)
class QrelsPlan:
    """Which judged queries are evaluated, and how many judged documents the store holds under the scheme."""

    queries: list[tuple[str, str]]  # (qid, text) of judged queries with text, in qrels order
    without_text: list[str]  # judged queries the queries file has no text for (not evaluated)
    unjudged: int  # judged queries with no relevant document (not evaluated)
    judged_documents: int
    stored_judged_documents: int


def docid_mapper(reader: Reader, scheme: str) -> Callable[[str], str]:
    """A function from a stored path to its document id under scheme (stem, path or title)."""
    if scheme == "stem":
        return lambda path: PurePosixPath(path.rstrip("/")).stem
    if scheme == "path":
        return lambda path: path
    if scheme == "title":
        titles = {row["path"]: row["title"] or "" for row in reader.sources()}
        return lambda path: titles.get(path, "")
    raise UsageError(f"unknown --docid {scheme!r}; expected one of {', '.join(DOCID_SCHEMES)}")


def plan(reader: Reader, qrels: Qrels, queries: dict[str, str], scheme: str) -> QrelsPlan:
    """The judged queries to evaluate; UsageError when no judged document id names a stored document."""
    to_docid = docid_mapper(reader, scheme)
    judged = {doc for docs in qrels.values() for doc, grade in docs.items() if grade > 0}
    stored = [row["path"] for row in reader.sources()]
    stored_ids = {to_docid(path) for path in stored}
    found = len(judged & stored_ids)
    if judged and stored and not found:
        example = stored[0]
        raise UsageError(
            f"no judged document id names a stored document under --docid {scheme} (e.g. {example!r} -> "
            f"{to_docid(example)!r}, judged ids look like {min(judged)!r}); "
            f"try --docid {' or '.join(s for s in DOCID_SCHEMES if s != scheme)}")
    relevant = [qid for qid, docs in qrels.items() if metrics.relevant(docs)]
    return QrelsPlan(
        queries=[(qid, queries[qid]) for qid in relevant if qid in queries],
        without_text=[qid for qid in relevant if qid not in queries],
        unjudged=len(qrels) - len(relevant),
        judged_documents=len(judged),
        stored_judged_documents=found,
    )


def run_qrels(settings: Settings, reader: Reader, qrels: Qrels, planned: QrelsPlan, ranking: str,
              scheme: str = "stem", depth: int = DEPTH) -> QrelsReport:
    """Rank every planned query `depth` chunks deep with `ranking` and score its document ranking."""
    to_docid = docid_mapper(reader, scheme)
    report = QrelsReport(ranking, depth)
    for qid, text in planned.queries:
        hits = search_deep(settings, reader, text, depth, ranking).hits
        documents = metrics.first_ranks(to_docid(h.path) for h in hits)
        judged = qrels[qid]
        report.outcomes.append(QueryOutcome(qid, text, documents, metrics.scores(documents, judged),
                                            metrics.misses(documents, judged), len(metrics.relevant(judged))))
    return report


# --- JSON shapes (`knowledge eval --json`) -------------------------------------------------------


def cases_json(report: CasesReport, top: bool = False) -> dict[str, object]:
    """One ranking's cases as JSON: recall, counts and every case's outcome (with its top k hits when asked)."""
    cases: list[dict[str, object]] = []
    for r in report.results:
        case: dict[str, object] = {"line": r.case.line, "query": r.case.query, "expect": r.case.expect,
                                   "pass": r.passed, "rank": r.rank, "citation": r.citation}
        if top:
            case["top"] = list(r.top)
        cases.append(case)
    return {"recall": round(report.recall, 4), "passed": report.passed, "total": len(report.results), "cases": cases}


def qrels_json(report: QrelsReport, per_query: bool = False) -> dict[str, object]:
    """One ranking's judged evaluation as JSON: the means (4 decimals), and each query's when asked."""
    out: dict[str, object] = {name: round(value, 4) for name, value in report.means.items()}
    out["queries"] = len(report.outcomes)
    if per_query:
        out["per_query"] = [
            {"qid": o.qid, **{name: round(value, 4) for name, value in o.scores.items()}, "relevant": o.relevant,
             "misses": [{"docid": doc, "relevance": grade, "rank": rank} for doc, grade, rank in o.misses]}
            for o in report.outcomes
        ]
    return out


@dataclass(frozen=True)
class CasesRun:
    """An evaluation by cases (`eval --cases`): each ranking's report over the cases at k."""

    cases: tuple[Case, ...]
    k: int
    rankings: tuple[str, ...]

    def on(self, settings: Settings, reader: Reader) -> list[CasesReport]:
        """The reports, ranking by ranking, on the reader QueryService.evaluate lends."""
        return [run_cases(settings, reader, self.cases, self.k, ranking) for ranking in self.rankings]


@dataclass(frozen=True)
class QrelsRun:
    """An evaluation on judgments (`eval --qrels`): the plan, and each ranking's report to depth."""

    qrels: Qrels
    queries: dict[str, str]
    scheme: str
    rankings: tuple[str, ...]
    depth: int
    files: tuple[str, str] = ("", "")  # the judgments' and the queries' files, for what a refusal names

    def on(self, settings: Settings, reader: Reader) -> tuple[QrelsPlan, list[QrelsReport]]:
        """The plan and the reports on the reader QueryService.evaluate lends (UsageError: no judged query has a
        text)."""
        planned = plan(reader, self.qrels, self.queries, self.scheme)
        if not planned.queries:
            raise UsageError(f"none of the judged queries of {self.files[0]} has a text in {self.files[1]}")
        return planned, [run_qrels(settings, reader, self.qrels, planned, ranking, self.scheme, self.depth)
                         for ranking in self.rankings]
