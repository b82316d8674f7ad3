"""match / enumerate: complete document sets per term, the closed query language, honest statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.errors import QueryError
from pipeline.store import Store
from query.match_query import parse
from tests.lent import enumerate_documents
from tests.query.stores import DOCS, build_store, store_settings


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    return build_store(store_settings(tmp_path_factory.mktemp("enum")), DOCS)


def paths(result) -> list[str]:
    return sorted(d.path for d in result.documents)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("retention OR policy", "OR is not supported"),
        ("retention AND policy", "write the words side by side"),
        ("NOT policy", "write a leading minus"),
        ("NEAR(retention policy)", "quoted phrase"),
        ("NEAR/3 retention", "NEAR is not supported"),
        ("retent*", "knowledge words '^prefix'"),
        ('"retention *"', "`*` is not supported"),
        ('"retention policy', "unbalanced quote"),
        ("retention -", "a bare `-`"),
        ("title:retention", "unknown field `title:`"),
        ("heading:", "needs a term right after it"),
        ("heading: retention", "needs a term right after it"),
        ("-retention -policy", "only exclusions"),
    ],
)
def test_each_rejected_query_names_what_to_write_instead(query: str, says: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse(query)
    assert says in str(caught.value)


def test_lowercase_operator_words_and_quoted_operators_are_ordinary_words() -> None:
    terms = parse('or and "NOT this" nearby').terms
    assert [t.text for t in terms] == ["or", "and", "NOT this", "nearby"]


def test_terms_under_two_characters_are_dropped_and_reported(built) -> None:
    result = enumerate_documents(built, "a retention x")
    assert result.dropped == ("a", "x")
    assert "dropped terms under two characters: a, x" in result.note
    assert [r.term.text for r in result.terms] == ["retention"]


def test_words_in_different_chunks_of_one_document_still_match(built) -> None:
    result = enumerate_documents(built, "retention policy")
    assert "docs/split.md" in paths(result)
    assert paths(result) == ["docs/retention.md", "docs/split.md", "notes.md"]


def test_a_quoted_phrase_needs_the_words_adjacent(built) -> None:
    assert paths(enumerate_documents(built, '"retention policy"')) == ["docs/retention.md", "notes.md"]


def test_a_leading_minus_subtracts_documents(built) -> None:
    assert paths(enumerate_documents(built, "retention -notes")) == ["docs/retention.md", "docs/split.md"]
    assert paths(enumerate_documents(built, 'retention -"retention policy"')) == ["docs/split.md"]


def test_heading_and_body_scope_a_term(built) -> None:
    assert paths(enumerate_documents(built, "heading:retention")) == ["docs/retention.md"]
    assert paths(enumerate_documents(built, "body:retention")) == ["docs/split.md", "notes.md"]
    assert paths(enumerate_documents(built, "-heading:retention retention")) == ["docs/split.md", "notes.md"]


def test_any_form_counts_every_word_sharing_the_stem_and_as_written_only_the_word(built) -> None:
    result = enumerate_documents(built, "deprecated")
    report = result.terms[0]
    assert report.stem == "deprec"
    assert report.any_form == 2  # api.md (deprecated, deprecation, deprecate) and retention.md
    assert report.as_written == 2
    assert set(report.related) == {"deprecation", "deprecate", "deprecations"}  # the other forms, not the word
    assert enumerate_documents(built, "deprecation").terms[0].as_written == 1


def test_body_and_heading_match_counts_are_kept_apart(built) -> None:
    result = enumerate_documents(built, "retention")
    by_path = {d.path: (d.body_matches, d.heading_matches) for d in result.documents}
    assert by_path["docs/retention.md"] == (0, 2)  # the heading is in both breadcrumbs
    assert by_path["docs/split.md"] == (1, 0)


def test_sort_by_matches_puts_body_matches_first_and_by_path_alphabetically(built) -> None:
    by_matches = [d.path for d in enumerate_documents(built, "api").documents]
    assert by_matches == ["docs/guide.md", "notes.md", "docs/api.md"]  # body (1, 1, 0) before heading (0, 0, 2)
    by_path = [d.path for d in enumerate_documents(built, "api", sort="path").documents]
    assert by_path == sorted(by_path)


def test_the_matched_total_is_recorded_before_the_limit(built) -> None:
    result = enumerate_documents(built, "retention", limit=1)
    assert result.matched == 3 and len(result.documents) == 1 and result.limited
    assert "listing 1 of 3" in result.note


def test_each_document_is_cited_at_its_first_matching_chunk(built) -> None:
    doc = next(d for d in enumerate_documents(built, "policy").documents if d.path == "docs/split.md")
    assert doc.ordinal > 0 and doc.section == "Storage > Rules"


def test_statuses_each_carry_a_note(tmp_path: Path, built) -> None:
    unbuilt = store_settings(tmp_path / "none")
    result = enumerate_documents(unbuilt, "retention")
    assert (result.status, result.matched) == ("index_not_built", 0)
    assert "knowledge index" in result.note

    empty = store_settings(tmp_path / "empty")
    Store(empty.db_path).close()
    result = enumerate_documents(empty, "retention")
    assert result.status == "corpus_empty" and "no documents" in result.note

    result = enumerate_documents(built, "a ! ?")
    assert result.status == "query_empty" and "says nothing about the documents" in result.note

    result = enumerate_documents(built, "zzzunknownword")
    assert result.status == "ok" and result.matched == 0
    assert "the documents do not contain these words" in result.note


def test_match_cli_flags(built, run_cli) -> None:
    base = ["--store-dir", str(built.store_base)]
    code, out, err = run_cli(*base, "match", "retention", "--count")
    assert (code, out.strip()) == (0, "3") and err.startswith("tier:")
    code, out, _ = run_cli(*base, "which", "retention", "--paths-only", "--sort", "path")
    assert out.split() == ["docs/retention.md", "docs/split.md", "notes.md"]
    code, out, _ = run_cli(*base, "enumerate", "retention", "--json", "--limit", "1")
    data = json.loads(out)
    assert (data["status"], data["matched"], data["returned"]) == ("ok", 3, 1)
    assert set(data["documents"][0]) == {"path", "citation", "index_ref", "body_matches", "heading_matches", "lang"}
    assert data["terms"][0]["documents_any_form"] == 3
    code, out, _ = run_cli(*base, "match", "retention")
    assert code == 0 and "term retention: 3 documents in any form" in out and "docs/split.md" in out
    assert run_cli(*base, "match", "zzzunknownword")[0] == 0
    assert run_cli(*base, "match", "zzzunknownword", "--exit-code")[0] == 1
    code, _, err = run_cli(*base, "match", "retention OR policy")
    assert code == 2 and "OR is not supported" in err


def test_match_all_lists_past_the_default_limit(tmp_path: Path, run_cli) -> None:
    settings = build_store(store_settings(tmp_path), {f"d/{i:03}.md": "# T\n\nshared word\n" for i in range(60)})
    base = ["--store-dir", str(settings.store_base)]
    _, out, _ = run_cli(*base, "match", "shared", "--json")
    assert (json.loads(out)["returned"], json.loads(out)["matched"]) == (50, 60)
    _, out, _ = run_cli(*base, "match", "shared", "--json", "--all")
    assert json.loads(out)["returned"] == 60


def test_a_pipe_never_reads_an_unbuilt_index_as_no_documents(tmp_path: Path, run_cli) -> None:
    base = ["--store-dir", str(tmp_path)]
    code, out, err = run_cli(*base, "match", "retention", "--count")
    assert code != 0 and out == "" and "knowledge index" in err
    code, out, _ = run_cli(*base, "match", "retention", "--json")
    assert json.loads(out)["status"] == "index_not_built"


def test_a_pipe_never_reads_a_query_without_terms_as_no_documents(built, run_cli) -> None:
    code, out, err = run_cli("--store-dir", str(built.store_base), "match", "a ?", "--paths-only")
    assert code == 2 and out == "" and "no term to match" in err


def test_match_output_strips_terminal_control_sequences(tmp_path: Path, run_cli) -> None:
    settings = build_store(store_settings(tmp_path), {"d/\x1b[31mred.md": "# \x1b]0;title\x07Evil\n\nmarker text\n"})
    code, out, _ = run_cli("--store-dir", str(settings.store_base), "match", "marker", "--paths-only")
    assert code == 0 and "\x1b" not in out and "d/red.md" in out


def test_a_doubled_quote_inside_a_phrase_is_one_quote_and_forty_terms_is_the_cap() -> None:
    assert [t.text for t in parse('"say ""hello"" now" other').terms] == ['say "hello" now', "other"]
    assert len(parse(" ".join(f"word{i}" for i in range(40))).terms) == 40
    with pytest.raises(QueryError, match="at most 40 terms"):
        parse(" ".join(f"word{i}" for i in range(41)))


def test_other_forms_are_at_most_five_most_chunks_first(tmp_path: Path) -> None:
    docs = {f"d/{i}.md": f"# T{i}\n\n" + " ".join(["connect"] + ["connects"] * (i > 0) + ["connected"] * (i > 1)
                                                  + ["connecting"] * (i > 2) + ["connection"] * (i > 3)
                                                  + ["connections"] * (i > 4) + ["connective"] * (i > 5)) + "\n"
            for i in range(8)}
    settings = build_store(store_settings(tmp_path), docs)
    forms = enumerate_documents(settings, "connect").terms[0].related
    assert "connect" not in forms and len(forms) == 5
    assert forms[:3] == ("connects", "connected", "connecting")


def test_min_matches_keeps_documents_with_that_many_matching_sections(tmp_path: Path) -> None:
    settings = build_store(store_settings(tmp_path), {
        "d/once.md": "# A\n\nalpha here\n",
        "d/thrice.md": "# Alpha\n\nalpha one\n\n## B\n\nalpha two\n",
    })
    assert enumerate_documents(settings, "alpha").matched == 2
    result = enumerate_documents(settings, "alpha", min_matches=3)
    assert [d.path for d in result.documents] == ["d/thrice.md"] and result.matched == 1
    assert result.indexed_documents == 2
