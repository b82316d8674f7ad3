"""Exact matches are protected: identifier and quoted-phrase queries never lose verbatim sections to fusion."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from config.loader import settings_from_mapping
from config.settings import Settings
from query.filters import Filter
from query.fusion import RRF_K
from query.reader import Reader
from query.search import HYBRID, LEXICAL, search_deep
from query.terms import verbatim_phrases
from query.verbatim import lift, protect
from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.lent import search
from tests.query.verbatim_set import CASES, documents, placements

# shared/eval/cranfield beside the checkout (bench/lib/cranfield.py), looked up from a worktree too.
CRANFIELD = next((found for parent in Path(__file__).resolve().parents
                  if (found := parent / "shared" / "eval" / "cranfield" / "queries.jsonl").exists()),
                 Path("shared/eval/cranfield/queries.jsonl"))


@pytest.fixture
def indexed(workdir: Path, server: EmbedServer, run_cli: Callable[..., tuple[int, str, str]]) -> Settings:
    files: dict[str, str | bytes] = dict(documents())
    write_tree(workdir, files)
    (workdir / "knowledge.yaml").write_text(
        f"knowledge:\n  paths: [docs]\n  embeddings:\n    base_url: {server.base_url}\n"
        "    model: hashed-bow\n    timeout: 1\n", encoding="utf-8")
    code, out, err = run_cli("index")
    assert code == 0, out + err
    emb = {"base_url": server.base_url, "model": "hashed-bow", "timeout": 1}
    return settings_from_mapping({"paths": ["docs"], "embeddings": emb}, store_base=workdir)


@pytest.mark.parametrize(("text", "phrases"), [
    ("ERR_CONN_RESET", ("ERR_CONN_RESET",)),
    ('"connection reset by peer"', ("connection reset by peer",)),
    ("kube-proxy", ("kube-proxy",)),
    ("std::vector", ("std::vector",)),
    ("`sha256sum` digest", ("sha256sum",)),
    ("where is config.yaml read", ("config.yaml",)),
    ("HTTP_429 retry -deprecated", ("HTTP_429",)),
    ("how to test my API with TestClient", ("TestClient",)),
    ("CORSMiddleware", ("CORSMiddleware",)),
    ("split into files with APIRouter", ("APIRouter",)),
    ("OAuth2 password flow with JWT tokens", ("OAuth2",)),
    ("or_", ("or_",)),
    ("model_validator modes", ("model_validator",)),
    ("when is Depends() called", ("Depends",)),
])
def test_identifiers_error_codes_and_quoted_phrases_are_read_as_verbatim_phrases(
        text: str, phrases: tuple[str, ...]) -> None:
    assert verbatim_phrases(text) == phrases


@pytest.mark.parametrize("text", [
    "how do I restart the agent", "why does kube-proxy restart so often", "i.e. the blasius problem",
    "mach numbers less than 15.4.", "api -deprecated", "", "papers on shock-sound wave interaction .",
    "how do I add CORS middleware", "API", "CLI options", "JWT tokens", "v1", "NASA report", "sha256sum digest",
    "APIs and URLs", "E1102 timeout", "Pydantic custom field validator",
])
def test_plain_language_acronyms_versions_and_hyphenated_compounds_are_not_verbatim(text: str) -> None:
    assert verbatim_phrases(text) == ()


@pytest.mark.skipif(not CRANFIELD.exists(), reason="the shared Cranfield collection is not on this machine")
def test_no_cranfield_query_is_read_as_verbatim_so_its_hybrid_ranking_is_unchanged() -> None:
    lines = [json.loads(line) for line in CRANFIELD.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) == 225
    assert [q["_id"] for q in lines if verbatim_phrases(q["text"])] == []


def test_protect_moves_held_ids_first_in_lexical_order_keeping_their_scores() -> None:
    fused = [(1, 0.5), (2, 0.4), (3, 0.3), (4, 0.2)]
    assert protect(fused, [4, 9, 3, 1], {3, 4}) == [(4, 0.2), (3, 0.3), (1, 0.5), (2, 0.4)]
    assert protect(fused, [4, 3], set()) == fused


def test_hybrid_never_ranks_a_verbatim_section_below_its_lexical_rank(indexed: Settings) -> None:
    with Reader(indexed) as reader:
        found = placements(indexed, reader)
    assert {p.query for p in found} == {q for q, _, _ in CASES}  # every query finds its verbatim section
    for placed in found:
        assert placed.lexical is not None and placed.hybrid is not None
        assert placed.hybrid <= placed.lexical, placed
    assert any(p.plain_rrf is not None and p.plain_rrf > p.lexical for p in found if p.lexical)  # the adversary bites


def test_the_verbatim_section_tops_search_for_each_identifier(indexed: Settings) -> None:
    with Reader(indexed) as reader:
        for i, (query, ident, _) in enumerate(CASES):
            hits = search(indexed, query, 3, reader).hits
            assert hits[0].path == f"docs/v{i:02d}.md", (query, [h.path for h in hits])
            assert ident.split("::")[0] in hits[0].content


def test_lexical_ranking_is_untouched_by_protection(indexed: Settings) -> None:
    lexical = settings_from_mapping({"paths": ["docs"]}, store_base=indexed.store_base)
    with Reader(indexed) as reader:
        for query, _, _ in CASES:
            assert search(lexical, query, 10, reader).hits == search_deep(indexed, reader, query, 10, LEXICAL).hits
            assert len(search_deep(indexed, reader, query, 10, HYBRID).hits) == 10


def test_filters_and_exclusions_still_bound_what_protection_puts_first(indexed: Settings) -> None:
    with Reader(indexed) as reader:
        filtered = search(indexed, "ERR_CONN_RESET", 5, reader, filters=Filter.of(paths="docs/d*")).hits
        assert filtered and all(h.path.startswith("docs/d") for h in filtered)
        excluded = search(indexed, "ERR_CONN_RESET -till", 5, reader).hits
        assert "docs/v00.md" not in [h.path for h in excluded]
        assert search(indexed, "ERR_CONN_RESET", 5, reader).hits[0].path == "docs/v00.md"


def test_the_lift_adds_one_rrf_vote_per_held_section_in_lexical_order_and_says_so() -> None:
    fused = [(1, 0.030), (2, 0.029), (3, 0.020), (4, 0.010)]
    entries, notes = lift(fused, [4, 9, 3, 1], {3, 4})
    gains = {4: 1 / (RRF_K + 1), 3: 1 / (RRF_K + 2)}
    assert dict(entries) == {1: 0.030, 2: 0.029, 3: 0.020 + gains[3], 4: 0.010 + gains[4]}
    assert [cid for cid, _ in entries] == [3, 1, 2, 4]  # a lift, not a place: 4 was too far down to pass 1 and 2
    assert set(notes) == {3, 4} and notes[4] == f"+{gains[4]:.4f}"


def test_explain_names_the_verbatim_rule_on_the_hits_it_lifted(indexed: Settings) -> None:
    with Reader(indexed) as reader:
        hits = search(indexed, "ERR_CONN_RESET", 5, reader, explain=True).hits
        plain = search(indexed, "how is the err code reset", 5, reader, explain=True).hits
    lifted = [h.explain for h in hits if h.explain is not None and dict(h.explain.stages).get("verbatim")]
    assert [h.path for h in hits if h.explain in lifted] == ["docs/v00.md"] and "verbatim +0.0164" in lifted[0].line()
    assert not any(h.explain is not None and dict(h.explain.stages).get("verbatim") for h in plain)
