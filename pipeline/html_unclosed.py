"""Markup that never closes, made text before the standard library's html.parser sees it (one linear pass).

html.parser looks for the end of a tag, comment, processing instruction or marked section from where it
starts to the end of the page; when the end is not there, it reports the `<` and what follows up to the
next `>` (else the next `<`) as text and starts again one construct later. A page of `<a<a<a...` (or
`<!--x>` repeated with no `-->`) therefore costs the length of the page at every `<`: quadratic.

`defuse` finds, in one pass with the last position of each kind of closer computed once, every `<`
that opens a construct html.parser could not close, and writes the text html.parser would have reported
for it with its `<` characters as `&lt;` (which the parser turns back into `<`): the same text, no
rescans. A marked section html.parser has no rule for (`<![foo[`, `<![ x`, on which it raised
AssertionError) reads as the bogus comment HTML5 makes of it: dropped up to its `>`.
"""

from __future__ import annotations

import re

_COMMENT_CLOSE = re.compile(r"--\s*>")
_SECTION_CLOSE = re.compile(r"]\s*]\s*>")  # <![CDATA[ and the other SGML marked sections
_MS_SECTION_CLOSE = re.compile(r"]\s*>")  # <![if ...]>, <![else]>, <![endif]>
_SECTION_NAME = re.compile(r"[a-zA-Z][-_.a-zA-Z0-9]*")
_SGML_SECTIONS = frozenset({"temp", "cdata", "ignore", "include", "rcdata"})
_MS_SECTIONS = frozenset({"if", "else", "endif"})
_NOTABLE = re.compile(r"<(?:!|(?:script|style)(?=[\t\n\r\f />\x00]))", re.IGNORECASE)
_RAW_TEXT = re.compile(r"<(script|style)(?=[\t\n\r\f />\x00])", re.IGNORECASE)


def _last_start(pattern: re.Pattern[str], text: str) -> int:
    """The start of the last match of pattern in text (-1 when none): the last place a closer begins."""
    last = -1
    for match in pattern.finditer(text):
        last = match.start()
    return last


class _Closers:
    """Where the last closer of each kind begins, so 'is there one after i' is one comparison."""

    def __init__(self, text: str) -> None:
        self.gt = text.rfind(">")
        self.comment = _last_start(_COMMENT_CLOSE, text)
        self.section = _last_start(_SECTION_CLOSE, text)
        self.ms_section = _last_start(_MS_SECTION_CLOSE, text)

    def closes(self, text: str, i: int) -> bool | None:
        """Whether the construct html.parser reads at `<` i ends; None for a marked section it has no
        rule for (that a `>` ends as a bogus comment)."""
        following = text[i + 1:i + 2]
        if (following.isascii() and following.isalpha()) or following in ("/", "?"):
            return self.gt > i  # a start tag, an end tag, a processing instruction: up to a `>`
        if following != "!":
            return True  # a lone `<` is text to html.parser already
        if text.startswith("<!--", i):
            return self.comment >= i + 4
        if text.startswith("<![", i):
            name = _SECTION_NAME.match(text, i + 3)
            kind = name.group().lower() if name else ""
            if kind in _SGML_SECTIONS:
                return self.section >= i + 3
            if kind in _MS_SECTIONS:
                return self.ms_section >= i + 3
            return None if self.gt > i else False
        return self.gt >= i + 2  # a doctype or a bogus comment: up to a `>`


def _raw_text_end(html: str, i: int) -> int | None:
    """For a <script>/<style> start tag at i (whose content html.parser does not parse), the index after
    its end tag (-1 when it has none: the parser keeps the rest to itself); None for any other `<`."""
    opened = _RAW_TEXT.match(html, i)
    if opened is None:
        return None
    tag_end = html.find(">", i)
    if html[tag_end - 1] == "/":
        return None  # <script/>: html.parser opens no raw text for it
    closer = re.compile(rf"</\s*{opened.group(1)}\s*>", re.IGNORECASE).search(html, tag_end)
    return -1 if closer is None else closer.end()


def _next(html: str, start: int, gt: int) -> int:
    """The next `<` from start that may need a look: before the last `>` every tag closes, so only `<!`
    and a raw-text element; after it, every `<`."""
    if start <= gt:
        found = _NOTABLE.search(html, start, gt + 1)
        if found is not None:
            return found.start()
        start = gt
    return html.find("<", start)


def _reported_end(html: str, i: int) -> int:
    """The end of what html.parser reports as text for an unclosed construct at i: through the next `>`,
    else up to the next `<`."""
    end = html.find(">", i + 1)
    if end >= 0:
        return end + 1
    end = html.find("<", i + 1)
    return i + 1 if end < 0 else end


def defuse(html: str) -> str:
    """html with every construct html.parser could not close written as the text it would report."""
    closers = _Closers(html)
    out: list[str] = []
    done = 0
    i = _next(html, 0, closers.gt)
    while i >= 0:
        closes = closers.closes(html, i)
        after = i + 1
        if closes is None:  # `<![foo[ ... >`: a bogus comment, as `<!-` opens one
            out.append(html[done:i] + "<!-")
            done = i + 2
        elif not closes:
            after = _reported_end(html, i)
            out.append(html[done:i] + html[i:after].replace("<", "&lt;"))
            done = after
        elif html.startswith("<!--", i):
            after = _COMMENT_CLOSE.search(html, i + 4).end()  # type: ignore[union-attr]  # closes: found
        elif (raw_end := _raw_text_end(html, i)) is not None:
            if raw_end < 0:
                break
            after = raw_end
        i = _next(html, after, closers.gt)
    out.append(html[done:])
    return "".join(out)
