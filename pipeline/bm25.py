"""BM25 as FTS5's bm25() computes it: one frozen value every lexical strategy, stage and explanation uses.

FTS5 scores a row by, for each phrase i of the expression in order,
`score += idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl))` and returns `-score`, where
f_i is the row's column-weighted count of the phrase's instances, D the row's token count (all
columns), avgdl the table's tokens per row, and `idf_i = log((N - n_i + 0.5) / (n_i + 0.5))` (clamped
to 1e-6 when not positive) with n_i the rows holding the phrase and N the row count (fts5_aux.c).

`part` is that formula for one phrase, written once with the same double operations, for a float or
a numpy array alike; `score` sums the parts in the expression's order as FTS5 does, so it equals
bm25() to the bit; `bound` is more than one phrase adds to any row (f/(f + x) < 1), the bound the
pruned, shaped and impact-list strategies prove their answers with. It lives in pipeline/ because the
writer scores the impact lists and records the weights its derived structures were made with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # numpy only where a caller passes arrays: a read of a small store loads none
    import numpy as np
    import numpy.typing as npt

Value = TypeVar("Value", float, "npt.NDArray[np.float64]")


@dataclass(frozen=True)
class Bm25:
    """FTS5's bm25 with the porter table's column weights (body, heading path)."""

    k1: float = 1.2
    b: float = 0.75
    weights: tuple[float, float] = (1.0, 2.0)
    idf_floor: float = 1e-6  # FTS5 clamps a non-positive IDF to this
    margin: float = 1e-6  # relative slack on each bound, far above the rounding of log() and the score

    @property
    def sql_weights(self) -> str:
        """The weights as bm25()'s arguments: `1.0, 2.0`."""
        return ", ".join(str(float(w)) for w in self.weights)

    def sql(self, table: str = "chunks_fts") -> str:
        """The SQL expression of a row's bm25 in table (lower is better)."""
        return f"bm25({table}, {self.sql_weights})"

    def idf(self, rows: int, held: int) -> float:
        """FTS5's IDF of a phrase held by `held` of `rows` rows."""
        value = math.log((rows - held + 0.5) / (held + 0.5))
        return value if value > 0.0 else self.idf_floor

    def part(self, idf: float, freq: Value, tokens: Value | float, avgdl: float) -> Value:
        """One phrase's part of a row's score (higher is better), for one row or an array of rows."""
        return idf * ((freq * (self.k1 + 1.0)) / (freq + self.k1 * (1 - self.b + self.b * tokens / avgdl)))

    def score(self, idfs: Sequence[float], freqs: Sequence[float], tokens: float, avgdl: float) -> float:
        """bm25() of one row (lower is better): the phrases' parts summed in the expression's order."""
        total = 0.0
        for weight, freq in zip(idfs, freqs, strict=True):
            total += self.part(weight, freq, tokens, avgdl)
        return -1.0 * total

    def bound(self, rows: int, held: int) -> float:
        """More than one phrase held by `held` of `rows` rows adds to any row's score (with margin)."""
        return (self.k1 + 1.0) * self.idf(rows, held) * (1.0 + self.margin)

    def explanation(self, idfs: Sequence[float], freqs: Sequence[float], tokens: float, avgdl: float) -> str:
        """One row's score spelled out: each phrase's idf, weighted count and part, and the length."""
        parts = [f"{self.part(i, f, tokens, avgdl):.4f} (idf {i:.3f}, tf {f:g})"
                 for i, f in zip(idfs, freqs, strict=True)]
        return (f"bm25 k1={self.k1} b={self.b} weights={self.sql_weights} length {tokens:g}/{avgdl:.1f}: "
                + " + ".join(parts))


BM25 = Bm25()
