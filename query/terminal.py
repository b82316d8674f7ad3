"""Make indexed text safe to print: strip terminal control sequences and control characters."""

from __future__ import annotations

import re

from pipeline.text import without_controls

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte ESC sequences, 8-bit C1 CSI/OSC;
# then pipeline.text removes any remaining C0/C1 control character except newline and tab.
_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
)


# Bidirectional controls reorder what a terminal shows (a name ending `\u202egnp.exe` reads as
# `exe.png`): shown escaped, as the code point, wherever text is printed.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile("[\n\r\t\x0b\x0c\x85\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    char = match.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\u{ord(char):04x}")


def clean(text: str) -> str:
    """text without escape sequences or control characters (newlines and tabs kept), bidi controls escaped."""
    return _BIDI.sub(_escaped, without_controls(_SEQUENCES.sub("", text)))


def name(text: str) -> str:
    """A path or other name cleaned onto one line: line breaks and tabs escaped (`\\n`), so a file name
    can never forge a line of output (`failed: ...`), bidi controls escaped (`\\u202e`)."""
    return clean(_LINE_BREAKS.sub(_escaped, text))


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
