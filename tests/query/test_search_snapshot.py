"""A search reads the store in one snapshot: a re-index that commits while it ranks loses it no hit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import query.search
from query.rank import pipeline
from query.reader import Reader
from tests.lent import search
from tests.query.stores import build_store, store_settings

DOCS = {f"docs/page-{i}.md": f"# Page {i}\n\nThe grizirk turns {i} times a day, then rests.\n" for i in range(5)}


def test_a_rewrite_committed_between_the_tiers_and_the_hits_loses_no_hit(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    settings = build_store(store_settings(tmp_path), DOCS)
    assert len(search(settings, "grizirk").hits) == 5
    real = pipeline.ranked_hits
    rewrites: list[int] = []

    def rewritten_meanwhile(*args: Any, **kwargs: Any) -> Any:
        # the fault: every page is re-indexed (new section ids) after the tiers found their candidates
        build_store(settings, {path: text + f"\nRewrite {len(rewrites)}.\n" for path, text in DOCS.items()})
        rewrites.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(query.search, "ranked_hits", rewritten_meanwhile)
    with Reader(settings) as reader:
        hits = search(settings, "grizirk", reader=reader).hits
    assert rewrites == [1]
    assert sorted(h.path for h in hits) == sorted(DOCS)
    monkeypatch.setattr(query.search, "ranked_hits", real)
    after = search(settings, "grizirk").hits
    assert len(after) == 5 and all("Rewrite 0" in h.content for h in after)
