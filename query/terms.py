"""Free text to the terms the lexical tier looks up, and to one safe FTS5 expression.

User text reaches FTS5 only through build_query: it keeps runs of letters and digits, drops terms
under two characters (reported), quotes each, caps the list at MAX_TERMS and ORs them, so no query
text can carry FTS5 syntax. A `-word` (at the start or after a blank) excludes the sections holding
that word, as in `knowledge match`. CJK runs are kept aside for the trigram table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from pipeline.identifiers import written_form
from pipeline.text import cjk_runs, is_cjk

MAX_TERMS = 40
# A term written several times in a query weighs that many times in BM25 (its phrase repeated in the
# expression; FTS5 scores each phrase), up to this many: a long question's key words are the ones it
# repeats (CISI: nDCG@10 0.352 -> see bench/RESULTS.md, "Query term frequency").
MAX_REPEAT = 8

_TERM = re.compile(r"[^\W_]+")
TRIGRAM = 3


# A word the query excludes: `-word` at the start or after a blank (so `kube-proxy` is one term).
_EXCLUDED = re.compile(r"(?:^|(?<=\s))-([^\W_][\w-]*)")


@dataclass(frozen=True)
class LexicalQuery:
    """The terms free text kept, dropped and excluded, its CJK runs, and the FTS5 expression of them."""

    terms: tuple[str, ...]
    dropped: tuple[str, ...] = field(default=())
    cjk: tuple[str, ...] = field(default=())
    excluded: tuple[str, ...] = field(default=())
    repeats: tuple[int, ...] = field(default=())  # how often each term is written in the query (none: once each)

    def repeat(self, term: str) -> int:
        """How many times the term's phrase is in the expression (its count in the query, at most MAX_REPEAT)."""
        if not self.repeats or term not in self.terms:
            return 1
        return self.repeats[self.terms.index(term)]

    @property
    def phrases(self) -> tuple[str, ...]:
        """The terms in the expression's order, each as often as its phrase is there: what BM25 sums over."""
        return tuple(t for t in self.terms for _ in range(self.repeat(t)))

    def keeping(self, terms: tuple[str, ...]) -> LexicalQuery:
        """This query with only terms (a subset of its own, in their order), each still repeated as written."""
        repeats = tuple(self.repeat(t) for t in terms) if self.repeats else ()
        return replace(self, terms=terms, repeats=repeats)

    @property
    def expression(self) -> str:
        """The OR of the quoted terms (each as often as the query repeats it), minus any section holding an
        excluded word; empty without terms."""
        if not self.terms:
            return ""
        wanted = " OR ".join(quote(t) for t in self.phrases)
        if not self.excluded:
            return wanted
        return f"({wanted}) NOT ({self.exclusion})"

    @property
    def exclusion(self) -> str:
        """The OR of the quoted excluded words (empty when none)."""
        return " OR ".join(quote(t) for t in self.excluded)


def terms_of(text: str) -> tuple[list[str], list[str]]:
    """(kept, dropped) terms of free text: letter/digit runs, kept when 2+ characters (or CJK), deduplicated."""
    kept, dropped, _ = counted_terms(text)
    return kept, dropped


# Where a word written in camelCase or PascalCase splits: CORSMiddleware is CORS + Middleware.
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def with_parts(words: list[str]) -> list[tuple[str, bool]]:
    """(word, whether it is a part) of words, each camelCase word followed by its parts of 2+ characters
    (`TestClient`, `Test`, `Client`): the porter index holds `TestClient` as one token, and the prose around
    it writes its parts."""
    out: list[tuple[str, bool]] = []
    for word in words:
        out.append((word, False))
        parts = [p for p in CAMEL.split(word) if p]
        if len(parts) > 1:
            out += [(p, True) for p in parts if len(p) >= 2]
    return out


def counted_terms(text: str) -> tuple[list[str], list[str], list[int]]:
    """terms_of's (kept, dropped) and how many times each kept term is written (case folded); a camelCase
    word also gives its parts (with_parts), which are searched but do not count as written again."""
    kept: list[str] = []
    dropped: list[str] = []
    seen: dict[str, int] = {}
    for term, part in with_parts(_TERM.findall(text)):
        key = term.lower()
        if len(term) < 2 and not is_cjk(term):
            if key not in dropped:
                dropped.append(key)
            continue
        if key not in seen:
            seen[key] = 0
            kept.append(term)
        seen[key] += 0 if part else 1
    return kept, dropped, [min(max(seen[t.lower()], 1), MAX_REPEAT) for t in kept]


