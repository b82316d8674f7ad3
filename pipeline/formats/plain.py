"""A markdown or text file: its front matter gives the title and fields, its body is markdown as written.

The extractor every other format is beside: the same bytes give the same chunks as before the
registry (no escaping, no rewriting; pipeline/markdown_sections.py reads the body into sections).
"""

from __future__ import annotations

from pipeline.formats.decoding import decode
from pipeline.formats.outline import Extracted
from pipeline.front_matter import split as split_front_matter


def extract(data: bytes) -> Extracted:
    """The body of a markdown or text file as written, its front matter as title and fields."""
    matter = split_front_matter(decode(data))
    return Extracted(title=matter.title, text=matter.body, fields=matter.fields, front_matter_error=matter.error)
