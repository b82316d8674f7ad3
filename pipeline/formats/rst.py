"""A reStructuredText file through docutils: section titles as headings, their ids as anchors.

The doctree docutils builds is walked into an Outline: paragraphs, lists, definition and field
lists, tables (one row a line), literal and code blocks (fenced, with their language), and the
text of admonitions and other directives. Roles are rendered as their text; the common Sphinx
roles and directives (which plain docutils does not know) are registered as text, so a Sphinx
tree does not read as a wall of errors. A malformed file indexes what docutils recovers, and the
warnings it reported are counted in the run summary; no input makes it crash (an error docutils
raises is a skip with its reason). Includes, raw blocks and file insertion are off. A line may be as
long as the file (docutils' own limit of 10,000 characters turned the whole file into one error
node), and a table too long for docutils' table parser is read as a literal block
(pipeline/formats/rst_tables.py).
"""

from __future__ import annotations

import io
import re
from typing import Any

from docutils import nodes
from docutils.core import publish_doctree
from docutils.parsers.rst import Directive, directives, roles

from config.errors import FileSkipped
from pipeline.formats.decoding import decode
from pipeline.formats.outline import Extracted, Outline, one_line
from pipeline.formats.rst_tables import bound_tables

MAX_INDENT = 240  # a line indented deeper is nesting no document needs (and docutils recurses on it)
MAX_DEPTH = 60  # doctree levels walked; deeper content is kept as flat text
LINE_LENGTH_LIMIT = 1024 * 1024  # the rst file limit: docutils' default (10,000) made one long line an error
# node in place of the whole document
_WARNING = re.compile(r"\((?:WARNING|ERROR|SEVERE)/[234]\)")
_ROLE = re.compile(r":[\w.+-]+(?::[\w.+-]+)*:`([^`]*)`")
_TARGET = re.compile(r"^(.*?)\s*<[^<>]*>$", re.DOTALL)

SPHINX_ROLES = (
    "ref", "doc", "term", "class", "func", "meth", "mod", "attr", "obj", "data", "const", "exc", "envvar",
    "option", "program", "file", "command", "kbd", "guilabel", "menuselection", "samp", "download", "numref",
    "any", "keyword", "dfn", "mailheader", "makevar", "manpage", "mimetype", "newsgroup", "regexp", "token",
    "py:class", "py:func", "py:meth", "py:mod", "py:attr", "py:obj", "py:data", "py:const", "py:exc",
)
IGNORED_DIRECTIVES = (
    "toctree", "automodule", "autoclass", "autofunction", "automethod", "autoattribute", "autodata",
    "autoexception", "autosummary", "literalinclude", "currentmodule", "module", "highlight", "index",
    "sectionauthor", "codeauthor", "tabularcolumns", "testsetup", "testcleanup", "graphviz", "digraph",
    "inheritance-diagram", "py:module", "py:currentmodule",
)
CONTENT_DIRECTIVES = (
    "versionadded", "versionchanged", "deprecated", "seealso", "only", "glossary", "centered", "hlist",
    "tabs", "tab", "group-tab", "code-tab", "tab-set", "tab-item", "card", "grid", "grid-item", "grid-item-card",
    "dropdown", "productionlist", "function", "class", "method", "attribute", "exception", "describe",
    "object", "envvar", "program", "option", "py:function", "py:class", "py:method", "py:attribute", "py:data",
    "py:exception", "py:decorator", "py:property", "testcode", "testoutput", "doctest", "data", "decorator",
    "property", "staticmethod", "classmethod", "confval", "event", "setting",
)


class _AnyOptions(dict[str, Any]):
    """An option spec that accepts every option as text (the directives registered here ignore them)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Any:
        return directives.unchanged


class _Content(Directive):
    """A directive whose arguments and content are kept as text (Sphinx's, unknown to docutils)."""

    optional_arguments = 10
    final_argument_whitespace = True
    has_content = True
    option_spec = _AnyOptions()

    def run(self) -> list[nodes.Node]:
        box = nodes.container()
        if self.arguments:
            box += nodes.paragraph(text=" ".join(self.arguments))
        if self.content:
            self.state.nested_parse(self.content, self.content_offset, box)
        return [box]


class _Ignored(_Content):
    """A directive that holds no prose (a toctree, an autodoc call): nothing is kept."""

    def run(self) -> list[nodes.Node]:
        return []


class _Code(_Content):
    """`code-block`/`sourcecode`/`code` with Sphinx's options too (`:caption:`, `:emphasize-lines:`)."""

    def run(self) -> list[nodes.Node]:
        language = self.arguments[0].split()[0] if self.arguments else ""
        return [nodes.literal_block("\n".join(self.content), "\n".join(self.content),
                                    classes=["code", language] if language else ["code"])]


def _text_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
               options: Any = None, content: Any = None) -> tuple[list[nodes.Node], list[Any]]:
    return [nodes.Text(_role_text(text))], []


def _role_text(text: str) -> str:
    """The shown text of a role's body: `Title <target>` is Title, `~a.b.c` is c."""
    match = _TARGET.match(text)
    shown = match.group(1) if match and match.group(1) else text
    if shown.startswith("~"):
        shown = shown[1:].rsplit(".", 1)[-1]
    return shown.lstrip("!")


