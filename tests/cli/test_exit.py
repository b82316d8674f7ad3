"""The `knowledge` executable (cli.run): a read command ends without the interpreter's teardown, and
nothing it owes is lost: its output, its exit code, the atexit hooks, a thread still running."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_tree

DOCS = {"docs/a.md": "# Alpha\n\nThe quick brown fox.\n", "docs/b.md": "# Beta\n\nA lazy dog.\n"}


def _knowledge(workdir: Path, prelude: str, *args: str, entry: str = "run") -> subprocess.CompletedProcess[str]:
    """`knowledge ARGS` through cli.run (or cli.main), after `prelude` ran in the same process."""
    code = f"import sys\n{prelude}\nfrom cli import {entry}\nsys.argv = ['knowledge', *{list(args)!r}]\n{entry}()\n"
    return subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=60)


def _indexed(workdir: Path) -> Path:
    write_tree(workdir, DOCS)
    assert _knowledge(workdir, "", "index", "docs").returncode == 0
    return workdir


def test_a_read_command_prints_all_of_its_output_and_runs_the_exit_hooks(workdir: Path) -> None:
    _indexed(workdir)
    hook = "import atexit\natexit.register(lambda: print('hook ran', file=sys.stderr))"
    done = _knowledge(workdir, hook, "search", "fox", "--json", "--top-k", "20")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["path"] == "docs/a.md"
    assert done.stderr.splitlines()[-1] == "hook ran"


def test_a_failing_read_command_keeps_its_exit_code_and_message(workdir: Path) -> None:
    _indexed(workdir)
    fast = _knowledge(workdir, "", "show", "docs/none.md#3")
    plain = _knowledge(workdir, "", "show", "docs/none.md#3", entry="main")
    assert fast.returncode == plain.returncode != 0
    assert (fast.stdout, fast.stderr) == (plain.stdout, plain.stderr)


def test_a_read_command_waits_for_a_thread_it_did_not_start_to_finish(workdir: Path) -> None:
    _indexed(workdir)
    marker = workdir / "written"
    thread = (
        "import threading, time\n"
        f"def late():\n    time.sleep(0.3)\n    open({str(marker)!r}, 'w').write('done')\n"
        "threading.Thread(target=late).start()"
    )
    done = _knowledge(workdir, thread, "stats")
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "done"


TEARDOWN = ("class Finalised:\n    def __del__(self):\n        sys.__stderr__.write('torn down\\n')\n"
            "kept = Finalised()")


def test_a_read_command_skips_the_teardown_a_command_that_writes_does_not(workdir: Path) -> None:
    write_tree(workdir, DOCS)
    wrote = _knowledge(workdir, TEARDOWN, "index", "docs", "--json")
    assert wrote.returncode == 0 and json.loads(wrote.stdout)["added"] == 2
    assert wrote.stderr.splitlines()[-1] == "torn down"
    read = _knowledge(workdir, TEARDOWN, "search", "fox")
    assert read.returncode == 0 and "docs/a.md#0" in read.stdout
    assert "torn down" not in read.stderr
