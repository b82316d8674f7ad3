"""SnapshotIndex: a replica serves the newest verified generation and swaps newer ones in while serving."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from config.settings import Settings
from pipeline import publish as pub
from pipeline.db import ProgrammingError
from query.replica import SnapshotIndex
from query.requests import MatchRequest, SearchRequest, WordsRequest
from query.service import QueryService
from query.status import Status
from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def primary(workdir: Path, run_cli: RunCli) -> Callable[[str], None]:
    """Index a new document holding `word` and publish a generation (the primary's cron)."""

    def add(word: str) -> None:
        write_tree(workdir, {f"docs/{word}.md": f"# About {word}\n\nThe {word} procedure, step by step.\n"})
        code, out, err = run_cli("index", "docs", "--publish")
        assert code == 0 and "published: generation" in out + err, out + err

    return add


def _replica(workdir: Path, make_settings: Callable[..., Settings]) -> tuple[SnapshotIndex, QueryService]:
    settings = make_settings()
    index = SnapshotIndex(settings, workdir / "knowledge" / "default" / "published", keep=2)
    return index, QueryService(settings, index)


def _found(service: QueryService, word: str) -> bool:
    return bool(service.search(SearchRequest(word, 5)).to_json()["results"])


def test_an_empty_directory_answers_not_built_then_serves_the_first_generation(
        workdir: Path, make_settings: Callable[..., Settings], primary: Callable[[str], None]) -> None:
    index, service = _replica(workdir, make_settings)
    assert index.poll() is None
    assert service.search(SearchRequest("anything", 5)).to_json()["status"] == Status.INDEX_NOT_BUILT
    assert index.health()["generation"] is None
    primary("rotation")
    assert index.poll() == 1 and _found(service, "rotation")
    assert index.answered_from() == 1
    assert index.health()["documents"] == 1
    index.close()


def test_a_replica_beside_a_store_of_its_own_answers_not_built_until_its_first_generation(
        workdir: Path, make_settings: Callable[..., Settings], run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/local.md": "# Local\n\nThe lighthouse keeper's log.\n"})
    assert run_cli("index", "docs")[0] == 0  # the host's own store, at the replica's settings.db_path
    index, service = _replica(workdir, make_settings)  # its DIR holds no generation
    assert index.poll() is None
    answers = [service.search(SearchRequest("lighthouse", 5)).to_json(),
               service.enumerate(MatchRequest("lighthouse")).to_json(),
               service.words(WordsRequest("^light")).to_json()]
    assert [a["status"] for a in answers] == [Status.INDEX_NOT_BUILT] * 3, answers
    assert not any(a.get("results") or a.get("documents") or a.get("words") for a in answers)
    index.close()


def test_a_swap_lets_the_request_in_flight_finish_on_the_old_generation_then_closes_it(
        workdir: Path, make_settings: Callable[..., Settings], primary: Callable[[str], None]) -> None:
    index, service = _replica(workdir, make_settings)
    primary("rotation")
    index.poll()
    with index.reader() as held:
        assert held is not None
        primary("escalation")
        assert index.poll() == 2
        assert _found(service, "escalation")  # new requests read generation 2
        assert held.conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 1  # still generation 1
    with pytest.raises(ProgrammingError):  # drained: closed
        held.conn.execute("SELECT 1")
    index.close()


def test_a_tampered_generation_is_refused_and_the_last_good_one_keeps_serving(
        workdir: Path, make_settings: Callable[..., Settings], primary: Callable[[str], None],
        capsys: pytest.CaptureFixture[str]) -> None:
    index, service = _replica(workdir, make_settings)
    primary("rotation")
    index.poll()
    primary("escalation")
    target = pub.generation_dir(index.directory, 2) / pub.DB_NAME
    target.chmod(0o644)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    assert index.poll() == 1 and index.refused == {2}
    assert "refused generation 2" in capsys.readouterr().err
    assert _found(service, "rotation") and not _found(service, "escalation")
    primary("handover")
    assert index.poll() == 3 and _found(service, "handover")
    index.close()


def test_a_generation_without_its_manifest_is_never_served(
        workdir: Path, make_settings: Callable[..., Settings], primary: Callable[[str], None]) -> None:
    index, service = _replica(workdir, make_settings)
    primary("rotation")
    primary("escalation")
    pub.manifest_path(index.directory, 2).unlink()  # a publish killed between its two renames
    assert index.poll() == 1 and not _found(service, "escalation")
    index.close()
