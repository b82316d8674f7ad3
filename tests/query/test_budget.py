"""The tool text budget: tokens x 4 characters, the first hit always kept, enumerate a quarter."""

from __future__ import annotations

from pathlib import Path

import pytest

from query import budget
from query.tools import knowledge_enumerate, knowledge_search
from tests.query.stores import build_store, store_settings


def test_the_budget_is_tokens_times_four_and_enumerate_gets_a_quarter() -> None:
    settings = store_settings(Path("/nonexistent"), max_injected_tokens=1000)
    assert budget.search_budget(settings) == 4000
    assert budget.enumerate_budget(settings) == 1000


def test_fit_stops_at_the_first_item_that_would_exceed_the_budget() -> None:
    fitted = budget.fit(["aaaa", "bb", "cccc", "d"], len, 7)
    assert fitted.items == ["aaaa", "bb"] and fitted.used == 6 and fitted.trimmed


def test_the_first_item_is_kept_even_when_it_alone_exceeds_the_budget() -> None:
    fitted = budget.fit(["x" * 100, "y"], len, 10)
    assert fitted.items == ["x" * 100] and fitted.trimmed
    assert budget.fit([], len, 10).items == [] and not budget.fit([], len, 10).trimmed


def test_an_answer_within_the_budget_is_not_trimmed() -> None:
    fitted = budget.fit(["a", "b"], len, 2)
    assert fitted.items == ["a", "b"] and not fitted.trimmed


def test_offered_counts_the_whole_answer_when_items_are_a_prefix() -> None:
    assert budget.fit(["a"], len, 10, offered=5).trimmed


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory):
    docs = {f"docs/{i:02}.md": f"# Section {i}\n\n" + "budget words " * 60 + "\n" for i in range(12)}
    return tmp_path_factory.mktemp("budget"), docs


def test_search_trims_to_the_budget_and_says_so(big) -> None:
    base, docs = big
    settings = build_store(store_settings(base / "s", max_injected_tokens=400, top_k=10), docs)
    data = knowledge_search(settings, "budget words")
    assert data["trimmed"] and data["returned"] == 2  # each hit is ~790 characters of a 1600 budget
    assert "trimmed to the text budget: returning 2 of 10 results" in data["note"]
    assert sum(len(r["content"]) + len(r["section"]) for r in data["results"]) <= 1600


def test_search_keeps_the_first_hit_when_the_budget_is_tiny(big) -> None:
    base, docs = big
    settings = build_store(store_settings(base / "t", max_injected_tokens=1), docs)
    data = knowledge_search(settings, "budget")
    assert data["returned"] == 1 and data["trimmed"] and len(data["results"][0]["content"]) > 4


def test_enumerate_gets_a_quarter_with_a_floor_of_one_document(big) -> None:
    base, docs = big
    roomy = build_store(store_settings(base / "u", max_injected_tokens=100_000), docs)
    data = knowledge_enumerate(roomy, "budget")
    assert (data["matched"], data["returned"], data["trimmed"]) == (12, 12, False)
    tight = build_store(store_settings(base / "v", max_injected_tokens=100), docs)
    data = knowledge_enumerate(tight, "budget")
    assert data["matched"] == 12 and data["returned"] == 1  # 100 characters hold no entry: the floor
    assert data["trimmed"] and "returning 1 of 12 documents" in data["note"]
    quarter = build_store(store_settings(base / "w", max_injected_tokens=400), docs)
    data = knowledge_enumerate(quarter, "budget")
    used = sum(budget.entry_size(d) for d in data["documents"])
    assert 1 < data["returned"] < 12 and used <= 400
