"""A PDF's text layer through pypdf: one section per page, headed `Page N` (its anchor `page=N`).

The document title is the PDF's own Title metadata. A PDF that cannot be opened (damaged), an
encrypted one (that an empty password does not open) and one with no text on any page (a scan) are
skips with that reason; a page that fails alone is left out, the others kept.
"""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader

from config.errors import FileSkipped
from pipeline.formats.outline import Extracted, Outline, one_line

MAX_PAGES = 5000

logging.getLogger("pypdf").setLevel(logging.ERROR)  # a damaged object is our skip, not a log line per page


def page_heading(number: int) -> str:
    """The heading of page number (1-based): what pipeline.formats.page_anchor reads back."""
    return f"Page {number}"


def extract(data: bytes) -> Extracted:
    """The pages of a PDF as sections; raise FileSkipped when it has no readable text."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileSkipped("encrypted PDF (a password is needed to read it)")
        pages = reader.pages
        count = len(pages)
        meta = reader.metadata
        title = meta.title if meta is not None and isinstance(meta.title, str) else None
    except FileSkipped:
        raise
    except Exception as exc:  # pypdf on an untrusted file: any failure to open it is this file's skip
        raise FileSkipped(f"damaged PDF ({one_line(str(exc))[:160] or type(exc).__name__})") from exc
    if count > MAX_PAGES:
        raise FileSkipped(f"too many pages ({count} > {MAX_PAGES})")
    out = Outline()
    found = False
    for number in range(1, count + 1):
        try:
            text = pages[number - 1].extract_text() or ""
        except Exception:  # noqa: BLE001 - one bad page is left out, the rest of the file kept
            continue
        if not text.strip():
            continue
        found = True
        out.heading(1, page_heading(number), f"page={number}")
        out.para(text)
    if not found:
        raise FileSkipped("no text layer (a scanned PDF, or images only)")
    return out.result(title)
