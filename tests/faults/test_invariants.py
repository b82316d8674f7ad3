"""The checker itself: its walk agrees with the walker on a hostile tree, and it fails on what it must catch."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.formats import extensions_of
from pipeline.walker import MAX_FILE_BYTES, walk_root
from tests.conftest import damage_store, write_tree
from tests.faults.invariants import Invariants, files_on_disk, integrity_problems

RunCli = Callable[..., tuple[int, str, str]]


def test_the_independent_walk_finds_exactly_what_the_walker_indexes(workdir: Path) -> None:
    write_tree(workdir, {
        "docs/a.md": "# A\n", "docs/b.txt": "b\n", "docs/c.markdown": "c\n", "docs/skip.rst": "no\n",
        "docs/.hidden.md": "no\n", "docs/.dot/x.md": "no\n", "docs/memory/x.md": "no\n",
        "docs/binary.md": b"a\x00b", "docs/latin.md": b"\xff\xfe", "docs/big.md": b"a" * (MAX_FILE_BYTES + 1),
        "docs/sub/deep.md": "deep\n", "private/p.md": "private\n",
    })
    os.mkfifo(workdir / "docs/pipe.md")
    (workdir / "docs/link.md").symlink_to(workdir / "private/p.md")
    (workdir / "docs/linkdir").symlink_to(workdir / "private", target_is_directory=True)
    with open(os.fsencode(workdir / "docs") + b"/bad\xffname.md", "wb") as handle:
        handle.write(b"# x\n")
    found = files_on_disk([workdir / "docs"])
    assert sorted(os.path.relpath(p, workdir) for p in found) == [
        "docs/a.md", "docs/b.txt", "docs/c.markdown", "docs/sub/deep.md"]
    # the walker, before reading, over the formats the independent walk knows (markdown and text)
    walked = {f.path for f in walk_root(str(workdir / "docs"), extensions=extensions_of(("markdown", "text"))).files}
    assert set(found) <= walked and walked - set(found) == {str(workdir / "docs/binary.md"),
                                                            str(workdir / "docs/latin.md")}


def test_the_checker_catches_stale_content_and_orphan_rows(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {f"docs/d{i}.md": f"# Doc {i}\n\nwords for checking {i}\n" for i in range(5)})
    past = int((time.time() - 60) * 1e9)  # out of the racy window: a re-run trusts size and mtime
    for path in (workdir / "docs").iterdir():
        os.utime(path, ns=(past, past))
    assert run_cli("index", "docs")[0] == 0
    checker = Invariants(run_cli, workdir, workdir / "knowledge/default/knowledge.db", ("docs",))
    checker.assert_recovered()

    damage_store(checker.db_path, f"UPDATE documents SET sha256 = '{'0' * 64}' WHERE path = 'docs/d1.md'")
    with pytest.raises(AssertionError, match="stored content is not the file's"):
        checker.assert_recovered()

    damage_store(checker.db_path, "PRAGMA foreign_keys = OFF", "DELETE FROM documents WHERE path = 'docs/d2.md'")
    problems = integrity_problems(checker.db_path)
    assert problems and problems[0].endswith(" orphan chunks"), problems
