"""WordprocessingML read as a stream: the body's paragraphs (style id and text) and tables (rows of cells).

The parts of a .docx are parsed with the standard library's expat, one callback an element and no tree
kept, so ten million empty paragraphs cost ten million callbacks (python-docx built the whole tree and
looked each paragraph's style up again: about 5 ms a paragraph). What is read is what python-docx's
`Document.iter_inner_content()`, `Paragraph.text` and `_Row.cells` give: the body's own `w:p` and
`w:tbl`; a paragraph's text from its runs and hyperlinked runs (`w:t`, tabs, breaks); a table's rows
as their cells' paragraphs, a cell spanning columns repeated (at most MAX_SPAN times) and a
vertically merged one read from the cell above it. A part declaring XML entities is refused, and so is
a document part of over MAX_ELEMENTS elements (ten million empty paragraphs in an 88 KB file).
"""

from __future__ import annotations

import xml.parsers.expat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from config.errors import FileSkipped

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MAX_SPAN = 64  # Word's own limit is 63 columns; a larger w:gridSpan is hostile, not a table
MAX_ELEMENTS = 2_000_000  # XML elements in the document part: a 1,000-page report has well under a million
_RUN_TEXT = {"tab": "\t", "ptab": "\t", "cr": "\n", "noBreakHyphen": "-"}
_READ_SIZE = 1 << 20
_W_PREFIX = W + " "
_W_LENGTH = len(_W_PREFIX)


@dataclass(slots=True)
class Paragraph:
    """A body paragraph: its style id ('' when none) and text."""

    style_id: str = ""
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass
class Table:
    """A body table: its rows, each the texts of its cells as python-docx's `_Row.cells` lists them."""

    rows: list[list[str]] = field(default_factory=list)


class _Cells:
    """The cells of the current table: spans, vertical merges and the row above, at grid offsets."""

    def __init__(self) -> None:
        self.table = Table()
        self._above: dict[int, tuple[str, int]] = {}  # grid offset -> (text, span) of the row above
        self._row: dict[int, tuple[str, int]] = {}
        self._cells: list[str] = []
        self._offset = 0
        self.span = 1
        self.merge: str | None = None  # w:vMerge's value: "continue" (its default) or "restart"
        self.paragraphs: list[str] = []

    def start_row(self, before: int = 0) -> None:
        self._row, self._cells, self._offset = {}, [], before

    def skip_before(self, before: int) -> None:
        self._offset += before

    def start_cell(self) -> None:
        self.span, self.merge, self.paragraphs = 1, None, []

    def end_cell(self) -> None:
        span = min(max(self.span, 1), MAX_SPAN)
        if self.merge == "continue":
            text, shown = self._above.get(self._offset, ("", 1))
        else:
            text, shown = "\n".join(self.paragraphs), span
        self._cells.extend([text] * shown)
        self._row[self._offset] = (text, shown)
        self._offset += span

    def end_row(self) -> None:
        self.table.rows.append(self._cells)
        self._above = self._row


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


