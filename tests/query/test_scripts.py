"""CJK text counted by its characters in BM25's length: a translation no longer outscores its original."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline.db import Connection
from pipeline.impacts import varints
from query.rank import stages
from query.rank.scripts import _bm25, _frequencies, extra_length
from query.reader import Reader
from query.search import to_json
from tests.lent import search
from tests.query.stores import build_store, store_settings

EN = ("# WebSockets\n\nInstall `websockets` first, then open a websocket from the browser and send messages "
      "to the server, which answers each of them in turn.\n")
ZH = "# WebSockets\n\n首先安装 `websockets`，然后从浏览器打开一个连接并向服务器发送消息，服务器会依次回复每一条消息。\n"
DOCS = {
    "docs/en/websockets.md": EN,
    "docs/zh/websockets.md": ZH,
    **{f"docs/en/page{i}.md": f"# Page {i}\n\nA note on the {topic}, its people and its history.\n"
       for i, topic in enumerate(["harbour", "orchard", "bakery", "railway", "glacier", "market", "theatre"])},
}


@pytest.fixture
def store(tmp_path: Path) -> Settings:
    return build_store(store_settings(tmp_path), DOCS)


def test_a_cjk_run_adds_its_characters_but_one_and_varints_read_as_sqlite_writes_them() -> None:
    assert extra_length("首先安装 然后") == 3 + 1
    assert extra_length("") == 0
    assert varints(bytes([0x11, 0x81, 0x00, 0x05])) == [17, 128, 5]


def test_the_english_page_outranks_its_translation_on_its_own_words(store: Settings,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ranked = [h.path for h in search(store, "websockets", 5).hits]
    assert ranked[:2] == ["docs/en/websockets.md", "docs/zh/websockets.md"]
    explained = to_json(search(store, "websockets", 5, explain=True))["results"]
    assert explained[1]["explain"]["stages"]["cjk_length"].startswith("x0.")
    monkeypatch.setattr(stages, "STAGES", tuple(s for s in stages.STAGES if s.__name__ != "cjk_length"))
    assert [h.path for h in search(store, "websockets", 5).hits][:1] == ["docs/zh/websockets.md"]


def test_the_recomputed_bm25_is_fts5s_own_at_fts5s_length(store: Settings) -> None:
    with Reader(store) as reader:
        conn = reader.conn
        rows = conn.execute("SELECT rowid, bm25(chunks_fts, 1.0, 2.0) FROM chunks_fts WHERE chunks_fts MATCH"
                            " '\"websockets\" OR \"install\"'").fetchall()
        count, *totals = varints(bytes(conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()[0]))
        average = sum(totals) / count
        idf = {s: _idf(conn, s, count) for s in ("websocket", "instal")}
        for rowid, score in rows:
            size = sum(varints(bytes(conn.execute("SELECT sz FROM chunks_fts_docsize WHERE id = ?",
                                                  (rowid,)).fetchone()[0])))
            heading, body = conn.execute("SELECT heading_path, body FROM chunks WHERE id = ?", (rowid,)).fetchone()
            tf = _frequencies(heading, body, set(idf), 2.0)
            assert _bm25(tf, idf, {s: 1 for s in idf}, size, average) == pytest.approx(-score, rel=1e-9)


def test_a_query_with_cjk_runs_and_a_store_without_cjk_text_are_left_alone(store: Settings, tmp_path: Path) -> None:
    found = to_json(search(store, "安装 websockets", 5, explain=True))["results"]
    assert all("cjk_length" not in r["explain"].get("stages", {}) for r in found)
    english = build_store(store_settings(tmp_path / "en"), {"docs/en/websockets.md": EN})
    found = to_json(search(english, "websockets", 5, explain=True))["results"]
    assert found and all("cjk_length" not in r["explain"].get("stages", {}) for r in found)


def _idf(conn: Connection, stem: str, count: int) -> float:
    held = conn.execute("SELECT doc FROM temp.porter_vocab WHERE term = ?", (stem,)).fetchone()
    n = int(held[0]) if held else 0
    return max(math.log((count - n + 0.5) / (n + 0.5)), 1e-6)
