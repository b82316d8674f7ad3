"""Query latency of the read side: search (lexical, hybrid), match, and MCP round trips.

    .venv/bin/python -m bench.bench_query --chunks 10000 100000 --queries 300

    .venv/bin/python -m bench.bench_query --chunks 10000 --embed-url http://127.0.0.1:8199/v1 \
        --out bench/out/query-real --skip-mcp        # real vectors from an embeddings server

    .venv/bin/python -m bench.bench_query --chunks 1000000 --skip-mcp --skip-match   # ~1M chunks

    .venv/bin/python -m bench.bench_query --chunks 40000 --out bench/out/query-real --skip-mcp \
        --vectors-file bench/out/query-real/store-40000/vectors.f32 --embed-url http://127.0.0.1:8199/v1
        # chunk vectors embedded in-process by bench/embed_chunks.py, queries by the server

For each size it generates a corpus with bench/lib/corpus.py (about 13 chunks a file), indexes it
with `knowledge index`, then adds a vector per chunk straight into chunks_vec and builds the
quantised companions (pipeline/vector_codes.py). Vectors are 384-dimension seeded random unit
vectors, one per chunk (no server needed; KNN costs the same whatever the values, and random
vectors are the hardest case for a quantised pre-filter; from 200k chunks on they are normalised
uniform int8 draws rather than Gaussian ones, ~20x faster to make in pure Python), or with
--embed-url the chunks embedded by a real server (about 25 chunks/s for all-MiniLM-L6-v2 on 2
cores), or with --vectors-file the records bench/embed_chunks.py wrote. Queries are 1-4
consecutive words taken from random chunks of the corpus, so they hit real co-occurring text.
Measured, each as p50/p95/mean:

- search, lexical: query.search.search with no embeddings configured, on a warm reader, and
  per call with a fresh reader (what the CLI and each tool call pay);
- search, hybrid: the same with embeddings configured, the query embedding replaced by a
  precomputed vector, so the figure covers FTS5 + KNN + RRF + hydration and excludes the
  embeddings server's time;
- KNN alone: exact brute force over chunks_vec, the quantised path forced (int8 codes of the
  lists nearest the query, the best re-scored exactly from chunks_vec), and knn() as shipped
  (exact below query.vector.EXACT_BELOW chunks); recall@50 of the quantised path against the
  exact top 50 (mean and minimum over the query vectors: seeded random unit vectors, or with
  --embed-url the embedded text queries), counting a result as found when its distance is
  within the exact 50th distance, so equal distances are not misses; --lists/--clusters give
  the density-matched estimate (another store's list count and probed fraction);
- the vector tier's bytes per chunk (dbstat, by table) and a reader's peak RSS (a child process
  running every search of the run on one Reader);
- search, hybrid with exact KNN forced, for comparison with the shipped path;
- match: query.enumerate.enumerate_documents (fresh reader per call, default CLI limit);
- MCP round trips: knowledge_search and knowledge_enumerate through the SDK's client session,
  over stdio (`knowledge mcp`) and over streamable HTTP (`knowledge serve`).

Prints one JSON object per size and a markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import time
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from bench.lib.paths import KNOWLEDGE, OUT
from bench.lib.samples import keyword_queries, sample_queries
from bench.lib.stats import percentiles, timed
from bench.lib.stores import lexical_store
from config.loader import settings_from_mapping
from config.settings import EmbeddingsSettings
from pipeline import db, schema, vector_codes, vectors
from pipeline.embedding_input import document_text
from pipeline.embeddings import EmbeddingsClient
from pipeline.store import Store
from query import search as search_module
from query import vector as vector_module
from query.reader import Reader
from query.requests import MatchRequest, SearchRequest
from query.service import QueryService
from query.vector import KNN_K, knn, knn_exact, knn_quantised

DIMENSION = 384
MODEL = "bench-random-384-unique"
RECALL_QUERIES = 100


def vector_only_store(out: Path, chunks: int) -> Path:
    """A store of `chunks` one-word sections in 13-section documents (KNN only).

    For the vector tier's latency, bytes and reader RSS at sizes whose text would take too long to
    index on a loaded machine: KNN reads chunks_vec, the companions and `max(id)` of chunks only.
    """
    base = out / f"vectors-only-{chunks}"
    path = base / "knowledge" / "default" / "knowledge.db"
    if path.exists():
        return base
    store = Store(path)
    try:
        with store.transaction() as conn:
            for d in range(math.ceil(chunks / 13)):
                n = min(13, chunks - 13 * d)
                doc = conn.execute(
                    "INSERT INTO documents(path, root, title, sha256, size, mtime_ns, chunk_count, indexed_at,"
                    " indexed_ns) VALUES (?, 'v', 't', '', 0, 0, ?, '', 0)", (f"v/{d}.md", n)).lastrowid
                conn.executemany("INSERT INTO chunks(document_id, ordinal, heading_path, body, text_hash)"
                                 " VALUES (?, ?, '', 'vector', '')", [(doc, i) for i in range(n)])
    finally:
        store.close()
    return base


def build(out: Path, chunks: int, seed: int, embed_url: str | None = None, vectors_file: Path | None = None) -> Path:
    """Corpus and store for about `chunks` chunks with vectors (reused when already built); the store's base dir."""
    base = lexical_store(out, chunks, seed)
    add_vectors(base / "knowledge" / "default" / "knowledge.db", seed, embed_url, vectors_file)
    return base


