"""What every extractor returns, and the builder that writes it as the text the chunker reads.

An extractor sees headings, paragraphs, code and table rows; it hands them to an Outline, which
writes markdown the chunker splits exactly as it splits a markdown file: a heading is an ATX
heading (so sections get breadcrumbs and `--section` expansion), code is a fence longer than any
inside it, and a paragraph line that would read as markdown structure (a `#` or a fence) is
escaped with a backslash. Each heading's anchor (an rst id, an HTML id, `page=N`) is kept beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from config.errors import FileSkipped

MAX_TEXT_BYTES = 4 * 1024 * 1024  # the text one document may extract to, whatever its format
_MARKUP_START = re.compile(r"^ {0,3}(#|`{3,}|~{3,})")
_FENCE_RUN = re.compile(r"^ {0,3}(`{3,})", re.MULTILINE)


@dataclass
class Extracted:
    """One file's content as the markdown path sees it: title, text with ATX headings, fields."""

    title: str | None
    text: str
    anchors: list[tuple[str, str]] = field(default_factory=list)  # (heading, anchor) in order
    fields: dict[str, Any] = field(default_factory=dict)
    front_matter_error: str | None = None
    warnings: int = 0  # what the parser reported and recovered from (rst)


def one_line(text: str) -> str:
    """Text with its whitespace runs (newlines too) collapsed to single spaces."""
    return " ".join(text.split())


def check_size(text: str) -> str:
    """text when it is within MAX_TEXT_BYTES; raise FileSkipped otherwise."""
    if len(text.encode()) > MAX_TEXT_BYTES:
        raise FileSkipped(f"too much text (extracts to over {MAX_TEXT_BYTES} bytes)")
    return text


class Outline:
    """Builds an Extracted from headings and blocks, bounded to a number of text bytes."""

    def __init__(self, limit: int = MAX_TEXT_BYTES) -> None:
        self._parts: list[str] = []
        self._size = 0
        self._limit = limit
        self.title: str | None = None
        self.anchors: list[tuple[str, str]] = []

    def heading(self, level: int, text: str, anchor: str = "") -> None:
        """A heading of level 1-6 (deeper ones are written as 6); the first sets the title."""
        text = one_line(text)
        if not text:
            return
        if self.title is None:
            self.title = text
        self.anchors.append((text, anchor))
        self._add("#" * min(max(level, 1), 6) + " " + text)

    def para(self, text: str) -> None:
        """A paragraph: its lines kept, blank lines dropped, markdown-looking starts escaped."""
        lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
        lines = ["\\" + line.lstrip() if _MARKUP_START.match(line) else line for line in lines if line.strip()]
        if lines:
            self._add("\n".join(lines))

    def code(self, text: str, language: str = "") -> None:
        """A code block, fenced longer than any fence inside it."""
        body = text.strip("\n").rstrip()
        if not body.strip():
            return
        longest = max((len(run) for run in _FENCE_RUN.findall(body)), default=2)
        fence = "`" * max(3, longest + 1)
        self._add(f"{fence}{one_line(language)}\n{body}\n{fence}")

    def markdown(self, text: str) -> None:
        """Markdown passed through as written (a notebook's markdown cell, an MDX body)."""
        if text.strip():
            self._add(text.strip("\n"))

    def _add(self, block: str) -> None:
        self._size += len(block.encode()) + 2
        if self._size > self._limit:
            raise FileSkipped(f"too much text (extracts to over {self._limit} bytes)")
        self._parts.append(block)

    def result(self, title: str | None = None, **extra: Any) -> Extracted:
        """The Extracted document; title (when given and not blank) wins over the first heading."""
        text = "\n\n".join(self._parts) + ("\n" if self._parts else "")
        chosen = one_line(title) if title and title.strip() else self.title
        return Extracted(title=chosen, text=text, anchors=self.anchors, **extra)
