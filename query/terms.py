"""Free text to the terms the lexical tier looks up, and to one safe FTS5 expression.

User text reaches FTS5 only through build_query: it keeps runs of letters and digits, drops terms
under two characters (reported), quotes each, caps the list at MAX_TERMS and ORs them, so no query
text can carry FTS5 syntax. CJK runs are kept aside for the trigram table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.text import CJK_RUN, cjk_runs

MAX_TERMS = 40

_TERM = re.compile(r"[^\W_]+")
TRIGRAM = 3


@dataclass(frozen=True)
class LexicalQuery:
    """The FTS5 expression built from free text, the terms it kept or dropped, and its CJK runs."""

    expression: str
    terms: tuple[str, ...]
    dropped: tuple[str, ...] = field(default=())
    cjk: tuple[str, ...] = field(default=())


def terms_of(text: str) -> tuple[list[str], list[str]]:
    """(kept, dropped) terms of free text: letter/digit runs, kept when 2+ characters (or CJK), deduplicated."""
    kept: list[str] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for term in _TERM.findall(text):
        key = term.lower()
        if len(term) < 2 and not CJK_RUN.fullmatch(term):
            if key not in dropped:
                dropped.append(key)
            continue
        if key not in seen:
            seen.add(key)
            kept.append(term)
    return kept, dropped


def cjk_runs_of(text: str) -> list[str]:
    """The distinct runs of CJK characters in text, in order (at most MAX_TERMS)."""
    return list(dict.fromkeys(cjk_runs(text)))[:MAX_TERMS]


def quote(text: str) -> str:
    """text as one quoted FTS5 string (internal quotes doubled)."""
    return '"' + text.replace('"', '""') + '"'


def build_query(text: str) -> LexicalQuery:
    """The OR of quoted terms (at most MAX_TERMS) for text; expression is empty when none remain."""
    kept, dropped = terms_of(text)
    kept = kept[:MAX_TERMS]
    expression = " OR ".join(quote(t) for t in kept)
    return LexicalQuery(expression, tuple(kept), tuple(dropped), tuple(cjk_runs_of(text)))


def trigrams(runs: tuple[str, ...] | list[str]) -> list[str]:
    """The distinct trigrams of runs of 3+ characters (at most MAX_TERMS): an unsegmented sentence finds its words."""
    grams: dict[str, None] = {}
    for run in runs:
        for i in range(len(run) - TRIGRAM + 1):
            grams[run[i : i + TRIGRAM]] = None
    return list(grams)[:MAX_TERMS]
