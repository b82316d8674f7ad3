"""Markdown read into sections: ATX headings open them, fenced code and paragraphs are their blocks.

The rules (the fisk reference, with its two bugs fixed): CRLF is normalised; an ATX heading (1-6 `#`
followed by a space or the end of the line) opens a section, its breadcrumb the headings open at it
joined by " > " (pipeline/chunker.py packs them); a fenced code block is one block, never split; other
text is cut into paragraphs at blank lines. A heading's closing hashes, attribute list and inline
HTML are markup, not text.
"""

from __future__ import annotations

import re

from pipeline.outline import Block, Section

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")  # its trailing spaces and tabs are cut in Python
# An attribute list closing a heading, as MkDocs (attr_list), Pandoc, Hugo and kramdown write it:
# `{ #websockets }`, `{#id .class}`, `{: #id }`, `{ .class key=value }`. It names the heading's anchor
# and style; it is neither breadcrumb nor text.
_ATTRIBUTES = re.compile(r"\{:?[ \t]*(?:(?:[#.][\w:-]+|[\w-]+=(?:\"[^\"]*\"|\S+?))[ \t]*)+\}[ \t]*")
_ATTRIBUTE_ID = re.compile(r"(?<=[{ \t:])#([\w:-]+)")
_ATTRIBUTE_TRIES = 4  # the last `{`s tried as an attribute list's start
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")




def parse_heading(line: str) -> tuple[int, str] | None:
    """(level, text) when line is an ATX heading, else None (`#include` and a bare `#` are text)."""
    heading = _heading(line)
    return None if heading is None else heading[:2]


def _heading(line: str) -> tuple[int, str, str] | None:
    """(level, text, the id its attribute list names or '') when line is an ATX heading, else None."""
    match = _HEADING.match(line)
    if match is None or match.group(2) is None:
        return None
    text = _without_closing_hashes(match.group(2).rstrip(" \t")).strip()
    bare, anchor = _without_attributes(text)
    return len(match.group(1)), _without_inline_html(bare.strip()), anchor


def _without_closing_hashes(text: str) -> str:
    """text without a closing run of `#` that whitespace (or nothing) precedes (`## Install ##`). A regular
    expression searched for it from every place in a run of spaces: quadratic in the run."""
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        return bare.rstrip(" \t")
    return text


def _without_attributes(text: str) -> tuple[str, str]:
    """text without a closing attribute list (tried from its last few `{`, not from every space before
    one), and the id the list names ('' when none)."""
    start = len(text)
    for _ in range(_ATTRIBUTE_TRIES):
        start = text.rfind("{", 0, start)
        if start < 0:
            break
        if _ATTRIBUTES.fullmatch(text, start):
            named = _ATTRIBUTE_ID.search(text, start)
            return text[:start].rstrip(" \t"), named.group(1) if named else ""
    return text, ""


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


def _blocks(lines: list[str]) -> list[tuple[str, tuple[int, str, str] | str]]:
    """Group lines into ('heading', (level, text)), ('fence', text) and ('para', text) blocks."""
    out: list[tuple[str, tuple[int, str, str] | str]] = []
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
        heading = _heading(line)
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


def sections(text: str) -> tuple[Section, ...]:
    """The sections of a markdown text (a level-0 one first when text comes before the first heading)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    stack: list[tuple[int, str]] = []
    out: list[Section] = []
    heading, level, anchor = "", 0, ""
    blocks: list[Block] = []
    for kind, value in _blocks(text.split("\n")):
        if isinstance(value, tuple):
            if blocks or level:
                out.append(Section(heading, level, _path(stack), anchor, tuple(blocks)))
            blocks = []
            level, heading, anchor = value
            _nest(stack, level, heading)
            continue
        blocks.append(Block("code" if kind == "fence" else "para", value))
    if blocks or level:
        out.append(Section(heading, level, _path(stack), anchor, tuple(blocks)))
    return tuple(out)


def _path(stack: list[tuple[int, str]]) -> tuple[str, ...]:
    return tuple(t for _, t in stack if t)


def _nest(stack: list[tuple[int, str]], level: int, heading: str) -> None:
    """Open a heading of level on the stack of open headings, closing those at its level or deeper."""
    while stack and stack[-1][0] >= level:
        stack.pop()
    stack.append((level, heading))