def cjk_runs_of(text: str) -> list[str]:
    """The distinct runs of CJK characters in text, in order (at most MAX_TERMS)."""
    return list(dict.fromkeys(cjk_runs(text)))[:MAX_TERMS]


def quote(text: str) -> str:
    """text as one quoted FTS5 string (internal quotes doubled)."""
    return '"' + text.replace('"', '""') + '"'


def build_query(text: str) -> LexicalQuery:
    """The terms (at most MAX_TERMS) of text, and the words it excludes with a leading `-`."""
    excluded = [w for w in dict.fromkeys(m.lower() for m in _EXCLUDED.findall(text))]
    rest = _EXCLUDED.sub(" ", text)
    kept, dropped, counts = counted_terms(rest)
    excluded_terms, _ = terms_of(" ".join(excluded))
    repeats = tuple(counts[:MAX_TERMS]) if any(n > 1 for n in counts[:MAX_TERMS]) else ()
    return LexicalQuery(tuple(kept[:MAX_TERMS]), tuple(dropped), tuple(cjk_runs_of(rest)),
                        tuple(excluded_terms[:MAX_TERMS]), repeats)


def trigrams(runs: tuple[str, ...] | list[str]) -> list[str]:
    """The distinct trigrams of runs of 3+ characters (at most MAX_TERMS): an unsegmented sentence finds its words."""
    grams: dict[str, None] = {}
    for run in runs:
        for i in range(len(run) - TRIGRAM + 1):
            grams[run[i : i + TRIGRAM]] = None
    return list(grams)[:MAX_TERMS]



# Exact-ish queries (query/verbatim.py): a quoted or backticked phrase, or a token written as code. The
# marks of code count anywhere in a query: an inner `_` or `::`, a case change inside a word
# (TestClient, CORSMiddleware, APIRouter, OAuth2; not APIs or URLs), a `.` between two runs of 2+
# characters one of which has a letter (config.yaml; not i.e. or 15.4), a call's `()`. A capitalised
# word or an acronym alone (API, CORS, NASA), or letters with digits (v1, sha256, E1102), is how prose
# writes names and versions: not code unless backticked. A hyphen (kube-proxy) is also how English
# joins compounds (two-dimensional), so it counts only in a query of at most SHORT_QUERY tokens.
SHORT_QUERY = 3
_QUOTED = re.compile(r'"([^"]+)"|`([^`]+)`')
_STRONG_JOIN = re.compile(r"[^\W_](?:_|::)[^\W_]|(?:^|[^\W_])_|_(?:$|[^\W_])")
_DOTTED = re.compile(r"[^\W_]{2,}\.[^\W_]{2,}")
_HYPHENED = re.compile(r"[^\W_]-[^\W_]")
_CASE_CHANGE = re.compile(r"[a-z][A-Z]|[A-Z][A-Z][a-z]{2}")
_CALL = re.compile(r"[^\W_]\(\)")
_LETTER = re.compile(r"[^\W\d_]")
_STRIP = "\"'`[]{}<>,;:!?/"


def verbatim_phrases(text: str) -> tuple[str, ...]:
    """The phrases text asks for verbatim: its quoted and backticked phrases and its identifiers, as word runs.

    A quoted span is its letter/digit runs joined by a space; a token is as the exact table holds it
    (pipeline/identifiers.py written_form): one identifier whole (`ERR_CONN_RESET`, `or_`, which is
    not the word "or"), anything else its runs in order (`std::vector` is "std vector"). Plain words, a
    natural-language question (even one with hyphenated compounds) or a `-word` exclusion yield nothing.
    """
    found = [" ".join(_TERM.findall(quoted or ticked)) for quoted, ticked in _QUOTED.findall(text)]
    tokens = _EXCLUDED.sub(" ", _QUOTED.sub(" ", text)).split()
    short = len(tokens) <= SHORT_QUERY
    for raw in tokens:
        token = raw.strip(_STRIP).rstrip(".")
        if not _CALL.search(token):
            token = token.strip("()")
        words = _TERM.findall(token)
        if words and (_identifier(token) or (short and _HYPHENED.search(token))):
            found.append(written_form(token.removesuffix("()")))
    return tuple(p for p in dict.fromkeys(found) if p)[:MAX_TERMS]


def _identifier(token: str) -> bool:
    """Whether token carries a mark of code: `_`, `::`, a case change inside a word, a dotted name, a call."""
    if _STRONG_JOIN.search(token) or _CASE_CHANGE.search(token) or _CALL.search(token):
        return True
    return any(_LETTER.search(m.group()) for m in _DOTTED.finditer(token))
