"""One contract, two ledgers: InMemoryLedger and RedisLedger answer every question the same way."""

from __future__ import annotations

import json

import pytest
import redis

from workers.ledger.redis_ledger import RedisLedger


def _walk(ledger: object, run_id: str = "r1", total: int = 3) -> None:
    ledger.start(run_id, {"roots": ["docs"]})  # type: ignore[attr-defined]
    ledger.walked(run_id, total, 0, ["docs/gone.md"])  # type: ignore[attr-defined]


def test_the_first_outcome_of_a_path_wins_and_counts_once(ledger) -> None:
    _walk(ledger)
    ledger.record("r1", [("docs/a.md", "added", None), ("docs/b.md", "failed", "boom")])
    ledger.record("r1", [("docs/a.md", "updated", None), ("docs/b.md", "added", None), ("docs/a.md", "added", None)])
    summary = ledger.summary("r1")
    assert summary.counts == {"added": 1, "updated": 0, "unchanged": 0, "skipped": 0, "failed": 1,
                              "vectors_added": 0}
    assert summary.failures == [{"path": "docs/b.md", "reason": "boom"}]
    assert summary.accounted == 2 and not summary.done


def test_a_run_is_done_only_when_every_walked_file_is_accounted_for(ledger) -> None:
    ledger.start("r1", {})
    ledger.record("r1", [("docs/a.md", "unchanged", None)])
    assert not ledger.summary("r1").done, "not walked yet"
    ledger.walked("r1", 2, 0, [])
    assert not ledger.summary("r1").done
    ledger.record("r1", [("docs/b.md", "skipped", "binary file")])
    summary = ledger.summary("r1")
    assert summary.done and summary.skipped == [{"path": "docs/b.md", "reason": "binary file"}]


def test_a_redelivered_record_writes_the_reason_a_crash_lost_and_counts_nothing_more(ledger) -> None:
    _walk(ledger)
    # a worker killed between the record's two steps: the outcome is in, its reason is not
    ledger.store.hash_first("run:r1:out", {"docs/b.md": "failed"}, 60, counts="run:r1:cnt")
    assert ledger.summary("r1").failures == []
    ledger.record("r1", [("docs/b.md", "failed", "boom")])
    summary = ledger.summary("r1")
    assert summary.failures == [{"path": "docs/b.md", "reason": "boom"}] and summary.counts["failed"] == 1


def test_walk_skips_and_read_skips_are_listed_together(ledger) -> None:
    _walk(ledger)
    ledger.skip("r1", [("docs/big.md", "larger than 10 MB")])
    ledger.record("r1", [("docs/c.md", "skipped", "not UTF-8")])
    assert [s["path"] for s in ledger.summary("r1").skipped] == ["docs/big.md", "docs/c.md"]


def test_staging_is_idempotent_and_unstaging_empties_it(ledger) -> None:
    _walk(ledger)
    payload = [{"path": "docs/a.md", "outcome": "document", "doc": {"body": "é" * 5000}}]
    assert ledger.staged("r1", "b-1") is None
    ledger.stage("r1", "b-1", payload)
    ledger.stage("r1", "b-1", payload)
    assert ledger.staged("r1", "b-1") == payload
    ledger.unstage("r1", "b-1")
    ledger.unstage("r1", "b-1")
    assert ledger.staged("r1", "b-1") is None


def test_the_paths_to_remove_come_back_as_walked(ledger) -> None:
    _walk(ledger)
    assert ledger.removals("r1") == ["docs/gone.md"]
    ledger.start("r2", {})
    ledger.walked("r2", 1, 0, [])
    assert ledger.removals("r2") == []


def test_files_unchanged_by_stat_are_counted_by_the_walk_without_a_record_each(ledger) -> None:
    ledger.start("r1", {})
    ledger.walked("r1", 100_000, 99_998, [])
    summary = ledger.summary("r1")
    assert summary.counts["unchanged"] == 99_998 and not summary.done
    ledger.record("r1", [("docs/a.md", "added", None), ("docs/b.md", "unchanged", None)])
    summary = ledger.summary("r1")
    assert summary.counts["unchanged"] == 99_999 and summary.accounted == 100_000 and summary.done


def test_a_no_change_run_holds_nothing_per_file_in_redis(redis_client: redis.Redis, redis_namespace: str) -> None:
    ledger = RedisLedger(redis_client, redis_namespace)
    ledger.start("r1", {"roots": ["docs"]})
    ledger.walked("r1", 100_000, 100_000, [])
    assert ledger.summary("r1").done
    sizes = {k.decode(): redis_client.memory_usage(k) for k in redis_client.scan_iter(f"{redis_namespace}:*")}
    assert sum(size or 0 for size in sizes.values()) < 4096, sizes


def test_staged_payloads_are_counted_until_applied(ledger) -> None:
    _walk(ledger)
    assert ledger.staged_count("r1") == 0
    for key in ("b-1", "b-2", "b-1"):  # a redelivered message stages the same key again
        ledger.stage("r1", key, [{"path": "docs/a.md"}])
    assert ledger.staged_count("r1") == 2
    ledger.unstage("r1", "b-1")
    ledger.unstage("r1", "b-1")
    assert ledger.staged_count("r1") == 1 and ledger.staged_count("r2") == 0


