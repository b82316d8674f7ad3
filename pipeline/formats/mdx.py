"""An .mdx file: front matter as in markdown, import/export lines and JSX tags dropped, then markdown.

Outside fenced code and code spans, a top-level `import`/`export` statement is dropped whole (over
several lines until its braces close), a JSX tag (`<Tabs items={[...]}>`, `</Tabs>`, `<Note />`,
`<>`) is dropped with its props, its text children are kept, and `{/* comments */}` and bare
`{expressions}` go. What remains is read by the markdown path.
"""

from __future__ import annotations

import re

from pipeline.chunker import fence_end
from pipeline.formats.decoding import decode
from pipeline.formats.outline import Extracted, check_size
from pipeline.front_matter import split as split_front_matter

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")  # an opening fence, as pipeline/chunker.py reads them
_STATEMENT = re.compile(r"^(?:import|export)\b")
_TAG_START = re.compile(r"<(?:/?[A-Za-z][\w.:-]*|/?>)")
_BACKTICKS = re.compile("`+")
_CLOSE_QUOTE = {'"': '"', "'": "'", "`": "`"}


def _statement_end(lines: list[str], i: int) -> int:
    """The index after an import/export statement starting at line i (its braces balanced)."""
    depth = 0
    while i < len(lines):
        depth += lines[i].count("{") + lines[i].count("(") - lines[i].count("}") - lines[i].count(")")
        i += 1
        if depth <= 0:
            break
    return i


def _skip_tag(text: str, start: int) -> int:
    """The index after the JSX tag opening at start: quotes and {...} props skipped over."""
    i, depth, quote = start + 1, 0, ""
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in _CLOSE_QUOTE and (depth or text[i - 1] == "="):
            quote = _CLOSE_QUOTE[char]
        elif char == "{":
            depth += 1
        elif char == "}":
            depth = max(depth - 1, 0)
        elif char == ">" and depth == 0:
            return i + 1
        i += 1
    return len(text)


def _skip_braces(text: str, start: int) -> int:
    """The index after the {...} expression opening at start."""
    depth, i = 0, start
    while i < len(text):
        depth += (text[i] == "{") - (text[i] == "}")
        i += 1
        if depth == 0:
            break
    return i


def strip_jsx(text: str) -> str:
    """Prose with JSX tags and expressions removed, code spans kept as written.

    A run of backticks is measured where it stands and its closing run looked for once per length: a
    length with no closing run after one place has none after any later place either.
    """
    out: list[str] = []
    unclosed: set[int] = set()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "`":
            run = _BACKTICKS.match(text, i).end() - i  # type: ignore[union-attr]  # text[i] is a backtick
            close = -1 if run in unclosed else text.find("`" * run, i + run)
            if close < 0:
                unclosed.add(run)
            end = close + run if close >= 0 else i + run
            out.append(text[i:end])
            i = end
        elif char == "<" and _TAG_START.match(text, i):
            i = _skip_tag(text, i)
        elif char == "{":
            i = _skip_braces(text, i)
        else:
            out.append(char)
            i += 1
    return "".join(out)


def to_markdown(body: str) -> str:
    """The markdown of an MDX body under the rules in the module docstring."""
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    prose: list[str] = []

    def flush() -> None:
        if prose:
            stripped = strip_jsx("\n".join(prose)).split("\n")
            kept.extend(line if line.strip() else "" for line in stripped)
            prose.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):  # code is kept as written, JSX-looking or not
            flush()
            end, _ = fence_end(lines, i)
            kept.extend(lines[i:end])
            i = end
            continue
        if _STATEMENT.match(line):
            flush()
            i = _statement_end(lines, i)
            continue
        prose.append(line)
        i += 1
    flush()
    return "\n".join(line.strip() if line.lstrip().startswith("#") else line for line in kept)


def extract(data: bytes) -> Extracted:
    """Front matter as in markdown; the body's JSX dropped; the rest is markdown."""
    matter = split_front_matter(decode(data))
    return Extracted(title=matter.title, text=check_size(to_markdown(matter.body)), fields=matter.fields,
                     front_matter_error=matter.error)
