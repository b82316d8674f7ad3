"""Listings that page: `sources`, `words` and `runs` take --limit/--offset and --path, stream their output, and
`check` shows its progress on a terminal only."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from config.loader import load_settings
from config.settings import Settings
from query.listing import SourcesListing
from query.requests import SourcesRequest
from query.service import QueryService
from tests.conftest import write_tree
from tests.query.stores import build_store, store_settings
from tests.workers.conftest import REDIS_URL, delete_namespace, require_redis
from workers.broker import namespace
from workers.distributed import open_ledger

RunCli = Callable[..., tuple[int, str, str]]
KNOWLEDGE = str(Path(sys.executable).with_name("knowledge"))
NAMES = ["a_b/x.md", "axb/y.md", "a%/z.md", "ab/w.md", "docs/in.md", "docs/sub/deep.md", "docs-old/out.md",
         "docs.md", "notes/one.md", "notes/two.md", "notes/three.md"]


@pytest.fixture
def tree(workdir: Path, run_cli: RunCli) -> Path:
    write_tree(workdir, {name: f"# {name}\n\nthe token of {name.replace('/', ' ')} beside alpha{i}\n"
                         for i, name in enumerate(NAMES)})
    assert run_cli("index", *sorted({n.split("/")[0] for n in NAMES}))[0] == 0
    return workdir


def _sources(run_cli: RunCli, *args: str) -> dict[str, Any]:
    code, out, err = run_cli("sources", "--json", *args)
    assert code == 0, err
    return dict(json.loads(out))


def test_sources_pages_join_to_the_whole_listing_and_say_where_the_next_starts(tree: Path, run_cli: RunCli) -> None:
    whole = _sources(run_cli)
    assert whole["total"] == whole["returned"] == len(NAMES) and whole["next_offset"] is None
    paths = [d["path"] for d in whole["documents"]]
    assert paths == sorted(NAMES)
    pages: list[str] = []
    offset: int | None = 0
    for _ in range(len(NAMES)):  # bounded: 3 pages of 4 are expected
        page = _sources(run_cli, "--limit", "4", "--offset", str(offset))
        assert page["offset"] == offset and page["total"] == len(NAMES) and page["returned"] <= 4
        pages += [d["path"] for d in page["documents"]]
        offset = page["next_offset"]
        if offset is None:
            break
    assert pages == paths
    last = _sources(run_cli, "--limit", "3", "--offset", str(len(NAMES) - 3))
    assert last["returned"] == 3 and last["next_offset"] is None
    past = _sources(run_cli, "--offset", str(len(NAMES)))
    assert past["documents"] == [] and past["next_offset"] is None and past["total"] == len(NAMES)
    code, out, _ = run_cli("sources", "--offset", str(len(NAMES) + 5))
    assert code == 0 and f"no documents past offset {len(NAMES) + 5} ({len(NAMES)} in all)" in out
    assert run_cli("sources", "--limit", "0")[0] == 2 and run_cli("sources", "--offset", "-1")[0] == 2


def test_sources_path_is_a_literal_prefix_or_a_glob(tree: Path, run_cli: RunCli) -> None:
    def listed(*paths: str) -> list[str]:
        return [d["path"] for d in _sources(run_cli, *[a for p in paths for a in ("--path", p)])["documents"]]

    assert listed("a_b") == ["a_b/x.md"]  # `_` is no wildcard
    assert listed("a%") == ["a%/z.md"]  # nor `%`
    assert listed("docs") == ["docs/in.md", "docs/sub/deep.md"]  # not docs-old/ nor docs.md
    assert listed("docs/**/*.md") == ["docs/in.md", "docs/sub/deep.md"]
    assert listed("notes", "docs.md") == ["docs.md", "notes/one.md", "notes/three.md", "notes/two.md"]
    page = _sources(run_cli, "--path", "notes", "--limit", "2", "--offset", "1")
    assert [d["path"] for d in page["documents"]] == ["notes/three.md", "notes/two.md"]
    assert page["total"] == 3 and page["next_offset"] is None


def test_sources_before_any_index_answers_not_built_on_stdout_and_exits_1(workdir: Path, run_cli: RunCli) -> None:
    code, out, err = run_cli("sources", "--json", "--limit", "5")
    assert code == 1 and json.loads(out)["status"] == "index_not_built" and "knowledge index" in err


def test_sources_matching_nothing_says_so(tree: Path, run_cli: RunCli) -> None:
    nothing = _sources(run_cli, "--path", "nowhere")
    assert (nothing["total"], nothing["documents"], nothing["next_offset"]) == (0, [], None)
    code, out, _ = run_cli("sources", "--path", "nowhere")
    assert code == 0 and "no documents indexed under nowhere" in out
    code, _, err = run_cli("sources", "--path", "docs/" + "*" * 600)
    assert code == 2 and "at most 512 characters" in err


def test_sources_on_a_terminal_is_a_table_for_a_page_and_a_line_per_document_past_it(tree: Path,
                                                                                    run_cli: RunCli) -> None:
    code, out, _ = run_cli("sources", "--limit", "2")
    assert code == 0 and "┃ Path" in out and "1-2 of 11 documents; the next page: --offset 2" in out
    from cli import read

    original = read.TABLE_ROWS
    read.TABLE_ROWS = 3
    try:
        code, out, _ = run_cli("sources", "--path", "notes", "--offset", "0")
        assert "┃ Path" in out  # three rows: still a table
        code, out, _ = run_cli("sources")
    finally:
        read.TABLE_ROWS = original
    lines = [line for line in out.splitlines() if line.endswith(".md")]
    assert [line.split()[-1] for line in lines] == sorted(NAMES) and "┃" not in out
    assert "1-11 of 11 documents" in out


def test_the_json_listing_hands_out_its_head_before_reading_a_row(tmp_path: Path) -> None:
    settings = build_store(store_settings(tmp_path), {f"d/{i:03d}.md": f"# {i}\n\ntext {i}\n" for i in range(30)})
    service = QueryService(settings)
    with service.sources_listing(SourcesRequest(limit=5, offset=20)) as listing:
        assert isinstance(listing, SourcesListing)
        pieces = listing.json_text()
        head = next(pieces)
        assert head.endswith('"documents": [') and listing.returned == 0
        first = next(pieces)
        assert listing.returned == 1 and json.loads(first.strip(",\n "))["path"] == "d/020.md"
        text = head + first + "".join(pieces)
    whole = json.loads(text)
    assert [d["path"] for d in whole["documents"]] == [f"d/{i:03d}.md" for i in range(20, 25)]
    assert whole == {**service.sources(SourcesRequest(limit=5, offset=20)).to_json(), "documents": whole["documents"]}


def test_sources_json_reaches_a_pipe_before_the_listing_is_written_whole(tmp_path: Path) -> None:
    """The pipe holds 64 KiB; the listing is several MB, so the process is still writing (blocked on the pipe)
    when its first line arrives: that line was flushed, not held until the end."""
    settings = build_store(store_settings(tmp_path), {f"d/{i:05d}-{'x' * 60}.md": f"# {i}\n\nt {i}\n"
                                                      for i in range(20000)})
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    proc = subprocess.Popen([KNOWLEDGE, "--store-dir", str(settings.store_dir.parent.parent), "sources", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith(b'{"status": "ok"') and proc.poll() is None
        rest = proc.stdout.read()
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(json.loads(first + rest)["documents"]) == 20000


def _words(run_cli: RunCli, *args: str) -> dict[str, Any]:
    code, out, err = run_cli("words", "--json", *args)
    assert code == 0, err
    return dict(json.loads(out))


def test_words_page_and_keep_the_words_of_a_path(tree: Path, run_cli: RunCli) -> None:
    whole = [w["word"] for w in _words(run_cli)["words"]]
    pages = [w["word"] for offset in range(0, len(whole), 5) for w in
             _words(run_cli, "--limit", "5", "--offset", str(offset))["words"]]
    assert pages == whole
    page = _words(run_cli, "--limit", "5", "--offset", "3")
    assert page["matched"] == len(whole) and page["offset"] == 3 and page["count"] == 5
    notes = {w["word"] for w in _words(run_cli, "--path", "notes")["words"]}
    assert {"one", "two", "three", "notes", "alpha8", "alpha9", "alpha10"} <= notes
    assert not notes & {"docs", "sub", "deep", "alpha0", "alpha4"}
    assert {w["word"] for w in _words(run_cli, "^alpha", "--path", "a_b")["words"]} == {"alpha0"}
    assert _words(run_cli, "--path", "nowhere")["words"] == []
    code, out, _ = run_cli("words", "--offset", "500")
    assert code == 0 and "none past offset 500" in out


def test_an_anchored_pattern_reads_its_prefix_and_finds_what_the_whole_vocabulary_would(tmp_path: Path) -> None:
    words = ["git", "github", "gitlab", "gimp", "giraffe", "Git-Flow", "ıstanbul", "ſtring", "string", "stride",
             "kelvin", "\u212aelvin", "model_validator", "modem", "alpha-beta", "alpha_gamma"]
    settings = build_store(store_settings(tmp_path), {f"w/{i}.md": f"# W\n\n{w} word\n" for i, w in enumerate(words)})
    service = QueryService(settings)
    from query.requests import WordsRequest

    def listed(pattern: str) -> list[str]:
        return [w.word for w in service.words(WordsRequest(pattern, counts=False)).words]

    for pattern in ("^git", "^gi", "^git-", "^gitl?", "^model_v", "^str", "^ſt", "^is", "^kel", "^alpha[-_]",
                    "^git|strid", "^G", "^mode+"):
        assert listed(pattern) == listed(f"^(?:{pattern[1:]})"), pattern  # `(` ends the prefix: a full read
    assert service.words(WordsRequest("^git", counts=False)).vocabulary_size is None
    assert service.words(WordsRequest("git", counts=False)).vocabulary_size == len(listed("."))


@pytest.fixture
def broker_store(workdir: Path) -> Iterator[Settings]:
    client = require_redis()
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  paths: [docs]\n  broker:\n    url: {REDIS_URL}\n",
                                            encoding="utf-8")
    settings = load_settings(str(workdir / "knowledge.yaml"))
    yield settings
    delete_namespace(client, namespace(settings))
    client.close()


@pytest.mark.redis
def test_runs_page_newest_first_and_keep_the_runs_of_a_path(broker_store: Settings, run_cli: RunCli) -> None:
    broker, ledger = open_ledger(broker_store)
    try:
        for n, roots in enumerate([["docs"], ["docs/api"], ["notes"], ["docs", "notes"], ["docs/guide"]]):
            ledger.start(f"run{n}", {"roots": roots, "started": time.time()})
            time.sleep(0.01)
    finally:
        broker.close()

    def ids(*args: str) -> list[str]:
        code, out, err = run_cli("runs", "--json", *args)
        assert code == 0, err
        return [r["run_id"] for r in json.loads(out)]

    assert ids() == ["run4", "run3", "run2", "run1", "run0"]
    assert ids("--limit", "2", "--offset", "1") == ["run3", "run2"]
    assert ids("--offset", "5") == []
    assert ids("--path", "docs/api") == ["run3", "run1", "run0"]  # docs walked docs/api too
    assert ids("--path", "docs") == ["run4", "run3", "run1", "run0"]
    assert ids("--path", "notes", "--limit", "1", "--offset", "1") == ["run2"]
    code, out, _ = run_cli("runs", "--path", "elsewhere")
    assert code == 0 and "no runs recorded for this store that walked elsewhere" in out


def _check_stderr(store: Path, terminal: bool) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    command = [KNOWLEDGE, "--store-dir", str(store), "check"]
    if not terminal:
        done = subprocess.run(command, capture_output=True, env=env, timeout=120)
        return done.stderr.decode()
    leader, follower = pty.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=follower, env=env)
    os.close(follower)
    seen = b""
    try:
        while len(seen) < 1_000_000:
            try:
                data = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not data:
                break
            seen += data
        assert proc.wait(timeout=120) == 0
    finally:
        os.close(leader)
    return seen.decode("utf-8", "replace")


def test_check_shows_its_steps_on_a_terminal_and_nothing_in_a_pipe(tmp_path: Path) -> None:
    settings = build_store(store_settings(tmp_path), {"d/a.md": "# A\n\nalpha\n"})
    base = settings.store_dir.parent.parent
    shown = _check_stderr(base, terminal=True)
    assert "check: 1/6 file" in shown and "check: 4/6 fts" in shown and shown.endswith("\r\x1b[K")
    assert "check: 1/6" not in _check_stderr(base, terminal=False)


def test_sources_with_citation_rules_streams_each_mapped_citation_and_counts_the_unmapped_last(
        workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n", "notes/c.md": "# C\n\ngamma\n"})
    (workdir / "knowledge.yaml").write_text(
        "knowledge:\n  paths: [docs, notes]\n  citations:\n"
        "    - pattern: '^docs/(.+)\\.md$'\n      replace: 'https://docs.example.net/$1/'\n", encoding="utf-8")
    assert run_cli("index")[0] == 0
    listed = _sources(run_cli, "--limit", "2", "--offset", "1")
    assert [(d["path"], d["mapped"]) for d in listed["documents"]] == [
        ("docs/b.md", "https://docs.example.net/b/"), ("notes/c.md", None)]
    assert listed["note"] == "1 of 2 documents matched no citation rule and is cited by path"
    from cli import read

    original = read.TABLE_ROWS
    read.TABLE_ROWS = 1
    try:
        code, out, _ = run_cli("sources")
    finally:
        read.TABLE_ROWS = original
    assert code == 0 and "docs/a.md  -> https://docs.example.net/a/" in out
    assert out.rstrip().endswith("1 of 3 documents matched no citation rule and is cited by path")
