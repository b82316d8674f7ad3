"""A local .html/.htm file: the URL path's HTML-to-text conversion, its footer dropped too."""

from __future__ import annotations

import re

from config.errors import FileSkipped
from pipeline.formats.outline import Extracted, check_size
from pipeline.html_text import html_to_text

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]{1,40})""", re.IGNORECASE)
DROPPED = frozenset({"footer"})


def decode_html(data: bytes) -> str:
    """The text of an HTML file: UTF-8 (a BOM dropped), else the charset its <meta> names."""
    if b"\x00" in data:
        raise FileSkipped("binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        match = _META_CHARSET.search(data[:4096])
        if match is None:
            raise FileSkipped(f"not UTF-8 (invalid byte at offset {exc.start}) and no <meta charset>") from exc
        try:
            return data.decode(match.group(1).decode("ascii"), errors="replace")
        except LookupError:
            raise FileSkipped(f"unknown charset {match.group(1).decode('ascii')!r}") from exc


def extract(data: bytes) -> Extracted:
    """h1-h6 as headings (their id attributes as anchors), blocks as paragraphs; <title> is the title."""
    page = html_to_text(decode_html(data), DROPPED)
    return Extracted(title=page.title, text=check_size(page.text), anchors=list(page.ids))
