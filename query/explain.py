"""Why a hit ranked where it did: its place and score in each tier, and each tier's share of its RRF score.

Asked for with `search --explain`, `"explain": true` in /v1/search and knowledge_search; a hit
carries it in an `explain` object beside its `score`, and only when asked. The lexical score is
FTS5's bm25 (lower is better; the hit's `score` is its negation) or, for a query with CJK runs, the
reciprocal rank fusion of its porter and trigram rankings; `plan` names the lexical strategy that found the
candidates (query/lexical/tier.py) and whether it proved its top k exact. The vector distance is L2 between unit
vectors (0 is identical, 2 opposite); in a hybrid ranking it is the distance to the query vector
moved toward the best fused sections, which re-scored both tiers' candidates (query/feedback.py),
and `feedback` says how many moved it. In a
hybrid ranking each tier adds 1/(RRF_K + rank) to the fused score, and its share is that part over
the whole. `demoted` is true when the hit was moved down because its document already had
PER_DOCUMENT sections above it (query/fusion.py), so it may follow hits of lower score.

The explanation is the trace the ranking stages leave (query/rank/): the tiers' candidates give the
ranks and scores (negated back to the tiers' own measures: bm25 and distance, lower is better), the
diversity stage's notes give `demoted`, and what any other stage said about a hit goes in `stages`
(name: note), present only when one did.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from query.fusion import PER_DOCUMENT, RRF_K

Note = str | int | float | bool  # what a ranking stage says about one hit


@dataclass(frozen=True)
class Explain:
    """One hit's ranks and scores in the tiers that found it (None where a tier did not)."""

    ranking: str
    lexical_rank: int | None = None
    lexical_score: float | None = None
    lexical_fused: bool = False  # the lexical score is a CJK fusion, not bm25
    vector_rank: int | None = None
    vector_distance: float | None = None
    demoted: bool = False  # moved down by document diversity
    feedback: int = 0  # sections whose vectors moved the query that re-scored the candidates (0: the query alone)
    stages: tuple[tuple[str, Note], ...] = ()  # what other ranking stages said about the hit, in their order
    strategy: str = ""  # the lexical plan that found the candidates (query/lexical/tier.py STRATEGIES)
    exact: bool = True  # whether that plan proved its top k the full query's

    def to_json(self) -> dict[str, Any]:
        """The `explain` object of a hit."""
        lexical: dict[str, Any] | None = None
        if self.lexical_rank is not None:
            score = None if self.lexical_score is None else round(self.lexical_score, 6)
            lexical = {"rank": self.lexical_rank, "bm25": None if self.lexical_fused else score}
            if self.lexical_fused:
                lexical["cjk_rrf"] = None if score is None else -score
            if self.strategy:
                lexical["plan"] = {"strategy": self.strategy, "exact": self.exact}
        vector = None
        if self.vector_rank is not None:
            distance = None if self.vector_distance is None else round(self.vector_distance, 6)
            vector = {"rank": self.vector_rank, "distance": distance, "feedback": self.feedback}
        out: dict[str, Any] = {"ranking": self.ranking, "lexical": lexical, "vector": vector, "rrf": None,
                               "demoted": self.demoted}
        if self.ranking == "hybrid":
            parts = {name: 1.0 / (RRF_K + rank) if rank is not None else 0.0
                     for name, rank in (("lexical", self.lexical_rank), ("vector", self.vector_rank))}
            total = sum(parts.values())
            out["rrf"] = {
                "k": RRF_K,
                "score": round(total, 6),
                "lexical_share": round(parts["lexical"] / total, 4) if total else 0.0,
                "vector_share": round(parts["vector"] / total, 4) if total else 0.0,
            }
        if self.stages:
            out["stages"] = dict(self.stages)
        return out

    def line(self) -> str:
        """The one-line form the terminal prints under a hit."""
        parts: list[str] = []
        if self.lexical_rank is not None:
            kind = "cjk-rrf" if self.lexical_fused else "bm25"
            plan = f", {self.strategy} {'exact' if self.exact else 'unproven'}" if self.strategy else ""
            parts.append(f"lexical #{self.lexical_rank} ({kind} {self.lexical_score:.4f}{plan})"
                         if self.lexical_score is not None else f"lexical #{self.lexical_rank}")
        else:
            parts.append("lexical -")
        if self.ranking != "lexical":
            moved = f", feedback {self.feedback}" if self.feedback else ""
            parts.append(f"vector #{self.vector_rank} (distance {self.vector_distance:.4f}{moved})"
                         if self.vector_rank is not None and self.vector_distance is not None else "vector -")
        rrf = self.to_json()["rrf"]
        if rrf is not None:
            parts.append(f"rrf {rrf['score']:.6f} = lexical {rrf['lexical_share']:.0%}"
                         f" + vector {rrf['vector_share']:.0%}")
        if self.demoted:
            parts.append(f"demoted (its document has {PER_DOCUMENT} sections above)")
        parts += [f"{name} {note}" for name, note in self.stages]
        return "explain: " + ", ".join(parts)


def explanations(ranking: str, lexical: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]],
                 fused: bool, demoted: Collection[int] = (), feedback: int = 0,
                 stages: Sequence[tuple[str, Mapping[int, Note]]] = (), strategy: str = "",
                 exact: bool = True) -> dict[int, Explain]:
    """Each chunk id of either tier with its explanation (ranks 1-based, as RRF counts them).

    lexical and vector hold the tiers' own measures (bm25, distance: lower is better); demoted: the
    ids document diversity moved down; feedback: the sections that moved the query vector; stages:
    what other stages said about some hits, by stage name; strategy and exact: the lexical plan and whether it
    proved its answer.
    """
    lexical_at = {cid: (rank, score) for rank, (cid, score) in enumerate(lexical, start=1)}
    vector_at = {cid: (rank, distance) for rank, (cid, distance) in enumerate(vector, start=1)}
    out: dict[int, Explain] = {}
    for cid in {*lexical_at, *vector_at}:
        lex = lexical_at.get(cid)
        vec = vector_at.get(cid)
        said = tuple((name, about[cid]) for name, about in stages if cid in about)
        out[cid] = Explain(ranking, lex[0] if lex else None, lex[1] if lex else None, fused,
                           vec[0] if vec else None, vec[1] if vec else None, cid in demoted, feedback, said,
                           strategy, exact)
    return out
