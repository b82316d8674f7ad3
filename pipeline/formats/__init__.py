"""The format registry: which extensions are indexed, how large each may be, and who reads them.

One owner for the list of extensions: the walker, the watcher, URL ingestion and `index --dry-run`
ask this module. Each format names the extractor (a module of this package, imported only when a
file of that format is read, so read commands never load docutils, pypdf or expat) that turns
a file's bytes into the structure the markdown path produces (pipeline/formats/outline.py); markdown
and text have theirs too (plain.py). `Format.outline` hands that over as a pipeline.outline.Outline:
sections with heading path, level, anchor and blocks, which pipeline.chunker.pack turns into chunks.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from config.errors import FileSkipped
from pipeline import chunker, markdown_sections
from pipeline.formats.outline import Extracted
from pipeline.outline import Outline

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Format:
    """One indexed format: its config name, extensions, size limit, extractor and library."""

    name: str
    extensions: tuple[str, ...]
    max_bytes: int
    extractor: str  # the module of pipeline.formats holding extract(data: bytes) -> Extracted
    library: str | None = None  # the distribution it reads with (for doctor), None for the stdlib
    keeps: str = ""
    version: str = "1"  # the extractor's version: raise it when the same bytes would give other text

    def policy(self) -> str:
        """The chunk policy of this format's documents: `<format>:<extractor version>+chunk:<chunker version>`."""
        return f"{self.name}:{self.version}+chunk:{chunker.VERSION}"

    def extract(self, data: bytes) -> Extracted:
        """The extracted document of data; raise FileSkipped when it cannot be read."""
        try:
            module = importlib.import_module(f"pipeline.formats.{self.extractor}")
        except ImportError as exc:
            missing = self.library or exc.name
            raise FileSkipped(f"{missing} is not installed, so {self.name} files are not read") from exc
        extracted: Extracted = module.extract(data)
        return extracted

    def outline(self, data: bytes) -> Outline:
        """The outline of data: its extraction read into sections, each heading's anchor kept; raise
        FileSkipped when it cannot be read. pipeline.chunker.pack(outline.sections) gives the chunks."""
        extracted = self.extract(data)
        notes = (extracted.front_matter_error,) if extracted.front_matter_error else ()
        read = Outline(extracted.title, markdown_sections.sections(extracted.text), extracted.fields, notes,
                       extracted.warnings)
        anchors = []
        for heading, anchor in extracted.anchors:
            parsed = markdown_sections.parse_heading("# " + heading)
            anchors.append((parsed[1] if parsed else heading, anchor))
        return read.with_anchors(anchors)


FORMATS: tuple[Format, ...] = (
    Format("markdown", (".md", ".markdown"), 512 * KIB, "plain", keeps="as written: ATX headings, fences"),
    Format("text", (".txt", ".text"), 512 * KIB, "plain", keeps="as written"),
    Format("html", (".html", ".htm"), 4 * MIB, "html_file",
           keeps="h1-h6 headings, text, lists, tables, pre; script/style/nav/footer dropped"),
    Format("mdx", (".mdx",), 512 * KIB, "mdx", keeps="markdown; import/export lines and JSX tags dropped"),
    Format("rst", (".rst", ".rest"), MIB, "rst", "docutils",
           keeps="section titles, paragraphs, lists, tables, directive text; roles as text",
           version="2"),  # 2: a table over 2,000 lines is a literal block (rst_tables.py)
    Format("asciidoc", (".adoc", ".asciidoc"), MIB, "asciidoc", keeps="= headings, paragraphs, listings, tables"),
    Format("org", (".org",), MIB, "org", keeps="* headings, #+TITLE, paragraphs, src blocks"),
    Format("ipynb", (".ipynb",), 16 * MIB, "notebook",
           keeps="markdown cells, code cells fenced, short text outputs; no images"),
    Format("pdf", (".pdf",), 32 * MIB, "pdf", "pypdf", keeps="the text layer, one section per page"),
    Format("docx", (".docx",), 16 * MIB, "word", keeps="Heading 1-6, paragraphs, tables as rows"),
)
BY_NAME = {f.name: f for f in FORMATS}
BY_EXTENSION = {ext: f for f in FORMATS for ext in f.extensions}
EXTENSIONS = frozenset(BY_EXTENSION)
PLAIN = frozenset({"markdown", "text"})  # read as written (formats/plain.py: front matter, then the body)

def extension(path: str) -> str:
    """The lowercased extension of path ('' when none)."""
    return os.path.splitext(path)[1].lower()


def format_of(path: str) -> Format | None:
    """The format that reads path, by its extension; None when no format does."""
    return BY_EXTENSION.get(extension(path))


def policy_of(path: str) -> str:
    """The chunk policy a document of path is built with today (the markdown one for no format)."""
    fmt = format_of(path)
    return (fmt if fmt is not None else BY_NAME["markdown"]).policy()


def current_policy(policy: str) -> str | None:
    """Today's policy of the format a stored policy names; None when no format of that name exists."""
    fmt = BY_NAME.get(policy.partition(":")[0])
    return None if fmt is None else fmt.policy()


def size_limit(path: str) -> int:
    """The largest file of path's format that is read (the markdown limit for no format)."""
    fmt = format_of(path)
    return fmt.max_bytes if fmt is not None else BY_NAME["markdown"].max_bytes


def extensions_of(names: Iterable[str]) -> frozenset[str]:
    """The extensions of the formats named (unknown names are ignored: config validated them)."""
    return frozenset(ext for name in names if name in BY_NAME for ext in BY_NAME[name].extensions)


_PAGE = re.compile(r"Page ([1-9][0-9]{0,5})")


def page_anchor(path: str, heading: str) -> str | None:
    """`page=N` for a PDF's `Page N` section (the fragment PDF viewers open), None for anything else."""
    if extension(path) != ".pdf":
        return None
    match = _PAGE.fullmatch(heading)
    return f"page={match.group(1)}" if match else None


def library_version(fmt: Format) -> str:
    """The installed version of the format's library, 'stdlib' when it needs none, 'missing' when absent."""
    from importlib import metadata  # doctor alone asks; a search mapping citations never loads it

    if fmt.library is None:
        return "stdlib"
    try:
        return metadata.version(fmt.library)
    except metadata.PackageNotFoundError:
        return "missing"
