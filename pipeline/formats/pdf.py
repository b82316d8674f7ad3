"""A PDF's text layer through pypdf: one section per page, headed `Page N` (its anchor `page=N`).

The document title is the PDF's own Title metadata. A PDF that cannot be opened (damaged), an
encrypted one (that an empty password does not open) and one with no text on any page (a scan) are
skips with that reason; a page that fails alone is left out, the others kept.

The page tree is counted (up to MAX_PAGES + 1 leaves, each node once) before pypdf flattens it, so a
PDF of 100,000 pages is refused without building 100,000 page objects; pages that share their content
stream, resources and rotation give the same text, so it is extracted once for them all (5,000 pages
drawing one costly blank stream were 5,000 full parses of it).
"""

from __future__ import annotations

import io
import logging

from pypdf import PageObject, PdfReader
from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject, PdfObject

from config.errors import FileSkipped
from pipeline.formats.outline import Extracted, Outline, one_line

MAX_PAGES = 5000

logging.getLogger("pypdf").setLevel(logging.ERROR)  # a damaged object is our skip, not a log line per page


def page_heading(number: int) -> str:
    """The heading of page number (1-based): what pipeline.formats.page_anchor reads back."""
    return f"Page {number}"


def count_pages(reader: PdfReader, limit: int = MAX_PAGES) -> int:
    """The leaves of the page tree, counted without flattening it and no further than limit + 1."""
    root = reader.trailer["/Root"].get_object()
    if not isinstance(root, DictionaryObject) or "/Pages" not in root:
        raise ValueError("no page tree")
    stack: list[PdfObject] = [root.raw_get("/Pages")]
    seen: set[tuple[int, int]] = set()
    count = 0
    while stack and count <= limit:
        ref = stack.pop()
        if isinstance(ref, IndirectObject):
            if (ref.idnum, ref.generation) in seen:
                continue
            seen.add((ref.idnum, ref.generation))
        node = ref.get_object()
        if not isinstance(node, DictionaryObject):
            continue
        kids = node.get("/Kids")
        if node.get("/Type") == "/Pages" or kids is not None:
            kids = kids.get_object() if kids is not None else None
            if isinstance(kids, ArrayObject):
                stack.extend(reversed(kids))
        else:
            count += 1
    return count


def _shared_key(page: DictionaryObject) -> tuple[str, ...] | None:
    """What a page's text depends on when its content is shared (indirect streams, resources, rotation);
    None when its content stream is its own (inline in the page)."""
    contents = page.get("/Contents")
    listed = list(contents) if isinstance(contents, ArrayObject) else [contents]
    refs = [ref for ref in listed if isinstance(ref, IndirectObject)]
    if not refs or len(refs) != len(listed):
        return None
    resources = page.get("/Resources")
    if resources is None:
        resources = ("inherited", repr(page.get("/Parent")))
    shown = repr(resources)
    if len(shown) > 4096:
        return None
    return (repr([(r.idnum, r.generation) for r in refs]), shown, repr(page.get("/Rotate")))


def extract(data: bytes) -> Extracted:
    """The pages of a PDF as sections; raise FileSkipped when it has no readable text."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileSkipped("encrypted PDF (a password is needed to read it)")
        if count_pages(reader) > MAX_PAGES:
            raise FileSkipped(f"too many pages (over {MAX_PAGES})")
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
    done: dict[tuple[str, ...], str | None] = {}  # shared content -> its text (None: it failed)
    for number in range(1, count + 1):
        text = _page_text(pages[number - 1], done)
        if text is None:
            continue
        if not text.strip():
            continue
        found = True
        out.heading(1, page_heading(number), f"page={number}")
        out.para(text)
    if not found:
        raise FileSkipped("no text layer (a scanned PDF, or images only)")
    return out.result(title)


def _page_text(page: PageObject, done: dict[tuple[str, ...], str | None]) -> str | None:
    """A page's text, from done when a page with the same shared content gave it; None when it fails."""
    try:
        key = _shared_key(page)
    except Exception:  # noqa: BLE001 - an odd page dictionary: read the page on its own
        key = None
    if key is not None and key in done:
        return done[key]
    try:
        text: str | None = page.extract_text() or ""
    except Exception:  # noqa: BLE001 - one bad page is left out, the rest of the file kept
        text = None
    if key is not None:
        done[key] = text
    return text
