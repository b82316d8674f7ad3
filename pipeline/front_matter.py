"""Front matter: a leading YAML (`---` ... `---`) or TOML (`+++` ... `+++`) block of document fields.

The block is split off before chunking, so its lines are never indexed as body text. Its fields
are kept as a JSON-able mapping (dates and times become ISO strings); `title`, when it is a
non-empty string, becomes the document's title. A block that does not parse, or parses to
something other than a mapping, is left in the text (indexed as text, never lost) and reported
with its reason. A block that is opened but never closed is not front matter at all: the text is
indexed as written, with no report.

A block is bounded before anything is built from it, since a tree's files are written by anyone: at
most MAX_BLOCK_CHARS characters, MAX_DEPTH levels of nesting, and MAX_VALUES values with every
YAML alias expanded (a 381-byte "billion laughs" block would otherwise grow without bound); a
recursive alias (`a: &a [*a]`) is refused by name. Non-finite numbers (`.nan`, `.inf`) are kept as
their text, so the fields are always valid JSON.

filter_values() states the fields as the (key, value) pairs an equality filter compares: a scalar
as its text (booleans lower-case, as YAML and TOML write them), a list as one pair per scalar item.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

JSONValue = str | int | float | bool | None | list["JSONValue"] | dict[str, "JSONValue"]

MAX_BLOCK_CHARS = 1024 * 1024
MAX_DEPTH = 32
MAX_VALUES = 100_000

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it
_FENCES = {"---": "yaml", "+++": "toml"}
_CLOSE = {"yaml": re.compile(r"^(?:---|\.\.\.)[ \t]*$"), "toml": re.compile(r"^\+\+\+[ \t]*$")}


@dataclass(frozen=True)
class FrontMatter:
    """The document text after its front matter, the fields, and why a block was not parsed."""

    body: str
    fields: dict[str, JSONValue] = field(default_factory=dict)
    error: str | None = None

    @property
    def title(self) -> str | None:
        """The `title` field when it is a non-empty string (stripped)."""
        value = self.fields.get("title")
        return value.strip() if isinstance(value, str) and value.strip() else None


def split(text: str) -> FrontMatter:
    """Split a leading front-matter block off text (CRLF and a BOM already handled by the caller or here)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    first, sep, rest = text.partition("\n")
    kind = _FENCES.get(first.rstrip(" \t"))
    if kind is None or not sep:
        return FrontMatter(text)
    lines = rest.split("\n")
    for end, line in enumerate(lines):
        if _CLOSE[kind].match(line):
            block = "\n".join(lines[:end])
            body = "\n".join(lines[end + 1:])
            break
    else:
        return FrontMatter(text)  # never closed: a horizontal rule or text, not front matter
    try:
        parsed = _parse(kind, block)
    except ValueError as exc:
        return FrontMatter(text, error=f"{kind.upper()} front matter not parsed ({exc}); indexed as text")
    return FrontMatter(body, parsed)


def _parse(kind: str, block: str) -> dict[str, JSONValue]:
    """The block's mapping; ValueError naming why it is not one (or why it was refused)."""
    if len(block) > MAX_BLOCK_CHARS:
        raise ValueError(f"the block has {len(block):,} characters, more than the {MAX_BLOCK_CHARS:,} read")
    if kind == "toml":
        try:
            loaded: object = tomllib.loads(block)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(str(exc)) from None
        except RecursionError:
            raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep") from None
    else:
        loaded = _load_yaml(block) if block.strip() else {}
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise ValueError(f"it is a {type(loaded).__name__}, not a mapping of fields")
    return {str(k): _plain(v) for k, v in loaded.items()}


def _load_yaml(block: str) -> object:
    """safe_load within the bounds, parsed once: the node graph is measured (nesting, aliases expanded) before
    anything is constructed from it."""
    loader = _LOADER(block)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {}, set())
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or type(exc).__name__
        where = f" at line {mark.line + 2}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{problem}{where}") from None
    except RecursionError:  # PyYAML's pure-Python composer, where libyaml is missing, recurses per level
        raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, seen: dict[int, tuple[int, int]], path: set[int],
                   depth: int = 1) -> tuple[int, int]:
    """(values, levels) the node at `depth` stands for once every alias is expanded; ValueError past the bounds
    or on a cycle. The descent stops at MAX_DEPTH, so it never recurses deeper than that."""
    key = id(node)
    if key in seen:
        size, height = seen[key]
        if depth + height - 1 > MAX_DEPTH + 1:
            raise ValueError(f"its aliases nest more than {MAX_DEPTH} levels deep")
        return size, height
    if key in path:
        raise ValueError("a YAML alias refers to the value that contains it (a recursive alias)")
    size, height = 1, 1
    if isinstance(node, yaml.CollectionNode):
        if depth > MAX_DEPTH:
            raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep")
        path.add(key)
        children = node.value if isinstance(node, yaml.SequenceNode) else [c for pair in node.value for c in pair]
        for child in children:
            values, levels = _expanded_size(child, seen, path, depth + 1)
            size, height = size + values, max(height, levels + 1)
            if size > MAX_VALUES:
                raise ValueError(f"its aliases expand to more than {MAX_VALUES:,} values")
        path.discard(key)
    seen[key] = (size, height)
    return size, height


def _plain(value: object) -> JSONValue:
    """A parsed value as JSON can hold it: dates and times as ISO text, other objects as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v) for v in value]
    return str(value)


def scalar_text(value: JSONValue) -> str | None:
    """The text an equality filter compares a scalar by; None for a list, a mapping or null."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def filter_values(fields: Mapping[str, JSONValue]) -> list[tuple[str, str]]:
    """(key, value) pairs to store for equality filters: scalars, and each scalar item of a list."""
    pairs: dict[tuple[str, str], None] = {}  # ordered and de-duplicated in linear time
    for key, value in fields.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            text = scalar_text(item)
            if text is not None:
                pairs[(key, text)] = None
    return list(pairs)


def to_json(fields: Mapping[str, JSONValue]) -> str | None:
    """The fields as stored in documents.meta (None when there are none)."""
    return json.dumps(fields, ensure_ascii=False, sort_keys=False) if fields else None
