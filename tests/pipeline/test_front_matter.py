"""Front matter: split off before chunking, title and fields kept, a malformed block indexed as text."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from config.errors import StoreFormatError
from pipeline import db, schema
from pipeline.chunker import chunk_text
from pipeline.files import ingest_file
from pipeline.front_matter import filter_values, split
from pipeline.models import Document, FileJob
from pipeline.paths import PathBase
from pipeline.store import Store


def test_a_yaml_block_gives_fields_and_title_and_leaves_the_body() -> None:
    matter = split("---\ntitle: Deploying\ntags: [ops, security]\ndate: 2024-05-01\ndraft: false\n---\n"
                   "# Heading\n\nBody text.\n")
    assert matter.error is None
    assert matter.title == "Deploying"
    assert matter.fields == {"title": "Deploying", "tags": ["ops", "security"], "date": "2024-05-01", "draft": False}
    assert matter.body == "# Heading\n\nBody text.\n"
    assert filter_values(matter.fields) == [("title", "Deploying"), ("tags", "ops"), ("tags", "security"),
                                            ("date", "2024-05-01"), ("draft", "false")]


def test_a_toml_block_is_parsed_with_crlf_line_ends() -> None:
    matter = split("+++\r\ntitle = \"Config\"\r\ntags = [\"api\"]\r\nweight = 3\r\n+++\r\nText.\r\n")
    assert matter.error is None and matter.title == "Config"
    assert matter.fields == {"title": "Config", "tags": ["api"], "weight": 3} and matter.body == "Text.\n"


@pytest.mark.parametrize(("text", "reason"), [
    ("---\ntitle: [unclosed\n---\nBody.\n", "YAML front matter not parsed"),
    ("---\n- a list\n---\nBody.\n", "it is a list, not a mapping of fields"),
    ("+++\ntitle = \n+++\nBody.\n", "TOML front matter not parsed"),
])
def test_a_malformed_block_is_reported_and_kept_as_text(text: str, reason: str) -> None:
    matter = split(text)
    assert matter.error is not None and reason in matter.error and "indexed as text" in matter.error
    assert matter.body == text and matter.fields == {}


def test_an_unclosed_fence_or_a_later_rule_is_just_text() -> None:
    unclosed = split("---\nno closing fence\n")
    assert unclosed.error is None and unclosed.fields == {} and unclosed.body == "---\nno closing fence\n"
    assert split("# Title\n\n---\n\ntitle: x\n---\n").fields == {}


def test_ingest_keeps_the_block_out_of_the_sections(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\ntitle: From front matter\nsecret: swordfish\n---\n# First heading\n\nBody.\n")
    doc = ingest_file(FileJob(str(tmp_path / "a.md"), str(tmp_path), 0, 0))
    assert not isinstance(doc, str)
    assert doc.title == "From front matter" and doc.fields["secret"] == "swordfish"
    assert all("swordfish" not in c.body and "---" not in c.body for c in doc.chunks)


def _format_2(db_path: Path, paths: dict[str, str]) -> None:
    """A store as format 2 left it: no fields column or table, front matter indexed as body text."""
    store = Store(db_path)
    for path, text in paths.items():
        data = text.encode()
        chunked = chunk_text(text)
        store.apply(Document(path, "docs", hashlib.sha256(data).hexdigest(), len(data), 1, chunked.title,
                             chunked.chunks))
    store.close()
    conn = db.open_writer(db_path)
    conn.execute("DROP TABLE document_fields")
    conn.execute("ALTER TABLE documents DROP COLUMN fields")
    conn.execute("UPDATE meta SET value = '2' WHERE key = ?", (schema.FORMAT_VERSION_KEY,))
    conn.close()


def test_format_2_is_refused_by_readers_and_migrated_by_the_next_index(tmp_path: Path) -> None:
    db_path = tmp_path / "knowledge.db"
    _format_2(db_path, {"docs/fm.md": "---\ntags: [x]\n---\nBody.\n", "docs/plain.md": "# Plain\n\nText.\n"})
    conn = db.connect_readonly(db_path)
    with pytest.raises(StoreFormatError, match=r"format 2.*run `knowledge index` once"):
        schema.check(conn, db_path)
    conn.close()
    store = Store(db_path, PathBase.at(tmp_path))
    rows = dict(store.conn.execute("SELECT path, sha256 FROM documents").fetchall())
    assert rows["docs/fm.md"] == "" and rows["docs/plain.md"] != ""  # only the front-matter file is read again
    assert schema.format_version(store.conn) == schema.FORMAT_VERSION
    schema.check(store.conn, db_path)
    store.close()


def test_format_1_passes_through_2_to_3(tmp_path: Path) -> None:
    db_path = tmp_path / "knowledge.db"
    _format_2(db_path, {"docs/plain.md": "# Plain\n\nText.\n"})
    conn = db.open_writer(db_path)
    conn.execute("UPDATE meta SET value = '1' WHERE key = ?", (schema.FORMAT_VERSION_KEY,))
    conn.close()
    store = Store(db_path, PathBase.at(tmp_path))
    assert schema.format_version(store.conn) == schema.FORMAT_VERSION
    assert [r[0] for r in store.conn.execute("SELECT path FROM documents")] == ["docs/plain.md"]
    store.close()


@pytest.mark.parametrize(("block", "reason"), [
    ("a: &a [x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
     "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
     "f: [*e, *e, *e, *e]\n",
     "expand to more than 100,000 values"),
    ("a: &a [*a]\n", "recursive alias"),
    ("a: &a {k: *a}\n", "recursive alias"),
    ("x: " + "[" * 40 + "]" * 40 + "\n", "nested more than 32 levels deep"),
    ("a: &a [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]\nb: [[[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]]\n",
     "aliases nest more than 32 levels deep"),
    ("x: '" + "y" * (1024 * 1024) + "'\n", "more than the 1,048,576 read"),
])
def test_a_yaml_block_past_the_bounds_is_refused_by_name_and_kept_as_text(block: str, reason: str) -> None:
    text = f"---\n{block}---\nBody.\n"
    matter = split(text)
    assert matter.error is not None and reason in matter.error and "indexed as text" in matter.error
    assert matter.body == text and matter.fields == {}


def test_a_deep_toml_block_is_refused_not_a_recursion_error() -> None:
    matter = split("+++\nx = " + "[" * 5000 + "]" * 5000 + "\n+++\nBody.\n")
    assert matter.error is not None and "TOML front matter not parsed" in matter.error


def test_shared_aliases_within_the_bounds_parse_and_non_finite_numbers_are_text() -> None:
    matter = split("---\nbase: &b {owner: alice}\nx: *b\ny: *b\nw: .nan\nv: [-.inf, 1.5]\n---\nBody.\n")
    assert matter.error is None
    assert matter.fields == {"base": {"owner": "alice"}, "x": {"owner": "alice"}, "y": {"owner": "alice"},
                             "w": "nan", "v": ["-inf", 1.5]}
    assert filter_values({"tags": ["a", "b", "a"] * 3, "k": "a"}) == [("tags", "a"), ("tags", "b"), ("k", "a")]
