"""The text of a file's bytes: UTF-8, a BOM dropped; anything else is a skip with its reason.

Every text format's extractor decodes here (pipeline/files.py re-exports decode for its callers), so
the formats package no longer imports back from its consumer.
"""

from __future__ import annotations

from config.errors import FileSkipped


def decode(data: bytes) -> str:
    """UTF-8 text of data (a BOM dropped); raise FileSkipped for binary or other encodings."""
    if b"\x00" in data:
        raise FileSkipped("binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileSkipped(f"not UTF-8 (invalid byte at offset {exc.start})") from exc
    return text.removeprefix("\ufeff")
