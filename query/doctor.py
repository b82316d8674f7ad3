"""knowledge doctor: check the store, SQLite, the configured paths and the embeddings server.

Every check ends in one of five states. A check that could not run (no store yet, the server did
not answer) says `not run` and why; it is never shown as passed. A check that does not apply to
this setup (the embeddings checks of a lexical-only config) says `not configured`: nothing to fix.
Only a failed check marked fatal (the store cannot be read, SQLite lacks FTS5, the embeddings
server is configured but does not answer, the index's vectors were built with another identity)
makes doctor exit non-zero.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from config.errors import EmbeddingError, KnowledgeError, RerankError, StoreBusy
from config.settings import Settings
from pipeline import db, integrity, schema, vectors
from pipeline.embeddings import EmbeddingsClient, Probe, RetryPolicy
from pipeline.lock import WriteLock

OK = "ok"
WARN = "warn"
FAIL = "fail"
NOT_RUN = "not run"
NOT_CONFIGURED = "not configured"

_PROBE_RETRY = RetryPolicy(attempts=2, initial_wait=0.2, max_wait=1.0)
# The reranker's probe: one query, a text that answers it first and two that do not.
RERANK_QUERY = "how are old log files rotated"
RERANK_TEXTS = ("Old log files are rotated every night, and rotated files are compressed.",
                "The cafeteria opens at noon on weekdays.",
                "Backups of the database are kept for thirty days.")
RERANK_PROBE_SECONDS = 10.0  # doctor waits longer than a search would, to tell slow from unreachable


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    status: str
    detail: str
    fatal: bool = False  # a failure of this check makes doctor exit non-zero

    def to_json(self) -> dict[str, Any]:
        """JSON form for `doctor --json`."""
        return asdict(self)


def failed_fatally(checks: list[Check]) -> bool:
    """True when a fatal check failed."""
    return any(c.status == FAIL and c.fatal for c in checks)


def run_checks(settings: Settings, check: Callable[[], integrity.Report],
               environ: Mapping[str, str] | None = None) -> list[Check]:
    """Run every check in order; never raises for a broken store or server. check is `knowledge check` in quick
    mode as the write side runs it (the engine: the lock taken when free), for the integrity step."""
    checks = [_config(settings), formats_check(settings), extraction_check(settings), *_paths(settings), *_sqlite()]
    meta, store_checks = _store(settings)
    checks += store_checks
    checks.append(_integrity(settings, check))
    checks += _embeddings(settings, meta, environ)
    checks.append(rerank_check(settings, environ))
    return checks


def _config(settings: Settings) -> Check:
    where = str(settings.config_path) if settings.config_path else "none (defaults and KNOWLEDGE_* variables)"
    return Check("config", OK, f"{where}; store {settings.db_path}")


def formats_check(settings: Settings) -> Check:
    """The formats knowledge.formats turns on, each with its library's version; warn when one is missing."""
    from pipeline import formats

    shown, missing = [], []
    for fmt in formats.FORMATS:
        if fmt.name not in settings.formats:
            continue
        version = formats.library_version(fmt)
        shown.append(fmt.name if fmt.library is None else f"{fmt.name} ({fmt.library} {version})")
        if version == "missing":
            missing.append(fmt.library or fmt.name)
    off = [f.name for f in formats.FORMATS if f.name not in settings.formats]
    detail = ", ".join(shown) + (f"; off: {', '.join(off)}" if off else "")
    if missing:
        return Check("formats", WARN, f"{detail}; not installed: {', '.join(missing)} (those files are skipped)")
    return Check("formats", OK, detail)


def extraction_check(settings: Settings) -> Check:
    """Start a bounded reading process (pipeline/extraction.py) and read a sample document through it."""
    from pipeline.extraction import Bound, Extraction
    from pipeline.files import parse_file

    bound = Bound.of(settings.extraction)
    limits = (f"each file read in a child process: {bound.seconds:g} s of CPU (+{bound.seconds_per_mib:g} s a MiB), "
              f"{bound.memory_mib} MiB")
    sample = b"# Doctor\n\nA sample section read under the bound.\n"
    started = time.monotonic()
    try:
        with Extraction(bound) as extraction:
            parsed = extraction.call(parse_file, "doctor.md", sample, size=len(sample))
    except KnowledgeError as exc:
        return Check("extraction", FAIL, f"{limits}; the reading process failed: {exc}", True)
    if [c.heading_path for c in parsed.chunks] != ["Doctor"]:
        return Check("extraction", FAIL, f"{limits}; the reading process read the sample wrong", True)
    return Check("extraction", OK, f"{limits}; a reader started and answered in {time.monotonic() - started:.2f} s")


