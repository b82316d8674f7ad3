"""Ranking metrics against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from query import metrics

JUDGED = {"a": 3, "c": 2, "e": 1, "x": 0}
RANKING = ["a", "b", "c", "d"]
IDEAL_DCG = 3 / 1 + 2 / math.log2(3) + 1 / math.log2(4)  # grades 3, 2, 1 at ranks 1, 2, 3


def test_a_document_counts_once_at_its_best_rank() -> None:
    assert metrics.first_ranks(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


def test_ndcg_divides_the_discounted_gains_by_those_of_the_ideal_ranking() -> None:
    # a (3) at rank 1 -> 3/log2(2) = 3; c (2) at rank 3 -> 2/log2(4) = 1
    assert metrics.ndcg_at(RANKING, JUDGED, 10) == pytest.approx(4 / IDEAL_DCG)
    assert metrics.ndcg_at(["e", "c", "a"], JUDGED, 10) == pytest.approx(
        (1 + 2 / math.log2(3) + 3 / 2) / IDEAL_DCG)
    assert metrics.ndcg_at(["a", "c", "e"], JUDGED, 10) == pytest.approx(1.0)


def test_ndcg_cuts_both_rankings_at_k() -> None:
    assert metrics.ndcg_at(["b", "a"], JUDGED, 1) == 0.0
    assert metrics.ndcg_at(["a", "b"], JUDGED, 1) == pytest.approx(1.0)  # the ideal top 1 is a's 3 too
    assert metrics.ndcg_at(["c"], JUDGED, 1) == pytest.approx(2 / 3)


def test_a_negative_grade_counts_as_zero() -> None:
    assert metrics.ndcg_at(["a", "b"], {"a": -1, "b": 2}, 10) == pytest.approx((2 / math.log2(3)) / 2)


def test_recall_is_the_share_of_relevant_documents_in_the_top_k() -> None:
    assert metrics.recall_at(RANKING, JUDGED, 10) == pytest.approx(2 / 3)
    assert metrics.recall_at(RANKING, JUDGED, 2) == pytest.approx(1 / 3)
    assert metrics.recall_at([], JUDGED, 10) == 0.0


def test_reciprocal_rank_is_one_over_the_first_relevant_rank_within_k() -> None:
    assert metrics.reciprocal_rank_at(RANKING, JUDGED, 10) == 1.0
    assert metrics.reciprocal_rank_at(["b", "x", "d", "c"], JUDGED, 10) == 0.25
    assert metrics.reciprocal_rank_at(["b", "x", "d", "c"], JUDGED, 3) == 0.0


def test_a_query_with_nothing_relevant_scores_zero_everywhere() -> None:
    assert metrics.scores(["x"], {"x": 0}) == {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}


def test_recall_at_100_sees_what_recall_at_10_does_not() -> None:
    ranking = [f"n{i}" for i in range(20)] + ["a"]
    got = metrics.scores(ranking, {"a": 1})
    assert got["recall@10"] == 0.0 and got["recall@100"] == 1.0 and got["mrr@10"] == 0.0


def test_means_average_each_metric_over_the_queries() -> None:
    rows = [metrics.scores(["a"], {"a": 1}), metrics.scores(["b"], {"a": 1})]
    assert metrics.mean(rows) == {"ndcg@10": 0.5, "recall@10": 0.5, "recall@100": 0.5, "mrr@10": 0.5}
    assert metrics.mean([]) == {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}


def test_misses_name_each_relevant_document_outside_the_top_k_with_its_rank() -> None:
    assert metrics.misses(RANKING, JUDGED, 1) == [("c", 2, 3), ("e", 1, None)]
    assert metrics.misses(["a", "c", "e"], JUDGED, 10) == []
