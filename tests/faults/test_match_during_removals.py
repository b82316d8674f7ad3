"""8 clients calling /v1/match while documents are removed and re-created under them: every answer is a 200
with status ok (never a 500 from a document id the reader's own snapshot does not hold), then the invariants.

The churn is the writer's own SQL (pipeline/store.py: remove, then apply, as an index run that prunes and
re-adds does), many commits a second, so the race the issue found within a minute of `knowledge index`
loops is met within seconds. Bounded: CYCLES cycles and CHURN_S seconds of churn, QUERIES answers a client.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

import httpx

from bench.lib.corpus import generate
from config.loader import load_settings
from config.settings import Settings
from pipeline.chunker import chunk_text
from pipeline.front_matter import split as split_front_matter
from pipeline.models import Document
from pipeline.store import Store
from query.serve.http_api import build_app
from tests.faults.conftest import Project
from tests.query.test_http_api import Running

FILES = 60
CLIENTS = 8
CYCLES = 400
CHURN_S = 8.0
QUERIES = 2_000
WORDS = ("that", "the", "for", "and", "was")


def _document(base: Path, path: str) -> Document:
    """The document an index run writes for the file at path (stored spelling, relative to base)."""
    data = (base / path).read_bytes()
    matter = split_front_matter(data.decode("utf-8"))
    chunked = chunk_text(matter.body)
    st = (base / path).stat()
    return Document(path=path, root="docs", sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                    mtime_ns=st.st_mtime_ns, title=matter.title or chunked.title, chunks=chunked.chunks,
                    fields=matter.fields)


def _churn(settings: Settings, documents: dict[str, Document], churned: list[str], stop: threading.Event,
           errors: list[BaseException], cycles: list[int]) -> None:
    """Remove and re-add half the churned documents a cycle, through the writer's own code, until the deadline."""
    store = Store(settings.db_path)
    try:
        deadline = time.monotonic() + CHURN_S
        for cycle in range(CYCLES):
            if time.monotonic() > deadline:
                break
            store.remove(churned[cycle % 2::2])
            store.apply_group([documents[p] for p in churned[cycle % 2::2]])
            cycles.append(cycle)
    except BaseException as exc:  # noqa: BLE001 - reported by the test thread
        errors.append(exc)
    finally:
        store.close()
        stop.set()


def _client(url: str, k: int, stop: threading.Event, answers: list[tuple[int, str]],
            errors: list[BaseException]) -> None:
    """Ask /v1/match until the churn stops, recording each answer's HTTP code and status."""
    try:
        with httpx.Client(timeout=30) as http:
            for i in range(QUERIES):
                if stop.is_set():
                    return
                response = http.get(f"{url}/v1/match", params={"q": WORDS[(i + k) % len(WORDS)]})
                status = response.json().get("status", "") if response.status_code < 500 else response.text
                answers.append((response.status_code, str(status)[:300]))
    except BaseException as exc:  # noqa: BLE001 - reported by the test thread
        errors.append(exc)


def test_match_answers_ok_while_documents_are_removed_and_re_created(project: Project) -> None:
    generate(project.cwd / "docs", FILES, seed=24)
    (project.cwd / "knowledge.yaml").write_text(
        "knowledge:\n  expose:\n    mcp:\n      builtins: [knowledge_search, knowledge_enumerate]\n", encoding="utf-8")
    assert project.knowledge("index", "docs")[0] == 0
    settings = load_settings(None, None)
    paths = sorted(str(p.relative_to(project.cwd)) for p in (project.cwd / "docs").rglob("*.md"))
    documents = {path: _document(project.cwd, path) for path in paths}
    churned = paths[::3]
    stop = threading.Event()
    answers: list[tuple[int, str]] = []
    errors: list[BaseException] = []
    cycles: list[int] = []

    with Running(build_app(settings, "127.0.0.1", warn=lambda m: None)) as url:
        threads = [threading.Thread(target=_churn, args=(settings, documents, churned, stop, errors, cycles))]
        threads += [threading.Thread(target=_client, args=(url, k, stop, answers, errors)) for k in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=CHURN_S + 60)
        assert not any(thread.is_alive() for thread in threads)

    assert errors == [], (errors[:3], len(answers), len(cycles), [a for a in answers if a != (200, "ok")][:3])
    assert len(cycles) >= 10 and len(answers) >= 100, (len(cycles), len(answers))
    print(f"{len(answers)} answers during {len(cycles)} removal cycles")
    failed = [a for a in answers if a != (200, "ok")]
    assert failed == [], f"{len(failed)} of {len(answers)} answers failed during {len(cycles)} cycles: {failed[:3]}"
    project.invariants().assert_recovered()