def unit_vectors(n: int, seed: int) -> list[list[float]]:
    """n seeded random unit vectors of DIMENSION."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        v = [rng.gauss(0, 1) for _ in range(DIMENSION)]
        norm = math.sqrt(sum(x * x for x in v))
        out.append([x / norm for x in v])
    return out


def embed_texts(url: str, texts: list[str], label: str) -> tuple[str, list[list[float]]]:
    """(served model name, unit vectors) of texts, 64 per request."""
    out: list[list[float]] = []
    started = time.perf_counter()
    with EmbeddingsClient(EmbeddingsSettings(base_url=url, model="all-MiniLM-L6-v2", timeout=300)) as client:
        served = client.probe().served_model
        for i in range(0, len(texts), 64):
            out += client.embed(texts[i : i + 64])
            if i and i % 6400 == 0:
                print(f"embedded {i} {label} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return served, out


def fast_unit_vectors(n: int, seed: int) -> Iterator[list[float]]:
    """n seeded random unit vectors from uniform int8 draws (normalised), for stores too large for gauss()."""
    rng = random.Random(seed)
    for _ in range(n):
        v = array("b", rng.randbytes(DIMENSION))
        inv = 1 / math.sqrt(sum(x * x for x in v) or 1)
        yield [x * inv for x in v]


def file_vectors(path: Path) -> dict[int, bytes]:
    """{chunk id: float32 blob} from a bench/embed_chunks.py file."""
    record = 8 + 4 * DIMENSION
    data = path.read_bytes()
    return {struct.unpack_from("<q", data, o)[0]: data[o + 8 : o + record]
            for o in range(0, len(data) - record + 1, record)}


def add_vectors(db_path: Path, seed: int, embed_url: str | None = None, vectors_file: Path | None = None) -> None:
    """Give every chunk a vector (seeded random, embedded by the server, or from a file) and build the companions."""
    conn = db.open_writer(db_path)
    try:
        meta = schema.read_meta(conn)
        real = embed_url is not None or vectors_file is not None
        same_source = real == (meta.get(schema.MODEL_KEY) != MODEL)
        if vectors.has_table(conn) and vector_codes.ready(conn) and same_source:
            have = conn.execute(f"SELECT count(*) FROM {schema.VECTORS}").fetchone()[0]
            if vectors_file is not None or have == conn.execute("SELECT count(*) FROM chunks").fetchone()[0]:
                return
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY id")]
        blobs: Iterable[tuple[int, bytes]]
        if vectors_file is not None:
            model, stored = "all-MiniLM-L6-v2", file_vectors(vectors_file)
            blobs = sorted(stored.items())
        elif embed_url:
            rows = conn.execute("SELECT id, heading_path, body FROM chunks ORDER BY id").fetchall()
            model, vecs = embed_texts(embed_url, [document_text(b, h, "") for _, h, b in rows], "chunks")
            blobs = ((cid, vectors.to_blob(v)) for cid, v in zip(ids, vecs))
        else:
            model = MODEL
            made = unit_vectors(len(ids), seed) if len(ids) < 200_000 else fast_unit_vectors(len(ids), seed)
            blobs = ((cid, vectors.to_blob(v)) for cid, v in zip(ids, made))
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        if vectors.has_table(conn):
            conn.execute(f"DELETE FROM {schema.VECTORS}")
        schema.drop_vector_codes(conn)
        vectors.install(conn, vectors.VectorIdentity(model=model, dimension=DIMENSION))  # companions empty
        stored_n = 0
        batch: list[tuple[int, bytes]] = []
        for row in blobs:
            batch.append(row)
            if len(batch) == 5000:
                conn.executemany(f"INSERT INTO {schema.VECTORS}(chunk_id, embedding) VALUES (?, ?)", batch)
                stored_n += len(batch)
                batch = []
        conn.executemany(f"INSERT INTO {schema.VECTORS}(chunk_id, embedding) VALUES (?, ?)", batch)
        stored_n += len(batch)
        print(f"stored {stored_n} vectors in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        install_codes(conn, "built the companions")
    finally:
        conn.close()


def measure_search(base: Path, queries: list[str], embedded: dict[str, list[float]] | None = None,
                   exact: bool = True) -> dict[str, Any]:
    """Lexical (warm and fresh reader) and hybrid (query embedding excluded) search latencies."""
    lexical = settings_from_mapping({}, store_base=base)
    with Reader(lexical) as reader:
        model = reader.meta["model"]
    hybrid = settings_from_mapping(
        {"embeddings": {"base_url": "http://127.0.0.1:9/v1", "model": model}}, store_base=base
    )
    # One seeded random vector per query (the lists a query reads depend on its vector), unless embedded.
    stand_in = embedded or dict(zip(queries, unit_vectors(len(queries), 7)))
    # The search path imports the embedding step from query.vector when it runs (the HTTP client only
    # with embeddings), so the stand-in replaces it there.
    original = vector_module.embed_query
    vector_module.embed_query = lambda settings, identity, text: stand_in[text]  # type: ignore[assignment, misc]
    shipped_threshold = vector_module.EXACT_BELOW
    try:
        with Reader(lexical) as reader:
            warm_lexical = timed(lambda q: search_module.search(lexical, q, 5, reader), queries)
        fresh_lexical = timed(lambda q: QueryService(lexical).search(SearchRequest(q, 5)).response, queries)
        with Reader(hybrid) as reader:
            check = search_module.search(hybrid, queries[0], 5, reader)
            assert check.degraded is None and check.tier.startswith("tier: hybrid"), check.tier
            warm_hybrid = timed(lambda q: search_module.search(hybrid, q, 5, reader), queries)
        fresh_hybrid = timed(lambda q: QueryService(hybrid).search(SearchRequest(q, 5)).response, queries)
        vector_module.EXACT_BELOW = 1 << 62  # every store brute force: the path before the companions
        with Reader(hybrid) as reader:
            warm_hybrid_exact = timed(lambda q: search_module.search(hybrid, q, 5, reader),
                                      queries if exact else [])
    finally:
        vector_module.embed_query = original
        vector_module.EXACT_BELOW = shipped_threshold
    return {
        "search_lexical_warm": warm_lexical,
        "search_lexical_fresh_reader": fresh_lexical,
        "search_hybrid_warm_no_embed": warm_hybrid,
        "search_hybrid_warm_no_embed_exact_knn": warm_hybrid_exact,
        "search_hybrid_fresh_reader_no_embed": fresh_hybrid,
    }


def measure_knn(base: Path, query_vectors: list[list[float]], recall_k: int = KNN_K,
                lists: int | None = None, timing: bool = True) -> dict[str, Any]:
    """KNN latencies (exact, quantised, shipped) and recall@recall_k of the quantised path against exact."""
    settings = settings_from_mapping({}, store_base=base)
    with Reader(settings) as reader:
        conn = reader.conn
        assert vector_codes.ready(conn)
        state = vector_codes.state(conn)
        size = conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
        by_text = {str(i): v for i, v in enumerate(query_vectors)}
        keys = list(by_text)
        out: dict[str, Any] = {"codes": {"clusters": state.clusters, "trained": state.trained, "factor": state.factor,
                                         "lists_probed": lists or vector_module.probes(state.clusters, size)}}
        if timing:
            out["knn_exact"] = timed(lambda key: knn_exact(conn, by_text[key], KNN_K), keys)
            # the lists kept in the Reader's caches across queries, as a server's ReadIndex keeps them
            out["knn_quantised"] = timed(lambda key: knn_quantised(conn, by_text[key], KNN_K, lists,
                                                                   caches=reader.caches), keys)
            out["knn_only"] = timed(lambda key: knn(conn, by_text[key], KNN_K, caches=reader.caches), keys)
        recalls = []
        for v in query_vectors:
            exact = knn_exact(conn, v, recall_k)
            found = knn_quantised(conn, v, recall_k, lists)
            bound = exact[-1][1] + 1e-6
            recalls.append(min(recall_k, sum(1 for _, d in found if d <= bound)) / recall_k)
    ordered = sorted(recalls)
    out["recall_at_50" if recall_k == KNN_K and lists is None else f"recall_at_{recall_k}_lists_{lists}"] = {
        "mean": round(statistics.fmean(recalls), 4), "min": ordered[0],
        "p5": ordered[max(0, math.ceil(0.05 * len(ordered)) - 1)], "n": len(recalls)}
    return out


def install_codes(conn: Any, what: str) -> None:
    """Train and file the store's vector codes in the open transaction, commit, and say how long it took."""
    started = time.perf_counter()
    vector_codes.install(conn, DIMENSION)
    conn.execute("COMMIT")
    print(f"{what} in {time.perf_counter() - started:.1f} s: {vector_codes.state(conn)}", file=sys.stderr)


