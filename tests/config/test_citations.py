"""Citation rules are validated and compiled when the config loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config.citations import Capture, CitationRule, Literal, Reserved, compile_rules
from config.errors import ConfigError
from config.loader import load_settings, settings_from_mapping
from config.settings import CitationSettings

DOCS = r"^docs/content/(.+)\.md$"


def rule(pattern: str, replace: str) -> CitationSettings:
    return CitationSettings(pattern=pattern, replace=replace)


def error_of(*rules: CitationSettings) -> str:
    with pytest.raises(ConfigError) as info:
        compile_rules(rules)
    return str(info.value)


def test_an_unknown_name_is_reported_like_the_reference() -> None:
    message = error_of(rule(DOCS, "https://docs.example.net/$1x/"))
    assert message == (
        'invalid knowledge.citations[0] replace "https://docs.example.net/$1x/": '
        '$1x is neither a named capture group in the pattern "^docs/content/(.+)\\\\.md$" '
        "nor one of ordinal, heading, anchor"
    )


def test_the_error_names_the_position_of_the_bad_rule() -> None:
    message = error_of(rule(DOCS, "https://a/$1/"), rule(DOCS, "https://b/${missing}/"))
    assert message.startswith('invalid knowledge.citations[1] replace "https://b/${missing}/": ${missing} is neither')


def test_a_pattern_that_does_not_compile_is_rejected_with_the_re_error() -> None:
    message = error_of(rule("^docs/(.+\\.md$", "x/$1"))
    assert message.startswith('invalid knowledge.citations[0] pattern "^docs/(.+\\\\.md$": does not compile: ')
    assert "missing ), unterminated subpattern at position 6" in message


@pytest.mark.parametrize("pattern", ["a{4294967296}", "(" * 1000 + ")" * 1000])
def test_a_pattern_python_cannot_build_is_rejected_not_crashed(pattern: str) -> None:
    assert "does not compile" in error_of(rule(pattern, "x"))


def test_an_empty_pattern_is_rejected() -> None:
    message = error_of(rule("", "https://x/"))
    assert message == (
        'invalid knowledge.citations[0] pattern "": an empty pattern matches every path '
        "and leaves every later rule dead"
    )


def test_an_empty_replace_is_rejected() -> None:
    message = error_of(rule(DOCS, ""))
    assert message == (
        'invalid knowledge.citations[0] replace "": an empty replacement maps every path the pattern matches to nothing'
    )


def test_a_group_number_beyond_the_pattern_is_rejected() -> None:
    message = error_of(rule(DOCS, "https://x/$2/"))
    assert message == (
        'invalid knowledge.citations[0] replace "https://x/$2/": $2 is beyond the 1 capture group '
        'of the pattern "^docs/content/(.+)\\\\.md$"'
    )


def test_a_braced_group_number_beyond_the_pattern_is_rejected() -> None:
    message = error_of(rule("^(a)(b)$", "${3}"))
    assert message.endswith('${3} is beyond the 2 capture groups of the pattern "^(a)(b)$"')


def test_digits_are_read_greedily_as_one_group_number() -> None:
    twelve = "(a)" * 11
    message = error_of(rule(twelve, "$12"))
    assert "$12 is beyond the 11 capture groups" in message
    compiled = compile_rules([rule("(a)" * 12, "$12")])
    assert compiled[0].template == (Capture(12),)


def test_a_dangling_dollar_is_rejected() -> None:
    message = error_of(rule(DOCS, "https://x/$1/$"))
    assert message == (
        'invalid knowledge.citations[0] replace "https://x/$1/$": it ends in a lone $; write $$ for a literal dollar'
    )


def test_an_unterminated_brace_is_rejected() -> None:
    message = error_of(rule(DOCS, "https://x/${anchor"))
    assert message == (
        'invalid knowledge.citations[0] replace "https://x/${anchor": ${anchor has no closing brace; write ${name}'
    )


@pytest.mark.parametrize("replace", ["x/${}", "x/${a-b}"])
def test_a_brace_without_a_valid_name_is_rejected(replace: str) -> None:
    assert "is not a reference; a name is letters, digits and underscores" in error_of(rule(DOCS, replace))


def test_a_dollar_before_punctuation_is_rejected() -> None:
    message = error_of(rule(DOCS, "x/$-y"))
    assert message.endswith("$- is not a reference; write $1, $name or ${name}, and $$ for a literal dollar")


def test_group_zero_is_the_whole_match_and_allowed() -> None:
    assert compile_rules([rule("^docs/", "https://x/$0")])[0].template == (Literal("https://x/"), Capture(0))


def test_a_pattern_without_groups_may_use_the_reserved_names() -> None:
    compiled = compile_rules([rule("^notes", "ticket-${ordinal}-$heading#$anchor")])
    assert compiled[0].template == (
        Literal("ticket-"),
        Reserved("ordinal"),
        Literal("-"),
        Reserved("heading"),
        Literal("#"),
        Reserved("anchor"),
    )


def test_a_named_group_wins_over_the_reserved_name() -> None:
    compiled = compile_rules([rule(r"^(?P<dir>\w+)/(?P<heading>\w+)", "$dir/${heading}/${anchor}")])
    assert compiled[0].template == (Capture(1), Literal("/"), Capture(2), Literal("/"), Reserved("anchor"))


def test_double_dollar_and_bare_braces_are_literal_text() -> None:
    compiled = compile_rules([rule(DOCS, "$$/{anchor}/$1$$")])
    assert compiled[0].template == (Literal("$/{anchor}/"), Capture(1), Literal("$"))


def test_a_compiled_rule_keeps_its_pattern_and_source() -> None:
    (compiled,) = compile_rules([rule(DOCS, "https://docs.example.net/$1/#${anchor}")])
    assert isinstance(compiled, CitationRule)
    assert compiled.pattern == re.compile(DOCS)
    assert compiled.source == "https://docs.example.net/$1/#${anchor}"


def test_no_rules_compile_to_nothing() -> None:
    assert compile_rules([]) == ()


def test_the_loader_rejects_a_bad_rule_from_a_yaml_file(tmp_path: Path) -> None:
    config = tmp_path / "knowledge.yaml"
    config.write_text(
        "knowledge:\n"
        "  citations:\n"
        "    - pattern: '^docs/content/(.+)\\.md$'\n"
        "      replace: 'https://docs.example.net/$1x/'\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(config=str(config), store_dir=str(tmp_path), environ={})
    assert str(info.value) == (
        f'{config}: invalid knowledge.citations[0] replace "https://docs.example.net/$1x/": '
        '$1x is neither a named capture group in the pattern "^docs/content/(.+)\\\\.md$" '
        "nor one of ordinal, heading, anchor"
    )


def test_the_loader_accepts_the_reference_rules(tmp_path: Path) -> None:
    config = tmp_path / "knowledge.yaml"
    config.write_text(
        "knowledge:\n"
        "  citations:\n"
        "    - pattern: '^docs/content/(.+)/_index\\.md$'\n"
        "      replace: 'https://docs.example.net/$1/'\n"
        "    - pattern: '^docs/content/(.+)\\.md$'\n"
        "      replace: 'https://docs.example.net/$1/#${anchor}'\n",
        encoding="utf-8",
    )
    settings = load_settings(config=str(config), store_dir=str(tmp_path), environ={})
    assert [c.replace for c in settings.citations] == [
        "https://docs.example.net/$1/",
        "https://docs.example.net/$1/#${anchor}",
    ]


def test_an_in_memory_block_is_validated_too() -> None:
    with pytest.raises(ConfigError, match=r"^settings: invalid knowledge.citations\[0\] pattern \"\""):
        settings_from_mapping({"citations": [{"pattern": "", "replace": "x"}]})
