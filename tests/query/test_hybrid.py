"""Hybrid search: RRF fusion, the pinned identity at query time, honest degradation, doctor."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from config.errors import VectorIdentityMismatch
from config.loader import settings_from_mapping
from query import fusion
from query.feedback import nearest_with_feedback
from query.lexical import search_ids
from query.reader import Reader
from query.search import to_json
from query.terms import build_query
from query.vector import embed_query, query_identity
from tests.conftest import write_tree
from tests.embedserver import EmbedServer
from tests.lent import search

DOCS = {
    "docs/budgets.md": "# Budgets\n\nLimit the cost of each run with a budget cap.\n",
    "docs/queues.md": "# Queues\n\nMessages wait in a queue until a worker takes them.\n",
    "docs/install.md": "# Install\n\nRun the installer, then restart the agent.\n",
    "docs/agent.md": "# Agent\n\nThe agent answers questions and calls tools.\n",
}
HYBRID = "tier: hybrid (FTS5 + vectors, RRF) - model=hashed-bow dim=24"


def write_config(workdir: Path, server: EmbedServer, **emb: object) -> None:
    lines = ["knowledge:", "  paths: [docs]", "  embeddings:", f"    base_url: {server.base_url}",
             "    model: hashed-bow", "    timeout: 1"]
    lines += [f"    {k}: {json.dumps(v)}" for k, v in emb.items()]
    (workdir / "knowledge.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def index_hybrid(workdir: Path, server: EmbedServer, run_cli, tree: dict[str, str]) -> str:
    """Write tree and a hybrid config under workdir, run `knowledge index`; its standard output."""
    write_tree(workdir, tree)
    write_config(workdir, server)
    code, out, err = run_cli("index")
    assert code == 0, out + err
    return out


@pytest.fixture
def indexed(workdir: Path, server: EmbedServer, run_cli) -> Path:
    out = index_hybrid(workdir, server, run_cli, DOCS)
    assert out.splitlines()[0] == "tier: hybrid (FTS5 + vectors, RRF) - model=hashed-bow dim=?"
    return workdir


def settings_of(workdir: Path, server: EmbedServer, **emb: object):
    block = {"base_url": server.base_url, "model": "hashed-bow", "timeout": 1, **emb}
    return settings_from_mapping({"paths": ["docs"], "embeddings": block}, store_base=workdir)


def test_rrf_sums_reciprocal_ranks_with_k_60_on_one_based_ranks() -> None:
    fused = fusion.rrf([[10, 20, 30], [30, 40]])
    scores = dict(fused)
    assert scores[10] == pytest.approx(1 / 61)
    assert scores[30] == pytest.approx(1 / 63 + 1 / 61)
    assert [cid for cid, _ in fused] == [30, 10, 20, 40]


def test_rrf_breaks_ties_toward_the_smaller_chunk_id() -> None:
    assert [cid for cid, _ in fusion.rrf([[7, 3], [3, 7]])] == [3, 7]
    assert [cid for cid, _ in fusion.rrf([[9], [4]])] == [4, 9]


def test_rrf_counts_a_repeated_id_once_at_its_best_rank() -> None:
    assert dict(fusion.rrf([[5, 5, 6]]))[5] == pytest.approx(1 / 61)
    assert fusion.fused_ids([[1, 2, 3], [3]], 2) == [3, 1]


def test_healthy_search_prints_the_hybrid_tier_line_with_model_and_dimension(indexed: Path, run_cli) -> None:
    code, out, _ = run_cli("search", "budget cap for a run")
    assert code == 0 and out.splitlines()[0] == HYBRID
    assert "docs/budgets.md#0" in out


def test_hybrid_order_is_the_rrf_of_the_lexical_and_knn_rankings(indexed: Path, server: EmbedServer) -> None:
    settings = settings_of(indexed, server)
    text = "agent worker queue"
    with Reader(settings) as reader:
        lexical = [cid for cid, _ in search_ids(reader.conn, build_query(text))]
        identity = query_identity(settings.embeddings, reader.meta, settings.db_path)
        vector = embed_query(settings.embeddings, identity, text)
        found = nearest_with_feedback(reader.conn, identity, vector, 50, lexical, set())
        assert found is not None
        nearest = [cid for cid, _ in found[0]]  # the candidates re-scored by the moved query (test_ranking.py)
        response = search(settings, text, 4, reader)
    assert len(nearest) == 4  # every section has a vector; KNN ranks them all
    assert [h.chunk_id for h in response.hits] == fusion.fused_ids([lexical, nearest], 4)
    assert response.tier == HYBRID and response.degraded is None


def test_the_vector_tier_finds_sections_lexical_search_cannot(indexed: Path, server: EmbedServer) -> None:
    settings = settings_of(indexed, server)
    lexical_only = settings_from_mapping({"paths": ["docs"]}, store_base=indexed)
    assert search(lexical_only, "zzqx unrelatedword").hits == []
    assert len(search(settings, "zzqx unrelatedword", 3).hits) == 3


def test_an_unreachable_server_degrades_to_lexical_and_says_so(indexed: Path, server: EmbedServer,
                                                                run_cli) -> None:
    server.stop()
    code, out, _ = run_cli("search", "budget")
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("tier: hybrid -> DEGRADED to lexical (embeddings unreachable: ")
    assert "docs/budgets.md#0" in out
    code, out, err = run_cli("search", "budget", "--json")
    data = json.loads(out)
    assert code == 0 and err.startswith("tier: hybrid -> DEGRADED")
    assert data["tier"].startswith("tier: hybrid -> DEGRADED") and "cannot reach" in data["degraded"]
    assert data["degraded_kind"] == "refused" and "(embeddings unreachable: refused: " in data["tier"]
    assert "lexical only" in data["note"] and data["results"][0]["citation"] == "docs/budgets.md#0"


def test_a_server_slower_than_the_timeout_degrades_to_lexical(indexed: Path, server: EmbedServer) -> None:
    server.faults.slow = 2.0
    response = search(settings_of(indexed, server, timeout=0.2), "budget")
    assert response.degraded is not None and "timed out" in response.degraded
    assert [h.index_ref for h in response.hits] == ["docs/budgets.md#0"]
    assert to_json(response)["degraded"] == response.degraded and response.degraded_kind == "timeout"


def test_a_server_error_status_and_a_malformed_answer_degrade_by_their_kind(indexed: Path, server: EmbedServer) -> None:
    server.faults.fail_next = 100
    assert search(settings_of(indexed, server), "budget").degraded_kind == "http_status"
    server.faults.fail_next = 0
    server.faults.non_numeric = True
    assert search(settings_of(indexed, server), "budget").degraded_kind == "malformed"


def test_a_dimension_change_is_a_hard_error_not_a_degrade(indexed: Path, server: EmbedServer, run_cli) -> None:
    server.dim = 32
    code, out, err = run_cli("search", "budget")
    assert code == 1 and "--reindex" in err and "DEGRADED" not in out


@pytest.mark.parametrize("change", [{"model": "another-model"}, {"query_prefix": "query: "},
                                    {"document_prefix": "passage: "}])
def test_a_model_or_prefix_mismatch_is_a_hard_error_naming_reindex(indexed: Path, server: EmbedServer,
                                                                    change: dict[str, str]) -> None:
    settings = settings_of(indexed, server, **change)
    with pytest.raises(VectorIdentityMismatch, match="knowledge index --reindex"):
        search(settings, "budget")


def test_the_query_is_embedded_with_the_pinned_query_prefix(workdir: Path, server: EmbedServer, run_cli) -> None:
    write_tree(workdir, DOCS)
    write_config(workdir, server, query_prefix="search_query: ", document_prefix="search_document: ")
    assert run_cli("index")[0] == 0
    server.reset()
    assert run_cli("search", "budget")[0] == 0
    assert server.requests == [["search_query: budget"]]


def test_doctor_reports_a_healthy_hybrid_setup(indexed: Path, run_cli) -> None:
    code, out, _ = run_cli("doctor")
    assert code == 0 and out.splitlines()[0] == HYBRID
    status = {line.split()[1]: line.split()[0] for line in out.splitlines()[1:-1] if "not run" not in line}
    assert {status[n] for n in ("store", "wal", "writable", "fts5", "embeddings", "model", "dimension",
                                "manifest")} == {"ok"}
    assert "no fatal problem" in out and " 24" in out


def test_doctor_marks_checks_that_could_not_run_and_fails_on_a_dead_server(indexed: Path, server: EmbedServer,
                                                                            run_cli) -> None:
    server.stop()
    code, out, _ = run_cli("doctor", "--json")
    data = json.loads(out)
    checks = {c["name"]: c for c in data["checks"]}
    assert code == 1 and data["ok"] is False
    assert checks["embeddings"]["status"] == "fail" and checks["embeddings"]["fatal"]
    assert {checks[n]["status"] for n in ("model", "dimension", "normalized", "manifest")} == {"not run"}


def test_doctor_fails_on_a_manifest_mismatch(indexed: Path, server: EmbedServer, run_cli) -> None:
    server.dim = 8
    code, out, _ = run_cli("doctor")
    line = next(line for line in out.splitlines() if line.split()[1:2] == ["manifest"])
    assert code == 1 and line.split()[0] == "fail" and "--reindex" in line


def test_doctor_without_embeddings_or_index_shows_not_run_and_exits_zero(workdir: Path, run_cli) -> None:
    code, out, _ = run_cli("doctor", "--json")
    checks = {c["name"]: c["status"] for c in json.loads(out)["checks"]}
    assert code == 0
    assert checks["embeddings"] == "not configured" and checks["manifest"] == "not configured"
    assert checks["wal"] == "not run" and checks["store"] == "warn"
    code, out, _ = run_cli("doctor")
    assert code == 0 and "check(s) did not run (" in out.splitlines()[-1] and "wal" in out.splitlines()[-1]
    assert "embeddings" not in out.splitlines()[-1]


def test_a_healthy_lexical_only_doctor_says_nothing_did_not_run(workdir: Path, run_cli) -> None:
    write_tree(workdir, {"docs/a.md": "# A\n\nalpha\n"})
    assert run_cli("index", "docs")[0] == 0
    code, out, _ = run_cli("doctor")
    assert code == 0 and "did not run" not in out and out.splitlines()[-1] == "doctor: no fatal problem found"
    assert any(line.split()[:3] == ["not", "configured", "embeddings"] for line in out.splitlines())


def test_embeddings_configured_on_a_lexical_index_is_an_error_naming_the_fix(workdir: Path, server: EmbedServer,
                                                                               run_cli) -> None:
    write_tree(workdir, DOCS)
    assert run_cli("index", "docs")[0] == 0  # lexical only: no knowledge.yaml yet
    write_config(workdir, server)
    code, _, err = run_cli("search", "budget")
    assert code == 1 and "has no vectors yet" in err and "run `knowledge index`" in err
    assert run_cli("index")[0] == 0
    code, out, _ = run_cli("search", "budget")
    assert code == 0 and out.splitlines()[0] == HYBRID


def test_hydration_keeps_the_fused_order_and_skips_rows_that_vanished(indexed: Path, server: EmbedServer) -> None:
    settings = settings_of(indexed, server)
    with Reader(settings) as reader:
        ids = [r[0] for r in reader.conn.execute("SELECT id FROM chunks ORDER BY id DESC")]
        hits = reader.hydrate([ids[0], 10_000_000, ids[-1]])
    assert [h.chunk_id for h in hits] == [ids[0], ids[-1]]


def test_hybrid_results_are_the_same_when_the_quantised_knn_answers(indexed: Path, server: EmbedServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline import vector_codes
    from query import vector

    settings = settings_of(indexed, server)
    texts = ["budget cap for a run", "agent worker queue", "zzqx unrelatedword", "restart the installer"]
    with Reader(settings) as reader:
        assert vector_codes.ready(reader.conn)  # the index run built the companions
        exact = [[h.chunk_id for h in search(settings, t, 4, reader).hits] for t in texts]
        monkeypatch.setattr(vector, "EXACT_BELOW", 0)  # this tiny store takes the large-store path
        quantised = [[h.chunk_id for h in search(settings, t, 4, reader).hits] for t in texts]
    assert quantised == exact and all(len(ids) == 4 for ids in exact)


def test_a_format_3_store_is_migrated_by_the_next_index_run_without_embedding_again(
    indexed: Path, server: EmbedServer, run_cli,
) -> None:
    from pipeline import db, schema, vector_codes

    settings = settings_of(indexed, server)
    conn = db.open_writer(settings.db_path)
    try:  # the shape format 3 left: bit codes and float copies beside chunks_vec, no int8 lists
        conn.execute("BEGIN IMMEDIATE")
        schema.drop_vector_codes(conn)
        conn.execute("CREATE VIRTUAL TABLE chunks_vec_bits USING vec0(chunk_id INTEGER PRIMARY KEY,"
                     " part INTEGER PARTITION KEY, code bit[96])")
        conn.execute("CREATE TABLE chunks_vec_f32 (chunk_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
        conn.execute("INSERT INTO chunks_vec_f32 SELECT chunk_id, embedding FROM chunks_vec")
        conn.execute("CREATE TRIGGER chunks_vec_bits_ad AFTER DELETE ON chunks BEGIN "
                     "DELETE FROM chunks_vec_bits WHERE chunk_id = old.id; "
                     "DELETE FROM chunks_vec_f32 WHERE chunk_id = old.id; END")
        schema.write_meta(conn, {schema.FORMAT_VERSION_KEY: "3",
                                 schema.VECTOR_CODES_KEY: "thermometer-4-step0.5-partitions16"})
        conn.execute("COMMIT")
        before = dict(conn.execute("SELECT chunk_id, embedding FROM chunks_vec").fetchall())
    finally:
        conn.close()
    code, _, err = run_cli("search", "budget cap")
    assert code == 1 and "format 3" in err and "run `knowledge index` once" in err
    served = len(server.requests)
    code, out, err = run_cli("index")
    assert code == 0, out + err
    assert len(server.requests) == served + 1  # the run's probe: nothing was embedded again
    conn = db.connect_readonly(settings.db_path)
    try:
        assert schema.format_version(conn) == schema.FORMAT_VERSION
        assert not {"chunks_vec_bits", "chunks_vec_f32", "chunks_vec_bits_ad"} & schema.table_names(conn)
        assert vector_codes.ready(conn)
        assert dict(conn.execute("SELECT chunk_id, embedding FROM chunks_vec").fetchall()) == before
        assert sorted(vector_codes.filed_ids(conn)) == sorted(before)
    finally:
        conn.close()
    code, out, _ = run_cli("search", "budget cap for a run")
    assert code == 0 and out.splitlines()[0] == HYBRID and "docs/budgets.md#0" in out


def test_a_store_of_one_level_lists_is_refiled_in_two_levels_by_the_next_index_run(
    indexed: Path, server: EmbedServer, run_cli, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pipeline import db, schema, vector_codes
    from query import vector

    settings = settings_of(indexed, server)
    texts = ["budget cap for a run", "agent worker queue", "restart the installer"]
    with Reader(settings) as reader:
        exact = [[h.chunk_id for h in search(settings, t, 4, reader).hits] for t in texts]
    conn = db.open_writer(settings.db_path)
    try:  # the shape scheme int8-ivf-1 left: one level of centroids, no coarse table
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(f"DROP TABLE {schema.COARSE}")
        schema.write_meta(conn, {schema.VECTOR_CODES_KEY: "int8-ivf-1"})
        conn.execute("COMMIT")
        before = dict(conn.execute("SELECT chunk_id, embedding FROM chunks_vec").fetchall())
    finally:
        conn.close()
    monkeypatch.setattr(vector, "EXACT_BELOW", 0)  # this tiny store takes the large-store path when it can
    with Reader(settings) as reader:
        assert not vector_codes.ready(reader.conn)  # until then KNN is exact
        assert [[h.chunk_id for h in search(settings, t, 4, reader).hits] for t in texts] == exact
    monkeypatch.setattr(vector_codes, "LIST_SIZE", 1)  # four vectors: four lists under two coarse cells
    served = len(server.requests)
    code, out, err = run_cli("index")
    assert code == 0, out + err
    assert len(server.requests) == served + 1  # the run's probe: nothing was embedded again
    with Reader(settings) as reader:
        conn = reader.conn
        assert vector_codes.ready(conn) and vector_codes.state(conn).clusters == 4
        assert conn.execute(f"SELECT count(*) FROM {schema.COARSE}").fetchone()[0] == 2
        assert dict(conn.execute("SELECT chunk_id, embedding FROM chunks_vec").fetchall()) == before
        assert sorted(vector_codes.filed_ids(conn)) == sorted(before)
        assert [[h.chunk_id for h in search(settings, t, 4, reader).hits] for t in texts] == exact


@pytest.mark.timeout(60)
def test_a_hung_server_costs_a_search_its_query_budget_not_the_indexing_timeout(indexed: Path, server: EmbedServer,
                                                                                run_cli) -> None:
    """With `timeout: 300s` for indexing, a server that accepts and never answers used to hold a search 600 s."""
    write_config(indexed, server, timeout="300s", query_timeout="300ms")
    server.faults.slow = 30.0  # accepts, then answers long after any budget
    began = time.monotonic()
    code, out, err = run_cli("search", "budget", "--json")
    spent = time.monotonic() - began
    data = json.loads(out)
    assert code == 0 and data["degraded_kind"] == "timeout" and "timed out after 0.3s" in data["degraded"]
    assert err.startswith("tier: hybrid -> DEGRADED to lexical") and data["results"][0]["path"] == "docs/budgets.md"
    assert spent < 20, spent  # two attempts of 0.3 s and a 0.1 s wait, far below either timeout
