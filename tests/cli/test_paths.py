"""One stored path per file, whatever the spelling; deletions reconciled under every walked directory."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from pipeline import db, schema
from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]


def _sources(run_cli: RunCli, *config: str) -> list[str]:
    code, out, err = run_cli(*config, "sources", "--json")
    assert code == 0, err
    return [d["path"] for d in json.loads(out)["documents"]]


def test_a_directory_named_two_ways_is_indexed_once(workdir: Path, run_cli: RunCli) -> None:
    project, corpus = workdir / "project", workdir / "corpus"
    write_tree(corpus, {"typer/a.md": "# A\n\nalpha typer\n", "typer/b.md": "# B\n\nbeta typer\n"})
    project.mkdir()
    (project / "knowledge.yaml").write_text("knowledge:\n  paths: [../corpus]\n", encoding="utf-8")
    os.chdir(project)
    assert run_cli("index")[0] == 0
    code, out, _ = run_cli("index", str(corpus / "typer"), "--json")
    assert code == 0 and json.loads(out)["added"] == 0 and json.loads(out)["unchanged"] == 2
    assert run_cli("index", "../corpus/./typer/")[0] == 0
    assert _sources(run_cli) == [str(corpus / "typer/a.md"), str(corpus / "typer/b.md")]  # outside the base: absolute
    code, out, _ = run_cli("search", "typer", "--json")
    assert len(json.loads(out)["results"]) == 2


def test_paths_under_the_base_are_stored_relative_from_any_working_directory(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"knowledge.yaml": "knowledge:\n  paths: [docs]\n", "docs/a.md": "# A\n\nalpha\n",
                         "docs/sub/b.md": "# B\n\nbeta\n"})
    os.chdir(workdir / "docs" / "sub")
    config = ("--config", str(workdir / "knowledge.yaml"))
    assert run_cli(*config, "index")[0] == 0  # the config's relative paths resolve against its directory
    assert (workdir / "knowledge" / "default" / "knowledge.db").is_file()  # and so does the store
    assert run_cli(*config, "index", "b.md")[0] == 0
    assert run_cli(*config, "index", str(workdir / "docs"))[0] == 0
    assert _sources(run_cli, *config) == ["docs/a.md", "docs/sub/b.md"]


def test_a_deleted_file_leaves_the_index_when_its_directory_is_indexed_again(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha words\n", "docs/gone.md": "# Gone\n\nvanishing words\n"})
    assert run_cli("index", "docs")[0] == 0
    (workdir / "docs/gone.md").unlink()
    code, out, _ = run_cli("index", "docs", "--json")
    assert code == 0 and json.loads(out)["removed"] == 1
    assert json.loads(run_cli("search", "vanishing", "--json")[1])["results"] == []
    (workdir / "docs/a.md").unlink()
    (workdir / "docs/b.md").write_text("# B\n\nbeta\n", encoding="utf-8")
    assert json.loads(run_cli("index", "docs/b.md", "--json")[1])["removed"] == 0  # a file alone never prunes
    assert _sources(run_cli) == ["docs/a.md", "docs/b.md"]


def test_rm_takes_a_directory_or_a_prefix_and_any_spelling(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/api/a.md": "# A\n\nalpha\n", "docs/api/b.md": "# B\n\nbeta\n",
                         "docs/c.md": "# C\n\ngamma\n"})
    assert run_cli("index", "docs")[0] == 0
    code, out, _ = run_cli("rm", "docs/api", "--force")  # 2 of 3 documents: past the default 50%
    assert code == 0 and "removed 2 documents under docs/api" in out
    assert _sources(run_cli) == ["docs/c.md"]
    code, out, _ = run_cli("rm", str(workdir / "docs/c.md"))
    assert code == 0 and "removed: docs/c.md" in out
    assert run_cli("index", "docs")[0] == 0
    code, out, _ = run_cli("rm", "--prefix", "docs", "--force")
    assert code == 0 and "removed 3 documents under docs" in out and _sources(run_cli) == []
    code, out, _ = run_cli("rm", "docs/nothing.md")
    assert code == 1 and "not indexed: docs/nothing.md" in out


def test_an_empty_rm_argument_is_a_usage_error_and_removes_nothing(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n"})
    assert run_cli("index", "docs")[0] == 0
    os.chdir(workdir / "docs")  # "" read as the working directory would be every document
    for empty in ("", "  ", "\t"):
        code, _, err = run_cli("rm", empty)
        assert code == 2 and "argument 1 is empty" in err and "unset variable" in err, (empty, err)
    code, _, err = run_cli("rm", "a.md", "")
    assert code == 2 and "argument 2 is empty" in err
    os.chdir(workdir)
    assert _sources(run_cli) == ["docs/a.md", "docs/b.md"]


def test_rm_of_a_whole_root_or_most_of_the_store_needs_force_and_says_how_many(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"knowledge.yaml": "knowledge:\n  paths: [docs, notes]\n",
                         **{f"docs/d{i}.md": f"# D{i}\n\nword{i}\n" for i in range(4)},
                         **{f"notes/n{i}.md": f"# N{i}\n\nnote{i}\n" for i in range(6)}})
    assert run_cli("index")[0] == 0
    code, _, err = run_cli("rm", "docs")  # 4 of 10, but every document of a root
    assert code == 2 and "would remove 4 of 10 documents" in err and "every document of the root docs" in err
    assert "--force" in err and len(_sources(run_cli)) == 10
    code, _, err = run_cli("rm", *[f"notes/n{i}.md" for i in range(5)], "docs/d0.md")  # 6 of 10 > 50%
    assert code == 2 and "would remove 6 of 10 documents" in err and "rm_max_percent (50%)" in err
    code, out, _ = run_cli("rm", "notes/n0.md", "notes/n1.md", "docs/d0.md")  # 3 of 10: no --force needed
    assert code == 0 and len(_sources(run_cli)) == 7
    code, out, _ = run_cli("rm", "docs", "--force")
    assert code == 0 and "removed 3 documents under docs" in out and len(_sources(run_cli)) == 4
    (workdir / "knowledge.yaml").write_text("knowledge:\n  paths: [docs, notes]\n  rm_max_percent: 100\n")
    code, out, _ = run_cli("rm", "notes/n2.md", "notes/n3.md")  # half of notes, not the whole root
    assert code == 0 and _sources(run_cli) == ["notes/n4.md", "notes/n5.md"]
    code, _, err = run_cli("rm", "notes/n4.md", "notes/n5.md")  # the whole root, whatever the share
    assert code == 2 and "every document of the root notes" in err
    code, out, _ = run_cli("rm", "notes/n4.md")  # one document named exactly: never sweeping
    assert code == 0 and "removed: notes/n4.md" in out


def test_include_and_exclude_globs_shape_the_walk(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {
        "knowledge.yaml": "knowledge:\n  paths: [docs]\n  exclude: ['**/generated/**', vendor, '*.draft.md']\n",
        "docs/a.md": "# A\n\nalpha\n", "docs/a.draft.md": "# D\n\ndraft\n", "docs/x/generated/g.md": "# G\n\ngen\n",
        "docs/vendor/v.md": "# V\n\nvendored\n", "docs/notes.txt": "notes\n",
    })
    code, out, _ = run_cli("index", "--json")
    summary = json.loads(out)
    assert code == 0 and _sources(run_cli) == ["docs/a.md", "docs/notes.txt"]
    reasons = {s["path"]: s["reason"] for s in summary["skipped"]}
    assert reasons["docs/x/generated/"] == "excluded by **/generated/**"
    assert reasons["docs/vendor/"] == "excluded by vendor"
    (workdir / "knowledge.yaml").write_text("knowledge:\n  paths: [docs]\n  include: ['**/*.md']\n", encoding="utf-8")
    assert run_cli("index")[0] == 0
    assert "docs/notes.txt" not in _sources(run_cli)  # no longer included: reconciled away
    assert "docs/vendor/v.md" in _sources(run_cli)


def test_a_format_1_store_is_migrated_by_the_next_index_and_keeps_one_copy(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n"})
    assert run_cli("index", "docs")[0] == 0
    db_path = workdir / "knowledge" / "default" / "knowledge.db"
    conn = db.open_writer(db_path)  # as a format-1 run from elsewhere left it: the same file spelled twice
    conn.execute("INSERT INTO documents(path, root, source, title, sha256, size, mtime_ns, chunk_count, indexed_at,"
                 " indexed_ns) SELECT ?, ?, source, title, sha256, size, mtime_ns, 0, '2000-01-01T00:00:00Z', 0"
                 " FROM documents",
                 (str(workdir / "docs/a.md"), str(workdir / "docs")))
    conn.execute("UPDATE documents SET path = './docs/a.md' WHERE path = 'docs/a.md'")
    schema.write_meta(conn, {schema.FORMAT_VERSION_KEY: "1"})
    conn.close()
    code, _, err = run_cli("search", "alpha")
    assert code == 1 and "run `knowledge index` once to migrate it" in err
    assert run_cli("index", "docs")[0] == 0
    assert _sources(run_cli) == ["docs/a.md"]
    assert json.loads(run_cli("search", "alpha", "--json")[1])["results"][0]["index_ref"] == "docs/a.md#0"


def test_a_dry_run_says_what_would_change_and_writes_nothing(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n", "docs/c.md": "# C\n\ngamma\n"})
    assert run_cli("index", "docs")[0] == 0
    db_path = workdir / "knowledge" / "default" / "knowledge.db"
    before = db_path.read_bytes()
    (workdir / "docs/a.md").write_text("# A\n\nalpha, edited\n", encoding="utf-8")
    (workdir / "docs/b.md").unlink()
    (workdir / "docs/d.md").write_text("# D\n\ndelta\n", encoding="utf-8")
    code, out, _ = run_cli("index", "docs", "--dry-run", "--json")
    data = json.loads(out)
    assert code == 0 and data["dry_run"] is True
    assert (data["added"], data["updated"], data["removed"]) == (["docs/d.md"], ["docs/a.md"], ["docs/b.md"])
    assert data["unchanged"] == 1 and data["vectors"] is None
    code, out, _ = run_cli("index", "docs", "--dry-run")
    assert code == 0 and "would add 1, update 1, remove 1; 1 unchanged" in out and "  remove: docs/b.md" in out
    assert db_path.read_bytes() == before
    assert _sources(run_cli) == ["docs/a.md", "docs/b.md", "docs/c.md"]
