"""The ranking stages, in order: each one function `Ranked -> Ranked`, scores higher-is-better throughout.

A stage reads the ranking so far (and its Context: the parsed query, the tiers' candidates, the reader)
and returns the next one; what it did to a hit it says with Ranked.noted, and --explain shows that.
Adding a stage is writing its function and naming it in STAGES. The last stage's output is read only
to the answer's depth (the pipeline sets Ranked.depth); every other stage must rank the whole list.

Verbatim protection lifts the sections holding the query's identifiers by one more ranked list in the
fusion (query/verbatim.py). A stage may pin sections instead (Ranked.pinned): diversity counts a pinned
section in its document's allowance but never demotes it, the same answer as demoting first and then
placing the pinned sections first (tests/query/test_rank_stages.py), while diversity, last, reads
only the ranks the answer needs. Stages before fusion re-score a tier's candidates (Ranked.with_lexical;
cjk_length in query/rank/scripts.py, names and documents in query/rank/evidence.py). A stage that
re-scores the fused list (language preference, a reranker) goes before diversity; pinned sections
stay first whatever it does.
The reranker (query/rank/rerank.py) sits right after fusion, before every stage that states a rule,
so it re-orders candidates without breaking one; unconfigured, it returns its input.
"""

from __future__ import annotations

from query.fusion import diversified_prefix, rrf
from query.rank.evidence import documents, names
from query.rank.language import language
from query.rank.ranked import Ranked, Stage
from query.rank.rerank import rerank
from query.rank.scripts import cjk_length
from query.rank.tiers import HYBRID, VECTOR
from query.verbatim import VERBATIM, lift, verbatim_ids

DIVERSITY = "diversity"  # its notes are explain's `demoted`


def fusion(ranked: Ranked) -> Ranked:
    """The tiers' candidates as one ranking: RRF of both in a hybrid ranking, else the one tier's own order."""
    tiers = ranked.context.tiers
    if tiers.ranking == HYBRID:
        entries = tuple(rrf([tiers.lexical_ids, [cid for cid, _ in tiers.vector]]))
    else:
        entries = tiers.vector if tiers.ranking == VECTOR else tiers.lexical
    return ranked.reordered(entries)


def verbatim(ranked: Ranked) -> Ranked:
    """In a hybrid ranking, lift the lexical candidates holding a verbatim phrase by one more RRF list."""
    context = ranked.context
    if context.tiers.ranking != HYBRID or not context.query.phrases:
        return ranked
    lexical = context.tiers.lexical_ids
    held = verbatim_ids(context.reader.conn, context.query.phrases, lexical)
    if not held:
        return ranked
    entries, lifted = lift(ranked.entries, lexical, held)
    return ranked.reordered(entries, VERBATIM, lifted)


def diversity(ranked: Ranked) -> Ranked:
    """Demote each document's sections past its first PER_DOCUMENT (query/fusion.py); pins stay, and count."""
    if not ranked.entries:
        return ranked
    pins = frozenset(ranked.pins)
    order, moved = diversified_prefix(ranked.entries, ranked.depth, ranked.context.reader.documents_of,
                                      exempt=pins)
    return ranked.reordered(order, DIVERSITY, dict.fromkeys(moved, True))


STAGES: tuple[Stage, ...] = (cjk_length, names, documents, fusion, rerank, verbatim, language, diversity)



def without(*names: str) -> tuple[Stage, ...]:
    """STAGES with the named stages left out: what evaluation ranks by to measure each stage (bench/bench_eval.py).

    query/rank/pipeline.py reads STAGES at each ranking, so evaluation sets this module's STAGES to the answer
    for a while (bench/lib/evalrun.py) and puts it back; search itself never does. Fusion cannot be left out
    (it makes the ranking); an unknown name is a ValueError.
    """
    known = {stage.__name__ for stage in STAGES}
    unknown = sorted(set(names) - known) + (["fusion"] if "fusion" in names else [])
    if unknown:
        raise ValueError(f"cannot leave out {', '.join(unknown)}; the stages are {', '.join(sorted(known))}")
    return tuple(stage for stage in STAGES if stage.__name__ not in names)
