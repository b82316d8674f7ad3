"""The write operations as frozen requests: wire forms round-trip, errors cross by the table, check via the engine."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from config import errors
from config.errors import IndexNotBuilt, PipelineError, StoreBusy
from config.settings import Settings
from pipeline.lock import WriteLock
from pipeline.vectors import VectorIdentity
from tests.query.stores import build_store, store_settings
from workers.engine import open_engine
from workers.maintenance import HeldStore
from workers.operations import (
    ERRORS,
    SENT,
    Check,
    Rebuild,
    Remove,
    Reset,
    SwitchStep,
    Vacuum,
    answer,
    operation_from_wire,
    raise_for,
)

IDENTITY = VectorIdentity("m", 4)
SENT_OPERATIONS = [Remove(("docs/a.md", "docs/b.md")), Rebuild(), Vacuum(), Reset(),
                   SwitchStep("start", IDENTITY), SwitchStep("finish", IDENTITY), SwitchStep("abandon", IDENTITY),
                   SwitchStep("store", IDENTITY, (1, 2), (b"\x00\x01", b"\xff"), ("d1", "d2"))]


@pytest.mark.parametrize("op", SENT_OPERATIONS, ids=lambda op: f"{op.name}")
def test_every_sent_operation_is_frozen_and_comes_back_from_its_wire_form_equal(
        op: Remove | Rebuild | Vacuum | Reset | SwitchStep) -> None:
    assert dataclasses.is_dataclass(op)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(op, dataclasses.fields(op)[0].name if dataclasses.fields(op) else "x", None)
    assert operation_from_wire(op.to_wire()) == op


def test_every_sent_operation_is_in_the_name_table_and_an_unknown_name_is_refused() -> None:
    assert sorted(SENT) == ["rebuild", "remove", "reset", "switch", "vacuum"]
    with pytest.raises(PipelineError, match="unknown operation 'drop'"):
        operation_from_wire({"op": "drop"})


def test_an_error_crosses_the_channel_as_the_class_the_table_names_and_an_unlisted_one_as_pipeline_error() -> None:
    for name, kind in ERRORS.items():
        assert kind is getattr(errors, name)
        with pytest.raises(kind) as raised:
            raise_for({"error": "text", "kind": name})
        assert type(raised.value) is kind and str(raised.value) == "text"
    with pytest.raises(PipelineError) as unlisted:
        raise_for({"error": "boom", "kind": "RerankError"})  # needs a kind of its own: not rebuilt by name
    assert type(unlisted.value) is PipelineError and str(unlisted.value) == "boom"
    assert raise_for({"removed": []}) == {"removed": []}


def test_a_writer_answers_what_an_operation_raised_with_its_name(tmp_path: Path) -> None:
    settings = store_settings(tmp_path)
    held = HeldStore(settings)
    try:
        reply = answer(held, Rebuild().to_wire())
    finally:
        held.close()
    assert reply["kind"] in ERRORS and "error" in reply
    with pytest.raises(ERRORS[reply["kind"]]):
        raise_for(reply)


def _store(base: Path) -> Settings:
    return build_store(store_settings(base), {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n"})


def test_the_engine_applies_each_request_and_answers_its_typed_result(tmp_path: Path) -> None:
    settings = _store(tmp_path)
    with open_engine(settings) as engine:
        assert engine.apply(Remove(("docs/a.md", "docs/none.md"))) == ["docs/a.md"]
        before, after = engine.apply(Vacuum())
        assert before > 0 and after > 0
        assert engine.apply(Rebuild()).after.ok
        assert engine.apply(Check(full=True)).ok
        emptied = engine.apply(Reset())
    assert (emptied.documents, emptied.existed) == (1, True)


def test_check_through_the_engine_takes_the_lock_only_when_it_is_free(tmp_path: Path) -> None:
    settings = _store(tmp_path)
    lock = WriteLock(settings.store_dir)
    lock.acquire("a run")
    try:
        with open_engine(settings) as engine:
            held = engine.apply(Check())
            with pytest.raises(StoreBusy):
                engine.apply(Rebuild())
    finally:
        lock.release()
    assert held.blocked == "busy" and not held.complete and not held.damaged
    with open_engine(settings) as engine:
        assert engine.apply(Check()).complete
    with pytest.raises(IndexNotBuilt), open_engine(store_settings(tmp_path / "none")) as engine:
        engine.apply(Check())


def test_rm_is_resolved_by_the_engine_before_anything_is_removed(tmp_path: Path) -> None:
    settings = _store(tmp_path)
    with open_engine(settings) as engine:
        removal = engine.resolve(("docs", "docs/a.md", "docs"), prefix=False)
    assert [(t.given, t.stored, t.subtree) for t in removal.targets] == [
        ("docs", ("docs/a.md", "docs/b.md"), True), ("docs/a.md", ("docs/a.md",), False)]
    assert (removal.documents, removal.whole_roots) == (2, ("docs",))  # the whole root: rm refuses without --force
    with open_engine(settings) as engine:
        assert [p for p in engine.apply(Remove(tuple(removal.wanted)))] == ["docs/a.md", "docs/b.md"]
