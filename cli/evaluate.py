"""`knowledge eval`: measure the store's rankings against expectation cases or judged queries.

Exit codes: 0 when every evaluated ranking reaches the thresholds given (`--min-recall`,
`--min-ndcg`), 1 when one falls below or the index is missing or empty, 2 for a usage error
(including a malformed line of a cases, qrels or queries file, named file:line).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.app import Context, cli, echo_json, pass_context, prologue
from config.errors import EXIT_FAILURE, UsageError
from config.settings import Settings
from query.evaluation import (
    DEPTH,
    DOCID_SCHEMES,
    CasesReport,
    CasesRun,
    QrelsPlan,
    QrelsReport,
    QrelsRun,
    available_rankings,
    cases_json,
    configured_ranking,
    qrels_json,
)
from query.judgments import read_cases, read_qrels, read_queries
from query.metrics import METRICS
from query.search import RANKINGS
from query.service import QueryService
from query.terminal import clean, one_line

FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
LABELS = {"ndcg@10": "nDCG@10", "recall@10": "Recall@10", "recall@100": "Recall@100", "mrr@10": "MRR@10"}
NO_EMBEDDINGS = "no embeddings configured (knowledge.embeddings)"


@cli.command("eval")
@click.option("--cases", type=FILE, help="JSON lines of {\"query\": ..., \"expect\": ...}; `#` lines are comments.")
@click.option("--qrels", type=FILE, help="Judgments: TREC `qid 0 docid rel` or BEIR qrels/test.tsv.")
@click.option("--queries", type=FILE, help="Query texts for --qrels: BEIR queries.jsonl or `qid<TAB>text`.")
@click.option("-k", "--top-k", type=click.IntRange(1, DEPTH), default=None,
              help="Cases: a case passes when one of the top k hits contains its text (default top_k).")
@click.option("--depth", type=click.IntRange(1, 1000), default=None,
              help=f"Qrels: chunks read per query and ranking (default {DEPTH}).")
@click.option("--docid", type=click.Choice(DOCID_SCHEMES), default=None,
              help="Qrels: how a stored document maps to a judged id (default stem: docs/184.md -> 184).")
@click.option("--tier", type=click.Choice(RANKINGS), default=None,
              help="The ranking to evaluate (default: as configured, hybrid with embeddings, else lexical).")
@click.option("--compare", is_flag=True, help="Evaluate lexical, vector and hybrid side by side.")
@click.option("--min-recall", type=click.FloatRange(0, 1), default=None,
              help="Exit 1 when recall@k (cases) or Recall@10 (qrels) is below this.")
@click.option("--min-ndcg", type=click.FloatRange(0, 1), default=None, help="Qrels: exit 1 when nDCG@10 is below this.")
@click.option("-v", "--verbose", is_flag=True,
              help="Cases: print what ranked instead of a failing case. Qrels: each query's relevant documents "
                   "missing from its top 10.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def eval_command(obj: Context, cases: Path | None, qrels: Path | None, queries: Path | None, top_k: int | None,
                 depth: int | None, docid: str | None, tier: str | None, compare: bool, min_recall: float | None,
                 min_ndcg: float | None, verbose: bool, as_json: bool) -> None:
    """Measure search against a cases file (recall@k) or judged queries (nDCG@10, Recall@10/@100, MRR@10)."""
    if (cases is None) == (qrels is None):
        raise UsageError("give either --cases FILE or --qrels FILE --queries FILE")
    if compare and tier:
        raise UsageError("--compare evaluates every tier; leave out --tier")
    if cases is not None:
        _refuse("--cases", queries=queries, depth=depth, docid=docid, min_ndcg=min_ndcg)
        _cases(obj, cases, top_k, tier, compare, min_recall, verbose, as_json)
    elif qrels is not None:
        if queries is None:
            raise UsageError("--qrels needs --queries FILE (the query texts)")
        _refuse("--qrels", top_k=top_k)
        _qrels(obj, qrels, queries, depth or DEPTH, docid or "stem", tier, compare, min_recall, min_ndcg,
               verbose, as_json)


def _refuse(mode: str, **given: object) -> None:
    for name, value in given.items():
        if value is not None:
            raise UsageError(f"--{name.replace('_', '-')} does not apply to {mode}")


def _rankings(settings: Settings, tier: str | None, compare: bool) -> tuple[list[str], dict[str, str]]:
    """The rankings to run and those skipped with why."""
    if not compare:
        return [tier or configured_ranking(settings)], {}
    runnable = list(available_rankings(settings))
    return runnable, {r: NO_EMBEDDINGS for r in RANKINGS if r not in runnable}


def _below(figure: str, ranking: str, value: float, threshold: float | None, option: str) -> str | None:
    if threshold is None or value >= threshold:
        return None
    return f"{figure} of {ranking} is {value:.3f}, below {option} {threshold:g}"


def _finish(failures: list[str]) -> None:
    for line in failures:
        click.echo(f"knowledge: {line}", err=True)
    if failures:
        sys.exit(EXIT_FAILURE)


def _cases(obj: Context, path: Path, top_k: int | None, tier: str | None, compare: bool,
           min_recall: float | None, verbose: bool, as_json: bool) -> None:
    settings = prologue(obj, as_json)
    loaded = read_cases(path)
    k = top_k or settings.top_k
    rankings, skipped = _rankings(settings, tier, compare)
    reports = QueryService(settings).evaluate(CasesRun(tuple(loaded), k, tuple(rankings)))
    failures = [f for f in (_below(f"recall@{k}", r.ranking, r.recall, min_recall, "--min-recall")
                            for r in reports) if f]
    if as_json:
        echo_json({"mode": "cases", "cases": str(path), "k": k,
                   "rankings": {r.ranking: cases_json(r, verbose) for r in reports}, "skipped": skipped,
                   "min_recall": min_recall, "ok": not failures})
    else:
        _print_cases(reports, skipped, verbose)
    _finish(failures)


def _print_cases(reports: list[CasesReport], skipped: dict[str, str], verbose: bool) -> None:
    k = reports[0].k
    if len(reports) == 1:
        for result in reports[0].results:
            query = one_line(result.case.query, 70)
            if result.passed:
                click.echo(f"PASS  {query}  -> {clean(result.citation or '')} (rank {result.rank})")
            else:
                click.echo(f"FAIL  {query}  (line {result.case.line}: no top-{k} hit contains "
                           f"{one_line(result.case.expect, 40)!r})")
                if verbose:
                    click.echo(f"      ranked instead: {clean(', '.join(result.top)) or 'nothing'}")
    else:
        click.echo("  ".join(f"{r.ranking:<7}" for r in reports) + "  case")
        for row in zip(*(r.results for r in reports)):
            marks = "  ".join(f"{'PASS' if result.passed else 'FAIL':<7}" for result in row)
            case = row[0].case
            click.echo(f"{marks}  {one_line(case.query, 60)} (line {case.line}, expects "
                       f"{one_line(case.expect, 30)!r})")
            for report, result in zip(reports, row) if verbose else ():
                if not result.passed:
                    click.echo(f"      {report.ranking} ranked instead: {clean(', '.join(result.top)) or 'nothing'}")
    summary = ", ".join(f"{r.ranking} {r.recall:.3f} ({r.passed} of {len(r.results)})" for r in reports)
    click.echo(f"recall@{k}: {summary}")
    for ranking, why in skipped.items():
        click.echo(f"{ranking}: skipped, {why}")


def _qrels(obj: Context, qrels_path: Path, queries_path: Path, depth: int, scheme: str, tier: str | None,
           compare: bool, min_recall: float | None, min_ndcg: float | None, verbose: bool, as_json: bool) -> None:
    settings = prologue(obj, as_json)
    judged, texts = read_qrels(qrels_path), read_queries(queries_path)
    rankings, skipped = _rankings(settings, tier, compare)
    run = QrelsRun(judged, texts, scheme, tuple(rankings), depth, (str(qrels_path), str(queries_path)))
    planned, reports = QueryService(settings).evaluate(run)
    failures = [f for r in reports for f in (
        _below("Recall@10", r.ranking, r.means["recall@10"], min_recall, "--min-recall"),
        _below("nDCG@10", r.ranking, r.means["ndcg@10"], min_ndcg, "--min-ndcg")) if f]
    if as_json:
        echo_json({"mode": "qrels", "qrels": str(qrels_path), "queries_file": str(queries_path), "depth": depth,
                   "docid": scheme, "queries": len(planned.queries), "queries_without_text": planned.without_text,
                   "queries_without_relevant": planned.unjudged, "judged_documents": planned.judged_documents,
                   "judged_documents_in_store": planned.stored_judged_documents,
                   "rankings": {r.ranking: qrels_json(r, verbose) for r in reports}, "skipped": skipped,
                   "min_recall": min_recall, "min_ndcg": min_ndcg, "ok": not failures})
    else:
        _print_qrels(reports, planned, scheme, depth, skipped, verbose)
    _finish(failures)


def _print_qrels(reports: list[QrelsReport], planned: QrelsPlan, scheme: str, depth: int,
                 skipped: dict[str, str], verbose: bool) -> None:
    click.echo(f"judged queries: {len(planned.queries)} evaluated"
               + (f", {len(planned.without_text)} without a text (not evaluated)" if planned.without_text else "")
               + (f", {planned.unjudged} without a relevant document" if planned.unjudged else ""))
    click.echo(f"judged documents in the store (--docid {scheme}): {planned.stored_judged_documents} of "
               f"{planned.judged_documents}; depth {depth} chunks per query")
    if verbose:
        for report in reports:
            _print_misses(report)
    header = ["ranking", "queries"] + [LABELS[m] for m in METRICS]
    rows = [[r.ranking, str(len(r.outcomes))] + [f"{r.means[m]:.3f}" for m in METRICS] for r in reports]
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    click.echo("")
    for row in table:
        cells = (cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        click.echo("  ".join(cells))
    for ranking, why in skipped.items():
        click.echo(f"{ranking}: skipped, {why}")


def _print_misses(report: QrelsReport) -> None:
    for outcome in report.outcomes:
        if not outcome.misses:
            continue
        missed = ", ".join(f"{clean(doc)} (relevance {grade}, " + (f"rank {rank})" if rank else "not retrieved)")
                           for doc, grade, rank in outcome.misses)
        click.echo(f"{report.ranking} query {clean(outcome.qid)} {one_line(outcome.text, 50)!r}: nDCG@10 "
                   f"{outcome.scores['ndcg@10']:.3f}, {len(outcome.misses)} of {outcome.relevant} relevant "
                   f"not in the top 10: {missed}")
