"""A replica uses nothing in a manifest it has not checked: a bad field (from a shared directory or a primary)
refuses the generation with its reason, /healthz stays 200 on the last good one, and no control sequence
written into a manifest reaches the operator's terminal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from pipeline import publish as pub
from pipeline.pull import Puller
from pipeline.pull_errors import PullRefused
from query.replica import SnapshotIndex
from query.serve.http_api import build_app
from tests.cutting_proxy import Faults, cutting_proxy
from tests.query.stores import DOCS, build_store, store_settings
from tests.query.test_http_api import Running
from tests.query.test_snapshot_pull import TOKEN, Primary, primary  # noqa: F401 - the primary, by name

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m\u202e"
# (field, bad value, what the refusal names): one per field and kind of damage
BAD = [
    ("created", None, "created is null, not a Unix time"),
    ("created", "yesterday", "created is \"yesterday\", not a Unix time"),
    ("documents", f"{ESCAPES}12", "documents is \"\\u001b]0;owned"),
    ("chunks", -3, "chunks is -3, not a whole number"),
    ("vector_identity", ["model"], "vector_identity is [\"model\"], not null or an object of strings"),
    ("source", 7, "source is 7, not a string"),
    ("format_version", True, "format_version is true, not a whole number"),
    ("bytes", 1.5, "bytes is 1.5, not a whole number above 0"),
]


def _rewrite(directory: Path, generation: int, field: str, value: object) -> None:
    path = pub.manifest_path(directory, generation)
    data = json.loads(path.read_text(encoding="utf-8"))
    data[field] = value
    path.write_text(json.dumps(data), encoding="utf-8")


def _health(index: SnapshotIndex, tmp_path: Path) -> httpx.Response:
    settings = store_settings(tmp_path / "replica-host")
    with Running(build_app(settings, "127.0.0.1", None, warn=lambda m: None, replica=index)) as url:
        return httpx.get(f"{url}/healthz", timeout=10)


@pytest.mark.parametrize(("field", "value", "reason"), BAD, ids=[f"{f}={v!r}" for f, v, _ in BAD])
def test_a_shared_directorys_manifest_with_a_bad_field_is_refused_and_healthz_stays_200(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, reason: str) -> None:
    settings = build_store(store_settings(tmp_path / "primary"), DOCS)
    snaps = settings.publish_dir
    pub.publish(settings.db_path, snaps)
    pub.publish(settings.db_path, snaps)
    _rewrite(snaps, 2, field, value)
    index = SnapshotIndex(settings, snaps)
    try:
        assert index.poll() == 1 and index.refused == {2}
        reply = _health(index, tmp_path)
        assert reply.status_code == 200, reply.text
        assert reply.json()["generation"] == 1 and reply.json()["documents"] == len(DOCS)
    finally:
        index.close()
    err = capsys.readouterr().err
    refusal = [line for line in err.splitlines() if line.startswith("knowledge: warning: refused generation 2")]
    assert len(refusal) == 1 and reason in refusal[0], err
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err


def test_escape_sequences_in_a_manifest_of_the_right_types_never_reach_the_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = build_store(store_settings(tmp_path / "primary"), DOCS)
    snaps = settings.publish_dir
    pub.publish(settings.db_path, snaps)
    _rewrite(snaps, 1, "source", f"/srv/{ESCAPES}/knowledge.db")  # a string, as its type says: served
    _rewrite(snaps, 1, "surplus\x1b[2J", 1)  # a field this version does not know: ignored
    index = SnapshotIndex(settings, snaps)
    try:
        assert index.poll() == 1
    finally:
        index.close()
    err = capsys.readouterr().err
    assert "serving generation 1" in err and not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", err), err


def test_a_primary_sending_a_bad_manifest_is_refused_once_and_nothing_is_installed(
        primary: Primary, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    primary.publish("alpha")
    other = tmp_path / "replica"
    with cutting_proxy(primary.port, Faults(manifest={"created": None, "documents": ESCAPES})) as url:
        puller = Puller(url, other, 2, TOKEN)
        try:
            with pytest.raises(PullRefused, match="created is null, not a Unix time") as refused:
                puller.pull()
            assert refused.value.generation == 1 and puller.refused == {1}
            puller.pull_once(lambda _generation: None)  # offered again: refused once, not fetched, not said again
            assert puller.record.failed == 0 and puller.record.problem is None
        finally:
            puller.close()
    assert pub.generations(other) == [] and not [p for p in other.glob("*") if not p.name.startswith(".")]
    index = SnapshotIndex(primary.settings, other)
    try:
        assert index.poll() is None
        reply = _health(index, tmp_path)
        assert reply.status_code == 200 and reply.json()["generation"] is None
    finally:
        index.close()
    assert "\x1b" not in capsys.readouterr().err
