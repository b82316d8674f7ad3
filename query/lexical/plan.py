"""The lexical seam: a top-k strategy plans a query (a cost and whether its answer is proven exact), then runs.

Every strategy answers the same question, the best `limit` rows of a query's OR expression by FTS5's
bm25 ordered by (score, rowid), and every score it gives is bm25()'s to the bit (pipeline/bm25.py).
They differ in what they read: the impact lists, the posting columns, the rarer terms' rows re-scored
(shaped), the rows that can reach the top k (pruned), or FTS5's full plan. `plan` is cheap (the
statistics the store and LexicalStats hold); `run` may still decline (None) when what it reads
cannot prove the answer, and query/lexical/tier.py then runs the next cheapest plan. A plan is
`exact` when the answer it serves is proven to be the full query's; an inexact one (an impact list
older than the table, a shaped answer the bound could not prove) is planned only when the request
permits it (`knowledge.unproven_lexical`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pipeline.db import Connection
from query.filters import Allowed
from query.lexical.frequency import without_common
from query.lexical.stats import LexicalStats
from query.terms import LexicalQuery

Rows = list[tuple[int, float]]  # (rowid, bm25) best first: lower scores are better, ties to the smaller rowid


@dataclass(frozen=True)
class Answer:
    """A strategy's top rows and whether they are proven to be the full query's."""

    rows: Rows
    exact: bool


@dataclass
class Request:
    """One top-k question: the query, how many rows, the filter's rows, and what may be served."""

    conn: Connection
    query: LexicalQuery
    limit: int
    allowed: Allowed | None
    stats: LexicalStats
    unproven: bool = True  # an inexact answer may be served (the setting)
    _pruned: LexicalQuery | None = field(default=None, repr=False)

    @property
    def scored(self) -> LexicalQuery:
        """What the FTS5-scored plans run: the pruned query when an unproven answer may be served (its scores lack
        the left-out words' parts, under 2.2e-6 each), else the query itself."""
        return self.pruned if self.unproven else self.query

    @property
    def pruned(self) -> LexicalQuery:
        """The query without the words most rows hold when a rarer word alone fills limit (query/lexical/frequency.py);
        with a filter, the query itself (a rare term alone may not fill limit allowed rows)."""
        if self._pruned is None:
            self._pruned = self.query if self.allowed is not None else without_common(
                self.conn, self.query, self.limit, self.stats)
        return self._pruned


@dataclass(frozen=True)
class Plan:
    """What one strategy would do for a request: its estimated cost (about microseconds) and exactness."""

    strategy: TopK
    cost: float
    exact: bool

    @property
    def name(self) -> str:
        return self.strategy.name

    def run(self, request: Request) -> Answer | None:
        """The strategy's answer, or None when it declines (the next plan runs)."""
        return self.strategy.run(request, self)


class TopK(Protocol):
    """One way to find a query's top k by bm25."""

    name: str

    def plan(self, request: Request) -> Plan | None:
        """This strategy's plan for the request, or None when it cannot serve it."""

    def run(self, request: Request, plan: Plan) -> Answer | None:
        """The planned answer, or None when what it read cannot give one (the request falls to the next plan)."""


@dataclass(frozen=True)
class Chosen:
    """The lexical tier's answer and the plan that gave it (its name and proven exactness shown by --explain)."""

    rows: Rows
    strategy: str
    exact: bool
