"""`knowledge search`'s default preview: cut at a sentence end, matched words bold only on a terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import write_tree

KNOWLEDGE = str(Path(sys.executable).with_name("knowledge"))
BOLD = "\x1b[1m"
DOCS = {
    "docs/cleanup.md": (
        "# Cleanup\n\nDependencies with yield run their cleanup after the response is sent to the client. "
        "The exit code of the dependency runs once the response has gone out, so a database session closes "
        "late and safely.\n"
    ),
}


def test_the_preview_ends_at_a_sentence_end_and_piped_output_has_no_escapes(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    code, out, _ = run_cli("search", "cleanup", "with", "yield")
    chunk = next(line for line in out.splitlines() if "Chunk:" in line)
    assert code == 0 and "\x1b" not in out
    assert chunk.endswith("after the response is sent to the client.")  # not "... the exit code of..."


def _on_a_terminal(args: list[str], cwd: Path) -> str:
    """The output of `knowledge ARGS` with its stdout a pseudo-terminal (read for at most 60 s)."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([KNOWLEDGE, *args], cwd=cwd, stdout=follower, stderr=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(leader)
        proc.wait(timeout=10)
    return b"".join(chunks).decode("utf-8", "replace")


def test_on_a_terminal_the_matched_words_are_bold_and_the_stop_word_is_not(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    out = _on_a_terminal(["search", "cleanup", "with", "yield"], workdir)
    chunk = next(line for line in out.splitlines() if "Chunk:" in line)
    assert f"{BOLD}yield\x1b[0m" in chunk and f"{BOLD}cleanup\x1b[0m" in chunk
    assert f"{BOLD}with" not in chunk