def retrain(base: Path, clusters: int) -> None:
    """Rebuild the store's companions with `clusters` lists (for a density-matched recall estimate)."""
    conn = db.open_writer(base / "knowledge" / "default" / "knowledge.db")
    try:
        total = conn.execute(f"SELECT count(*) FROM {schema.VECTORS}").fetchone()[0]
        if vector_codes.ready(conn) and vector_codes.state(conn).clusters == clusters:
            return
        vector_codes.LIST_SIZE = max(1, total // clusters)
        vector_codes.MAX_CLUSTERS = clusters  # a store whose vector file covers part of its chunks counts them all
        conn.execute("BEGIN IMMEDIATE")
        install_codes(conn, "retrained")
    finally:
        conn.close()


def vector_bytes(base: Path) -> dict[str, Any]:
    """Bytes of the vector tier by table (dbstat, through the stdlib sqlite3, which has it) and per vector."""
    path = base / "knowledge" / "default" / "knowledge.db"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        sizes = {str(n): int(b) for n, b in conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat WHERE name LIKE 'chunks_vec%' GROUP BY name")}
        count = conn.execute(f"SELECT count(*) FROM {schema.VECTORS}_rowids").fetchone()[0]
    finally:
        conn.close()
    floats = {n: b for n, b in sizes.items() if n.startswith(schema.VECTORS + "_")
              and not n.startswith((schema.CODES, schema.CENTROIDS))}
    codes = {n: b for n, b in sizes.items() if n not in floats}
    per = {"float_vector_alone": 4 * DIMENSION,
           "chunks_vec": round(sum(floats.values()) / max(1, count), 1),
           "companions": round(sum(codes.values()) / max(1, count), 1)}
    per["tier"] = round(per["chunks_vec"] + per["companions"], 1)
    per["tier_over_float_vector"] = round(per["tier"] / per["float_vector_alone"], 3)
    per["tier_over_chunks_vec"] = round(per["tier"] / max(1, per["chunks_vec"]), 3)
    return {"vectors": count, "bytes_by_table": sizes, "bytes_per_vector": per}


def reader_rss(base: Path, queries: list[str]) -> dict[str, Any]:
    """Peak RSS of a child process that runs every query lexical and hybrid on one warm Reader."""
    probe = base / "rss-queries.json"
    probe.write_text(json.dumps(queries))
    out = subprocess.run([sys.executable, __file__, "--rss-child", str(base)], capture_output=True, text=True,
                         check=True, timeout=3600)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def rss_child(base: Path) -> None:
    """The child of reader_rss: searches, then prints its RSS figures as JSON."""
    queries = json.loads((base / "rss-queries.json").read_text())
    rss_before = _rss_kib()
    with Reader(settings_from_mapping({}, store_base=base)) as reader:
        model = reader.meta["model"]
    hybrid = settings_from_mapping({"embeddings": {"base_url": "http://127.0.0.1:9/v1", "model": model}},
                                   store_base=base)
    fixed = unit_vectors(len(queries), 11)
    by_text = dict(zip(queries, fixed))
    vector_module.embed_query = lambda settings, identity, text: by_text[text]  # type: ignore[assignment, misc]
    with Reader(hybrid) as reader:
        opened = _rss_kib()
        for q in queries:
            search_module.search(hybrid, q, 5, reader)
        after = _rss_kib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rss_before_open_mib": round(rss_before / 1024, 1),
                      "rss_reader_open_mib": round(opened / 1024, 1),
                      "rss_after_queries_mib": round(after / 1024, 1), "peak_rss_mib": round(peak / 1024, 1),
                      "queries": len(queries)}))


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def measure_match(base: Path, queries: list[str]) -> dict[str, Any]:
    """match latency (fresh reader per call, CLI default limit 50)."""
    settings = settings_from_mapping({}, store_base=base)
    return {"match": timed(lambda q: QueryService(settings).enumerate(MatchRequest(q, limit=50)).result, queries)}


