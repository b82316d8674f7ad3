"""Turn an HTML page into markdown-ish text the chunker understands, and find its title.

Built on the standard library's tolerant html.parser, after a linear pass that writes markup it could
not close as the text it would report (pipeline/html_unclosed.py: it rescans to the end at each one,
so a page of `<a<a<a...` was quadratic). h1-h6 become ATX headings (so sections get
breadcrumbs), paragraphs and other blocks are separated by blank lines, list items become `- ` or
`1. ` lines indented by nesting, <pre> becomes a fenced block (longer than any fence inside it,
its language taken from a `language-x` class), table rows become `a | b` lines and <br> a line
break. Scripts, styles, navigation and other non-content elements are dropped with all they hold.
Pages are untrusted: control characters are removed, and text that would read as markdown
structure (a line starting with `#` or a fence) is escaped with a backslash.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser

from pipeline.html_unclosed import defuse
from pipeline.text import without_controls

SKIPPED = frozenset({
    "script", "style", "noscript", "template", "nav", "svg", "math", "iframe", "object", "canvas",
    "select", "button", "dialog",
})
VOID = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
})
BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "body", "center", "dd", "details", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "html", "legend",
    "main", "ol", "p", "section", "summary", "table", "tbody", "tfoot", "thead", "ul",
})
HEADINGS = {f"h{n}": n for n in range(1, 7)}
MAX_TITLE_CHARS = 300

_BREAK = "\x00"  # stands for <br> inside a block; real NULs are removed from the input first
_MARKUP_START = re.compile(r"^(#|`{3,}|~{3,})")
_FENCE_RUN = re.compile(r"^ {0,3}(`{3,})", re.MULTILINE)
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang)-([\w+#.-]{1,30})")


@dataclass(frozen=True)
class PageText:
    """A page converted: its <title> (None when absent or blank) and its markdown-ish text."""

    title: str | None
    text: str
    ids: tuple[tuple[str, str], ...] = ()  # (heading, its id attribute or '') in document order


def strip_controls(text: str) -> str:
    """Text without control characters (C0 but tab and newline, DEL, C1); CR and CRLF become LF."""
    return without_controls(text.replace("\r\n", "\n").replace("\r", "\n"))


def html_to_text(html: str, dropped: frozenset[str] = frozenset()) -> PageText:
    """Convert an HTML document to markdown-ish text under the rules in the module docstring.

    dropped: more elements dropped with all they hold (a local file drops its footer too).
    """
    converter = _Converter(dropped)
    converter.feed(defuse(strip_controls(html)))
    converter.close()
    return converter.result()


class _Converter(HTMLParser):
    def __init__(self, dropped: frozenset[str] = frozenset()) -> None:
        super().__init__(convert_charrefs=True)
        self._skipped = SKIPPED | dropped
        self.ids: list[tuple[str, str]] = []  # (heading text, its id attribute) of each heading
        self._heading_id = ""
        self._blocks: list[tuple[str, str]] = []  # (kind, text): heading, para, item, row, fence
        self._inline: list[str] = []
        self._skip_tag: str | None = None
        self._skip_depth = 0
        self._heading = 0
        self._lists: list[list[int]] = []  # per open list: [ordered (0/1), next number]
        self._bullet: str | None = None  # the marker the current list item's first line takes
        self._list_group = 0  # items of one outermost list are joined by single newlines
        self._cells = 0
        self._pre = 0
        self._pre_parts: list[str] = []
        self._pre_lang = ""
        self._title_parts: list[str] | None = None
        self._title: str | None = None

    # -- parser callbacks ------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if self._skipping_start(tag, attributes):
            return
        if tag == "title":
            if self._title is None:
                self._title_parts = []
        elif self._pre:
            self._start_in_pre(tag, attributes)
        elif (opener := _OPENERS.get(tag)) is not None:
            opener(self, tag, attributes)
        elif tag in BLOCKS:
            self._block_boundary()

    def handle_endtag(self, tag: str) -> None:
        if self._skip_tag is not None:
            self._skipping_end(tag)
        elif tag == "title":
            if self._title_parts is not None:
                self._title = _title(self._title_parts)
                self._title_parts = None
        elif self._pre:
            if tag == "pre":
                self._pre -= 1
                if not self._pre:
                    self._emit_fence()
        elif (closer := _CLOSERS.get(tag)) is not None:
            closer(self, tag)
        elif tag in BLOCKS:
            self._block_boundary()

    def handle_data(self, data: str) -> None:
        if self._skip_tag is not None:
            return
        if self._title_parts is not None:
            self._title_parts.append(data)
        elif self._pre:
            self._pre_parts.append(data)
        else:
            self._inline.append(data)

    def close(self) -> None:
        super().close()
        if self._pre:
            self._emit_fence()
        self._flush()
        if self._title_parts is not None:
            self._title = _title(self._title_parts)

    # -- skipped elements: dropped with all they hold -------------------------------------

    def _skipping_start(self, tag: str, attributes: dict[str, str | None]) -> bool:
        """Whether the tag is inside (or opens) a skipped element; a nested one of its kind deepens it."""
        if self._skip_tag is not None:
            self._skip_depth += tag == self._skip_tag and tag not in VOID
            return True
        if tag in self._skipped or (attributes.get("role") or "").lower() == "navigation":
            if tag not in VOID:
                self._skip_tag, self._skip_depth = tag, 1
            return True
        return False

    def _skipping_end(self, tag: str) -> None:
        if tag == self._skip_tag:
            self._skip_depth -= 1
        if self._skip_depth <= 0 or tag in ("body", "html"):
            self._skip_tag, self._skip_depth = None, 0

    # -- opening and closing tags outside <pre> and <title>, one method a kind ---------------

    def _start_in_pre(self, tag: str, attributes: dict[str, str | None]) -> None:
        if tag == "br":
            self._pre_parts.append("\n")
        elif tag == "code" and not self._pre_lang:
            self._pre_lang = _language(attributes.get("class"))

    def _open_heading(self, tag: str, attributes: dict[str, str | None]) -> None:
        self._flush()
        self._heading = HEADINGS[tag]
        self._heading_id = attributes.get("id") or ""

    def _open_pre(self, tag: str, attributes: dict[str, str | None]) -> None:
        self._flush()
        self._pre, self._pre_parts = 1, []
        self._pre_lang = _language(attributes.get("class"))

    def _open_break(self, tag: str, attributes: dict[str, str | None]) -> None:
        self._inline.append(_BREAK)

    def _open_list(self, tag: str, attributes: dict[str, str | None]) -> None:
        self._flush()
        self._list_group += not self._lists
        self._lists.append([int(tag == "ol"), _start(attributes.get("start"))])

    def _open_item(self, tag: str, attributes: dict[str, str | None]) -> None:
        self._flush()
        if self._lists and self._lists[-1][0]:
            self._bullet = f"{self._lists[-1][1]}. "
            self._lists[-1][1] += 1
        else:
            self._bullet = "- "

    def _open_row(self, tag: str, attributes: dict[str, str | None]) -> None:
        self._flush()
        self._cells = 0

    def _open_cell(self, tag: str, attributes: dict[str, str | None]) -> None:
        if self._cells:
            self._inline.append(" | ")
        self._cells += 1

    def _open_code(self, tag: str, attributes: dict[str, str | None]) -> None:
        self._inline.append("`")

    def _close_heading(self, tag: str) -> None:
        self._flush()

    def _close_list(self, tag: str) -> None:
        self._flush()
        if self._lists:
            self._lists.pop()

    def _close_item_or_row(self, tag: str) -> None:
        self._flush()
        if tag == "li":
            self._bullet = None
        else:
            self._cells = 0

    def _close_code(self, tag: str) -> None:
        if self._inline and self._inline[-1] == "`":  # an empty <code></code> leaves nothing
            self._inline.pop()
        else:
            self._inline.append("`")

    # -- output ----------------------------------------------------------------------------

    def result(self) -> PageText:
        out: list[str] = []
        previous = ""
        for kind, text in self._blocks:
            if out:
                out.append("\n" if kind == previous and kind.startswith(("item", "row")) else "\n\n")
            out.append(text)
            previous = kind
        return PageText(title=self._title, text="".join(out) + ("\n" if out else ""), ids=tuple(self.ids))

    def _block_boundary(self) -> None:
        if self._heading or self._cells:  # a block inside a heading or a table cell stays inline
            self._inline.append(" ")
        else:
            self._flush()

    def _flush(self) -> None:
        raw, self._inline = "".join(self._inline), []
        lines = [" ".join(part.split()) for part in raw.split(_BREAK)]
        lines = [line for line in lines if line]
        level, self._heading = self._heading, 0
        if not lines:
            return
        if level:
            self._blocks.append(("heading", "#" * level + " " + " ".join(lines)))
            self.ids.append((" ".join(lines), self._heading_id))
            self._heading_id = ""
            return
        lines = ["\\" + line if _MARKUP_START.match(line) else line for line in lines]
        if self._bullet is None and not self._lists:
            self._blocks.append(("row" if self._cells else "para", "\n".join(lines)))
            return
        indent = "  " * max(len(self._lists) - 1, 0)
        marker, self._bullet = self._bullet, None
        first = indent + (marker or "  ") + lines[0]
        rest = [indent + "  " + line for line in lines[1:]]
        self._blocks.append((f"item{self._list_group}", "\n".join([first, *rest])))

    def _emit_fence(self) -> None:
        self._pre = 0
        body = "".join(self._pre_parts).strip("\n")
        self._pre_parts = []
        lang, self._pre_lang = self._pre_lang, ""
        if not body.strip():
            return
        longest = max((len(run) for run in _FENCE_RUN.findall(body)), default=2)
        fence = "`" * max(3, longest + 1)
        self._blocks.append(("fence", f"{fence}{lang}\n{body.rstrip()}\n{fence}"))



_Opener = Callable[[_Converter, str, dict[str, str | None]], None]
_OPENERS: dict[str, _Opener] = {
    **dict.fromkeys(HEADINGS, _Converter._open_heading),
    "pre": _Converter._open_pre,
    "br": _Converter._open_break,
    "ul": _Converter._open_list,
    "ol": _Converter._open_list,
    "li": _Converter._open_item,
    "tr": _Converter._open_row,
    "td": _Converter._open_cell,
    "th": _Converter._open_cell,
    "code": _Converter._open_code,
}
_CLOSERS: dict[str, Callable[[_Converter, str], None]] = {
    **dict.fromkeys(HEADINGS, _Converter._close_heading),
    "ul": _Converter._close_list,
    "ol": _Converter._close_list,
    "li": _Converter._close_item_or_row,
    "tr": _Converter._close_item_or_row,
    "table": _Converter._close_item_or_row,
    "code": _Converter._close_code,
}

def _title(parts: list[str]) -> str | None:
    title = " ".join("".join(parts).split())[:MAX_TITLE_CHARS]
    return title or None


def _language(classes: str | None) -> str:
    match = _LANGUAGE.search(classes or "")
    return match.group(1) if match else ""


def _start(value: str | None) -> int:
    try:
        return max(0, min(int(value or "1"), 10**6))
    except ValueError:
        return 1
