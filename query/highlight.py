"""The words of a query marked in a section's text: an excerpt around the first match, as segments.

A word of the text is marked when it is a query term as written (case-folded) or shares the term's
porter stem, the form the lexical index matches; a CJK run of the query is marked wherever it occurs
as a substring. Terms the query dropped (one letter) are never marked, nor are common English
function words ("with", "the", "how") when the query has any other term: they match nearly every
section, so marking them points at nothing.
Text is split into words exactly as query/terms.py splits a query. The result is a
list of (text, marked) segments, so a renderer escapes each piece and wraps only the marked ones:
no markup ever passes through the document's text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from query.terms import LexicalQuery
from query.words import STEMMER

WORD = re.compile(r"[^\W_]+")  # the word class of query/terms.py, so a marked word is a query word
EXCERPT_CHARS = 320
ELLIPSIS = "…"
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her
here hers him his how i if in into is it its itself just me more most my no nor not of off on once only or
other our ours out over own same she should so some such than that the their them then there these they
this those through to too under until up very was we were what when where which while who whom why will
with would you your
""".split())


def marked_terms(query: LexicalQuery) -> set[str]:
    """The query's terms (case-folded) a match marks: its kept terms, less stop words unless only they remain."""
    terms = {t.lower() for t in query.terms}
    content = terms - STOP_WORDS
    return content if content or query.cjk else terms


@dataclass(frozen=True)
class Segment:
    """A run of text and whether it is a matched word."""

    text: str
    marked: bool = False


def matched_spans(text: str, query: LexicalQuery) -> list[tuple[int, int]]:
    """The (start, end) spans of text holding a query word (any form) or a CJK run of the query, in order."""
    terms = marked_terms(query)
    if not terms and not query.cjk:
        return []
    words = [(m.start(), m.end(), m.group().lower()) for m in WORD.finditer(text)]
    term_stems = {s for s in STEMMER.stems(sorted(terms)).values() if s}
    stems = STEMMER.stems(sorted({w for _, _, w in words if w not in terms})) if term_stems else {}
    spans = [(start, end) for start, end, word in words if word in terms or stems.get(word) in term_stems]
    for run in query.cjk:
        spans += [(m.start(), m.start() + len(run)) for m in re.finditer(re.escape(run), text)]
    return _merged(sorted(spans))


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


def excerpt(content: str, query: LexicalQuery, width: int = EXCERPT_CHARS) -> list[Segment]:
    """About `width` characters of content (whitespace folded) around its first match, query words marked.

    Without a match the excerpt is the section's opening. An ellipsis marks text left out at either end.
    """
    text = " ".join(content.split())
    spans = matched_spans(text, query)
    start = 0
    if spans and spans[0][1] > width:
        start = max(0, spans[0][0] - width // 3)
        blank = text.rfind(" ", 0, start)
        start = blank + 1 if blank >= 0 and start - blank < 40 else start
    end = min(len(text), start + width)
    if end < len(text):
        blank = text.rfind(" ", start, end)
        end = blank if blank > start + width // 2 else end
    segments: list[Segment] = [Segment(ELLIPSIS)] if start > 0 else []
    segments += _segments(text, spans, start, end)
    if end < len(text):
        segments.append(Segment(ELLIPSIS))
    return segments


def marks(text: str, query: LexicalQuery) -> list[Segment]:
    """All of text (a heading trail, say) as segments, query words marked."""
    return _segments(text, matched_spans(text, query), 0, len(text))


def _segments(text: str, spans: list[tuple[int, int]], start: int, end: int) -> list[Segment]:
    segments: list[Segment] = []
    at = start
    for s, e in spans:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        if s > at:
            segments.append(Segment(text[at:s]))
        segments.append(Segment(text[s:e], marked=True))
        at = e
    if at < end:
        segments.append(Segment(text[at:end]))
    return segments


def styled(text: str, query: LexicalQuery, mark: Callable[[str], str]) -> str:
    """text with each matched word passed through mark (bold on a terminal, say); the rest unchanged."""
    return "".join(mark(s.text) if s.marked else s.text for s in marks(text, query))
