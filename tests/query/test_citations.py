"""Citations render from compiled rules: expansion, encoding, anchors and first-rule-wins."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.citations import compile_rules
from config.loader import settings_from_mapping
from config.settings import CitationSettings
from query.citations import CitationMapper, own_heading, slug

BREADCRUMB = "Running the agent > Shell mode > HTTP debugging"
REFERENCE_RULES = [
    (r"^docs/content/(.+)/_index\.md$", "https://docs.example.net/$1/"),
    (r"^docs/content/(.+)\.md$", "https://docs.example.net/$1/#${anchor}"),
]


def mapper(*rules: tuple[str, str]) -> CitationMapper:
    return CitationMapper(compile_rules([CitationSettings(pattern=p, replace=r) for p, r in rules]))


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Don't Panic", "dont-panic"),
        ("C++ API", "c-api"),
        ("Über Café", "über-café"),
        ("HTTP debugging", "http-debugging"),
        ("heading with a - dash", "heading-with-a---dash"),
        ("two  spaces", "two--spaces"),
        ("😄 unicode emoji", "unicode-emoji"),
        (" a ", "a"),
        ("Step 1 — install", "step-1--install"),
        ("en–dash", "endash"),
        ("exchange.bind_headers(exchange, routing [, bindCallback])",
         "exchangebind_headersexchange-routing--bindcallback"),
        ("apostrophe’s should be trimmed", "apostrophes-should-be-trimmed"),
        ("Привет non-latin 你好", "привет-non-latin-你好"),
        (":ok_hand: Single", "ok_hand-single"),
        ("x² and ½", "x-and"),
        ("& More", "more"),
        ("Ⓔ circled", "ⓔ-circled"),
        ("tab\there", "tabhere"),
        ("", ""),
    ],
)
def test_slug_matches_github_slugger(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_the_own_heading_is_the_last_breadcrumb_element() -> None:
    assert own_heading(BREADCRUMB) == "HTTP debugging"
    assert own_heading("Rollout notes") == "Rollout notes"
    assert own_heading("") == ""
    assert own_heading(None) == ""


def test_the_reference_example_maps_a_section_to_its_anchor() -> None:
    citations = mapper(*REFERENCE_RULES)
    assert citations.map_chunk("docs/content/agents/basic.md", 11, BREADCRUMB) == (
        "https://docs.example.net/agents/basic/#http-debugging"
    )


def test_the_first_matching_rule_wins() -> None:
    citations = mapper(*REFERENCE_RULES)
    assert citations.map_document("docs/content/knowledge/_index.md") == "https://docs.example.net/knowledge/"
    reversed_order = mapper(*reversed(REFERENCE_RULES))
    assert reversed_order.map_document("docs/content/knowledge/_index.md") == (
        "https://docs.example.net/knowledge/_index/"
    )


def test_a_path_no_rule_matches_is_none() -> None:
    citations = mapper(*REFERENCE_RULES)
    assert citations.map_chunk("notes.md", 0, "Rollout notes") is None
    assert citations.map_document("./docs/content/x.md") is None
    assert citations.cite_chunk("notes.md", 0, "Rollout notes") == "notes.md#0"


def test_rules_search_anywhere_in_the_path_unless_anchored() -> None:
    citations = mapper((r"content/(\w+)", "page:$1"))
    assert citations.map_document("/srv/docs/content/intro.md") == "page:intro"


def test_a_document_citation_trims_the_bare_hash_left_by_an_empty_anchor() -> None:
    citations = mapper(*REFERENCE_RULES)
    assert citations.map_document("docs/content/agents/basic.md") == "https://docs.example.net/agents/basic/"
    assert citations.map_chunk("docs/content/agents/basic.md", 0, "") == "https://docs.example.net/agents/basic/"


def test_a_literal_after_the_hash_is_kept_when_the_value_is_empty() -> None:
    citations = mapper((r"^docs/(.+)\.md$", "https://x/$1#section-${heading}"))
    assert citations.map_chunk("docs/a.md", 3, None) == "https://x/a#section-"


def test_numbered_named_and_braced_groups_expand() -> None:
    citations = mapper((r"^(?P<area>[a-z]+)/(?P<page>[a-z]+)\.md$", "$1|$area|${page}|${2}|$0"))
    assert citations.map_document("guide/setup.md") == "guide|guide|setup|setup|guide/setup.md"


def test_double_dollar_writes_a_dollar_and_bare_braces_stay_literal() -> None:
    citations = mapper((r"^(.+)\.md$", "$$$1-{anchor}"))
    assert citations.map_chunk("price.md", 1, "Costs") == "$price-{anchor}"


def test_the_reserved_values_fill_from_the_section() -> None:
    citations = mapper((r"^(.+)\.md$", "$1?n=${ordinal}&h=${heading}#${anchor}"))
    assert citations.map_chunk("guide.md", 7, "Usage > One-shot runs") == "guide?n=7&h=One-shot%20runs#one-shot-runs"


def test_the_reserved_values_are_empty_for_a_whole_document() -> None:
    citations = mapper((r"^(.+)\.md$", "$1/${ordinal}/${heading}/${anchor}"))
    assert citations.map_document("guide.md") == "guide///"


def test_a_capture_group_named_like_a_reserved_value_wins() -> None:
    citations = mapper((r"^(?P<heading>[^/]+)/(?P<ordinal>\d+)", "${heading}-${ordinal}-${anchor}"))
    assert citations.map_chunk("intro/42/x.md", 5, "Real Heading") == "intro-42-real-heading"


def test_every_substituted_value_is_percent_encoded_keeping_slashes() -> None:
    citations = mapper((r"^(.+)\.md$", "https://x/$1/#${heading}"))
    assert citations.map_chunk("a dir/Ünï?&#.md", 0, "One-shot runs") == (
        "https://x/a%20dir/%C3%9Cn%C3%AF%3F%26%23/#One-shot%20runs"
    )


def test_the_anchor_is_encoded_after_slugging() -> None:
    citations = mapper((r"^(.+)\.md$", "$1#${anchor}"))
    assert citations.map_chunk("p.md", 0, "Über Café") == "p#%C3%BCber-caf%C3%A9"


def test_an_unmatched_optional_group_is_empty() -> None:
    citations = mapper((r"^(\w+)(?:-(v\d+))?\.md$", "doc/$1/$2"))
    assert citations.map_document("intro.md") == "doc/intro/"


def test_a_mapper_from_settings_uses_the_configured_rules() -> None:
    configured = settings_from_mapping({"citations": [{"pattern": r"^(.+)\.md$", "replace": "id:$1"}]})
    citations = CitationMapper.from_settings(configured)
    assert citations.configured
    assert citations.map_document("a.md") == "id:a"
    assert not CitationMapper.from_settings(settings_from_mapping({})).configured


def test_a_path_with_undecodable_bytes_still_renders() -> None:
    citations = mapper((r"^(.+)\.md$", "$1"))
    odd = b"caf\xe9".decode("utf-8", "surrogateescape")
    assert citations.map_document(f"{odd}.md") == "caf%E9"
    assert citations.map_document("\ud800.md") == "%ED%A0%80"


_RULES = st.lists(
    st.sampled_from(
        [
            (r"^docs/content/(.+)/_index\.md$", "https://docs.example.net/$1/"),
            (r"^docs/content/(.+)\.md$", "https://docs.example.net/$1/#${anchor}"),
            (r"(?P<heading>[^/]*)$", "${heading}/${ordinal}#"),
            (r"^(?:(a)|(b))", "$1$2$0$$#section-${heading}"),
            (r".", "${anchor}"),
        ]
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(
    rules=_RULES,
    path=st.text(max_size=40),
    ordinal=st.one_of(st.none(), st.integers(min_value=0, max_value=10**6)),
    heading=st.one_of(st.none(), st.text(max_size=40)),
)
def test_rendering_never_raises_for_any_path_or_heading(
    rules: list[tuple[str, str]], path: str, ordinal: int | None, heading: str | None
) -> None:
    citations = mapper(*rules)
    for result in (citations.map_chunk(path, ordinal, heading), citations.map_document(path)):
        assert result is None or (result.isascii() and " " not in result and not result.endswith("#"))


@given(heading=st.text(max_size=60))
def test_a_slug_has_no_spaces_and_slugs_to_itself(heading: str) -> None:
    anchor = slug(heading)
    assert " " not in anchor
    assert slug(anchor) == anchor
