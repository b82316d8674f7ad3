"""Evidence beyond a section's own text: its document's name and title, and its document's other sections.

Two stages re-score the lexical tier's candidates before fusion (so a hybrid ranking fuses the
re-scored lexical order, and a lexical ranking is it); neither adds a candidate, and both leave a
query untouched when nothing applies. A query with CJK runs is left as it is: its lexical scores are
a rank fusion (query/lexical.py), on another scale than these BM25 additions.

- **names**: a document's file name says what it is about (`request-files.md` is "request files";
  an `index.md` or `README.md` speaks through its folder, `dependencies/index.md`) and so does its
  title, often in words its sections never repeat (a page without a heading of its own has only its
  file name). These words are a third field beside body and breadcrumb, scored as BM25 scores a
  field of one occurrence per word: each query term whose porter stem is among them, and not among
  the words of the section's own breadcrumb, adds
  `NAMES_WEIGHT * idf * (k1 + 1) / (1 + k1 * (1 - b + b * len / avglen))`, with FTS5's idf of the
  term over the sections (query/frequency.py) and the name's length in words against the mean of
  the candidates'. So a name that is exactly the query's rare words lifts most; a common word in
  a name ("docs", "index") adds next to nothing. A word the breadcrumb holds is not weighed again:
  the breadcrumb opens with the title (the page's first heading) and BM25 already scores it there at
  the heading weight, so the field lifts only what the section's text cannot show, a file name's
  words and a title that is not a heading (front matter), and a section holding the query word in
  its own heading and body stays above one that holds it only through its page's title (issue 30).
- **documents**: a document several of whose sections match the query is about it as a whole, more
  than one section that matches alone. Its best-scored candidate gains DOCUMENT_WEIGHT times the
  scores of the document's next best candidates (at most DOCUMENT_SECTIONS of them), and only it:
  the page rises by its best section, and diversity (query/fusion.py) still limits what one page
  can hold of the answer.

The weights were measured on Cranfield, CISI and the FastAPI/pydantic real-tree cases, not tuned to
one query (bench/RESULTS.md, "Evidence stages"), and each stage again on SciFact-train too by
bench/bench_eval.py (bench/RESULTS.md, "Issue 30"). --explain shows each stage's addition to a hit's
lexical score (`names +2.1`, `documents +4.3`); the hit's bm25 stays FTS5's own.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath

from pipeline.bm25 import BM25
from query.lexical.frequency import frequencies
from query.rank.ranked import Ranked
from query.rank.tiers import Scored
from query.terms import CAMEL
from query.words import STEMMER

NAMES = "names"
DOCUMENTS = "documents"
NAMES_WEIGHT = 0.5
# Off: at 0.1 it cost Cranfield 0.001 and CISI 0.002-0.003 nDCG@10 and gained no real-tree case (20 of 20
# either way once the language stage runs; bench/RESULTS.md, "Evidence stages"), so by the rule that a
# ranking change must hold on every judged collection it is not a gain. Measured again for issue 30
# (bench/bench_eval.py --set query.rank.evidence.DOCUMENT_WEIGHT=0.1): real tree +0.018 nDCG@10 but
# SciFact-train -0.006, past the 0.005 of noise. The stage stays, measured, for a tree where it is one.
DOCUMENT_WEIGHT = 0.0
DOCUMENT_SECTIONS = 2
# File names that say nothing of their page: its folder's name speaks for it.
_PLACEHOLDERS = frozenset({"index", "readme", "_index", "default", "main"})
_WORD = re.compile(r"[^\W_]+")


NAME_WORDS_KEPT = 65536  # documents whose name words a NameWords keeps


class NameWords:
    """name_words of the documents seen so far, kept by the ReadIndex (query/caches.py); emptied when full."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.words: dict[tuple[str, str | None], tuple[str, ...]] = {}

    def of(self, path: str, title: str | None) -> tuple[str, ...]:
        """name_words(path, title), computed once."""
        key = (path, title)
        found = self.words.get(key)
        if found is None:
            found = name_words(path, title)
            with self.lock:
                if len(self.words) >= NAME_WORDS_KEPT:
                    self.words.clear()
                self.words[key] = found
        return found


def name_words(path: str, title: str | None) -> tuple[str, ...]:
    """The words a document's name and title give: its file name's (or its folder's, for an index page) and
    its title's, camelCase split, lower-cased, each once."""
    pure = PurePosixPath(path.split("://", 1)[-1])
    stem = pure.name.split(".", 1)[0]
    if stem.lower() in _PLACEHOLDERS and pure.parent.name:
        stem = pure.parent.name
    words: dict[str, None] = {}
    for text in (stem, title or ""):
        for run in _WORD.findall(text):
            for part in CAMEL.split(run):
                if part:
                    words[part.lower()] = None
    return tuple(words)


