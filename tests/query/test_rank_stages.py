"""The staged ranking (query/rank/): a stage added in one line shows in --explain; the stages rank as before."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from query.fusion import diversified_prefix, diversify
from query.rank import stages
from query.rank.parsed import parse_query
from query.rank.ranked import Ranked
from query.search import to_json
from query.verbatim import protect
from tests.lent import search
from tests.query.stores import build_store, store_settings

DOCS = {
    "docs/retention.md": "".join(f"## {name}\n\nRetention of {name.lower()}: the retention period.\n\n"
                                 for name in ("Logs", "Backups", "Audit")),
    "docs/policy.md": "# Policy\n\nThe retention policy is reviewed every year.\n",
    "docs/queues.md": "# Queues\n\nMessages wait in a queue until a worker takes them.\n",
}


def shout(ranked: Ranked) -> Ranked:
    """A throwaway stage: it says "seen" about every hit it ranked, and changes nothing."""
    return ranked.noted("shout", {cid: "seen" for cid, _ in ranked.entries})


def flip(ranked: Ranked) -> Ranked:
    """A throwaway re-scoring stage: the worst candidate becomes the best (scores stay higher-is-better)."""
    return ranked.reordered([(cid, -score) for cid, score in reversed(ranked.entries)])


@pytest.fixture
def configured(tmp_path: Path, workdir: Path) -> Path:
    settings = build_store(store_settings(tmp_path / "store"), DOCS)
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  directory: {settings.store_dir}\n", encoding="utf-8")
    return settings.store_dir


def test_a_stage_added_in_one_line_leaves_its_note_in_explain(configured: Path, run_cli,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run_cli("search", "--json", "--explain", "retention")
    before = json.loads(out)["results"]
    assert code == 0 and before and all("shout" not in r["explain"].get("stages", {}) for r in before)
    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES, shout))  # the one line that adds a stage
    code, out, _ = run_cli("search", "--json", "--explain", "retention")
    after = json.loads(out)["results"]
    assert code == 0 and all(r["explain"]["stages"]["shout"] == "seen" for r in after)
    assert [{k: v for k, v in r.items() if k != "explain"} for r in after] == [
        {k: v for k, v in r.items() if k != "explain"} for r in before]  # a stage that only notes ranks alike
    code, out, _ = run_cli("search", "--explain", "retention")
    assert code == 0 and out.count(", shout seen") == len(after)
    code, out, _ = run_cli("search", "--json", "retention")
    assert all("explain" not in r for r in json.loads(out)["results"])


def test_a_stage_placed_before_diversity_reorders_what_diversity_then_spreads(
        configured: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = store_settings(configured.parent.parent)
    plain = [h.chunk_id for h in search(settings, "retention", 20).hits]
    monkeypatch.setattr(stages, "STAGES", (stages.fusion, stages.verbatim, flip, stages.diversity))
    flipped = to_json(search(settings, "retention", 20, explain=True))
    assert [r["explain"]["lexical"]["rank"] for r in flipped["results"]] == list(range(len(plain), 0, -1))
    scores = [r["score"] for r in flipped["results"]]
    assert scores == sorted(scores, reverse=True)  # higher is better, whatever a stage makes of the scores
    assert scores[0] == flipped["results"][0]["explain"]["lexical"]["bm25"]  # flip negated -bm25 back


def test_pinning_then_diversity_read_to_depth_ranks_as_diversity_then_protection_did() -> None:
    rng = random.Random(7)
    for _ in range(400):
        ranked = [(cid, 1.0 / (rank + 1)) for rank, cid in enumerate(rng.sample(range(1, 200), rng.randint(0, 60)))]
        documents = {cid: rng.randint(1, 6) for cid, _ in ranked}
        lexical = rng.sample([cid for cid, _ in ranked], rng.randint(0, len(ranked)))
        held = set(rng.sample(lexical, rng.randint(0, min(4, len(lexical)))))
        k = rng.randint(1, 25)
        order, moved = diversify(ranked, documents)
        expected = protect(order, lexical, held)[:k]  # the ranking before the stages: diversity, then protection
        pins = [cid for cid in lexical if cid in held]
        looked_up: list[int] = []
        staged, staged_moved = diversified_prefix(ranked, k, _recording(documents, looked_up), exempt=set(pins))
        assert protect(staged, pins, set(pins))[:k] == expected
        assert {cid for cid, _ in expected} & staged_moved == {cid for cid, _ in expected} & (moved - held)
        assert len(looked_up) == len(set(looked_up))  # each rank's document is looked up once at most


def _recording(documents: dict[int, int], looked_up: list[int]) -> Callable[[list[int]], dict[int, int]]:
    """A documents_of over a dict that records the ids it was asked for."""

    def documents_of(ids: list[int]) -> dict[int, int]:
        looked_up.extend(ids)
        return {cid: documents[cid] for cid in ids}

    return documents_of


def test_search_reads_the_query_once_and_hands_the_reading_back(configured: Path) -> None:
    text = 'ERR_CONN_RESET "retention period" -audit 库 a'
    parsed = parse_query(text)
    assert parsed.phrases == ("retention period", "ERR_CONN_RESET")
    assert (parsed.excluded, parsed.dropped, parsed.cjk) == (("audit",), ("a",), ("库",))
    response = search(store_settings(configured.parent.parent), text)
    assert response.query == parsed and response.hits
    assert all("Audit" not in h.section for h in response.hits)



def test_evaluation_can_leave_a_stage_out_and_never_fusion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = build_store(store_settings(tmp_path), DOCS)
    shipped = stages.STAGES
    assert stages.without("diversity") == tuple(s for s in shipped if s.__name__ != "diversity")
    assert stages.without() == shipped
    for wrong in ("fusion", "nonesuch"):
        with pytest.raises(ValueError, match=wrong):
            stages.without(wrong)
    with_diversity = [h.path for h in search(settings, "retention", 5).hits]
    monkeypatch.setattr(stages, "STAGES", stages.without("diversity"))  # as bench/lib/evalrun.py does
    assert [h.path for h in search(settings, "retention", 5).hits][:3] == ["docs/retention.md"] * 3
    assert with_diversity[:3].count("docs/retention.md") == 2  # the document allowance, with diversity