def _paths(settings: Settings) -> list[Check]:
    if not settings.paths:
        return [Check("paths", WARN, "none configured: pass PATHS to `knowledge index` or set knowledge.paths")]
    out: list[Check] = []
    for raw in settings.paths:
        path = Path(raw)
        if path.is_dir():
            out.append(Check("path", OK, f"{raw} (directory)"))
        elif path.is_file():
            out.append(Check("path", OK, f"{raw} (file)"))
        else:
            out.append(Check("path", WARN, f"{raw} does not exist here (relative paths resolve from {Path.cwd()})"))
    return out


def _sqlite() -> list[Check]:
    conn = db.memory_connection()
    try:
        try:
            for statement in schema.FTS5_PROBE_DDL:
                conn.execute(statement)
            fts = Check("fts5", OK, f"SQLite {db.sqlite_version()} with FTS5 (porter, unicode61, trigram)", True)
        except db.DatabaseError as exc:
            fts = Check("fts5", FAIL, f"SQLite {db.sqlite_version()} has no usable FTS5: {exc}", True)
        try:
            version = conn.execute("SELECT vec_version()").fetchone()[0]
            vec = Check("sqlite-vec", OK, f"{version} loaded")
        except db.DatabaseError as exc:
            vec = Check("sqlite-vec", FAIL, f"not loadable: {exc}", True)
    finally:
        conn.close()
    return [fts, vec]


def _store(settings: Settings) -> tuple[dict[str, str] | None, list[Check]]:
    path = settings.db_path
    writable = _writable(settings)
    if not path.is_file():
        missing = "no index yet; run `knowledge index` to build it"
        return None, [Check("store", WARN, f"{path}: {missing}"), Check("wal", NOT_RUN, "no store to inspect"),
                      writable]
    try:
        conn = db.connect_readonly(path)
    except KnowledgeError as exc:
        return None, [Check("store", FAIL, str(exc), True), Check("wal", NOT_RUN, "the store did not open"),
                      writable]
    try:
        schema.check(conn, path)
        meta = schema.read_meta(conn)
        docs, chunks = conn.execute("SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents").fetchone()
        version = meta.get(schema.FORMAT_VERSION_KEY)
        store = Check("store", OK, f"{path}: format {version}, {docs} documents, {chunks} sections", True)
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        wal = Check("wal", OK if mode == "wal" else WARN,
                    "journal_mode=wal: readers never block the writer" if mode == "wal"
                    else f"journal_mode={mode}; the next `knowledge index` switches it to WAL")
        return meta, [store, wal, writable]
    except (KnowledgeError, db.DatabaseError) as exc:
        return None, [Check("store", FAIL, str(exc), True), Check("wal", NOT_RUN, "the store is unreadable"),
                      writable]
    finally:
        conn.close()


def _integrity(settings: Settings, check: Callable[[], integrity.Report]) -> Check:
    """`knowledge check` in quick mode: damage anywhere in the store is fatal."""
    if not settings.db_path.is_file():
        return Check("integrity", NOT_RUN, "no store to check")
    try:
        report = check()
    except KnowledgeError as exc:
        return Check("integrity", FAIL, str(exc), True)
    if report.damaged:
        what = "; ".join(f"{f.where}: {f.problem}" for f in report.findings[:3])
        return Check("integrity", FAIL, f"{what}; run `knowledge check` to see where and what repairs it", True)
    if not report.complete:
        why = ("the store is on a read-only file system" if report.blocked == integrity.READ_ONLY
               else "a run holds the write lock")
        return Check("integrity", NOT_RUN, f"{why}, so the FTS cross-check did not run")
    return Check("integrity", OK, "`knowledge check`: the file, FTS indexes, triggers and vectors are sound", True)