def test_finishing_is_claimed_exactly_once(ledger) -> None:
    _walk(ledger)
    assert ledger.claim_finish("r1") is True
    assert ledger.claim_finish("r1") is False
    ledger.finish("r1", "complete", 2, 10, 40, None)
    summary = ledger.summary("r1")
    summary_facts = (summary.state, summary.removed, summary.files, summary.chunks, summary.error)
    assert summary_facts == ("complete", 2, 10, 40, None)


def test_recent_lists_runs_newest_first(ledger) -> None:
    for run_id in ("r1", "r2", "r3"):
        ledger.start(run_id, {"roots": ["docs"]})
    assert [s.run_id for s in ledger.recent(2)] == ["r3", "r2"]


def test_the_run_lock_admits_one_run_until_it_finishes(ledger) -> None:
    assert ledger.run_lock.acquire("r1", 5_000) is None
    assert ledger.run_lock.acquire("r2", 5_000) == "r1"
    assert ledger.run_lock.refresh("r2") is False and ledger.run_lock.release("r2") is False
    assert ledger.run_lock.refresh("r1", 60_000) is True and ledger.run_lock.holder() == "r1"
    ledger.start("r1", {})
    ledger.finish("r1", "complete", 0, 0, 0, None)
    assert ledger.run_lock.holder() is None
    assert ledger.run_lock.acquire("r2", 5_000) is None


def test_presence_lists_announced_processes_until_they_withdraw(ledger) -> None:
    ledger.presence.announce("worker", "host:1")
    ledger.presence.announce("writer", "host:2")
    assert ledger.presence.alive("worker") == ["host:1"] and ledger.presence.alive("writer") == ["host:2"]
    ledger.presence.withdraw("worker", "host:1")
    assert ledger.presence.alive("worker") == []


def test_the_first_reply_to_a_request_stays(ledger) -> None:
    assert ledger.replies.get("rm-1") is None
    ledger.replies.put("rm-1", ["docs/a.md"])
    ledger.replies.put("rm-1", [])
    assert json.loads(ledger.replies.get("rm-1")) == ["docs/a.md"]


def test_redis_keys_all_expire(redis_client: redis.Redis, redis_namespace: str) -> None:
    ledger = RedisLedger(redis_client, redis_namespace)
    _walk(ledger)
    ledger.skip("r1", [("docs/x.bin", "binary")])
    ledger.record("r1", [("docs/a.md", "failed", "x"), ("docs/b.md", "skipped", "y"), ("docs/c.md", "added", None)])
    ledger.stage("r1", "b-1", [{"path": "docs/a.md"}])
    keys = list(redis_client.scan_iter(match=f"{redis_namespace}:*"))
    assert len(keys) >= 8
    assert all(0 < redis_client.ttl(k) <= 7 * 24 * 3600 for k in keys), {k: redis_client.ttl(k) for k in keys}


def test_the_run_lock_admits_one_run_and_names_it(redis_client: redis.Redis, redis_namespace: str) -> None:
    ledger = RedisLedger(redis_client, redis_namespace)
    assert ledger.run_lock.acquire("r1", 5_000) is None
    assert ledger.run_lock.acquire("r2", 5_000) == "r1"
    assert ledger.run_lock.refresh("r2") is False and ledger.run_lock.release("r2") is False
    assert ledger.run_lock.refresh("r1", 60_000) is True
    assert 5_000 < redis_client.pttl(f"{redis_namespace}:run-lock") <= 60_000
    ledger.start("r1", {})
    ledger.finish("r1", "complete", 0, 0, 0, None)
    assert ledger.run_lock.holder() is None
    assert ledger.run_lock.acquire("r2", 5_000) is None


def test_a_run_left_running_without_its_lock_is_abandoned_by_the_next(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    ledger = RedisLedger(redis_client, redis_namespace)
    assert ledger.run_lock.acquire("r1", 5_000) is None
    _walk(ledger, "r1")
    redis_client.delete(f"{redis_namespace}:run-lock")  # the lock expired: its CLI and workers went away
    assert ledger.run_lock.acquire("r2", 5_000) is None
    old = ledger.summary("r1")
    assert old.state == "failed" and "r2" in (old.error or "")
    assert ledger.claim_finish("r1") is False, "an abandoned run never prunes"


def test_a_run_whose_keys_are_gone_reads_as_failed(redis_client: redis.Redis, redis_namespace: str) -> None:
    summary = RedisLedger(redis_client, redis_namespace).summary("nope")
    assert summary.state == "failed" and "gone" in (summary.error or "")


def test_a_missing_redis_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    from _pytest.outcomes import Failed, Skipped

    from tests.workers.conftest import require_redis

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(Skipped):
        require_redis("redis://127.0.0.1:1/0")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(Failed, match="CI=true"):
        require_redis("redis://127.0.0.1:1/0")
