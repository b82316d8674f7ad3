"""Make indexed text safe to print: strip terminal control sequences and control characters, and shape previews."""

from __future__ import annotations

import re

from pipeline.text import clean as clean  # the cleaners of what is printed live beside without_controls, so
from pipeline.text import name as name  # pipeline (pipeline/pull.py) prints safely too; re-exported here

# Markup a reader of a preview does not want: HTML tags (`<abbr title=..>`), mkdocs/snippet includes
# (`{!> ../x.py !}`, `--8<-- "x"`), attribute lists (`{.internal-link target=_blank}`, `{: #id }`),
# and entities, decoded (`&amp;` -> `&`).
_TAGS = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_INCLUDES = re.compile(r"\{!.*?!\}|--8<--\s*\"[^\"]*\"")
_ATTR_LISTS = re.compile(r"\{:?[ \t]*[.#][A-Za-z_][^{}\n]*\}|\{:[ \t]*[A-Za-z_][\w-]*=[^{}\n]*\}")
# Where a preview may end early: after a sentence's end (. ! ? and a closing quote or bracket), or a clause's.
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)")
_CLAUSE_END = re.compile(r"[;:,\u2014](?=\s)")


# The inline formatting tags a page drops (their text kept); any other tag (`<script>`) a page shows as text.
FORMATTING_TAGS = frozenset(
    "a abbr b bdi big br cite code del dfn em i ins kbd mark q s samp small span strong sub sup time u var wbr".split())


def strip_tags(text: str, only: frozenset[str] | None = None) -> str:
    """text without HTML tags (their text kept); with only, without just the tags of those names."""
    if only is None:
        return _TAGS.sub("", text)
    return _TAGS.sub(lambda m: "" if _tag_name(m.group(0)) in only else m.group(0), text)


def _tag_name(tag: str) -> str:
    return re.split(r"[\s/>]", tag.lstrip("</"), maxsplit=1)[0].lower()


def strip_directives(text: str) -> str:
    """text without mkdocs include directives and attribute lists."""
    return _ATTR_LISTS.sub("", _INCLUDES.sub(" ", text))


def preview_text(text: str, only: frozenset[str] | None = None) -> str:
    """text without tags (with only, just those), include directives, attribute lists and entities,
    as a preview shows it."""
    import html  # its entity table only when a preview is drawn (not for --json)

    return html.unescape(strip_directives(strip_tags(text, only)))


def preview(text: str, width: int = 100) -> str:
    """A section's one-line preview: markup stripped, then cut at a sentence or clause end when one is near."""
    return one_line(preview_text(text), width, sentences=True)


def one_line(text: str, width: int = 100, sentences: bool = False) -> str:
    """text cleaned onto a single line of at most width characters, cut at a word when one is near.

    With sentences, a cut prefers the last sentence end in the second half of the line (no ellipsis
    needed), then a clause end past two thirds, then a word.
    """
    flat = " ".join(clean(text).split())
    if len(flat) <= width:
        return flat
    cut = flat[: width - 3]
    if sentences:
        ends = [m.end() for m in _SENTENCE_END.finditer(flat[: width + 1]) if m.end() >= width // 2]
        if ends:
            return flat[: ends[-1]]
        clauses = [m.start() for m in _CLAUSE_END.finditer(cut) if m.start() >= width * 2 // 3]
        if clauses:
            return cut[: clauses[-1]] + "..."
    space = cut.rfind(" ")
    if space >= width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "..."
