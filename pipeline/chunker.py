"""Split a markdown or text document into cited sections.

Rules (the fisk reference, with its two bugs fixed): CRLF is normalised; an ATX heading (1-6 `#`
followed by a space or the end of the line) flushes the section and updates the breadcrumb stack,
joined by " > "; a fenced code block is collected whole and never split; paragraphs are packed
toward TARGET bytes; a paragraph over HARD_LIMIT bytes is hard-split near TARGET bytes, never
through a multi-byte character. The document title is the first heading. A document of headings
only becomes one section holding its headings, so it can still be found.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from pipeline.models import Chunk
from pipeline.text import cjk_runs

# The chunker's version: part of every document's policy (pipeline/formats); raise it when the
# same text would be cut into other sections, and the next index run re-chunks every document.
VERSION = "2"  # 2: a heading's explicit id (`## WebSockets { #websockets }`) is markup, not text
TARGET = 1200
HARD_LIMIT = 1500
BREADCRUMB_SEP = " > "

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
# An attribute list closing a heading, as MkDocs (attr_list), Pandoc, Hugo and kramdown write it:
# `{ #websockets }`, `{#id .class}`, `{: #id }`, `{ .class key=value }`. It names the heading's anchor
# and style; it is neither breadcrumb nor text.
_ATTRIBUTES = re.compile(r"[ \t]*\{:?[ \t]*(?:(?:[#.][\w:-]+|[\w-]+=(?:\"[^\"]*\"|\S+?))[ \t]*)+\}[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class ChunkedText:
    """The chunks of one document and its title (first heading, if any)."""

    title: str | None
    chunks: list[Chunk]


def text_hash(heading_path: str, body: str) -> str:
    """Identity of a chunk's text: equal hashes mean an embedding can be reused."""
    return hashlib.sha256(f"{heading_path}\x00{body}".encode()).hexdigest()[:32]


def parse_heading(line: str) -> tuple[int, str] | None:
    """(level, text) when line is an ATX heading, else None (`#include` and a bare `#` are text)."""
    match = _HEADING.match(line)
    if match is None or match.group(2) is None:
        return None
    text = _CLOSING_HASHES.sub("", match.group(2)).strip()
    text = _ATTRIBUTES.sub("", text).strip()
    return len(match.group(1)), _without_inline_html(text)


# Inline HTML a heading carries (`<a href=.. target="_blank">WebSockets</a>`, `<abbr>`, `<code>`): the tags
# go, their text stays, as a browser shows the heading. Only these element names, and never inside a code
# span, so `Vec<T>` and `` `Option<u8>` `` keep their angle brackets.
_INLINE_TAG = re.compile(
    r"</?(?:a|abbr|b|big|br|cite|code|del|dfn|em|font|i|img|ins|kbd|mark|q|s|samp|small|span|strike|strong|"
    r"sub|sup|time|tt|u|var)(?:\s[^<>]*)?/?>",
    re.IGNORECASE,
)
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")


def _without_inline_html(text: str) -> str:
    """A heading's text with inline HTML tags removed outside code spans, spaces collapsed."""
    if "<" not in text:
        return text
    out, pos = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_INLINE_TAG.sub("", text[pos:span.start()]), span.group(0)]
        pos = span.end()
    out.append(_INLINE_TAG.sub("", text[pos:]))
    return " ".join("".join(out).split())


def fence_end(lines: list[str], start: int) -> tuple[int, bool]:
    """(the index after the fenced code block opening at lines[start], whether a closing fence ended it).

    The closing fence is the opening character, at least as many times, with at most 3 spaces before
    it and nothing after it (CommonMark); without one the block runs to the end of the text.
    """
    opening = _FENCE.match(lines[start])
    assert opening is not None, "fence_end is called on a line that opens a fence"
    marker = opening.group(1)
    closing = re.compile(r"^ {0,3}" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}[ \t]*$")
    for i in range(start + 1, len(lines)):
        if closing.match(lines[i]):
            return i + 1, True
    return len(lines), False


def _blocks(lines: list[str]) -> list[tuple[str, tuple[int, str] | str]]:
    """Group lines into ('heading', (level, text)), ('fence', text) and ('para', text) blocks."""
    out: list[tuple[str, tuple[int, str] | str]] = []
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(("para", "\n".join(para)))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            end, closed = fence_end(lines, i)
            block = lines[i:end]
            i = end
            while not closed and len(block) > 1 and not block[-1].strip():
                block.pop()
            out.append(("fence", "\n".join(block)))
            continue
        heading = parse_heading(line)
        if heading is not None:
            flush()
            out.append(("heading", heading))
        elif line.strip() == "":
            flush()
        else:
            para.append(line)
        i += 1
    flush()
    return out


def split_utf8(text: str, limit: int = TARGET) -> list[str]:
    """Split text into pieces of at most `limit` UTF-8 bytes (a single wider character excepted).

    Prefers the last whitespace in the second half of the window; never cuts a character.
    """
    pieces: list[str] = []
    rest = text
    while len(rest.encode()) > limit:
        encoded = rest.encode()
        cut = limit
        while cut > 0 and (encoded[cut] & 0xC0) == 0x80:
            cut -= 1
        head = encoded[:cut].decode()
        space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
        if space >= len(head) // 2:
            head = head[: space + 1]
        if not head:
            head = rest[0]
        pieces.append(head)
        rest = rest[len(head):]
    if rest:
        pieces.append(rest)
    return pieces


def _nest(stack: list[tuple[int, str]], level: int, heading: str) -> None:
    """Open a heading of level on the stack of open headings, closing those at its level or deeper."""
    while stack and stack[-1][0] >= level:
        stack.pop()
    stack.append((level, heading))


def chunk_text(text: str) -> ChunkedText:
    """Chunk a document's text into sections under the rules in the module docstring."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    stack: list[tuple[int, str]] = []
    headings: list[str] = []  # the non-empty ones, in order: the first is the title
    pieces: list[tuple[str, str]] = []
    current: list[str] = []
    size = 0

    def breadcrumb() -> str:
        return BREADCRUMB_SEP.join(t for _, t in stack if t)

    def flush() -> None:
        nonlocal size
        if current:
            pieces.append((breadcrumb(), "\n\n".join(current)))
            current.clear()
        size = 0

    for kind, value in _blocks(text.split("\n")):
        if isinstance(value, tuple):  # a heading
            flush()
            level, heading = value
            if heading:
                headings.append(heading)
            _nest(stack, level, heading)
            continue
        block = value
        parts = [block] if kind == "fence" or len(block.encode()) <= HARD_LIMIT else split_utf8(block)
        for part in parts:
            width = len(part.encode())
            if current and size + 2 + width > TARGET:
                flush()
            current.append(part)
            size += width + (2 if size else 0)
    flush()
    title = headings[0] if headings else None
    if not pieces and headings:  # a title-only or headings-only page is still findable by its headings
        pieces.append((title or "", "\n".join(headings)))
    chunks = [
        Chunk(ordinal=i, heading_path=crumb, body=body, text_hash=text_hash(crumb, body),
              cjk=" ".join(cjk_runs(f"{crumb}\n{body}")))
        for i, (crumb, body) in enumerate(pieces)
    ]
    return ChunkedText(title=title, chunks=chunks)
