"""The reranking stage: the head of the fused ranking re-ordered by a `/rerank` endpoint, within a time budget.

Configured by a `knowledge.rerank` block (query/reranker.py speaks to the endpoint); without one the
stage returns the ranking it was given and costs nothing. With one, the top_n best hits of the
fused list are sent (each as its breadcrumb, a blank line and its body, cut to TEXT_CHARS) with the
query, and re-ordered by the scores that come back, ties kept in fused order; the hits below top_n
follow in their fused order. The hit's `score` stays on the fused scale (the i-th reranked hit takes
the fused score of the i-th place, so scores still read higher-is-better down the whole list) and
the reranker's own score is its --explain note. On a timeout, an error or an answer that is not one
finite score per hit, the ranking is returned unchanged and the stage's remark says `rerank
skipped: <reason>`, which the tier line and the note carry to every surface (query/search.py).

It runs right after fusion (and the stages that re-score the fused list) and before the stages that
state rules: language preference and one hit per translation group, exact-match protection and
document diversity run on its output, so a reranker can re-order the candidates but never break a
rule the ranking promises, and diversity still reads only the ranks the answer needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.errors import RerankError
from config.settings import Settings
from query.rank.ranked import Ranked
from query.reader import Hit
from query.terminal import one_line
from query.tier import reranker_name

RERANK = "rerank"  # the stage's name: its notes are explain's `stages.rerank`, its remark the outcome
TEXT_CHARS = 2048  # of a hit's text sent: about the 512 tokens a cross-encoder reads


@dataclass(frozen=True)
class RerankOutcome:
    """What the stage did to one ranking: how many hits it re-ordered and how, or why it skipped."""

    label: str  # the model, else the endpoint's host
    top_n: int
    reranked: int = 0
    shape: str | None = None
    ms: float | None = None
    skipped: str | None = None  # why the fused order was kept
    kind: str | None = None  # the failed step: timeout, refused, http_status, malformed, config

    def line(self) -> str:
        """The tier line's part: `rerank: top 12 by <label> (tei, 14 ms)` or `rerank skipped: <reason>`."""
        if self.skipped is not None:
            return f"rerank skipped: {self.skipped}"
        return f"rerank: top {self.reranked} by {self.label} ({self.shape}, {self.ms:.0f} ms)"

    def to_json(self) -> dict[str, Any]:
        """The `rerank` object of a search answer."""
        return {"status": "skipped" if self.skipped is not None else "reranked", "reason": self.skipped,
                "kind": self.kind, "model": self.label, "top_n": self.top_n, "reranked": self.reranked,
                "shape": self.shape, "ms": None if self.ms is None else round(self.ms, 1)}


def passage(hit: Hit) -> str:
    """The text a hit is judged by: its breadcrumb, a blank line, its body (as it is embedded), cut to TEXT_CHARS."""
    text = f"{hit.section}\n\n{hit.content}" if hit.section else hit.content
    return text[:TEXT_CHARS]


def rerank(ranked: Ranked) -> Ranked:
    """The top_n hits re-ordered by the configured endpoint's scores; unchanged (saying why) when it fails."""
    settings: Settings | None = ranked.context.settings
    config = settings.rerank if settings is not None else None
    if config is None or len(ranked.entries) < 2:
        return ranked
    from query.reranker import Rerankers, scores  # the HTTP client loads only when a reranker is configured

    head = ranked.entries[:config.top_n]
    hits = ranked.context.reader.hydrate([cid for cid, _ in head])
    try:
        answer = scores(config, ranked.context.query.text, [passage(h) for h in hits],
                        kept=ranked.context.reader.caches.of(Rerankers))
    except RerankError as error:
        reason = one_line(str(error), 200)  # the server's words reach the tier line: one clean line
        skipped = RerankOutcome(reranker_name(config), config.top_n, skipped=reason, kind=error.kind)
        return ranked.remarked(RERANK, skipped)
    by_score = sorted(range(len(hits)), key=lambda i: (-answer.scores[i], i))
    judged = {hit.chunk_id for hit in hits}
    ids = [hits[i].chunk_id for i in by_score] + [cid for cid, _ in head if cid not in judged]
    reordered = [(cid, score) for cid, (_, score) in zip(ids, head)]
    said = {hits[i].chunk_id: round(answer.scores[i], 6) for i in range(len(hits))}
    outcome = RerankOutcome(reranker_name(config), config.top_n, len(hits), answer.shape, answer.seconds * 1000)
    return ranked.reordered([*reordered, *ranked.entries[len(head):]], RERANK, said).remarked(RERANK, outcome)


def outcome_of(ranked: Ranked) -> RerankOutcome | None:
    """What the stage did to this ranking (None: not configured, or nothing to re-order)."""
    remark = ranked.remark_of(RERANK)
    return remark if isinstance(remark, RerankOutcome) else None
