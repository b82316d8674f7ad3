"""What a survey finds for a run to do: here, the stored files it removes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from config.settings import Settings
from pipeline.fingerprint import StoredStat
from pipeline.survey import survey
from tests.conftest import write_tree

STAT = StoredStat("0" * 64, 1, 1, 1)


def _stored(*paths: str) -> dict[str, StoredStat]:
    return dict.fromkeys(paths, STAT)


def test_a_complete_walk_removes_only_the_stored_files_under_it_that_no_root_walked(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n", "docs/.b.md": "# B\n", "notes/c.md": "# C\n"})
    stored = _stored("docs/a.md", "docs/.b.md", "docs/gone.md", "docs/sub/gone.md", "docs-2/x.md",
                     "notes/c.md", "notes/gone.md", "https://example.org/docs/page")
    # docs walked as a tree (its dot file skipped there) and docs/.b.md named alone; notes not walked
    found = survey(make_settings(), [str(workdir / "docs"), str(workdir / "docs/.b.md")], stored, False)
    assert found.removals(stored) == ["docs/gone.md", "docs/sub/gone.md"]


def test_a_walk_that_saw_nothing_removes_nothing(workdir: Path, make_settings: Callable[..., Settings]) -> None:
    (workdir / "docs").mkdir()
    stored = _stored("docs/a.md")
    assert survey(make_settings(), [str(workdir / "docs")], stored, False).removals(stored) == []


def test_a_no_change_survey_of_a_large_tree_removes_nothing(
        workdir: Path, make_settings: Callable[..., Settings]) -> None:
    write_tree(workdir, {f"docs/d{i % 10}/f{i}.md": "x\n" for i in range(2000)})
    found = survey(make_settings(), [str(workdir / "docs")], {}, False)
    stored = {f.path: StoredStat("0" * 64, f.size, f.mtime_ns, f.mtime_ns + 10**10) for f in found.files.values()}
    again = survey(make_settings(), [str(workdir / "docs")], stored, False)
    assert (len(again.unchanged), again.jobs, again.removals(stored)) == (2000, [], [])