def _writable(settings: Settings) -> Check:
    directory = settings.store_dir
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        return Check("writable", WARN, f"{probe} is not writable by this user: search works, indexing will not")
    if not directory.exists():
        return Check("writable", OK, f"{directory} will be created on the first `knowledge index`")
    lock = WriteLock(directory)
    try:
        lock.acquire("knowledge doctor")
    except StoreBusy:
        return Check("writable", OK, f"{directory} is writable; an index run or writer holds the lock right now")
    except KnowledgeError as exc:
        return Check("writable", WARN, f"cannot take the write lock: {exc}")
    lock.release()
    return Check("writable", OK, f"{directory} is writable and the write lock is free")


def _embeddings(settings: Settings, meta: dict[str, str] | None, environ: Mapping[str, str] | None) -> list[Check]:
    emb = settings.embeddings
    names = ("embeddings", "model", "dimension", "normalized", "manifest")
    if emb is None:
        return [Check(n, NOT_CONFIGURED, "no embeddings configured: lexical tier only") for n in names]
    probe: Probe | None = None
    try:
        with EmbeddingsClient(emb, environ=environ, retry=_PROBE_RETRY) as client:
            probe = client.probe()
        reach = Check("embeddings", OK, f"{client.url} answered", True)
    except (EmbeddingError, KnowledgeError) as exc:
        reach = Check("embeddings", FAIL, f"{exc}", True)
    if probe is None:
        why = "the embeddings server did not answer"
        return [reach, *(Check(n, NOT_RUN, why) for n in names[1:])]
    served = f" (served as {probe.served_model!r})" if probe.served_model != probe.model else ""
    out = [
        reach,
        Check("model", OK, f"{probe.model}{served}"),
        Check("dimension", OK, str(probe.dimension)),
        Check("normalized", OK, "yes: the server returns unit-length vectors" if probe.normalized
              else "no: knowledge L2-normalises every vector itself"),
    ]
    return [*out, _manifest(settings, meta, probe)]


def _manifest(settings: Settings, meta: dict[str, str] | None, probe: Probe) -> Check:
    assert settings.embeddings is not None
    if meta is None:
        return Check("manifest", NOT_RUN, "no readable index to compare with")
    pinned = vectors.pinned_identity(meta)
    wanted = vectors.configured_identity(settings.embeddings, probe.dimension, vectors.kept_recipe(pinned, False))
    if pinned is None:
        return Check("manifest", WARN, "the index has no vectors yet; run `knowledge index` to embed it")
    if pinned != wanted:
        diff = "; ".join(vectors.differences(pinned, wanted))
        return Check("manifest", FAIL, f"{diff}; run `{vectors.REINDEX}`", True)
    older = vectors.recipe_note(pinned)
    if older is not None:
        return Check("manifest", WARN, f"matches the index (model={pinned.model} dim={pinned.dimension}), but {older}",
                     True)
    return Check("manifest", OK, f"matches the index (model={pinned.model} dim={pinned.dimension})", True)


def rerank_check(settings: Settings, environ: Mapping[str, str] | None = None) -> Check:
    """Probe the reranker: reachable, the shape it speaks, its latency against budget_ms, and a sane order.

    Never fatal: search answers in the fused order without it, and says so.
    """
    config = settings.rerank
    if config is None:
        return Check("rerank", NOT_CONFIGURED, "no reranker configured: the fused ranking is the answer")
    from query.reranker import scores  # the HTTP client only with a reranker

    try:
        answer = scores(config, RERANK_QUERY, RERANK_TEXTS, time.monotonic() + RERANK_PROBE_SECONDS, environ)
    except RerankError as exc:
        return Check("rerank", FAIL, f"{exc}; searches keep the fused order and say `rerank skipped`")
    ms = answer.seconds * 1000
    shown = ", ".join(f"{value:.4g}" for value in answer.scores)
    detail = (f"{config.url} answered as {answer.shape} in {ms:.0f} ms for {len(RERANK_TEXTS)} texts "
              f"(budget {config.budget_ms} ms for up to {config.top_n}); scores {shown}")
    if ms > config.budget_ms:
        return Check("rerank", WARN, f"{detail}: slower than the budget, so searches will skip it")
    if max(range(len(answer.scores)), key=answer.scores.__getitem__) != 0:
        return Check("rerank", WARN, f"{detail}: the text that answers the probe did not score best; "
                                     "is the endpoint serving a reranking model?")
    return Check("rerank", OK, detail)
