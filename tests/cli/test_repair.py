"""check, rebuild, vacuum and reset as a user runs them: a damaged store gives one line, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from config.loader import load_settings
from pipeline import db
from pipeline.lock import WriteLock
from tests.conftest import write_tree
from tests.pipeline.test_integrity import garble

RunCli = Callable[..., tuple[int, str, str]]
DOCS: dict[str, str | bytes] = {
    f"docs/d{i}.md": f"# Doc {i}\n\nRetention policy {i} for logs.\n\n## Part\n\n" + f"word{i} filler " * 200
    for i in range(40)
}
READERS = (("search", "retention"), ("match", "retention"), ("words", "reten"), ("show", "docs/d1.md#0"))
WRITERS = (("rm", "docs/d2.md"), ("index", "docs"))


@pytest.fixture
def indexed(workdir: Path, run_cli: RunCli) -> Path:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    return load_settings(None, None).db_path


def damage(path: Path, statement: str) -> None:
    conn = db.open_writer(path)
    try:
        conn.execute(statement)
    finally:
        conn.close()


def one_line_naming_check_and_rebuild(result: tuple[int, str, str]) -> None:
    code, _, err = result
    lines = [line for line in err.splitlines() if not line.startswith("tier:")]
    assert code == 1 and len(lines) == 1, err
    assert "Traceback" not in err and "`knowledge check`" in lines[0] and "`knowledge rebuild`" in lines[0]


def test_a_sound_store_checks_ok_with_exit_0_and_json(indexed: Path, run_cli: RunCli) -> None:
    code, out, _ = run_cli("check")
    assert code == 0 and out.splitlines()[-1].startswith("check: ok")
    code, out, err = run_cli("check", "--json", "--full")
    data = json.loads(out)
    assert code == 0 and data["ok"] and data["complete"] and data["full"] and err.startswith("tier:")


@pytest.mark.parametrize("statement", [
    "INSERT INTO chunks_fts(chunks_fts) VALUES('delete-all')",
    "DROP TRIGGER chunks_ad",
])
def test_derived_damage_is_reported_then_rebuilt_and_every_command_works_after(
    indexed: Path, run_cli: RunCli, statement: str,
) -> None:
    damage(indexed, statement)
    code, out, _ = run_cli("check")
    assert code == 1 and "damaged" in out and "`knowledge rebuild`" in out
    data = json.loads(run_cli("check", "--json")[1])
    assert not data["ok"] and data["findings"][0]["repair"] == "knowledge rebuild"
    for command in WRITERS:
        one_line_naming_check_and_rebuild(run_cli(*command))
    if "delete-all" in statement:  # an emptied index must not read as "no results"
        for command in READERS[:3]:
            one_line_naming_check_and_rebuild(run_cli(*command))
    code, out, _ = run_cli("rebuild")
    assert code == 0 and "`knowledge check` passes" in out
    assert run_cli("check")[0] == 0
    assert "Retention policy" in run_cli("search", "retention")[1]
    assert run_cli("rm", "docs/d2.md")[0] == 0 and run_cli("index", "docs")[0] == 0


def test_garbage_in_the_file_gives_one_line_everywhere_and_rebuild_names_reset(indexed: Path, run_cli: RunCli) -> None:
    garble(indexed)
    code, out, _ = run_cli("check")
    assert code == 1 and "`knowledge reset --force` then `knowledge index`" in out
    for command in READERS + WRITERS:  # a command that never reads a damaged page may still answer
        result = run_cli(*command)
        if result[0] != 0 or result[2]:
            one_line_naming_check_and_rebuild(result)
    code, _, err = run_cli("rebuild")
    assert code == 1 and "Traceback" not in err and "knowledge reset --force" in err
    code, out, _ = run_cli("doctor")
    assert code == 1 and "fail     integrity" in out
    code, out, _ = run_cli("reset", "--force")
    assert code == 0 and "removed" in out
    assert run_cli("index", "docs")[0] == 0 and run_cli("check")[0] == 0


def test_reset_keeps_an_empty_store_and_says_what_it_removed(indexed: Path, run_cli: RunCli) -> None:
    code, out, _ = run_cli("reset", "--force")
    assert code == 0 and "removed 40 documents and 160 chunks" in out
    assert json.loads(run_cli("search", "retention", "--json")[1])["status"] == "index_empty"
    assert json.loads(run_cli("stats", "--json")[1])["documents"] == 0
    assert run_cli("check")[0] == 0


def test_rm_of_most_documents_gives_the_space_back_and_vacuum_still_runs(indexed: Path, run_cli: RunCli) -> None:
    before = indexed.stat().st_size
    assert run_cli("rm", *[f"docs/d{i}.md" for i in range(36)], "--force")[0] == 0
    assert indexed.stat().st_size < before / 2
    code, out, _ = run_cli("vacuum")
    assert code == 0 and out.splitlines()[-1].startswith("vacuum:")
    assert run_cli("check")[0] == 0


def test_doctor_runs_the_check(indexed: Path, run_cli: RunCli) -> None:
    code, out, _ = run_cli("doctor")
    assert code == 0 and "ok       integrity" in out


def test_a_dropped_fts_table_names_rebuild_not_reset(indexed: Path, run_cli: RunCli) -> None:
    damage(indexed, "DROP TABLE chunks_fts_cjk")
    one_line_naming_check_and_rebuild(run_cli("search", "retention"))
    one_line_naming_check_and_rebuild(run_cli("index", "docs"))
    assert run_cli("rebuild")[0] == 0 and run_cli("check")[0] == 0
    assert "Retention policy" in run_cli("search", "retention")[1]


def test_while_a_run_holds_the_lock_rebuild_and_vacuum_exit_75_and_check_says_what_did_not_run(
    indexed: Path, run_cli: RunCli,
) -> None:
    lock = WriteLock(indexed.parent)
    lock.acquire("knowledge index")
    try:
        for command in ("rebuild", "vacuum"):
            code, _, err = run_cli(command)
            assert code == 75 and "another writer holds the store lock" in err
        code, out, _ = run_cli("check")
        assert code == 75 and "not run  fts" in out
    finally:
        lock.release()


def test_a_run_that_prunes_most_documents_gives_the_space_back(indexed: Path, run_cli: RunCli, workdir: Path) -> None:
    before = indexed.stat().st_size
    (workdir / "knowledge.yaml").write_text("knowledge:\n  paths: [docs]\n", encoding="utf-8")
    for i in range(36):
        (workdir / f"docs/d{i}.md").unlink()
    code, out, _ = run_cli("index")  # configured paths are pruned; paths given on the line are not
    assert code == 0 and "removed=36" in out
    assert indexed.stat().st_size < before / 2
    assert run_cli("check")[0] == 0