class _BodyReader:
    """expat callbacks keeping the path of open elements (local names; None outside WordprocessingML)."""

    def __init__(self, emit: Callable[[Paragraph | Table], None]) -> None:
        self._emit = emit
        self._path: list[str | None] = []
        self._paragraph: Paragraph | None = None
        self._cells: _Cells | None = None
        self._depth = 0  # the path length at which the current paragraph's element sits
        self._elements = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        tag = name[_W_LENGTH:] if name.startswith(_W_PREFIX) else None
        path = self._path
        path.append(tag)
        depth = len(path)
        self._elements += 1
        if self._elements > MAX_ELEMENTS:
            raise FileSkipped(f"DOCX of over {MAX_ELEMENTS:,} XML elements (empty paragraphs or cells by the million)")
        if depth == 3 and path[1] == "body":
            if tag == "p":
                self._paragraph, self._depth = Paragraph(), 3
            elif tag == "tbl":
                self._cells = _Cells()
        elif self._cells is not None and depth > 3:
            self._table_start(tag, attrs, depth)
        if self._paragraph is not None and depth > self._depth:
            self._paragraph_start(tag, attrs, depth)

    def _table_start(self, tag: str | None, attrs: dict[str, str], depth: int) -> None:
        cells, path = self._cells, self._path
        assert cells is not None
        if depth == 4 and tag == "tr":
            cells.start_row()
        elif path[3] != "tr":
            return
        elif depth == 5 and tag == "tc":
            cells.start_cell()
        elif depth == 6 and path[4] == "tc" and tag == "p":
            self._paragraph, self._depth = Paragraph(), 6
        elif depth == 7 and path[5] == "tcPr" and path[4] == "tc":
            if tag == "gridSpan":
                cells.span = _int(attrs.get(f"{W} val"), 1)
            elif tag == "vMerge":
                cells.merge = attrs.get(f"{W} val", "continue")
        elif depth == 6 and path[4] == "trPr" and tag == "gridBefore":
            cells.skip_before(max(_int(attrs.get(f"{W} val"), 0), 0))

    def _paragraph_start(self, tag: str | None, attrs: dict[str, str], depth: int) -> None:
        paragraph, path, base = self._paragraph, self._path, self._depth
        assert paragraph is not None
        if depth == base + 2 and tag == "pStyle" and path[base] == "pPr":
            paragraph.style_id = attrs.get(f"{W} val", "")
            return
        in_run = (depth == base + 2 and path[base] == "r") or (
            depth == base + 3 and path[base] == "hyperlink" and path[base + 1] == "r")
        if not in_run or tag is None:
            return
        if tag == "br":
            paragraph.parts.append("\n" if attrs.get(f"{W} type", "textWrapping") == "textWrapping" else "")
        elif tag in _RUN_TEXT:
            paragraph.parts.append(_RUN_TEXT[tag])

    def text(self, data: str) -> None:
        paragraph, path = self._paragraph, self._path
        if paragraph is None or path[-1] != "t":
            return
        depth, base = len(path), self._depth
        if (depth == base + 2 and path[base] == "r") or (
                depth == base + 3 and path[base] == "hyperlink" and path[base + 1] == "r"):
            paragraph.parts.append(data)

    def end(self, name: str) -> None:
        path = self._path
        depth = len(path)
        tag = path.pop()
        if self._paragraph is not None and depth == self._depth:
            if self._cells is not None and depth == 6:
                self._cells.paragraphs.append(self._paragraph.text)
            elif self._paragraph.parts:  # a paragraph without text adds nothing, whatever its style
                self._emit(self._paragraph)
            self._paragraph = None
        elif self._cells is not None:
            if depth == 3:
                self._emit(self._cells.table)
                self._cells = None
            elif depth == 5 and tag == "tc" and path[3] == "tr":
                self._cells.end_cell()
            elif depth == 4 and tag == "tr":
                self._cells.end_row()


def _refuse_entities(*_: object) -> None:
    raise FileSkipped("DOCX part declares XML entities (Word writes none)")


def parse(stream: IO[bytes], start: Callable[[str, dict[str, str]], None], end: Callable[[str], None],
          text: Callable[[str], None]) -> None:
    """Feed an XML part through expat with namespaces as `uri local` names; raise FileSkipped when it is
    not well-formed or declares entities."""
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.EntityDeclHandler = _refuse_entities
    try:
        while chunk := stream.read(_READ_SIZE):
            parser.Parse(chunk, False)
        parser.Parse(b"", True)
    except xml.parsers.expat.ExpatError as exc:
        raise FileSkipped(f"damaged DOCX ({exc})") from exc


def read_body(stream: IO[bytes], emit: Callable[[Paragraph | Table], None]) -> None:
    """Hand each paragraph and table of a document part's body to emit, in order, as it ends."""
    reader = _BodyReader(emit)
    parse(stream, reader.start, reader.end, reader.text)
