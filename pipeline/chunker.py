"""Pack an outline's sections into cited chunks (a markdown text is read into sections first).

Rules: each section's blocks (pipeline/outline.py) are packed toward TARGET bytes under its
breadcrumb (its open headings joined by " > "); a code block is never split; a paragraph over
HARD_LIMIT bytes is hard-split near TARGET bytes, never through a multi-byte character. The
document title is the first heading. A document of headings only becomes one chunk holding its
headings, so it can still be found. Markdown is read into sections by pipeline/markdown_sections.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline import markdown_sections
from pipeline.markdown_sections import fence_end, parse_heading
from pipeline.models import Chunk
from pipeline.outline import Section
from pipeline.text import cjk_runs

__all__ = ["BREADCRUMB_SEP", "ChunkedText", "chunk_text", "fence_end", "pack", "parse_heading", "text_hash"]

# The chunker's version: part of every document's policy (pipeline/formats); raise it when the
# same text would be cut into other sections, and the next index run re-chunks every document.
VERSION = "2"  # 2: a heading's explicit id (`## WebSockets { #websockets }`) is markup, not text
TARGET = 1200
HARD_LIMIT = 1500
BREADCRUMB_SEP = " > "

@dataclass(frozen=True)
class ChunkedText:
    """The chunks of one document and its title (first heading, if any)."""

    title: str | None
    chunks: list[Chunk]


def text_hash(heading_path: str, body: str) -> str:
    """Identity of a chunk's text: equal hashes mean an embedding can be reused."""
    return hashlib.sha256(f"{heading_path}\x00{body}".encode()).hexdigest()[:32]


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


def chunk_text(text: str) -> ChunkedText:
    """Chunk a markdown document's text into sections under the rules in the module docstring."""
    return pack(markdown_sections.sections(text))


def pack(sections: Sequence[Section]) -> ChunkedText:
    """The chunks of an outline's sections: each section's blocks packed toward TARGET bytes."""
    headings = [s.heading for s in sections if s.level and s.heading]
    pieces: list[tuple[str, str]] = []
    for section in sections:
        crumb = BREADCRUMB_SEP.join(section.path)
        current: list[str] = []
        size = 0
        for block in section.blocks:
            text = block.text
            parts = [text] if block.kind == "code" or len(text.encode()) <= HARD_LIMIT else split_utf8(text)
            for part in parts:
                width = len(part.encode())
                if current and size + 2 + width > TARGET:
                    pieces.append((crumb, "\n\n".join(current)))
                    current, size = [], 0
                current.append(part)
                size += width + (2 if size else 0)
        if current:
            pieces.append((crumb, "\n\n".join(current)))
    title = headings[0] if headings else None
    if not pieces and headings:  # a title-only or headings-only page is still findable by its headings
        pieces.append((title or "", "\n".join(headings)))
    chunks = [
        Chunk(ordinal=i, heading_path=crumb, body=body, text_hash=text_hash(crumb, body),
              cjk=" ".join(cjk_runs(f"{crumb}\n{body}")))
        for i, (crumb, body) in enumerate(pieces)
    ]
    return ChunkedText(title=title, chunks=chunks)
