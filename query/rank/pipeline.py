"""The stages run in order over a query's candidates, then the answer cut at k and hydrated once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from query.rank import stages as stages_module
from query.rank.language import with_translations
from query.rank.ranked import Context, Ranked, Stage
from query.reader import Hit

if TYPE_CHECKING:
    from query.explain import Explain


def ranked(context: Context, k: int, stages: Sequence[Stage] | None = None) -> Ranked:
    """The ranking the stages (default: query.rank.stages.STAGES) leave; the last one is read to depth k."""
    chosen = stages_module.STAGES if stages is None else stages
    ranking = Ranked(context)
    last = len(chosen) - 1
    for at, stage in enumerate(chosen):
        ranking = stage(ranking.read_to(k if at == last else None))
    return ranking


@dataclass(frozen=True)
class RankedHits:
    """The top k hits, hydrated, and the ranking they were cut from (its stages' remarks: the reranker's outcome)."""

    hits: list[Hit]
    ranking: Ranked


def ranked_hits(context: Context, k: int, explain: bool = False, stages: Sequence[Stage] | None = None) -> RankedHits:
    """The top k hits of the staged ranking, hydrated once; with explain each carries the stages' trace."""
    ranking = ranked(context, k, stages)
    top = ranking.answer(k)
    found = with_translations(context.reader, ranking, context.reader.hydrate([cid for cid, _ in top], dict(top)))
    if not explain:
        return RankedHits(found, ranking)
    why = _trace(ranking)
    return RankedHits([replace(h, explain=why.get(h.chunk_id)) for h in found], ranking)


def rank(context: Context, k: int, explain: bool = False, stages: Sequence[Stage] | None = None) -> list[Hit]:
    """The top k hits of the staged ranking (ranked_hits without the ranking)."""
    return ranked_hits(context, k, explain, stages).hits


def _trace(ranking: Ranked) -> dict[int, Explain]:
    """Each candidate's explanation from the trace: the tiers' ranks and own measures, the stages' notes."""
    from query.explain import explanations  # only --explain pays for it

    tiers = ranking.context.tiers
    diversity = stages_module.DIVERSITY
    own = dict(tiers.bm25 or tiers.lexical)  # the tier's own scores, in the order the stages left it
    return explanations(tiers.ranking, [(cid, -own[cid]) for cid, _ in tiers.lexical],
                        [(cid, -score) for cid, score in tiers.vector], bool(ranking.context.query.cjk),
                        ranking.note_of(diversity), len(tiers.feedback),
                        [(name, about) for name, about in ranking.notes if name != diversity],
                        tiers.strategy, tiers.exact)