for _name in SPHINX_ROLES:
    roles.register_local_role(_name, _text_role)  # type: ignore[arg-type]
for _name in IGNORED_DIRECTIVES:
    directives.register_directive(_name, _Ignored)
for _name in CONTENT_DIRECTIVES:
    directives.register_directive(_name, _Content)
for _name in ("code-block", "sourcecode", "code"):
    directives.register_directive(_name, _Code)

_SETTINGS = {
    "report_level": 2, "halt_level": 5, "file_insertion_enabled": False, "raw_enabled": False,
    "doctitle_xform": False, "sectsubtitle_xform": False, "docinfo_xform": False, "syntax_highlight": "none",
    "input_encoding": "unicode", "_disable_config": True, "exit_status_level": 5, "traceback": True,
    "line_length_limit": LINE_LENGTH_LIMIT,
}
_DROPPED = (nodes.system_message, nodes.comment, nodes.substitution_definition, nodes.target, nodes.raw,
            nodes.image, nodes.pending, nodes.meta)
_PARAGRAPHS = (nodes.paragraph, nodes.line_block, nodes.attribution, nodes.rubric, nodes.caption, nodes.title,
               nodes.subtitle, nodes.term, nodes.field_name, nodes.label)


def inline(node: nodes.Node) -> str:
    """A node's text with roles docutils did not know rendered as their text."""
    return _ROLE.sub(lambda m: _role_text(m.group(1)), node.astext())


class _Walker:
    def __init__(self) -> None:
        self.out = Outline()

    def walk(self, node: nodes.Node, level: int, depth: int) -> None:
        if self._cut(node, depth):
            return
        if isinstance(node, nodes.section):
            self._section(node, level, depth)
        elif isinstance(node, (nodes.literal_block, nodes.doctest_block)):
            self._code(node)
        elif isinstance(node, _PARAGRAPHS):
            self.out.para(inline(node))
        elif isinstance(node, nodes.table):
            rows = [" | ".join(one_line(inline(e)) for e in row.children) for row in node.findall(nodes.row)]
            self.out.para("\n".join(rows))
        elif isinstance(node, nodes.list_item):
            self._item(node, level, depth)
        elif isinstance(node, nodes.Admonition):
            name = str(getattr(node, "tagname", ""))
            self.out.para(name.capitalize() + ":" if name != "admonition" else "")
            self._children(node, level, depth)
        elif isinstance(node, nodes.Text):
            self.out.para(str(node))
        elif isinstance(node, nodes.Element):
            self._children(node, level, depth)

    def _cut(self, node: nodes.Node, depth: int) -> bool:
        """Whether the walk stops at node: dropped, or past MAX_DEPTH (its text kept as one paragraph)."""
        if isinstance(node, _DROPPED):
            return True
        if depth > MAX_DEPTH:
            self.out.para(inline(node))
            return True
        return False

    def _section(self, node: nodes.section, level: int, depth: int) -> None:
        title = node.next_node(nodes.title)
        ids = node.get("ids") or []
        if title is not None and title.parent is node:
            self.out.heading(level, inline(title), ids[0] if ids else "")
        for child in node.children:
            if child is not title:
                self.walk(child, level + 1, depth + 1)

    def _code(self, node: nodes.Element) -> None:
        given: list[str] = list(node.get("classes", []))
        classes = [c for c in given if c != "code"]
        self.out.code(node.astext(), classes[0] if classes else "")

    def _children(self, node: nodes.Node, level: int, depth: int) -> None:
        for child in node.children:
            self.walk(child, level, depth + 1)

    def _item(self, node: nodes.Element, level: int, depth: int) -> None:
        first = node.children[0] if node.children else None
        if isinstance(first, nodes.paragraph):
            self.out.para("- " + one_line(inline(first)))
            rest = node.children[1:]
        else:
            rest = node.children
        for child in rest:
            self.walk(child, level, depth + 1)


def extract(data: bytes) -> Extracted:
    """Parse data with docutils and walk its doctree; raise FileSkipped when it cannot be read."""
    text = decode(data)
    if any(len(line) - len(line.lstrip()) > MAX_INDENT for line in text.splitlines()):
        raise FileSkipped(f"nested too deeply (a line indented over {MAX_INDENT} columns)")
    stream = io.StringIO()
    try:
        tree = publish_doctree(bound_tables(text), settings_overrides={**_SETTINGS, "warning_stream": stream})
        walker = _Walker()
        for child in tree.children:
            walker.walk(child, 1, 1)
    except RecursionError as exc:
        raise FileSkipped("nested too deeply for docutils") from exc
    except FileSkipped:
        raise
    except Exception as exc:  # a third-party parser on untrusted input: any failure is this file's skip
        raise FileSkipped(f"docutils could not read it: {one_line(str(exc))[:200]}") from exc
    warnings = len(_WARNING.findall(stream.getvalue()))
    note = f"docutils reported {warnings} warning(s); indexed what it recovered" if warnings else None
    return walker.out.result(front_matter_error=note, warnings=warnings)
