"""Front matter, filters and explain through a real index run and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import db
from tests.conftest import write_tree

DOCS = {
    "docs/api/auth.md": "---\ntitle: Auth API\ntags: [security, api]\nowner: alice\n---\n"
                        "# Tokens\n\nTokens expire after an hour; rotate the token.\n",
    "docs/api/rates.md": "+++\ntitle = \"Rate limits\"\ntags = [\"api\"]\n+++\n"
                         "# Limits\n\nA token bucket limits calls.\n",
    "docs/guide/start.md": "---\ntags: security\n---\n# Start\n\nCreate a token before the first call.\n",
    "docs/guide/broken.md": "---\ntitle: [oops\n---\n# Broken\n\nThe token section survives.\n",
    "notes/token.md": "# Notes\n\nToken token token notes.\n",
}


def search_json(run_cli, *args: str) -> dict:
    code, out, err = run_cli("search", *args, "--json")
    assert code == 0, out + err
    return json.loads(out)


def test_front_matter_titles_fields_and_a_malformed_block_in_the_run_summary(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    code, out, _ = run_cli("index", "docs", "notes")
    assert code == 0
    assert "indexed: added=5" in out
    assert any(line.startswith("  skipped: docs/guide/broken.md: YAML front matter not parsed") and
               line.endswith("indexed as text") for line in out.splitlines())
    code, out, _ = run_cli("sources", "--json")
    sources = {s["path"]: s for s in json.loads(out)["documents"]}
    titles = {path: s["title"] for path, s in sources.items()}
    assert sources["docs/api/auth.md"]["fields"] == {"title": "Auth API", "tags": ["security", "api"], "owner": "alice"}
    assert sources["notes/token.md"]["fields"] == {}
    assert titles["docs/api/auth.md"] == "Auth API" and titles["docs/api/rates.md"] == "Rate limits"
    assert titles["docs/guide/start.md"] == "Start"
    assert "owner" not in json.dumps(search_json(run_cli, "alice")["results"])  # fields are not body text
    broken = search_json(run_cli, "oops")["results"]
    assert [r["path"] for r in broken] == ["docs/guide/broken.md"]  # never lost: indexed as text


def test_search_and_match_filter_by_path_root_and_where(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs", "notes")

    def paths(*args: str) -> set[str]:
        return {r["path"] for r in search_json(run_cli, "token", *args)["results"]}

    assert paths() == set(DOCS)
    assert paths("--path", "docs/api/**") == {"docs/api/auth.md", "docs/api/rates.md"}
    assert paths("--path", "docs/api") == {"docs/api/auth.md", "docs/api/rates.md"}
    assert paths("--path", "*.md", "--root", "notes") == {"notes/token.md"}
    assert paths("--where", "tags=security") == {"docs/api/auth.md", "docs/guide/start.md"}
    assert paths("--where", "tags=security", "--where", "owner=alice") == {"docs/api/auth.md"}
    assert paths("--where", "tags=security", "--path", "docs/guide/**") == {"docs/guide/start.md"}
    assert paths("--where", "tags=nothing") == set()
    data = search_json(run_cli, "token", "--where", "tags=api")
    assert "filtered to tags=api" in data["note"]
    code, out, _ = run_cli("match", "token", "--where", "tags=security", "--paths-only")
    assert code == 0 and sorted(out.splitlines()) == ["docs/api/auth.md", "docs/guide/start.md"]
    code, out, _ = run_cli("match", "token", "--path", "docs/api/", "--json")
    assert {d["path"] for d in json.loads(out)["documents"]} == {"docs/api/auth.md", "docs/api/rates.md"}
    code, _, err = run_cli("search", "token", "--where", "tags")
    assert code != 0 and "key=value" in err


def test_a_filtered_search_fills_k_past_the_fan_out(workdir: Path, run_cli) -> None:
    crowd = {f"docs/crowd/{i}.md": f"# Widget {i}\n\nwidget widget widget number {i}\n" for i in range(70)}
    rare = {f"docs/rare/{i}.md": f"# Rare {i}\n\nOne widget among many other words here {i}.\n" for i in range(4)}
    write_tree(workdir, {**crowd, **rare})
    run_cli("index", "docs")
    unfiltered = search_json(run_cli, "widget", "--top-k", "20")["results"]
    assert all(r["path"].startswith("docs/crowd/") for r in unfiltered)
    found = search_json(run_cli, "widget", "--path", "docs/rare/**", "--top-k", "4")["results"]
    assert sorted(r["path"] for r in found) == sorted(rare)


def test_explain_adds_ranks_and_scores_only_when_asked(workdir: Path, run_cli) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs", "notes")
    plain = search_json(run_cli, "token")["results"][0]
    assert "explain" not in plain
    explained = search_json(run_cli, "token", "--explain")["results"]
    first = explained[0]
    assert {k: v for k, v in first.items() if k != "explain"} == plain
    assert first["explain"] == {"ranking": "lexical",
                                "lexical": {"rank": 1, "bm25": -first["score"],
                                            "plan": {"strategy": "fts5", "exact": True}},  # which strategy answered
                                "vector": None, "rrf": None, "demoted": False}
    assert [r["explain"]["lexical"]["rank"] for r in explained] == list(range(1, len(explained) + 1))
    code, out, _ = run_cli("search", "token", "--explain")
    assert code == 0 and "explain: lexical #1 (bm25 " in out


def test_the_next_index_migrates_a_format_2_store_and_reads_its_front_matter_files_again(
    workdir: Path, run_cli, make_settings
) -> None:
    write_tree(workdir, DOCS)
    run_cli("index", "docs", "notes")
    conn = db.open_writer(make_settings().db_path)  # back to format 2: the auth file's block indexed as text
    (doc_id,) = conn.execute("SELECT id FROM documents WHERE path = 'docs/api/auth.md'").fetchone()
    conn.execute("UPDATE chunks SET ordinal = ordinal + 100 WHERE document_id = ?", (doc_id,))
    conn.execute("INSERT INTO chunks(document_id, ordinal, heading_path, body, text_hash) VALUES (?, 0, '', ?, 'x')",
                 (doc_id, "---\ntitle: Auth API\ntags: [security, api]\nowner: alice\n---"))
    conn.execute("DROP TABLE document_fields")
    conn.execute("ALTER TABLE documents DROP COLUMN fields")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'format_version'")
    conn.close()
    code, _, err = run_cli("search", "alice")
    assert code != 0 and "format 2" in err and "knowledge index" in err
    code, out, _ = run_cli("index", "docs", "notes")
    assert code == 0 and "updated=2 unchanged=3" in out  # auth.md, and broken.md (its text begins with ---)
    assert search_json(run_cli, "alice")["results"] == []
    assert {r["path"] for r in search_json(run_cli, "token", "--where", "owner=alice")["results"]} == {
        "docs/api/auth.md"}


LAUGHS = "---\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(c + 1)}: &{chr(c + 1)} [{', '.join([f'*{chr(c)}'] * 9)}]\n" for c in range(ord("a"), ord("i"))
) + "---\n# Laughs\n\nThe laughing section body.\n"
HOSTILE = {
    "docs/laughs.md": LAUGHS,  # 9^9 values once expanded
    "docs/recursive.md": "---\na: &a [*a]\n---\n# Recursive\n\nThe recursive section body.\n",
    "docs/deep.md": "---\nx: " + "[" * 5000 + "]" * 5000 + "\n---\n# Deep\n\nThe deep section body.\n",
    "docs/tags.md": "---\ntags: [" + ", ".join(f"t{i % 25000}" for i in range(50_000)) + "]\n---\n# Tags\n\nMany.\n",
    "docs/nan.md": "---\nweight: .nan\nlimit: .inf\nfloor: -.inf\n---\n# Numbers\n\nNot a number.\n",
}


@pytest.mark.timeout(120)
def test_hostile_front_matter_is_refused_within_bounds_indexed_as_text_and_json_stays_valid(workdir: Path,
                                                                                           run_cli) -> None:
    write_tree(workdir, HOSTILE)
    code, out, err = run_cli("index", "docs")
    assert code == 0, out + err
    assert "indexed: added=5" in out
    reasons = {line.split(":")[1].strip(): line for line in out.splitlines() if line.startswith("  skipped: ")}
    assert "aliases expand to more than 100,000 values" in reasons["docs/laughs.md"]
    assert "recursive alias" in reasons["docs/recursive.md"]
    assert "nest" in reasons["docs/deep.md"]  # past 32 levels (or libyaml's own limit of 1,000)
    assert set(reasons) == {"docs/laughs.md", "docs/recursive.md", "docs/deep.md"}
    for word, path in (("laughing", "docs/laughs.md"), ("recursive", "docs/recursive.md"), ("deep", "docs/deep.md")):
        assert [r["path"] for r in search_json(run_cli, word)["results"]] == [path]  # never lost: indexed as text

    def refuse(constant: str) -> None:
        raise ValueError(f"invalid JSON constant {constant}")

    code, out, _ = run_cli("sources", "--json")
    sources = {s["path"]: s for s in json.loads(out, parse_constant=refuse)["documents"]}
    assert sources["docs/nan.md"]["fields"] == {"weight": "nan", "limit": "inf", "floor": "-inf"}
    assert len(sources["docs/tags.md"]["fields"]["tags"]) == 50_000
    code, out, _ = run_cli("match", "many", "--where", "tags=t24999", "--json")
    assert code == 0 and json.loads(out)["matched"] == 1
    assert run_cli("check")[0] == 0
