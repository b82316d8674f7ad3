"""Render citations: rewrite a stored path (and section) into how the corpus is cited outside itself.

Rules come compiled from config.citations; the first whose pattern is found in the path wins.
Every substituted value is percent-encoded for a URL path (keeping `/`), an unmatched group is
empty, and a citation left ending in a bare `#` loses it. `${anchor}` is the github-slugger slug
of the section's own heading, the fragment GitHub, Hugo and Docusaurus generate (`page=N` for a
PDF's page section, the fragment PDF viewers open).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from urllib.parse import quote

from config.citations import Capture, CitationRule, Literal, Reserved, compile_rules
from config.settings import Settings
from pipeline.chunker import BREADCRUMB_SEP
from pipeline.formats import page_anchor

# General categories github-slugger keeps: letters, marks, decimal and letter numbers, connector
# punctuation; plus the plain space (turned into `-`) and the plain hyphen.
_KEPT_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "Pc"})
# Other symbols that carry the Unicode Alphabetic property (circled and squared Latin letters),
# which github-slugger keeps too.
_ALPHABETIC_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))


def _kept(char: str) -> bool:
    if char in " -":
        return True
    if unicodedata.category(char) in _KEPT_CATEGORIES:
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _ALPHABETIC_SYMBOLS)


def slug(heading: str) -> str:
    """The github-slugger slug of a heading (lowercased, punctuation/symbols deleted, spaces to `-`), trimmed of `-`."""
    return "".join(c for c in heading.lower() if _kept(c)).replace(" ", "-").strip("-")


def own_heading(breadcrumb: str | None) -> str:
    """The section's own heading: the last element of an `A > B > C` breadcrumb ('' when none)."""
    if not breadcrumb:
        return ""
    return breadcrumb.rsplit(BREADCRUMB_SEP, 1)[-1].strip()


def _encode(value: str, safe: str = "/") -> str:
    """Percent-encode a value for a URL path, leaving `/` alone; never raises on odd surrogates."""
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = value.encode("utf-8", "surrogatepass")
    return quote(raw, safe=safe)


class CitationMapper:
    """Maps stored paths and sections to citations under an ordered list of compiled rules."""

    def __init__(self, rules: Sequence[CitationRule]) -> None:
        self._rules = tuple(rules)

    @classmethod
    def from_settings(cls, settings: Settings) -> CitationMapper:
        """A mapper for the rules of settings.citations; raise ConfigError if one is invalid."""
        return cls(compile_rules(settings.citations))

    @property
    def configured(self) -> bool:
        """Whether any rule exists (the Mapped column and unmatched count show only then)."""
        return bool(self._rules)

    def map_chunk(self, path: str, ordinal: int | None, heading: str | None) -> str | None:
        """The citation of one section (heading may be its breadcrumb), or None when no rule matches."""
        title = own_heading(heading)
        reserved = {
            "ordinal": "" if ordinal is None else str(ordinal),
            "heading": title,
            "anchor": page_anchor(path, title) or slug(title),
        }
        return self._map(path, reserved)

    def map_document(self, path: str) -> str | None:
        """The citation of a whole document (ordinal, heading, anchor empty), or None when unmatched."""
        return self._map(path, {"ordinal": "", "heading": "", "anchor": ""})

    def cite_document(self, path: str) -> str:
        """The mapped citation of a whole document, or its path when no rule maps it."""
        return self.map_document(path) or path

    def cite_chunk(self, path: str, ordinal: int, heading: str | None) -> str:
        """The mapped citation of a section, or its raw `<path>#<ordinal>` token when none (or empty)."""
        mapped = self.map_chunk(path, ordinal, heading)
        return mapped if mapped else f"{path}#{ordinal}"

    def _map(self, path: str, reserved: dict[str, str]) -> str | None:
        for rule in self._rules:
            match = rule.pattern.search(path)
            if match is None:
                continue
            parts: list[str] = []
            for token in rule.template:
                if isinstance(token, Literal):
                    parts.append(token.text)
                elif isinstance(token, Capture):
                    parts.append(_encode(match.group(token.group) or ""))
                elif isinstance(token, Reserved):
                    # an anchor keeps its `=` (a slug has none; a PDF page's is `page=N`)
                    parts.append(_encode(reserved[token.name], "/=" if token.name == "anchor" else "/"))
            citation = "".join(parts)
            return citation[:-1] if citation.endswith("#") else citation
        return None
