"""The text a section and a query are embedded as: the document recipe pinned with the vectors, the query cut.

A section is embedded by a named recipe, pinned in the store with its vectors (pipeline/vectors.py,
meta key `document_recipe`), because the recipe decides what the vectors mean: vectors built by two
recipes must never be mixed in one store.

- `breadcrumb` (CURRENT): the section's breadcrumb, a blank line, then its body
  (`Guide > Install > Linux\n\nRun the installer...`), after `document_prefix`. The breadcrumb names
  what a section is about, often in words its body never repeats (a "Linux" section's steps). A
  section without headings is its body alone. When `document_prefix` holds `{title}`, the prefix
  places the breadcrumb (`none` when empty) and it is not repeated before the body.
- `body` (LEGACY: every store pinned before the recipe was recorded): `document_prefix` with
  `{title}` replaced by the breadcrumb (`none` when empty), then the body.

A query is embedded from at most MAX_QUERY_BYTES of its UTF-8 text, cut at a character boundary,
after `query_prefix`: a pasted log or document must not make the request too large for the server
(models read a few hundred tokens anyway), and the cut is the same for every surface.
"""

from __future__ import annotations

BREADCRUMB = "breadcrumb"
BODY = "body"
RECIPES = (BREADCRUMB, BODY)
CURRENT = BREADCRUMB  # what a new store (or --reindex, or a model switch) pins
LEGACY = BODY  # what a store pinned before recipes were recorded holds
MAX_QUERY_BYTES = 8192
TITLE = "{title}"


def document_text(body: str, crumb: str, prefix: str = "", recipe: str = CURRENT) -> str:
    """The text a section (body under breadcrumb crumb) is embedded as under recipe; ValueError for an unknown one."""
    if recipe == BODY or (recipe == BREADCRUMB and TITLE in prefix):
        return prefix.replace(TITLE, crumb or "none") + body
    if recipe == BREADCRUMB:
        return f"{prefix}{crumb}\n\n{body}" if crumb else prefix + body
    raise ValueError(f"unknown embedded-text recipe {recipe!r}; expected one of {', '.join(RECIPES)}")


def utf8_head(text: str, limit: int) -> str:
    """The longest start of text whose UTF-8 encoding is at most limit bytes (never half a character)."""
    if len(text) * 4 <= limit:  # no character takes more than four bytes
        return text
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate (from JSON) is kept as it came
    if len(data) <= limit:
        return text
    cut = limit
    while cut > 0 and data[cut] & 0xC0 == 0x80:  # data[cut] continues a character begun before the cut
        cut -= 1
    return data[:cut].decode("utf-8", "surrogatepass")


def query_text(text: str, prefix: str = "") -> str:
    """The text a query is embedded as: prefix, then the query's first MAX_QUERY_BYTES bytes."""
    return prefix + utf8_head(text, MAX_QUERY_BYTES)
