"""What flows between the ranking stages: the candidates best first, the ids placed first, the stages' notes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from config.settings import Settings
from query.rank.parsed import ParsedQuery, QueryLanguage
from query.rank.tiers import Scored, Tiers
from query.reader import Reader
from query.verbatim import protect

if TYPE_CHECKING:
    from query.explain import Note  # what a stage says about one hit, shown by --explain


@dataclass(frozen=True, slots=True)
class Context:
    """What every stage may read and none changes: the parsed query, the tiers' candidates, the open reader."""

    query: ParsedQuery
    tiers: Tiers
    reader: Reader
    settings: Settings | None = None  # what the stages configured there read (the reranker)
    language: QueryLanguage | None = None  # the query's language; None: the language stage is off (lang any)


@dataclass(frozen=True, slots=True)
class Ranked:
    """A ranking between two stages: (chunk id, score) best first, higher is better.

    pins are placed first in the answer, in their order, whatever later stages do to the rest (a stage
    may pin; verbatim protection lifts instead, query/verbatim.py); notes are what each stage that ran
    said about some hits, by stage name, in order.
    depth is how many entries past the pins anyone reads from this stage's output (None: all of it),
    so a stage may leave the rest of the list in its previous order (document diversity does).
    """

    context: Context
    entries: tuple[Scored, ...] = ()
    pins: tuple[int, ...] = ()
    notes: tuple[tuple[str, Mapping[int, Note]], ...] = ()
    depth: int | None = None
    remarks: tuple[tuple[str, object], ...] = ()

    def noted(self, stage: str, about: Mapping[int, Note]) -> Ranked:
        """This ranking with a stage's notes on some hits added to the trace --explain shows."""
        return Ranked(self.context, self.entries, self.pins, (*self.notes, (stage, about)), self.depth, self.remarks)

    def reordered(self, entries: Sequence[Scored], stage: str = "", about: Mapping[int, Note] | None = None) -> Ranked:
        """This ranking with its entries (re-scored or re-ordered) replaced, and the stage's notes if any."""
        notes = self.notes if about is None else (*self.notes, (stage, about))
        return Ranked(self.context, tuple(entries), self.pins, notes, self.depth, self.remarks)

    def with_lexical(self, lexical: Sequence[Scored]) -> Ranked:
        """This ranking over a re-scored lexical tier (a stage before fusion); the tier's own scores are kept
        in Tiers.bm25 for --explain."""
        tiers = self.context.tiers
        rescored = replace(tiers, lexical=tuple(lexical), bm25=tiers.bm25 or tiers.lexical)
        return Ranked(replace(self.context, tiers=rescored), self.entries, self.pins, self.notes, self.depth)

    def pinned(self, ids: Sequence[int]) -> Ranked:
        """This ranking with ids pinned first, after those pinned already."""
        return Ranked(self.context, self.entries, (*self.pins, *ids), self.notes, self.depth, self.remarks)

    def read_to(self, depth: int | None) -> Ranked:
        """This ranking with how deep its next stage's output is read set (None: all of it)."""
        if depth == self.depth:
            return self
        return Ranked(self.context, self.entries, self.pins, self.notes, depth, self.remarks)

    def remarked(self, stage: str, remark: object) -> Ranked:
        """This ranking with what a stage says about it as a whole (read back with remark_of)."""
        return Ranked(self.context, self.entries, self.pins, self.notes, self.depth, (*self.remarks, (stage, remark)))

    def remark_of(self, stage: str) -> object | None:
        """What the named stage said about the whole ranking (None when it did not run or said nothing)."""
        return next((remark for name, remark in self.remarks if name == stage), None)

    def note_of(self, stage: str) -> Mapping[int, Note]:
        """What the named stage said about each hit (empty when it did not run or said nothing)."""
        return next((about for name, about in self.notes if name == stage), {})

    def answer(self, k: int) -> list[Scored]:
        """The first k: the pins (each with its score), then the rest in order."""
        return protect(self.entries, self.pins, set(self.pins))[:k]


Stage = Callable[[Ranked], Ranked]