def _documents(ranked: Ranked, ids: list[int]) -> dict[int, tuple[int, str, str | None, str]]:
    """{chunk id: (document id, path, title, breadcrumb)} of the candidates, in one query."""
    rows = ranked.context.reader.conn.execute(
        "SELECT c.id, d.id, d.path, d.title, c.heading_path FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))
    return {int(r[0]): (int(r[1]), str(r[2]), None if r[3] is None else str(r[3]), str(r[4] or "")) for r in rows}


def breadcrumb_stems(breadcrumbs: Mapping[int, str]) -> dict[int, frozenset[str]]:
    """{chunk id: the porter stems of its breadcrumb's words and of their camelCase parts}: the words BM25 already
    scores in the heading column, and the parts name_words would split them into (`CAFs` is `ca`, `fs` there)."""
    words = {cid: {w.lower() for run in _WORD.findall(crumb) for w in (run, *CAMEL.split(run)) if w}
             for cid, crumb in breadcrumbs.items()}
    stems = STEMMER.stems({w for held in words.values() for w in held})
    return {cid: frozenset(stems.get(w) or w for w in held) for cid, held in words.items()}


def _idf(rows: int, held: int | None) -> float:
    """FTS5's idf of a term held by `held` of `rows` sections (0 when unknown)."""
    return 0.0 if not rows or held is None else BM25.idf(rows, held)


def names_bonus(terms: Mapping[str, float], names: Mapping[int, Sequence[str]],
                sections: Mapping[int, tuple[int, str]]) -> dict[int, float]:
    """{chunk id: what its document's name field adds} for query terms {stem: idf}, documents' name words and
    the sections {chunk id: (document id, its breadcrumb)}: a term the breadcrumb holds adds nothing. Only the
    breadcrumbs of sections whose document's name holds a query term are stemmed."""
    stems = STEMMER.stems({w for words in names.values() for w in words})
    fields = {doc: {stems.get(w, w) for w in words} for doc, words in names.items()}
    mean = sum(len(words) for words in names.values()) / len(names) if names else 0.0
    if not mean:
        return {}
    named = {cid: found for cid, (doc, _) in sections.items()
             if (found := [stem for stem in terms if stem in fields.get(doc, ())])}
    crumbs = breadcrumb_stems({cid: sections[cid][1] for cid in named})
    out: dict[int, float] = {}
    for cid, found in named.items():
        matched = [terms[stem] for stem in found if stem not in crumbs[cid]]
        if matched:
            doc = sections[cid][0]
            out[cid] = NAMES_WEIGHT * BM25.part(sum(matched), 1.0, float(len(names[doc])), mean)
    return out


def _rescored(ranked: Ranked, stage: str, added: Mapping[int, float]) -> Ranked:
    """The ranking with the lexical tier's scores raised by added (re-sorted), the additions noted."""
    lexical = ranked.context.tiers.lexical
    entries = [(cid, score + added.get(cid, 0.0)) for cid, score in lexical]
    entries.sort(key=lambda entry: (-entry[1], entry[0]))
    notes = {cid: f"+{bonus:.4f}" for cid, bonus in added.items() if bonus >= 0.00005}
    return ranked.with_lexical(tuple(entries)).noted(stage, notes)


def names(ranked: Ranked) -> Ranked:
    """Raise each lexical candidate by its document's name and title as a field (module docstring)."""
    context = ranked.context
    lexical = context.tiers.lexical
    terms = context.query.terms
    if not lexical or not terms or context.query.cjk or NAMES_WEIGHT <= 0:
        return ranked
    owners = _documents(ranked, [cid for cid, _ in lexical])
    rows, held = frequencies(context.reader.conn, terms, context.reader.lexical)
    stems = STEMMER.stems(terms)
    weights = {stems[t]: _idf(rows, held.get(t)) * context.query.lexical.repeat(t) for t in terms if stems.get(t)}
    kept = context.reader.caches.of(NameWords)
    docs = {doc: kept.of(path, title) for doc, path, title, _ in owners.values()}
    added = names_bonus(weights, docs, {cid: (owner[0], owner[3]) for cid, owner in owners.items()})
    return _rescored(ranked, NAMES, added) if added else ranked


def document_bonus(lexical: Iterable[Scored], owner: Mapping[int, int]) -> dict[int, float]:
    """{chunk id: what it gains} for each document's best candidate from its next best ones (module docstring)."""
    by_document: dict[int, list[Scored]] = {}
    for cid, score in lexical:
        if cid in owner:
            by_document.setdefault(owner[cid], []).append((cid, score))
    out: dict[int, float] = {}
    for sections in by_document.values():
        if len(sections) < 2:
            continue
        sections.sort(key=lambda entry: (-entry[1], entry[0]))
        rest = [max(score, 0.0) for _, score in sections[1:1 + DOCUMENT_SECTIONS]]
        out[sections[0][0]] = DOCUMENT_WEIGHT * sum(rest)
    return out


def documents(ranked: Ranked) -> Ranked:
    """Lend each document's best lexical candidate the weight of its other matching sections."""
    lexical = ranked.context.tiers.lexical
    if len(lexical) < 2 or ranked.context.query.cjk or DOCUMENT_WEIGHT <= 0:
        return ranked
    added = document_bonus(lexical, ranked.context.reader.documents_of([cid for cid, _ in lexical]))
    return _rescored(ranked, DOCUMENTS, added) if added else ranked
