"""The candidates each tier finds for a parsed query, every score turned "higher is better" here, once.

The lexical tier is FTS5's bm25 over the porter table (lower is better there; a CJK query fuses its
porter and trigram rankings by RRF, query/lexical.py); the vector tier is the L2 distance to the
query vector (lower is better), for a hybrid ranking after the feedback pass (query/feedback.py).
Both are negated on the way in, so every stage and every hit reads a higher score as a better one;
explain (query/explain.py) negates them back to show the tiers' own measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from config.errors import VectorIdentityMismatch
from config.settings import Settings
from pipeline.schema import read_meta
from pipeline.vectors import pinned_identity, serving
from query.filters import Allowed
from query.lexical import lexical_top
from query.rank.parsed import ParsedQuery
from query.reader import Reader
from query.tier import tier_line

# The rankings search_deep can force; `search` ranks as configured (hybrid with embeddings, else lexical).
LEXICAL = "lexical"
VECTOR = "vector"
HYBRID = "hybrid"
RANKINGS = (LEXICAL, VECTOR, HYBRID)

Scored = tuple[int, float]  # (chunk id, score), higher is better


@dataclass(frozen=True)
class Tiers:
    """The ranking the tiers make up and each tier's candidates, best first; ids the query excludes are out."""

    ranking: str  # LEXICAL, VECTOR or HYBRID
    lexical: tuple[Scored, ...] = ()  # -bm25, or the CJK fusion's RRF score
    vector: tuple[Scored, ...] = ()  # -distance to the (moved) query vector
    feedback: tuple[int, ...] = ()  # the sections whose vectors moved the query (hybrid only)
    # The lexical tier's own scores when a stage re-scored `lexical` (query/rank/evidence.py); empty: not re-scored.
    bm25: tuple[Scored, ...] = ()
    strategy: str = ""  # the lexical plan that found the candidates (query/lexical/tier.py STRATEGIES)
    exact: bool = True  # whether that plan proved its top k the full query's

    @property
    def lexical_ids(self) -> list[int]:
        """The lexical candidates' chunk ids, best first."""
        return [cid for cid, _ in self.lexical]


def excluded_ids(reader: Reader, query: ParsedQuery) -> set[int]:
    """The chunks holding a word the query excludes (any form of it, as the porter index sees words)."""
    if not query.excluded:
        return set()
    rows = reader.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (query.lexical.exclusion,))
    return {int(r[0]) for r in rows}


@dataclass(frozen=True)
class LexicalTier:
    """The lexical candidates, best first, and the plan that found them."""

    found: tuple[Scored, ...]
    strategy: str
    exact: bool


def lexical_tier(reader: Reader, query: ParsedQuery, fanout: int, allowed: Allowed | None,
                 excluded: set[int]) -> LexicalTier:
    """The best `fanout` lexical candidates (of the allowed documents' chunks when a filter is on)."""
    chosen = lexical_top(reader.conn, query.lexical, fanout, allowed, reader.lexical,
                         reader.settings.unproven_lexical)
    return LexicalTier(tuple([(cid, -score) for cid, score in chosen.rows if cid not in excluded]),
                       chosen.strategy, chosen.exact)


@dataclass(frozen=True)
class VectorTier:
    """The vector tier's candidates and feedback, and the settings and tier line of the identity that served them."""

    found: tuple[Scored, ...]
    feedback: tuple[int, ...]
    settings: Settings
    tier: str


def vector_tier(settings: Settings, reader: Reader, text: str, depth: int, allowed: str | None, tier: str,
                lexical: Sequence[int] | None, excluded: set[int]) -> VectorTier:
    """The vector tier's max(depth, KNN_K) candidates: with lexical candidates the feedback pass re-scores
    both tiers' (query/feedback.py); with lexical None (a forced vector ranking) the first pass alone.

    Runs under the identity the store serves: a model switch that swaps the vectors between embedding
    and KNN is followed once (the query is embedded again with the new model); EmbeddingError when
    the server fails, VectorIdentityMismatch for a model, dimension or prefix the index does not pin.
    """
    from query.feedback import nearest_with_feedback  # the HTTP client only with embeddings
    from query.vector import KNN_K, embed_query, query_identity

    for _ in range(2):  # a second pass only when a model switch swapped the vectors mid-query
        emb = settings.embeddings
        assert emb is not None  # serving() only ever swaps one block for another
        identity = query_identity(emb, reader.meta, settings.db_path)
        vector = embed_query(emb, identity, text)
        found = nearest_with_feedback(reader.conn, identity, vector, max(depth, KNN_K), lexical, excluded, allowed,
                                      reader.caches)
        if found is not None:
            nearest = tuple([(cid, -distance) for cid, distance in found[0] if cid not in excluded])
            return VectorTier(nearest, tuple(found[1]), settings, tier)
        reader.meta = read_meta(reader.conn)  # the store now serves another model: follow it
        settings = serving(settings, reader.meta)
        now = pinned_identity(reader.meta)
        tier = tier_line(settings, dimension=now.dimension if now else None)
    raise VectorIdentityMismatch(f"the vectors of {settings.db_path} changed model twice during one query")
