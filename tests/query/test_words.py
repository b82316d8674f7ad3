"""words: the vocabulary with SQLite's own porter stems and document counts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pipeline.store import Store
from query import words
from query.read_index import ReadIndex
from tests.conftest import bounded_knowledge
from tests.lent import list_words
from tests.query.stores import DOCS, build_store, store_settings


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    return build_store(store_settings(tmp_path_factory.mktemp("words")), DOCS)


def test_stems_come_from_sqlites_porter_tokenizer() -> None:
    stems = words.STEMMER.stems(["deprecated", "deprecation", "Happiness", "Café", "running", "a-b", "!!"])
    assert stems == {
        "deprecated": "deprec", "deprecation": "deprec", "Happiness": "happi", "Café": "cafe",
        "running": "run", "a-b": "a b", "!!": "",
    }


def test_a_short_list_carries_stem_and_both_document_counts(built) -> None:
    result = list_words(built, "^deprec")
    assert result.status == "ok" and result.short
    table = {w.word: (w.stem, w.as_written, w.any_form) for w in result.words}
    assert table == {
        "deprecate": ("deprec", 1, 2),
        "deprecated": ("deprec", 2, 2),
        "deprecation": ("deprec", 1, 2),
        "deprecations": ("deprec", 1, 2),
    }
    assert words.by_counts(result.words)[0].word == "deprecated"


def test_the_pattern_is_a_case_insensitive_regex(built) -> None:
    assert [w.word for w in list_words(built, "^RETENT").words] == ["retention"]
    assert list_words(built, "zzz").note == "no word of the index matches 'zzz'"


def test_an_invalid_pattern_is_a_status_not_an_exception(built) -> None:
    result = list_words(built, "([")
    assert result.status == "pattern_invalid" and "not a regular expression" in (result.note or "")


def test_bulk_counts_agree_with_per_word_counts(built, monkeypatch: pytest.MonkeyPatch) -> None:
    each = {w.word: (w.as_written, w.any_form) for w in list_words(built, counts=True).words}
    monkeypatch.setattr(words, "BULK_COUNTS", 0)
    bulk = {w.word: (w.as_written, w.any_form) for w in list_words(built, counts=True).words}
    assert each == bulk and len(each) > 30


def test_related_forms_are_the_index_words_sharing_a_stem(built) -> None:
    reader = ReadIndex(built).open()
    assert reader is not None
    with reader:
        assert words.related_forms(reader.conn, "deprec") == ["deprecate", "deprecated", "deprecation", "deprecations"]
        assert words.related_forms(reader.conn, "retent") == ["retention"]


def test_statuses_of_an_unbuilt_and_an_empty_index(tmp_path: Path) -> None:
    assert list_words(store_settings(tmp_path / "none")).status == "index_not_built"
    empty = store_settings(tmp_path / "empty")
    Store(empty.db_path).close()
    assert list_words(empty).status == "corpus_empty"


def test_words_cli_short_list_is_a_table_and_long_list_plain_words(built, run_cli) -> None:
    base = ["--store-dir", str(built.store_base)]
    code, out, _ = run_cli(*base, "words", "^deprec")
    assert code == 0
    assert "Word" in out and "As written" in out and "Any form" in out and "deprecations" in out
    code, out, _ = run_cli(*base, "words")
    assert code == 0 and "As written" not in out and "retention" in out
    assert len(out.splitlines()[1].split()) > 1  # several words to a line


def test_words_json_and_its_errors(built, tmp_path: Path, run_cli) -> None:
    code, out, err = run_cli("--store-dir", str(built.store_base), "words", "^retent", "--json")
    data = json.loads(out)
    assert code == 0 and err.startswith("tier:")
    assert data["words"] == [{"word": "retention", "stem": "retent", "as_written": 3, "any_form": 3}]
    code, out, err = run_cli("--store-dir", str(tmp_path / "none"), "words", "--json")
    assert code == 1 and json.loads(out)["status"] == "index_not_built" and "knowledge index" in err
    code, out, err = run_cli("--store-dir", str(tmp_path / "none"), "words")
    assert code == 1 and "knowledge index" in err
    code, _, err = run_cli("--store-dir", str(built.store_base), "words", "([")
    assert code == 2 and "not a regular expression" in err


def test_words_output_strips_terminal_control_sequences(tmp_path: Path, run_cli) -> None:
    settings = build_store(store_settings(tmp_path), {"d/a.md": "# T\n\nplain \x1b[2Jclearing\x1b]8;;x\x07 words\n"})
    code, out, _ = run_cli("--store-dir", str(settings.store_base), "words")
    assert code == 0 and "\x1b" not in out and "\x07" not in out


@pytest.mark.timeout(120)
def test_a_catastrophically_backtracking_pattern_is_answered_or_stopped_never_left_running(
    workdir: Path, run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "docs").mkdir()
    (workdir / "docs/a.md").write_text("# Long\n\n" + "a" * 60 + "b and some ordinary words\n", encoding="utf-8")
    assert run_cli("index", "docs")[0] == 0
    monkeypatch.setattr(words, "PATTERN_SECONDS", 0.3)
    code, out, _ = run_cli("words", "(a+)+$")  # 2**60 paths through the long word for re; regex memoises
    assert code == 0 and "no word of the index matches" in out
    code, out, err = run_cli("words", "(a|aa)+$")  # exponential for both engines: stopped at the deadline
    assert code == 2
    assert err.count("\n") == 1 and "took over 0.3 s" in err and "Traceback" not in out + err
    code, out, _ = run_cli("words", "^ordin")  # an ordinary pattern still answers
    assert code == 0 and "ordinary" in out


def test_a_pattern_that_unrolls_beyond_bounds_is_refused_in_one_line_before_it_compiles(workdir: Path) -> None:
    (workdir / "docs").mkdir()
    (workdir / "docs/a.md").write_text("# Words\n\naaaa and some ordinary words\n", encoding="utf-8")
    assert bounded_knowledge(workdir, "index", "docs").returncode == 0
    started = time.monotonic()
    done = bounded_knowledge(workdir, "words", "(?:a{60000}){60000}")  # 3.6e9 items once the bounded engine unrolls it
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-400:]
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "repeats too much" in done.stderr, done.stderr
    assert time.monotonic() - started < 10
    for ordinary in ("^ordin", "a{2,}", "(?:a|b){2}"):  # ordinary repeats still answer
        done = bounded_knowledge(workdir, "words", ordinary)
        assert done.returncode == 0 and ("ordinary" in done.stdout or "aaaa" in done.stdout), (ordinary, done)


def test_words_narrow_by_documents_and_field_sort_by_documents_and_limit(built, run_cli) -> None:
    base = ["--store-dir", str(built.store_base)]
    every = json.loads(run_cli(*base, "words", "--json")[1])["words"]
    code, out, _ = run_cli(*base, "words", "--min-docs", "2", "--json")
    kept = json.loads(out)["words"]
    assert code == 0 and kept and all(w["as_written"] >= 2 for w in kept)
    assert len(kept) == sum(1 for w in every if w["as_written"] >= 2)
    code, out, _ = run_cli(*base, "words", "--max-docs", "1", "--sort", "docs", "--limit", "3", "--json")
    assert code == 0 and len(json.loads(out)["words"]) == 3
    code, out, _ = run_cli(*base, "words", "--sort", "docs", "--json")
    counts = [w["as_written"] for w in json.loads(out)["words"]]
    assert counts == sorted(counts, reverse=True)
    headings = {w["word"] for w in json.loads(run_cli(*base, "words", "--field", "heading", "--json")[1])["words"]}
    assert "retention" in headings and headings < {w["word"] for w in every}


def test_an_invalid_pattern_advises_escaping(built, run_cli) -> None:
    code, _, err = run_cli("--store-dir", str(built.store_base), "words", "c++(")
    assert code == 2 and "escape them with a backslash" in err


def test_the_stemmer_answers_every_word_when_its_cache_fills_up(monkeypatch: pytest.MonkeyPatch) -> None:
    stemmer = words.Stemmer()
    monkeypatch.setattr(words, "_STEM_CACHE_MAX", 2)
    assert stemmer.stems(["running", "jumps"]) == {"running": "run", "jumps": "jump"}
    assert stemmer.stems(["running", "jumps", "deprecated"]) == {"running": "run", "jumps": "jump",
                                                                 "deprecated": "deprec"}
