"""Identifiers as written: the exact table holds `model_validator`, `config.yaml` and `--workers` whole.

match counts a document as written only when it holds the identifier itself, words lists it, and the
porter table that ranks search still splits it, so `model validator` finds it in any form.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]
DOCS = {
    "docs/pydantic.md": "# Validators\n\nUse model_validator to check the model.\n\n"
                        "## The model_validator hook\n\nRun it with --workers 4.\n",
    "docs/config.md": "# Config\n\nEdit config.yaml first. The model validator is described here.\n",
    "docs/hyphen.md": "# Hooks\n\nThe model-validator hook; see also --dry-run.\n",
    "docs/prose.md": "# Prose\n\nA model of the validator pattern. The end.\n",
}


def _json(run_cli: RunCli, *args: str) -> Any:
    code, out, err = run_cli(*args, "--json")
    assert code == 0, out + err
    return json.loads(out)


def _term(run_cli: RunCli, query: str) -> tuple[int, int, int]:
    """(documents as written, in any form, matched) of a one-term match."""
    data = _json(run_cli, "match", query)
    (term,) = data["terms"]
    return term["documents_as_written"], term["documents_any_form"], data["matched"]


def _words(run_cli: RunCli, pattern: str) -> dict[str, tuple[int, int]]:
    data = _json(run_cli, "words", pattern)
    return {w["word"]: (w["as_written"], w["any_form"]) for w in data["words"]}


def test_match_counts_as_written_only_the_documents_holding_the_identifier(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    # In any form the identifier is the phrase of its words, as before: three documents match.
    assert _term(run_cli, "model_validator") == (1, 3, 3)
    assert _term(run_cli, "heading:model_validator") == (1, 1, 1)
    assert _term(run_cli, "config.yaml") == (1, 1, 1)
    assert _term(run_cli, "model-validator") == (1, 3, 3)
    # A word keeps counting the identifiers it is part of, in any form and as written.
    assert _term(run_cli, "model") == (4, 4, 4)
    assert _term(run_cli, '"model validator"') == (3, 3, 3)


def test_words_lists_identifiers_whole_and_no_word_keeps_a_sentence_dot(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    assert _words(run_cli, "^model_valid") == {"model_validator": (1, 3)}
    assert _words(run_cli, "^config\\.") == {"config.yaml": (1, 1)}
    assert sorted(_words(run_cli, "^--")) == ["--dry-run", "--workers"]
    assert _words(run_cli, "[.-]$") == {}
    assert _words(run_cli, "^(end|validator|yaml)$") == {"end": (1, 1), "validator": (4, 4), "yaml": (1, 1)}
    every = _json(run_cli, "words")["words"]
    assert all(any(c.isalnum() for c in w["word"]) for w in every)


def test_bulk_word_counts_give_an_identifier_its_documents_in_any_form(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    every = {w["word"]: (w["as_written"], w["any_form"]) for w in _json(run_cli, "words")["words"]}
    assert len(every) > 20  # over the short list: counted in one pass over the index
    assert every["model_validator"] == (1, 3) and every["model"] == (4, 4)


def test_search_still_finds_an_identifier_by_its_words(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    paths = [r["path"] for r in _json(run_cli, "search", "model", "validator")["results"]]
    assert "docs/pydantic.md" in paths and "docs/hyphen.md" in paths


def test_an_edited_identifier_leaves_the_exact_table_and_check_and_rebuild_agree(
    workdir: Path, run_cli: RunCli,
) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0
    write_tree(workdir, {"docs/pydantic.md": "# Validators\n\nUse field_validator. Run it with --workers.\n"})
    assert run_cli("index", "docs")[0] == 0
    assert _term(run_cli, "model_validator")[0] == 0 and _term(run_cli, "field_validator")[0] == 1
    assert _json(run_cli, "check")["ok"] is True
    assert run_cli("rebuild")[0] == 0
    assert _term(run_cli, "field_validator")[0] == 1 and "model_validator" not in _words(run_cli, "^model")