async def _tool_latency(client: Any, tool: str, queries: list[str]) -> dict[str, float]:
    """Percentiles of one tool's round trips over queries, after ten warm-up calls."""
    for q in queries[:10]:
        await client.call_tool(tool, {"query": q})
    samples = []
    for q in queries:
        start = time.perf_counter()
        await client.call_tool(tool, {"query": q})
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def measure_mcp(base: Path, queries: list[str], workdir: Path) -> dict[str, Any]:
    """Round trips of both tools through the SDK client, over stdio and streamable HTTP."""
    import anyio
    import httpx
    import yaml
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    workdir.mkdir(parents=True, exist_ok=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = workdir / "knowledge.yaml"
    store = base / "knowledge" / "default"
    config.write_text(yaml.safe_dump({"knowledge": {
        "directory": str(store),
        "expose": {"mcp": {"builtins": ["knowledge_search", "knowledge_enumerate"], "port": port}},
    }}))

    async def session(client: Any) -> dict[str, Any]:
        return {
            "knowledge_search": await _tool_latency(client, "knowledge_search", queries),
            "knowledge_enumerate": await _tool_latency(client, "knowledge_enumerate", queries),
        }

    async def over_stdio() -> dict[str, Any]:
        params = StdioServerParameters(command=KNOWLEDGE, args=["--config", str(config), "mcp"], cwd=str(workdir))
        with open(workdir / "mcp.err", "w") as err:
            async with Client(stdio_client(params, errlog=err)) as client:
                return await session(client)

    async def over_http() -> dict[str, Any]:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            return await session(client)

    out: dict[str, Any] = {"mcp_stdio": anyio.run(over_stdio)}
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    with open(workdir / "serve.err", "w") as err:
        proc = subprocess.Popen([KNOWLEDGE, "--config", str(config), "serve"], cwd=workdir, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("knowledge serve did not start; see serve.err")
            time.sleep(0.1)
        out["mcp_http"] = anyio.run(over_http)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    return out


def chunk_count(base: Path) -> tuple[int, int]:
    """(documents, chunks) of the store."""
    with Reader(settings_from_mapping({}, store_base=base)) as reader:
        docs, chunks = reader.conn.execute("SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents").fetchone()
    return int(docs), int(chunks)


def markdown(results: list[dict[str, Any]]) -> str:
    """The RESULTS.md table: one row per measurement, one column pair per size."""
    sizes = [f"{r['chunks']:,} chunks" for r in results]
    lines = ["| measurement | " + " | ".join(f"{s} p50 / p95 (ms)" for s in sizes) + " |",
             "| --- | " + " | ".join("---" for _ in sizes) + " |"]
    rows = [
        ("text: search, lexical (warm reader)", ["search_lexical_warm"]),
        ("text: search, lexical (reader opened per call)", ["search_lexical_fresh_reader"]),
        ("text: search, hybrid excl. query embedding (warm reader)", ["search_hybrid_warm_no_embed"]),
        ("text: search, hybrid excl. query embedding (reader per call)", ["search_hybrid_fresh_reader_no_embed"]),
        ("text: search, hybrid with exact KNN forced (warm reader)", ["search_hybrid_warm_no_embed_exact_knn"]),
        ("KNN exact (vec0 brute force over float[384], k=50)", ["knn_exact"]),
        ("KNN quantised (int8 codes of the nearest lists, best RESCORE * k re-scored, k=50)", ["knn_quantised"]),
        ("KNN as shipped (exact under 15,000 chunks, else quantised)", ["knn_only"]),
        ("text: match (reader per call, limit 50)", ["match"]),
        ("keyword: search, lexical (warm reader)", ["search_lexical_warm_keywords"]),
        ("keyword: search, hybrid excl. query embedding (warm reader)", ["search_hybrid_warm_no_embed_keywords"]),
        ("keyword: search, hybrid with exact KNN forced (warm reader)",
         ["search_hybrid_warm_no_embed_exact_knn_keywords"]),
        ("keyword: match", ["match_keywords"]),
        ("MCP stdio round trip (SDK client, `knowledge mcp`), knowledge_search", ["mcp_stdio", "knowledge_search"]),
        ("MCP stdio round trip, knowledge_enumerate", ["mcp_stdio", "knowledge_enumerate"]),
        ("MCP streamable HTTP round trip (`knowledge serve`), knowledge_search", ["mcp_http", "knowledge_search"]),
        ("MCP streamable HTTP round trip, knowledge_enumerate", ["mcp_http", "knowledge_enumerate"]),
    ]
    for label, key in rows:
        cells = []
        for r in results:
            value: Any = r
            for part in key:
                value = value.get(part, {}) if isinstance(value, dict) else {}
            cells.append(f"{value['p50_ms']} / {value['p95_ms']}" if value else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    recall = [r.get("recall_at_50") for r in results]
    lines.append("| recall@50 of the quantised KNN vs exact: mean / min | " + " | ".join(
        f"{x['mean']:.3f} / {x['min']:.2f}" if x else "-" for x in recall) + " |")
    return "\n".join(lines)


def _query_vectors(args: argparse.Namespace, queries: list[str], keywords: list[str],
                   ) -> tuple[dict[str, list[float]] | None, list[list[float]]]:
    """The queries' vectors from --embed-url (None without it) and the recall probes (random without it)."""
    if not args.embed_url:
        return None, unit_vectors(2 * args.recall_queries, args.seed + 100)
    texts = list(dict.fromkeys(queries + keywords))
    embedded = dict(zip(texts, embed_texts(args.embed_url, texts, "queries")[1]))
    return embedded, [embedded[q] for q in queries[:args.recall_queries] + keywords[:args.recall_queries]]


def main() -> None:
    """Build, measure and report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT / "query")
    parser.add_argument("--skip-mcp", action="store_true")
    parser.add_argument("--recall-k", type=int, default=KNN_K, help="recall@k measured (default 50)")
    parser.add_argument("--lists", type=int, nargs="+", default=[0],
                        help="lists probed for the recall measurement (0: as shipped; several: one recall each)")
    parser.add_argument("--clusters", type=int, help="retrain the store's codes into this many lists first")
    parser.add_argument("--recall-queries", type=int, default=RECALL_QUERIES, help="per query set (two sets)")
    parser.add_argument("--embed-url", help="embed chunks and queries with this OpenAI-compatible server "
                        "(use another --out: the stores differ from the random-vector ones)")
    parser.add_argument("--vectors-file", type=Path, help="chunk vectors from bench/embed_chunks.py "
                        "(queries then need --embed-url)")
    parser.add_argument("--knn-only", action="store_true", help="recall and KNN only, no search/match/MCP")
    parser.add_argument("--skip-match", action="store_true")
    parser.add_argument("--skip-exact", action="store_true", help="no hybrid search with exact KNN forced")
    parser.add_argument("--vector-only", action="store_true", help="stores of one-word sections "
                        "(bench/out/query/vectors-only-N): KNN, bytes and a KNN reader's RSS only")
    parser.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for chunks in args.chunks:
        if args.vector_only:
            base = vector_only_store(args.out.resolve(), chunks)
            add_vectors(base / "knowledge" / "default" / "knowledge.db", args.seed)
        else:
            base = build(args.out.resolve(), chunks, args.seed, args.embed_url, args.vectors_file)
        if args.clusters:
            retrain(base, args.clusters)
        docs, actual = chunk_count(base)
        settings = settings_from_mapping({}, store_base=base)
        queries = sample_queries(settings, args.queries, args.seed) if not args.vector_only else []
        keywords = keyword_queries(settings, args.queries, args.seed) if not args.vector_only else []
        embedded, probes = _query_vectors(args, queries, keywords)
        result: dict[str, Any] = {"chunks": actual, "documents": docs, "queries": len(queries),
                                  "vectors": "embedded" if args.embed_url else "random"}
        for n, lists in enumerate(args.lists):
            result.update(measure_knn(base, probes, args.recall_k, lists or None, timing=n == 0))
        print(json.dumps(result), flush=True)
        if args.vector_only:  # no text: "hybrid" is KNN, RRF and hydration over an empty lexical side
            stand = [f"q{i}" for i in range(args.queries)]
            result.update(vector_bytes(base))
            result.update({k: v for k, v in measure_search(base, stand, None, False).items() if "hybrid" in k and v})
            result["reader_rss"] = reader_rss(base, stand)
        if args.knn_only or args.vector_only:
            print(json.dumps(result), flush=True)
            results.append(result)
            continue
        result.update(vector_bytes(base))
        result.update(measure_search(base, queries, embedded, not args.skip_exact))
        result.update({f"{k}_keywords": v for k, v in
                       measure_search(base, keywords, embedded, not args.skip_exact).items() if "warm" in k})
        result["reader_rss"] = reader_rss(base, queries + keywords)
        if not args.skip_match:
            result.update(measure_match(base, queries))
            result.update({f"{k}_keywords": v for k, v in measure_match(base, keywords).items()})
        if not args.skip_mcp:
            result.update(measure_mcp(base, queries, args.out.resolve() / f"mcp-{chunks}"))
        print(json.dumps(result), flush=True)
        results.append(result)
    print(markdown(results))


if __name__ == "__main__":
    main()
