"""Evidence beyond a section's text: a page's file name and title, its other matching sections, a repeated term."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.settings import Settings
from query.rank import evidence
from query.rank.evidence import document_bonus, name_words
from query.reader import Reader
from query.search import to_json
from query.terms import build_query
from tests.lent import search
from tests.query.stores import build_store, store_settings

# Each page says "validator" once in a body of other words; only one is named for it.
FILLER = "The model checks its input and raises an error with a message for each field that fails."
DOCS = {
    "docs/concepts/validators.md": f"Custom checks run after parsing. {FILLER} A validator is one such check.\n",
    "docs/concepts/types.md": f"# Types\n\n{FILLER} A type may carry a validator too.\n",
    "docs/concepts/fields.md": f"# Fields\n\n{FILLER} Each field may name a custom validator.\n",
    "docs/guide/index.md": "# Guide\n\nStart here: install, then read the concepts.\n",
    # One page with three sections on retention, one with a single, denser section.
    "docs/ops/storage.md": "".join(f"## {n}\n\nThe retention of {n.lower()} is thirty days.\n\n"
                                   for n in ("Logs", "Backups", "Metrics")),
    "docs/ops/notes.md": "# Notes\n\nRetention retention: the retention of logs is thirty days.\n",
    # Pages on other things, so the words above are as rare as a real tree makes them.
    **{f"docs/misc/page{i}.md": f"# Page {i}\n\nA note on the {topic} and the people who keep it.\n"
       for i, topic in enumerate(["harbour", "orchard", "bakery", "railway", "glacier", "market", "theatre",
                                  "vineyard", "lighthouse", "quarry", "meadow", "canal", "forge", "mill"])},
}


@pytest.fixture
def store(tmp_path: Path) -> Settings:
    return build_store(store_settings(tmp_path), DOCS)


def test_a_file_name_gives_its_words_an_index_page_its_folder_and_a_title_its_own() -> None:
    assert name_words("docs/tutorial/request-files.md", None) == ("request", "files")
    assert name_words("docs/tutorial/dependencies/index.md", "Dependencies") == ("dependencies",)
    assert name_words("docs/api/CORSMiddleware.md", "Add CORS") == ("cors", "middleware", "add")
    assert name_words("https://example.com/docs/static_files.html", "Static Files") == ("static", "files")


def test_the_page_named_for_the_query_ranks_first_and_explain_says_why(store: Settings) -> None:
    evidence_off = search(store, "custom validator", 5)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evidence, "NAMES_WEIGHT", 0.0)
        plain = search(store, "custom validator", 5)
    assert evidence_off.hits[0].path == "docs/concepts/validators.md"
    assert plain.hits[0].path != "docs/concepts/validators.md"  # its text alone does not put it first
    explained = to_json(search(store, "custom validator", 5, explain=True))["results"]
    top = explained[0]["explain"]
    assert top["stages"]["names"].startswith("+") and top["lexical"]["rank"] == 1
    assert explained[0]["score"] > -top["lexical"]["bm25"]  # the bm25 shown is FTS5's own, before the lift


def test_a_name_word_the_query_lacks_lifts_nothing(store: Settings) -> None:
    found = to_json(search(store, "install concepts", 5, explain=True))["results"]
    assert all("names" not in r["explain"].get("stages", {}) or r["path"] == "docs/guide/index.md" for r in found)


def test_a_document_lends_its_best_section_the_weight_of_its_next_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence, "DOCUMENT_WEIGHT", 0.1)  # off by default (not a gain on the judged collections)
    lexical = [(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0), (5, 5.0)]
    owner = {1: 10, 2: 20, 3: 20, 4: 20, 5: 20}
    bonus = document_bonus(lexical, owner)
    assert set(bonus) == {2}  # a page's best candidate only, and only when another of its sections matches
    assert bonus[2] == pytest.approx(evidence.DOCUMENT_WEIGHT * (7.0 + 6.0))  # its next DOCUMENT_SECTIONS


def test_a_page_of_several_matching_sections_shows_the_documents_stage(store: Settings,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert not any("documents" in r["explain"].get("stages", {})  # off by default
                   for r in to_json(search(store, "retention days", 10, explain=True))["results"])
    monkeypatch.setattr(evidence, "DOCUMENT_WEIGHT", 0.1)
    found = to_json(search(store, "retention days", 10, explain=True))["results"]
    lifted = [r for r in found if "documents" in r["explain"].get("stages", {})]
    assert [r["path"] for r in lifted] == ["docs/ops/storage.md"]


def test_a_term_written_twice_weighs_twice(store: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_query("logs retention retention").expression == '"logs" OR "retention" OR "retention"'
    assert build_query("logs Retention retention").repeats == (1, 2)
    assert build_query("logs retention").expression == '"logs" OR "retention"'
    monkeypatch.setattr(evidence, "NAMES_WEIGHT", 0.0)  # BM25 alone
    monkeypatch.setattr(evidence, "DOCUMENT_WEIGHT", 0.0)
    with Reader(store) as reader:
        once = search(store, "logs retention", 3, reader).hits
        twice = search(store, "logs retention retention retention", 3, reader).hits
    assert (once[0].path, once[0].section) == ("docs/ops/storage.md", "Logs")
    assert twice[0].path == "docs/ops/notes.md"  # the page that says retention most, once the query insists


def test_cli_explain_prints_the_names_stage(store: Settings, workdir: Path, run_cli) -> None:
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  directory: {store.store_dir}\n", encoding="utf-8")
    code, out, _ = run_cli("search", "--explain", "custom validator")
    assert code == 0 and ", names +" in out
    code, out, _ = run_cli("search", "--json", "custom validator")
    assert json.loads(out)["results"][0]["path"] == "docs/concepts/validators.md"


def test_a_camel_case_query_word_also_finds_the_prose_that_writes_its_parts(tmp_path: Path) -> None:
    assert build_query("add CORSMiddleware").terms == ("add", "CORSMiddleware", "CORS", "Middleware")
    assert build_query("OAuth2 flow").dropped == ()  # a part under two characters is left out silently
    assert build_query("TestClient test").repeats == ()  # a part is searched, not counted as written again
    docs = {"docs/cors.md": "# Cross-origin requests\n\nAdd the CORS middleware to the application.\n",
            "docs/other.md": "# Other\n\nNothing about that here.\n"}
    settings = build_store(store_settings(tmp_path), docs)
    assert [h.path for h in search(settings, "CORSMiddleware", 5).hits] == ["docs/cors.md"]


# Issue 30: one page's section holds the word in its own heading and body; another page holds it only in its
# title (the first heading, so the first step of each of its sections' breadcrumbs), and names nothing else.
PINNED = {
    "docs/guide.md": "# Guide\n\n## Websockets\n\nWebsockets keep one connection open for messages both ways.\n",
    "docs/notes.md": "# Websockets and more\n\n## Setup\n\nInstall the server, then start it with its defaults.\n",
    **{f"docs/misc/page{i}.md": f"# Page {i}\n\nA note on the {topic} and the people who keep it.\n"
       for i, topic in enumerate(["harbour", "orchard", "bakery", "railway", "glacier", "market", "theatre"])},
}


def test_a_section_holding_the_word_in_its_heading_and_body_ranks_above_one_holding_it_in_its_title(
        tmp_path: Path) -> None:
    from pipeline.bm25 import BM25

    assert BM25.weights == (1.0, 2.0)  # the seeds' weights: body 1.0, breadcrumb 2.0
    settings = build_store(store_settings(tmp_path), PINNED)
    found = to_json(search(settings, "websockets", 5, explain=True))["results"]
    sections = [(r["path"], r["section"]) for r in found]
    assert sections.index(("docs/guide.md", "Guide > Websockets")) < sections.index(
        ("docs/notes.md", "Websockets and more > Setup"))
    # The title is the breadcrumb's first step: BM25 scores it there, and the names field does not weigh it again.
    assert all("names" not in r["explain"].get("stages", {}) for r in found)


def test_a_file_name_word_the_breadcrumb_lacks_still_lifts(store: Settings) -> None:
    found = to_json(search(store, "validators", 5, explain=True))["results"]
    top = next(r for r in found if r["path"] == "docs/concepts/validators.md")
    assert top["explain"]["stages"]["names"].startswith("+")
