"""Citation rules: validate each `{pattern, replace}` at config load and compile it once.

A replacement expands `$1`, `$name`, `${name}` and `${1}`, and `$$` writes a literal dollar. A name
is read greedily as letters, digits and underscores, so `$1x` names a group `1x` (Go's reading) and
is rejected unless the pattern has one. Besides the pattern's own groups, a replacement may use the
reserved names ordinal, heading and anchor; a capture group of the same name wins. Rendering lives
in query/citations.py; this module only parses, checks and compiles.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from config.errors import ConfigError
from config.settings import CitationSettings

RESERVED = ("ordinal", "heading", "anchor")

_NAME = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class Literal:
    """Text copied into the citation as written."""

    text: str


@dataclass(frozen=True)
class Capture:
    """A capture group of the rule's pattern, by number (0 is the whole match)."""

    group: int


@dataclass(frozen=True)
class Reserved:
    """One of the reserved values: ordinal, heading or anchor."""

    name: str


Token = Literal | Capture | Reserved


@dataclass(frozen=True)
class CitationRule:
    """One validated rule: its compiled pattern, parsed template and the replacement as written."""

    pattern: re.Pattern[str]
    template: tuple[Token, ...]
    source: str


class _TemplateError(Exception):
    """A replacement that cannot be parsed or names something the pattern lacks."""


def quoted(text: str) -> str:
    """Text in double quotes with backslashes and quotes escaped, as Go's %q prints it."""
    return json.dumps(text, ensure_ascii=False)


def compile_rules(rules: Sequence[CitationSettings], where: str | None = None) -> tuple[CitationRule, ...]:
    """Validate and compile rules in order; raise ConfigError naming the rule as citations[i]."""
    prefix = f"{where}: " if where else ""
    return tuple(_compile_rule(rule, f"{prefix}invalid knowledge.citations[{i}]") for i, rule in enumerate(rules))


def _compile_rule(rule: CitationSettings, label: str) -> CitationRule:
    if rule.pattern == "":
        raise ConfigError(
            f'{label} pattern "": an empty pattern matches every path and leaves every later rule dead'
        )
    try:
        pattern = re.compile(rule.pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise ConfigError(f"{label} pattern {quoted(rule.pattern)}: does not compile: {exc}") from exc
    if rule.replace == "":
        raise ConfigError(
            f'{label} replace "": an empty replacement maps every path the pattern matches to nothing'
        )
    try:
        template = _parse_template(rule.replace, pattern)
    except _TemplateError as exc:
        raise ConfigError(f"{label} replace {quoted(rule.replace)}: {exc}") from None
    return CitationRule(pattern=pattern, template=template, source=rule.replace)


def _parse_template(replace: str, pattern: re.Pattern[str]) -> tuple[Token, ...]:
    tokens: list[Token] = []
    i = 0
    while i < len(replace):
        dollar = replace.find("$", i)
        if dollar < 0:
            tokens.append(Literal(replace[i:]))
            break
        tokens.append(Literal(replace[i:dollar]))
        name, written, i = _read_reference(replace, dollar)
        tokens.append(Literal("$") if name is None else _resolve(name, written, pattern))
    return _merge_literals(tokens)


def _read_reference(replace: str, dollar: int) -> tuple[str | None, str, int]:
    """(name or None for `$$`, the reference as written, index after it) for the `$` at dollar."""
    after = dollar + 1
    if after >= len(replace):
        raise _TemplateError("it ends in a lone $; write $$ for a literal dollar")
    nxt = replace[after]
    if nxt == "$":
        return None, "$$", after + 1
    if nxt == "{":
        close = replace.find("}", after + 1)
        if close < 0:
            raise _TemplateError(f"{replace[dollar:]} has no closing brace; write ${{name}}")
        name = replace[after + 1 : close]
        written = replace[dollar : close + 1]
        if not _NAME.fullmatch(name):
            raise _TemplateError(
                f"{written} is not a reference; a name is letters, digits and underscores, "
                "and $$ writes a literal dollar"
            )
        return name, written, close + 1
    match = _NAME.match(replace, after)
    if match is None:
        raise _TemplateError(
            f"${nxt} is not a reference; write $1, $name or ${{name}}, and $$ for a literal dollar"
        )
    return match.group(), replace[dollar : match.end()], match.end()


def _resolve(name: str, written: str, pattern: re.Pattern[str]) -> Token:
    if name.isdigit():
        number = int(name)
        if number > pattern.groups:
            groups = f"{pattern.groups} capture group" + ("" if pattern.groups == 1 else "s")
            raise _TemplateError(f"{written} is beyond the {groups} of the pattern {quoted(pattern.pattern)}")
        return Capture(number)
    if name in pattern.groupindex:
        return Capture(pattern.groupindex[name])
    if name in RESERVED:
        return Reserved(name)
    raise _TemplateError(
        f"{written} is neither a named capture group in the pattern {quoted(pattern.pattern)} "
        f"nor one of {', '.join(RESERVED)}"
    )


def _merge_literals(tokens: list[Token]) -> tuple[Token, ...]:
    merged: list[Token] = []
    for token in tokens:
        if isinstance(token, Literal) and merged and isinstance(merged[-1], Literal):
            merged[-1] = Literal(merged[-1].text + token.text)
        elif not (isinstance(token, Literal) and token.text == ""):
            merged.append(token)
    return tuple(merged)
