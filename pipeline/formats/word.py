"""A Word document (.docx): Heading 1-6 styles as headings, tables as rows, read as python-docx reads them.

A .docx is a zip: its members' declared sizes are checked before anything is expanded, so a zip
bomb is a skip. The styles part is read once (style id -> name); the body is streamed through
pipeline/formats/word_xml.py, so no paragraph or cell costs a style lookup or a tree walk (through
python-docx, 10 M empty paragraphs took hours). The title is the document's core Title property,
else the Title style paragraph, else the first heading.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile

from config.errors import FileSkipped
from pipeline.formats.outline import Extracted, Outline, one_line
from pipeline.formats.word_xml import Paragraph, Table, W, parse, read_body

MAX_EXPANDED_BYTES = 64 * 1024 * 1024
MAX_MEMBERS = 5000
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def check_zip(data: bytes) -> None:
    """Raise FileSkipped unless data is a zip with word/document.xml that expands within bounds."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise FileSkipped(f"damaged DOCX (not a zip: {exc})") from exc
    if len(members) > MAX_MEMBERS:
        raise FileSkipped(f"DOCX with too many parts ({len(members)} > {MAX_MEMBERS})")
    expanded = sum(m.file_size for m in members)
    if expanded > MAX_EXPANDED_BYTES:
        raise FileSkipped(f"DOCX expands to {expanded} bytes (> {MAX_EXPANDED_BYTES}): a zip bomb or a huge file")
    if "word/document.xml" not in {m.filename for m in members}:
        raise FileSkipped("not a Word document (no word/document.xml)")


class _Styles:
    """The names of a styles part's paragraph styles by id, and the default one, read once."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.default = ""
        self._style: tuple[str, str, bool] | None = None  # id, type, default of the open w:style
        self._name = ""
        self._depth = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self._depth += 1
        if name == f"{W} style" and self._depth == 2:
            default = attrs.get(f"{W} default", "0").lower() in ("1", "true", "on")
            self._style = (attrs.get(f"{W} styleId", ""), attrs.get(f"{W} type", "paragraph"), default)
            self._name = ""
        elif name == f"{W} name" and self._depth == 3 and self._style is not None:
            self._name = attrs.get(f"{W} val", "")

    def end(self, name: str) -> None:
        self._depth -= 1
        if self._depth == 1 and self._style is not None:
            style_id, kind, default = self._style
            if kind == "paragraph":
                self.names.setdefault(style_id, self._name)  # the first of an id wins, as python-docx's lookup
                if default:
                    self.default = self._name  # the last default wins, as python-docx's default_for
            self._style = None

    def name(self, style_id: str) -> str:
        """The name of a paragraph's style: its own, else the default paragraph style's."""
        return self.names.get(style_id, self.default) if style_id else self.default


_RELATIONSHIP = re.compile(r"""<Relationship\b[^>]*>""")
_ATTRIBUTE = re.compile(r"""(\w+)\s*=\s*("[^"]*"|'[^']*')""")


def _target(archive: zipfile.ZipFile, rels: str, kind: str, base: str, fallback: str) -> str:
    """The part a relationships part names for a relationship type ending in kind (fallback when none)."""
    try:
        text = archive.read(rels).decode("utf-8", "replace")
    except KeyError:
        return fallback
    for element in _RELATIONSHIP.findall(text):
        attributes = {k: v[1:-1] for k, v in _ATTRIBUTE.findall(element)}
        if attributes.get("Type", "").endswith(kind) and attributes.get("TargetMode") != "External":
            return posixpath.normpath(posixpath.join(base, attributes.get("Target", ""))).lstrip("/")
    return fallback


def _styles(archive: zipfile.ZipFile) -> _Styles:
    styles = _Styles()
    part = _target(archive, "word/_rels/document.xml.rels", "/styles", "word", "word/styles.xml")
    if part in archive.namelist():
        with archive.open(part) as stream:
            parse(stream, styles.start, styles.end, lambda _: None)
    return styles


def _core_title(archive: zipfile.ZipFile) -> str:
    part = _target(archive, "_rels/.rels", "/core-properties", "", "docProps/core.xml")
    if part not in archive.namelist():
        return ""
    found: list[str] = []
    inside = [0, False]  # depth, in the first dc:title

    def start(name: str, attrs: dict[str, str]) -> None:
        inside[0] += 1
        if inside[0] == 2 and name == "http://purl.org/dc/elements/1.1/ title" and not found:
            found.append("")
            inside[1] = True

    def end(name: str) -> None:
        inside[0] -= 1
        inside[1] = False

    def text(data: str) -> None:
        if inside[1]:
            found[0] += data

    with archive.open(part) as stream:
        parse(stream, start, end, text)
    return found[0] if found else ""


def extract(data: bytes) -> Extracted:
    """The outline of a .docx under the rules in the module docstring."""
    check_zip(data)
    out = Outline()
    styled_title: list[str] = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            styles = _styles(archive)
            core_title = _core_title(archive)

            def add(block: Paragraph | Table) -> None:
                if isinstance(block, Table):
                    rows = [" | ".join(one_line(cell) for cell in row) for row in block.rows]
                    out.para("\n".join(row for row in rows if row.strip(" |")))
                    return
                text = block.text
                style = styles.name(block.style_id)
                heading = _HEADING_STYLE.match(style)
                if heading:
                    out.heading(min(int(heading.group(1)), 6), text)
                elif style.lower() == "title" and not styled_title and text.strip():
                    styled_title.append(text)
                else:
                    out.para(text)

            with archive.open("word/document.xml") as stream:
                read_body(stream, add)
    except FileSkipped:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError) as exc:  # a damaged member
        raise FileSkipped(f"damaged DOCX ({one_line(str(exc))[:160] or type(exc).__name__})") from exc
    return out.result(core_title or (styled_title[0] if styled_title else None))
