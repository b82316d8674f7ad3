"""Identifiers as written: `model_validator`, `config.yaml`, `--workers`, whole, for the exact table.

The exact table (pipeline/schema.py) takes `_`, `-` and `.` as token characters and indexes each
text of a section twice over: its words (those three characters read as spaces, so every word and
phrase unicode61 found before is found still) and then the section's identifiers, which the writer
keeps in chunks beside the text (as it keeps the CJK runs). An identifier is a run of letters,
digits and those three characters holding at least one of them and a letter or digit, without the
`.` or `-` that end it (a sentence's last word keeps no dot). A query term written as one
identifier is looked up whole; any other term, and every phrase, by its words, as before.
"""

from __future__ import annotations

import re

TOKENCHARS = "_-."
# A run as the exact tokenizer cuts it (letters, digits and the token characters), and its tail.
_RUN = re.compile(r"[\w.-]+")
_TAIL = ".-"
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
# Where an identifier may be: an `_`, or a `.` or `-` before a letter or digit (a sentence's end is
# not), so a scan visits these few places instead of every word (10x faster on prose).
_MARK = re.compile(r"_|[.-]\w")


def _whole(run: str) -> str | None:
    """run as an identifier (its ending `.` and `-` dropped), None when it is a plain word or no word."""
    run = run.rstrip(_TAIL)
    if not _LETTER_OR_DIGIT.search(run) or not any(c in run for c in TOKENCHARS):
        return None
    return run


def identifiers(text: str) -> str:
    """The distinct identifiers of text, in order, space-joined ('' when it has none)."""
    found: dict[str, None] = {}
    at = 0
    while (mark := _MARK.search(text, at)) is not None:
        start = mark.start()
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in TOKENCHARS):
            start -= 1
        run = _RUN.match(text, start)
        if run is None:  # unreachable: a mark is itself a run
            break
        if whole := _whole(run.group()):
            found[whole] = None
        at = run.end()
    return " ".join(found)


def words(text: str) -> str:
    """text with the token characters read as spaces: the words unicode61 alone would cut."""
    for c in TOKENCHARS:
        text = text.replace(c, " ")
    return text


def words_sql(column: str) -> str:
    """The SQL of words() over a column (shallow: one replace per token character)."""
    for c in TOKENCHARS:
        column = f"replace({column}, '{c}', ' ')"
    return column


def exact_sql(text: str, idents: str) -> str:
    """The SQL of what the exact table indexes for a text column and its identifiers column."""
    return f"{words_sql(text)} || ' ' || {idents}"


def written_form(term: str, phrase: bool = False) -> str:
    """A query term as the exact table holds it: one identifier whole, anything else (and a phrase) as its words."""
    if not phrase:
        runs = _RUN.findall(term)
        if len(runs) == 1 and runs[0].rstrip(_TAIL) == term.strip().rstrip(_TAIL) and (whole := _whole(runs[0])):
            return whole
    return " ".join(words(term).split())
