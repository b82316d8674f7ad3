"""100 searches and 100 matches over HTTP while `knowledge index --reindex` rewrites every document in
another process: every answer is ok and whole (a reader sees each document before or after its rewrite,
never without it), then the invariants."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import httpx
import pytest

from bench.lib.corpus import generate
from config.loader import load_settings
from query.serve.http_api import build_app
from tests.faults.conftest import Project
from tests.query.test_http_api import Running

pytestmark = pytest.mark.slow

FILES = 400
QUERIES = 100


def test_searches_and_matches_during_a_reindex_all_answer_ok(project: Project) -> None:
    generate(project.cwd / "docs", FILES, seed=51)
    (project.cwd / "knowledge.yaml").write_text(
        "knowledge:\n  expose:\n    mcp:\n      builtins: [knowledge_search, knowledge_enumerate]\n", encoding="utf-8")
    assert project.knowledge("index", "docs")[0] == 0
    settings = load_settings(None, None)
    sample = sorted((project.cwd / "docs").rglob("*.md"))[:: FILES // 3]
    words = (*(re.findall(r"[a-z]{6,}", p.read_text(encoding="utf-8").lower())[3] for p in sample), "zzyzxnowhere")

    with Running(build_app(settings, "127.0.0.1", warn=lambda m: None)) as url, httpx.Client(timeout=30) as http:
        def ask(route: str, word: str) -> dict[str, object]:
            response = http.get(f"{url}/v1/{route}", params={"q": word})
            assert response.status_code == 200, response.text
            return dict(response.json())

        before = {w: ask("match", w)["matched"] for w in words}
        hits = {w: len(ask("search", w)["results"]) for w in words}  # type: ignore[arg-type]
        answers: list[tuple[str, str, dict[str, object]]] = []
        errors: list[BaseException] = []
        running: list[bool] = []

        def reader(route: str, still_running: Callable[[], bool]) -> None:
            try:
                for i in range(QUERIES):
                    word = words[i % len(words)]
                    answers.append((route, word, ask(route, word)))
                    running.append(still_running())
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                errors.append(exc)

        run = project.popen("index", "docs", "--reindex", "--json")
        project.wait_for(lambda: run.poll() is not None or _rewritten(project), 60, "the re-index to start writing")
        threads = [threading.Thread(target=reader, args=(route, lambda: run.poll() is None))
                   for route in ("search", "match")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err

    assert errors == [] and len(answers) == 2 * QUERIES
    assert sum(running) >= QUERIES // 2, f"only {sum(running)} answers came while the re-index ran"
    for route, word, answer in answers:
        assert answer["status"] == "ok", answer
        if route == "match":
            assert answer["matched"] == before[word], (word, answer["matched"], before[word])
        else:
            assert len(answer["results"]) == hits[word], (word, answer)  # type: ignore[arg-type]
    project.invariants().assert_recovered()


def _rewritten(project: Project) -> bool:
    """True once the re-index has committed a rewrite (a document indexed later than the first run's)."""
    from pipeline import db

    conn = db.connect_readonly(project.db_path)
    try:
        return bool(conn.execute("SELECT count(DISTINCT indexed_at) > 1 FROM documents").fetchone()[0])
    finally:
        conn.close()
