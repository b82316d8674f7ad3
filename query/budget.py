"""The text budget of the agent tools: max_injected_tokens x 4 characters.

Search adds hits in order until the next would exceed the budget, but always keeps the first, so a
large first section is never silently dropped to nothing. Enumerate is a pre-check that has to
leave room for the retrieval that follows: it gets a quarter of the budget, with a floor of one
document so rounding to zero never reads as absence. A trimmed answer says it was trimmed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from config.settings import Settings

CHARS_PER_TOKEN = 4
ENUMERATE_SHARE = 4

T = TypeVar("T")


def search_budget(settings: Settings) -> int:
    """Characters of text the search tool may return."""
    return max(1, settings.max_injected_tokens) * CHARS_PER_TOKEN


def enumerate_budget(settings: Settings) -> int:
    """Characters the enumerate tool may return: a quarter of the search budget."""
    return search_budget(settings) // ENUMERATE_SHARE


@dataclass(frozen=True)
class Fitted(Generic[T]):
    """The items that fit a budget, how many characters they use, and whether any were cut."""

    items: list[T]
    used: int
    budget: int
    offered: int

    @property
    def trimmed(self) -> bool:
        """Whether items were left out to stay within the budget."""
        return len(self.items) < self.offered


def fit(items: Sequence[T], size: Callable[[T], int], budget: int, offered: int | None = None) -> Fitted[T]:
    """The longest prefix of items within budget characters; the first item is always kept.

    offered is how many items the full answer has, when items is already a prefix of it.
    """
    kept: list[T] = []
    used = 0
    for item in items:
        cost = size(item)
        if kept and used + cost > budget:
            break
        kept.append(item)
        used += cost
    return Fitted(kept, used, budget, len(items) if offered is None else offered)


def hit_size(hit: dict[str, Any]) -> int:
    """The injected text of a search hit: its section and content."""
    return len(hit.get("section") or "") + len(hit.get("content") or "")


def entry_size(entry: dict[str, Any]) -> int:
    """The injected text of an enumerate entry: its JSON form."""
    return len(json.dumps(entry, ensure_ascii=False))


def most_entries(budget: int) -> int:
    """An upper bound on how many enumerate entries can fit budget (each is at least this small)."""
    smallest = entry_size({"citation": "", "index_ref": "#0", "path": "", "body_matches": 0, "heading_matches": 0})
    return budget // smallest + 1


def trimmed_note(kind: str, fitted: Fitted[Any], tokens: int) -> str:
    """The sentence a trimmed answer carries."""
    return (
        f"trimmed to the text budget: returning {len(fitted.items)} of {fitted.offered} {kind} "
        f"({fitted.budget} characters, from max_injected_tokens={tokens})"
    )
