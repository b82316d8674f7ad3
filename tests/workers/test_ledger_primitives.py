"""One contract, two twins: MemoryPrimitives and RedisPrimitives (real Redis) answer every primitive the same way,
and each primitive is atomic when threads race on it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

THREADS = 8


def race(step: Callable[[int], Any]) -> list[Any]:
    """Run step(i) on THREADS threads released together; their answers by i (bounded: 30 s)."""
    answers: list[Any] = [None] * THREADS
    gate = threading.Barrier(THREADS)

    def run(i: int) -> None:
        gate.wait(timeout=10)
        answers[i] = step(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    return answers


def test_a_value_set_only_if_absent_keeps_the_first_and_expires(primitives) -> None:
    assert primitives.put("k", "one", 0.2, new=True) is True
    assert primitives.put("k", "two", 0.2, new=True) is False
    assert primitives.get("k") == b"one"
    assert primitives.put("k", 3, 0.2) is True and primitives.get("k") == b"3"
    time.sleep(0.3)
    assert primitives.get("k") is None and primitives.put("k", "two", 5, new=True) is True


def test_a_value_is_refreshed_or_deleted_only_by_what_it_holds(primitives) -> None:
    primitives.put("lock", "r1", 0.2)
    assert primitives.refresh_if("lock", "r2", 60) is False and primitives.delete_if("lock", "r2") is False
    assert primitives.refresh_if("lock", "r1", 60) is True
    time.sleep(0.3)
    assert primitives.get("lock") == b"r1", "refreshed past its first ttl"
    assert primitives.delete_if("lock", "r1") is True and primitives.get("lock") is None
    assert primitives.refresh_if("lock", "r1", 60) is False


def test_the_first_value_of_a_field_wins_and_is_counted_once(primitives) -> None:
    held = primitives.hash_first("out", {"a": "added", "b": "failed"}, 60, counts="cnt")
    assert held == [b"added", b"failed"]
    assert primitives.hash_first("out", {"a": "updated", "c": "added"}, 60, counts="cnt") == [b"added", b"added"]
    assert primitives.hash_all(["cnt"])[0] == {"added": b"2", "failed": b"1"}
    assert primitives.hash_first("notes", {"b": "boom"}, 60) == [b"boom"]
    assert primitives.hash_all(["cnt"])[0]["added"] == b"2"


def test_racing_first_writes_count_each_field_once(primitives) -> None:
    fields = {f"docs/{n}.md": "added" for n in range(50)}
    race(lambda i: primitives.hash_first("out", {**fields, f"own-{i}": "updated"}, 60, counts="cnt"))
    assert primitives.hash_all(["cnt"])[0] == {"added": b"50", "updated": str(THREADS).encode()}
    assert primitives.hash_len(["out"]) == [50 + THREADS]


def test_hashes_put_read_count_and_drop_fields(primitives) -> None:
    primitives.hash_put("h", {"a": "1", "b": b"\x00\xff", "c": 2.5}, 60)
    assert primitives.hash_get("h", ["a", "b", "z"]) == [b"1", b"\x00\xff", None]
    assert primitives.hash_all(["h", "none"]) == [{"a": b"1", "b": b"\x00\xff", "c": b"2.5"}, {}]
    assert primitives.hash_has([("h", "c"), ("h", "z"), ("none", "c")]) == [True, False, False]
    assert primitives.hash_len(["h", "none"]) == [3, 0]
    assert primitives.hash_incr("h", "n", 5, 60) == 5 and primitives.hash_incr("h", "n", 2, 60) == 7
    primitives.hash_drop("h", ["a", "b", "c", "n"])
    assert primitives.hash_all(["h", "none"]) == [{}, {}] and primitives.hash_len(["h"]) == [0]


def test_a_set_answers_its_size_after_each_add_so_one_racer_sees_the_last(primitives) -> None:
    sizes = race(lambda i: primitives.set_add("done", [f"b-{i}"], 60))
    assert sorted(sizes) == list(range(1, THREADS + 1))
    assert primitives.set_add("done", ["b-0"], 60) == THREADS  # a repeat adds nothing
    assert primitives.set_has("done", ["b-1", "b-x"]) == [True, False] and primitives.set_len("done") == THREADS
    primitives.set_drop("done", ["b-1", "b-x"])
    assert primitives.set_len("done") == THREADS - 1


def test_stamped_members_come_newest_first_and_old_ones_are_forgotten(primitives) -> None:
    now = time.time()
    for n, member in enumerate(["a", "b", "c"]):
        primitives.stamp("alive", member, now + n, 60, keep=10)
    assert primitives.stamped("alive") == ["c", "b", "a"] and primitives.stamped("alive", limit=2) == ["c", "b"]
    assert primitives.stamped("alive", since=now + 1) == ["c", "b"]
    primitives.stamp("alive", "d", now + 20, 60, keep=10)  # a, b and c are older than 10 s before it
    assert primitives.stamped("alive") == ["d"]
    primitives.unstamp("alive", "d")
    assert primitives.stamped("alive") == []


def test_a_log_appends_once_per_name_and_once_per_live_slot(primitives) -> None:
    assert primitives.log_append("log", "b-1", [("d1:0", "x"), ("d1:1", "y")], 60) == [0, 1]
    assert primitives.log_append("log", "b-2", [("d1:1", "y"), ("d2:0", "z")], 60) == [1, 2]
    assert primitives.log_append("log", "b-1", [("d9:0", "q")], 60) == [0, 1]  # a repeat appends nothing
    assert primitives.log_append("log", "b-3", [], 60) == []
    assert primitives.log_read("log", 0, 9) == [b"x", b"y", b"z"]
    assert primitives.log_counts("log", "b-3") == (3, 3, True) and primitives.log_counts("log", "b-4")[2] is False


def test_a_log_frees_a_range_once_and_a_freed_slot_appends_again(primitives) -> None:
    primitives.log_append("log", "b-1", [("s0", "a"), ("s1", "b"), ("s2", "c")], 60)
    primitives.log_free("log", 0, 2)
    primitives.log_free("log", 0, 2)
    assert primitives.log_counts("log") == (3, 1, False) and primitives.log_read("log", 0, 3) == [b"c"]
    assert primitives.log_append("log", "b-2", [("s0", "a"), ("s2", "c")], 60) == [3, 2]
    primitives.log_free("log")
    assert primitives.log_counts("log", "b-2") == (4, 0, True) and primitives.log_read("log", 0, 9) == []


def test_a_log_refuses_new_entries_over_its_limit_but_never_a_name_it_holds(primitives) -> None:
    assert primitives.log_append("log", "b-1", [("s0", "a"), ("s1", "b")], 60, limit=1) == [0, 1]  # 0 live
    assert primitives.log_append("log", "b-2", [("s2", "c")], 60, limit=1) is None
    assert primitives.log_append("log", "b-2", [], 60, limit=1) == []
    assert primitives.log_append("log", "b-1", [("s0", "a")], 60, limit=0) == [0, 1]
    assert primitives.log_counts("log", "b-2") == (2, 2, True)


def test_racing_appends_of_one_name_append_once_and_the_limit_holds(primitives) -> None:
    entries = [(f"s{n}", f"v{n}") for n in range(20)]
    answers = race(lambda i: primitives.log_append("log", "b-1", entries, 60))
    assert all(a == list(range(20)) for a in answers) and primitives.log_counts("log")[:2] == (20, 20)
    admitted = race(lambda i: primitives.log_append("log", f"c-{i}", [(f"t{i}", "w")], 60, limit=20))
    assert sum(a is not None for a in admitted) == 1, "only the first append found room"


def test_keys_of_any_kind_are_deleted_by_name_or_prefix_and_expire(primitives) -> None:
    primitives.put("run:1:prune", "x", 60)
    primitives.hash_put("run:1:emb:vec:d1", {"0": "v"}, 60)
    primitives.hash_put("run:1:emb:vec:d2", {"0": "v"}, 0.2)
    primitives.set_add("run:2:s", ["m"], 60)
    primitives.delete_prefix("run:1:emb:vec:")
    assert primitives.hash_len(["run:1:emb:vec:d1"]) == [0] and primitives.get("run:1:prune") == b"x"
    primitives.delete(["run:1:prune", "run:2:s"])
    assert primitives.get("run:1:prune") is None and primitives.set_len("run:2:s") == 0
    primitives.hash_put("h", {"a": "1"}, 60)
    primitives.expire("h", 0.2)
    time.sleep(0.3)
    assert primitives.hash_all(["h"])[0] == {}


def test_a_packed_json_value_comes_back_equal_through_a_hash(primitives) -> None:
    payload = [{"path": "docs/a.md", "doc": {"body": "é" * 3000, "n": 2}}]
    primitives.hash_put("staged", {"b-1": primitives.pack(payload)}, 60)
    held = primitives.hash_get("staged", ["b-1"])[0]
    assert held is not None and primitives.unpack(held) == payload


def test_a_batch_applies_its_writes_together_at_the_end_and_none_if_it_raises(primitives) -> None:
    with primitives.batch() as batch:
        batch.set_add("settled", ["d1"], 60)
        batch.hash_put("vec:d1", {"0": "v"}, 60)
        batch.stamp("runs", "r1", time.time(), 60, keep=60)
        assert primitives.set_len("settled") == 0, "nothing is written before the block ends"
    assert primitives.set_has("settled", ["d1"]) == [True] and primitives.stamped("runs") == ["r1"]
    try:
        with primitives.batch() as batch:
            batch.delete(["vec:d1"])
            batch.set_drop("settled", ["d1"])
            raise RuntimeError("killed midway")
    except RuntimeError:
        pass
    assert primitives.hash_len(["vec:d1"]) == [1] and primitives.set_len("settled") == 1
