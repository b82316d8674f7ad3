"""The bounds a `words` pattern is checked against before it runs, and the notes that refuse one.

A pattern re cannot compile is refused with what to write instead; so is one whose repeats unroll
to more than PATTERN_UNITS items, before the bounded engine (query/words.py matching_words) would
compile it: that engine expands each repeat's minimum count when it compiles, and compiling is not
under the matching deadline.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

PATTERN_UNITS = 50_000
"""The most pattern items a pattern may unroll to: the bounded engine expands each repeat's minimum
count when it compiles ((?:a{60000}){60000} is 3.6 billion items, a MemoryError after seconds), and
compiling is not under the matching deadline; 50,000 compile in well under 0.1 s."""


def refusal(pattern: str | None) -> str | None:
    """Why a pattern is refused (re cannot compile it, or it unrolls too large to run); None for a good one."""
    try:
        with warnings.catch_warnings():  # a user's pattern may trip re's FutureWarnings; it is not our code
            warnings.simplefilter("ignore", FutureWarning)
            if pattern:
                re.compile(pattern, re.IGNORECASE)
            if pattern and unrolled_size(pattern) > PATTERN_UNITS:  # before the bounded engine compiles it
                return _too_large(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        return invalid_note(pattern, exc)
    return None


def unrolled_size(pattern: str) -> int:
    """How many items pattern unrolls to when its repeats' minimum counts are expanded (capped above PATTERN_UNITS).

    Read from re's own parse of the pattern (which never expands a repeat); raise re.error as
    re.compile would.
    """
    import importlib

    parser: Any = importlib.import_module("re._parser")  # the parser behind re.compile; no stub ships for it
    return _units(parser.parse(pattern, re.IGNORECASE))


def _units(items: Any) -> int:
    total = 0
    for op, arg in items:
        name = getattr(op, "name", str(op))
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _high, body = arg
            total += max(1, low) * _units(body)
        elif name == "SUBPATTERN":
            total += _units(arg[3])
        elif name == "BRANCH":
            total += sum(_units(branch) for branch in arg[1])
        elif name == "ATOMIC_GROUP":
            total += _units(arg)
        elif name in ("ASSERT", "ASSERT_NOT"):
            total += _units(arg[1])
        elif name == "GROUPREF_EXISTS":
            total += _units(arg[1]) + (_units(arg[2]) if arg[2] else 0)
        else:
            total += 1
        if total > PATTERN_UNITS:
            return PATTERN_UNITS + 1
    return total


def _too_large(pattern: str) -> str:
    return (f"{pattern[:80]!r}{'...' if len(pattern) > 80 else ''} repeats too much: it unrolls to over "
            f"{PATTERN_UNITS:,} pattern items, more than a word needs; use smaller repeat counts, as 'a{{3,}}'")


def invalid_note(pattern: str | None, exc: Exception) -> str:
    """The note refusing a pattern re or the bounded engine cannot compile."""
    return (f"{pattern!r} is not a regular expression: {exc}; to match characters such as + ( [ * ? literally, "
            "escape them with a backslash, as 'c\\+\\+'")
