"""The structure every format reader hands over and the chunker packs: an Outline of sections.

A section is what a heading opens (the part before the first heading is a section of level 0 with
no heading): its own heading text, its level, the breadcrumb of the headings open at it (the empty
ones left out), the anchor its format gives it ('' when none: an HTML id, an rst label, `page=N`)
and its blocks, each a paragraph (split near the chunk size when long) or code (never split).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Block:
    """One paragraph or code block of a section, as the chunk text shows it."""

    kind: Literal["para", "code"]
    text: str


@dataclass(frozen=True)
class Section:
    """What one heading opens: heading text, level (0 before any heading), breadcrumb, anchor, blocks."""

    heading: str
    level: int
    path: tuple[str, ...]
    anchor: str = ""
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Outline:
    """One file read by its format: title (None: the first heading's), fields, sections and notes (what
    the reader recovered from: a front matter problem, parser warnings)."""

    title: str | None
    sections: tuple[Section, ...]
    fields: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    warnings: int = 0

    def headings(self) -> list[str]:
        """The non-empty headings in document order (the first is the title when none is given)."""
        return [s.heading for s in self.sections if s.level and s.heading]

    def with_anchors(self, anchors: list[tuple[str, str]]) -> Outline:
        """This outline with the anchors of its headings, given in document order as (heading, anchor)."""
        pending = list(reversed(anchors))
        sections = []
        for section in self.sections:
            anchor = section.anchor
            if section.level and section.heading and pending and pending[-1][0] == section.heading:
                anchor = pending.pop()[1] or anchor
            sections.append(Section(section.heading, section.level, section.path, anchor, section.blocks))
        return Outline(self.title, tuple(sections), self.fields, self.notes, self.warnings)
