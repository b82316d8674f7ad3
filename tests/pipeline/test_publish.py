"""`knowledge publish`: verified generations, written atomically, never modified, pruned beyond --keep."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline import publish as pub
from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]


def _indexed(workdir: Path, run_cli: RunCli, files: int = 3) -> Path:
    write_tree(workdir, {f"docs/d{i}.md": f"# Doc {i}\n\nalpha beta word{i}\n" for i in range(files)})
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    return workdir / "knowledge" / "default" / "published"


def test_publish_writes_a_verified_generation_with_its_counts(workdir: Path, run_cli: RunCli) -> None:
    directory = _indexed(workdir, run_cli)
    code, out, err = run_cli("publish", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) == {"generation", "path", "sha256", "documents", "chunks", "bytes", "seconds"}
    assert (data["generation"], data["documents"], data["chunks"]) == (1, 3, 3)
    manifest = pub.verify(directory, 1)
    assert manifest.sha256 == data["sha256"] == pub.sha256_file(Path(data["path"]))
    assert manifest.source == str(workdir / "knowledge" / "default" / "knowledge.db")
    assert stat.S_IMODE(os.stat(data["path"]).st_mode) == 0o444
    assert not [p for p in directory.iterdir() if p.name.startswith(pub.TEMP_PREFIX)]


def test_publish_keeps_only_the_newest_generations(workdir: Path, run_cli: RunCli) -> None:
    directory = _indexed(workdir, run_cli)
    for _ in range(4):
        assert run_cli("publish", "--keep", "2")[0] == 0
    assert pub.generations(directory) == [4, 3]
    assert sorted(p.name for p in directory.iterdir()) == ["g000003", "g000003.json", "g000004", "g000004.json"]


def test_publish_writes_to_the_configured_directory(workdir: Path, run_cli: RunCli) -> None:
    (workdir / "knowledge.yaml").write_text("knowledge:\n  publish:\n    directory: snaps\n    keep: 1\n")
    _indexed(workdir, run_cli)
    assert run_cli("publish")[0] == 0 and run_cli("publish")[0] == 0
    assert pub.generations(workdir / "snaps") == [2]


def test_index_publish_publishes_only_after_a_run_that_changed_something(workdir: Path, run_cli: RunCli) -> None:
    directory = _indexed(workdir, run_cli)
    code, out, err = run_cli("index", "docs", "--publish")
    assert code == 0 and pub.generations(directory) == [], out + err  # nothing changed: nothing published
    (workdir / "docs" / "new.md").write_text("# New\n\nnovelword\n")
    code, out, err = run_cli("index", "docs", "--publish", "--json")
    assert code == 0, err
    assert json.loads(out[out.index("{"):])["added"] == 1 and "published: generation 1" in err
    assert pub.verify(directory, 1).documents == 4


def test_publish_after_index_in_the_config_publishes_after_each_run_that_changed_something(
        workdir: Path, run_cli: RunCli) -> None:
    (workdir / "knowledge.yaml").write_text("knowledge:\n  paths: [docs]\n  publish:\n    after_index: true\n")
    directory = _indexed(workdir, run_cli)
    assert pub.generations(directory) == [1]
    code, out, err = run_cli("index")
    assert code == 0 and pub.generations(directory) == [1] and "published" not in out + err  # nothing changed
    (workdir / "docs" / "new.md").write_text("# New\n\nnovelword\n")
    code, out, err = run_cli("index")
    assert code == 0 and "published: generation 2" in out, out + err
    assert pub.verify(directory, 2).documents == 4


def test_a_publish_killed_midway_leaves_no_generation_to_serve(workdir: Path, run_cli: RunCli) -> None:
    directory = _indexed(workdir, run_cli)
    assert run_cli("publish")[0] == 0
    # what kill -9 leaves: the temporary copy, or a renamed generation whose manifest never came
    (directory / f"{pub.TEMP_PREFIX}2-999").mkdir()
    (directory / f"{pub.TEMP_PREFIX}2-999" / pub.DB_NAME).write_bytes(b"partial")
    (directory / "g000002").mkdir()
    (directory / "g000002" / pub.DB_NAME).write_bytes(b"partial")
    assert pub.generations(directory) == [1]
    assert run_cli("publish")[0] == 0  # numbered past the leftover, which is pruned once a newer one is complete
    assert pub.generations(directory) == [3, 1]
    assert not (directory / "g000002").exists()
    assert pub.verify(directory, 3).documents == 3


def test_a_tampered_or_truncated_generation_is_refused(workdir: Path, run_cli: RunCli) -> None:
    directory = _indexed(workdir, run_cli)
    assert run_cli("publish")[0] == 0 and run_cli("publish")[0] == 0
    first = directory / "g000001" / pub.DB_NAME
    os.chmod(first, 0o644)
    data = bytearray(first.read_bytes())
    data[-100] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(pub.SnapshotRefused, match="SHA-256"):
        pub.verify(directory, 1)
    second = directory / "g000002" / pub.DB_NAME
    os.chmod(second, 0o644)
    second.write_bytes(second.read_bytes()[:4096])
    with pytest.raises(pub.SnapshotRefused, match="bytes"):
        pub.verify(directory, 2)
    pub.manifest_path(directory, 2).write_text("{not json")
    with pytest.raises(pub.SnapshotRefused, match="manifest"):
        pub.verify(directory, 2)


def test_publish_without_a_store_says_the_index_is_not_built(workdir: Path, run_cli: RunCli) -> None:
    code, _, err = run_cli("publish")
    assert code != 0 and "knowledge index" in err and "Traceback" not in err
    assert not (workdir / "knowledge" / "default" / "published").exists()
