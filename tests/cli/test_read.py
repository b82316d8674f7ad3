"""The CLI: the tier line first, output shapes, and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import write_tree

TIER = "tier: lexical (FTS5) - no embeddings configured"
DOCS: dict[str, str | bytes] = {
    "docs/a.md": "# Alpha\n\nThe quick brown fox.\n\n## Details\n\nMore about the fox \x1b[31mred\x1b[0m here.\n",
    "docs/b.txt": "Nothing to see.\n",
    "docs/bad.md": b"\xff\xfe\x00",
}


def test_index_prints_the_tier_line_then_the_summary_and_skips(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    code, out, _ = run_cli("index", "docs")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == TIER
    assert "indexed: added=2 updated=0 unchanged=0 removed=0 failed=0; store: 2 files, 3 chunks" in lines
    assert any(line.startswith("  skipped: docs/bad.md: binary") for line in lines)


def test_index_json_prints_one_object_and_the_tier_line_on_stderr(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    code, out, err = run_cli("index", "docs", "--json")
    data = json.loads(out)
    assert code == 0 and err.splitlines()[0] == TIER
    assert {k: data[k] for k in ("added", "updated", "unchanged", "removed", "failed", "files", "chunks")} == {
        "added": 2, "updated": 0, "unchanged": 0, "removed": 0, "failed": 0, "files": 2, "chunks": 3}
    assert data["skipped"][0]["path"] == "docs/bad.md" and data["failures"] == []


def test_index_with_nothing_to_index_is_a_usage_error(workdir: Path, run_cli) -> None:
    code, _, err = run_cli("index")
    assert code == 2 and "knowledge.paths" in err


def test_search_json_shape_and_show_takes_the_citation_back(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    code, out, err = run_cli("search", "fox", "--json")
    data = json.loads(out)
    assert code == 0 and err.strip() == TIER
    assert data["tier"] == TIER and data["status"] == "ok"
    first = data["results"][0]
    assert list(first) == ["citation", "index_ref", "ref", "path", "section", "content", "score", "lang",
                           "translations"]
    assert first["citation"] == first["index_ref"] and len(first["ref"]) == 6 and first["score"] > 0
    assert data["note"] is None
    code, out, _ = run_cli("show", first["index_ref"])
    assert code == 0 and out.splitlines()[0] == TIER and first["content"].split("\x1b")[0].strip() in out


def test_search_output_strips_terminal_control_sequences(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    code, out, _ = run_cli("search", "fox red", "--full")
    assert code == 0 and "\x1b" not in out and "red" in out
    assert out.splitlines()[0] == TIER and "Section: Alpha > Details" in out


def test_an_empty_result_is_a_success(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    code, out, _ = run_cli("search", "zzzz")
    assert code == 0 and "no results" in out


def test_every_read_command_before_any_index_exits_1_naming_the_fix(workdir: Path, run_cli) -> None:
    code, out, err = run_cli("search", "x y", "--json")
    assert code == 1 and json.loads(out)["status"] == "index_not_built" and "knowledge index" in err
    for args in (["search", "x"], ["match", "x"], ["match", "x", "--count"], ["words"], ["sources"],
                 ["stats"], ["show", "a.md#1"]):
        code, out, err = run_cli(*args)
        assert code == 1 and "knowledge index" in err and "Traceback" not in err, args


def test_show_of_an_unknown_citation_or_document_fails(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    assert run_cli("show", "docs/a.md#99")[0] == 1
    code, _, err = run_cli("show", "docs/zzz.md")
    assert code == 1 and "knowledge sources" in err


def test_show_of_a_document_path_prints_every_section_with_its_citation(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/a.md": "# One\n\nfirst part\n\n## Two\n\nsecond part\n"})
    run_cli("index", "docs")
    code, out, _ = run_cli("show", "docs/a.md")
    assert code == 0
    assert out.index("docs/a.md#0") < out.index("first part") < out.index("docs/a.md#1") < out.index("second part")


def test_sources_stats_rm_and_reset(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    code, out, _ = run_cli("sources", "--json")
    assert code == 0 and [r["path"] for r in json.loads(out)["documents"]] == ["docs/a.md", "docs/b.txt"]
    code, out, _ = run_cli("stats", "--json")
    assert json.loads(out)["documents"] == 2
    code, out, _ = run_cli("rm", "docs/b.txt", "docs/nope.md")
    assert code == 1 and "removed: docs/b.txt" in out and "not indexed: docs/nope.md" in out
    assert run_cli("reset")[0] == 2
    code, out, _ = run_cli("reset", "--force")
    assert code == 0 and "knowledge.db" in out
    assert json.loads(run_cli("search", "fox", "--json")[1])["status"] == "index_empty"  # reset keeps the schema


def test_a_bad_config_exits_2_naming_the_key_and_position(workdir: Path, run_cli) -> None:
    (workdir / "knowledge.yaml").write_text("knowledge:\n  paths: docs\n  top_kk: 3\n", encoding="utf-8")
    code, _, err = run_cli("search", "x")
    assert code == 2 and "knowledge.yaml:2:10" in err and "knowledge.paths must be a list" in err


def test_the_console_script_runs_and_exits_with_the_error_code(workdir: Path) -> None:
    exe = Path(sys.executable).with_name("knowledge")
    env = {**os.environ, "KNOWLEDGE_STORE_DIR": str(workdir)}
    proc = subprocess.run([str(exe), "show", "x#1"], capture_output=True, text=True, timeout=60, env=env,
                          cwd=workdir)
    assert proc.returncode == 1 and "run `knowledge index` first" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_search_shows_the_mapped_citation_under_the_raw_token(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    (workdir / "knowledge.yaml").write_text(
        "knowledge:\n  paths: [docs]\n  citations:\n"
        "    - pattern: '^docs/(.+)\\.md$'\n      replace: 'https://docs.example.net/$1/#${anchor}'\n",
        encoding="utf-8")
    run_cli("index")
    code, out, _ = run_cli("search", "fox")
    assert code == 0
    assert "  docs/a.md#0:" in out and "Mapped: https://docs.example.net/a/#alpha" in out
    data = json.loads(run_cli("search", "fox", "--json")[1])
    assert data["results"][0]["index_ref"] == "docs/a.md#0"
    assert data["results"][0]["citation"] == "https://docs.example.net/a/#alpha"


def test_a_query_takes_its_words_unquoted_and_a_dash_word_once_it_has_started(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/a.md": "# API\n\nthe api is deprecated\n\n## CORS\n\nallow_origins list\n",
                         "docs/b.md": "# Other\n\napi current\n"})
    assert run_cli("index", "docs")[0] == 0
    code, out, _ = run_cli("search", "api", "current", "--json")
    assert code == 0 and json.loads(out)["results"][0]["citation"] == "docs/b.md#0"
    code, out, _ = run_cli("match", "api", "-deprecated", "--paths-only")
    assert code == 0 and out.split() == ["docs/b.md"]
    code, out, _ = run_cli("match", "heading:cors", "body:allow_origins", "--paths-only")
    assert code == 0 and out.split() == ["docs/a.md"]
    code, out, _ = run_cli("match", "--paths-only", "--", "-deprecated", "api")
    assert code == 0 and out.split() == ["docs/b.md"]


def test_a_query_that_starts_with_a_dash_gets_a_hint_naming_the_double_dash(workdir: Path, run_cli) -> None:
    code, _, err = run_cli("search", "-deprecated")
    assert code == 2 and "knowledge search -- -deprecated" in err
    code, _, err = run_cli("search", "--workers", "fastapi")
    assert code == 2 and "No such option '--workers'" in err and "knowledge search -- --workers" in err


def test_a_double_dash_word_that_is_no_option_is_a_query_word_once_the_query_started(workdir: Path,
                                                                                      run_cli) -> None:
    write_tree(workdir, {"docs/run.md": "# Run\n\nfastapi run --workers 4 starts four workers\n",
                         "docs/other.md": "# Other\n\nfastapi is a framework\n"})
    assert run_cli("index", "docs")[0] == 0
    code, out, err = run_cli("search", "fastapi", "run", "--workers", "4", "--json")
    assert code == 0, err
    assert json.loads(out)["results"][0]["path"] == "docs/run.md"
    code, out, _ = run_cli("search", "fastapi", "--top-k", "1", "--json")  # an option of the command stays one
    assert code == 0 and len(json.loads(out)["results"]) == 1


def test_global_options_are_accepted_after_the_sub_command(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha words\n"})
    store = workdir / "elsewhere"
    assert run_cli("index", "docs", "--store-dir", str(store))[0] == 0
    assert (store / "knowledge" / "default" / "knowledge.db").exists()
    code, out, _ = run_cli("search", "alpha", "--store-dir", str(store), "--json")
    assert code == 0 and json.loads(out)["results"][0]["citation"] == "docs/a.md#0"


def test_version_names_the_program(run_cli) -> None:
    code, out, _ = run_cli("--version")
    assert code == 0 and out.startswith("knowledge ")


def test_contradictory_match_flags_are_usage_errors_and_an_empty_search_suggests_match(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha words\n"})
    assert run_cli("index", "docs")[0] == 0
    for flags in (["--all", "--limit", "3"], ["--count", "--paths-only"], ["--count", "--limit", "2"]):
        code, _, err = run_cli("match", "alpha", *flags)
        assert (code == 2 and "contradict" in err) or "drop --limit" in err, flags
    code, out, _ = run_cli("search", "zzzz", "qqqq")
    assert code == 0 and "knowledge match 'zzzz qqqq'" in out


def test_sources_and_stats_json_have_the_http_api_shape(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    sources = json.loads(run_cli("sources", "--json")[1])
    assert (sources["status"], sources["note"]) == ("ok", None) and sources["store"].endswith("knowledge.db")
    assert set(sources["documents"][0]) >= {"path", "title", "chunks", "indexed_at", "root", "mapped"}
    stats = json.loads(run_cli("stats", "--json")[1])
    assert (stats["status"], stats["note"], stats["documents"]) == ("ok", None, 2)


def test_show_with_an_ordinal_past_sqlites_integers_is_a_one_line_miss(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    code, out, err = run_cli("show", "docs/a.md#99999999999999999999999")
    assert code == 1 and "Traceback" not in out + err
    assert err == "knowledge: error: no section or document docs/a.md#99999999999999999999999 in the index; " \
                  "`knowledge sources` lists the documents\n"


def test_show_json_has_the_hit_shape(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs")
    code, out, _ = run_cli("show", "docs/a.md#0", "--json")
    data = json.loads(out)
    assert code == 0 and (data["status"], data["note"]) == ("ok", None)
    assert [r["index_ref"] for r in data["results"]] == ["docs/a.md#0"] and data["results"][0]["score"] is None


AROUND = {"docs/g.md": "# Guide\n\nIntro.\n\n## Install\n\nStep one.\n\n## Use\n\nUse it.\n\n## Remove\n\nRemove it.\n"}


def test_show_before_and_after_reads_around_the_citation(workdir: Path, run_cli) -> None:
    write_tree(workdir, AROUND)
    run_cli("index", "docs")
    code, out, _ = run_cli("show", "docs/g.md#2", "--before", "1", "--after", "1")
    assert code == 0 and out.splitlines()[0] == TIER
    assert out.index("docs/g.md#1") < out.index("Step one.") < out.index("Use it.") < out.index("Remove it.")
    assert "Intro." not in out
    code, out, _ = run_cli("show", "docs/g.md#2", "--after", "30", "--section", "--json")
    data = json.loads(out)
    assert code == 0 and data["status"] == "ok" and "capped at 20" in data["note"]
    assert [r["index_ref"] for r in data["results"]] == ["docs/g.md#2", "docs/g.md#3"]
    assert data["results"][0]["span"] == "docs/g.md#2..#2" and data["results"][0]["score"] is None


def test_show_around_refuses_a_bad_or_unknown_citation(workdir: Path, run_cli) -> None:
    write_tree(workdir, AROUND)
    run_cli("index", "docs")
    code, out, err = run_cli("show", "docs/g.md#9", "--after", "1", "--json")
    assert code == 1 and json.loads(out)["status"] == "not_found" and "knowledge sources" in err
    code, _, err = run_cli("show", "docs/g.md", "--before", "1")
    assert code == 2 and "<path>#<ordinal>" in err
    code, _, _ = run_cli("show", "docs/g.md#1", "--before", "-1")
    assert code == 2


def test_file_names_cannot_forge_output_lines_and_null_lists_them_as_stored(workdir: Path, run_cli) -> None:
    forged = "a\nfailed: docs/x.md: database disk image is malformed.md"
    bidi = "report\u202eexe.md"
    write_tree(workdir, {f"docs/{forged}": "# Forged\n\nwidget words\n", f"docs/{bidi}": "# Bidi\n\nwidget text\n",
                         "docs/ok.md": "# Ok\n\nwidget plain\n"})
    (workdir / "docs" / "bin\nskipped: all.md").write_bytes(b"\x00\x01binary")
    code, out, _ = run_cli("index", "docs")
    assert code == 0
    lines = out.splitlines()
    assert not any(line.startswith("failed: docs/x.md") for line in lines)
    assert "  skipped: docs/bin\\nskipped: all.md: " in out and sum(line.startswith("  skipped") for line in lines) == 1
    code, out, _ = run_cli("match", "widget", "--paths-only")
    assert code == 0 and out.splitlines() == sorted(
        ["docs/a\\nfailed: docs/x.md: database disk image is malformed.md", "docs/ok.md", "docs/report\\u202eexe.md"])
    assert "\u202e" not in out
    code, out, _ = run_cli("match", "widget", "-0")
    assert code == 0 and sorted(out.split("\0")[:-1]) == sorted([f"docs/{forged}", "docs/ok.md", f"docs/{bidi}"])
