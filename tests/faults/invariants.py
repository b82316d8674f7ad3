"""The one checker every fault test ends with: after the fault, the store recovers to exactly the tree.

`Invariants.assert_recovered()` asserts, in this order:

1. `knowledge check --json` passes on what the fault left (optional: a store under repair or a
   running writer skips it), so the fault itself did no damage;
2. a re-run (`knowledge index ROOTS --json`) succeeds with 0 failures, and a second re-run
   changes nothing: the store converged;
3. 0 documents lost and none extra: the indexed file paths (`knowledge sources --json`) are
   exactly the files on disk that should be indexed, found by an independent walk below (not the
   walker under test), and each document's stored SHA-256 is its file's bytes now;
4. 0 errors for readers: search, show, match, words and stats answer with status ok, exit 0 and
   no traceback, and find a word of a file on disk in that file;
5. after `quiesce` (a running `knowledge writer` holds the write lock the FTS cross-check needs):
   `knowledge check --json` is ok and complete, and 0 orphan rows by direct SQL: no chunk without
   its document, every FTS table indexing exactly the chunks (row counts and FTS5's own
   integrity-check against its content), no vector without a chunk and, in a vector store, no
   chunk without its vector, each companion table in step with the vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import db, schema, vector_codes

Knowledge = Callable[..., tuple[int, str, str]]
"""Runs `knowledge ARGS...` (in-process or as a process) and returns (exit code, stdout, stderr)."""

# What the walker indexes, restated independently (pipeline/walker.py): these suffixes, no dot
# files or dot/memory directories, no symlink followed, regular files of at most 512 KiB whose
# bytes are UTF-8 without NUL.
EXTENSIONS = (".md", ".markdown", ".txt", ".text")
MAX_BYTES = 512 * 1024
_WORD = re.compile(r"[a-z]{6,}")


def completed(run: Callable[..., subprocess.CompletedProcess[str]]) -> Knowledge:
    """A Knowledge from a function returning a CompletedProcess (such as Cluster.knowledge)."""

    def knowledge(*args: str) -> tuple[int, str, str]:
        result = run(*args)
        return result.returncode, result.stdout, result.stderr

    return knowledge


def _indexable(path: str) -> bytes | None:
    """The bytes of a file the walker must index, or None when it must skip it."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return None if b"\x00" in data else data


def files_on_disk(roots: Sequence[Path], skip: Sequence[Path] = ()) -> dict[str, str]:
    """Absolute path -> SHA-256 of every file under roots that an index run must hold (skip: store dirs)."""
    skipped = {os.path.realpath(p) for p in skip}
    found: dict[str, str] = {}
    for root in roots:
        for directory, dirs, files in os.walk(root, followlinks=False):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "memory"
                       and os.path.realpath(os.path.join(directory, d)) not in skipped
                       and not os.path.islink(os.path.join(directory, d))]
            for name in files:
                path = os.path.join(directory, name)
                if name.startswith(".") or not name.endswith(EXTENSIONS):
                    continue
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:
                    continue
                data = _indexable(path)
                if data is not None:
                    found[os.path.abspath(path)] = hashlib.sha256(data).hexdigest()
    return found


def integrity_problems(db_path: Path) -> list[str]:
    """Orphan rows of every kind, chunk counts out of step, and FTS5 integrity-check failures (empty = healthy).

    Opens a writable connection (the FTS5 integrity-check is an INSERT): run it with no writer active.
    """
    conn = db.open_writer(db_path)
    problems: list[str] = []

    def count(sql: str) -> int:
        return int(conn.execute(sql).fetchone()[0])

    try:
        orphans = count("SELECT count(*) FROM chunks WHERE document_id NOT IN (SELECT id FROM documents)")
        if orphans:
            problems.append(f"{orphans} orphan chunks")
        skew = count("SELECT count(*) FROM documents d WHERE chunk_count != (SELECT count(*) FROM chunks c"
                     " WHERE c.document_id = d.id)")
        if skew:
            problems.append(f"{skew} documents whose chunk_count disagrees with their chunks")
        total = count("SELECT count(*) FROM chunks")
        for table in ("chunks_fts", "chunks_fts_exact"):  # one docsize row per indexed chunk, no more
            rows = count(f"SELECT count(*) FROM {table}_docsize")
            if rows != total:
                problems.append(f"{table} indexes {rows} rows for {total} chunks")
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING fts5(%'")]
        for table in tables:
            try:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")
            except db.DatabaseError as exc:
                problems.append(f"{table}: {exc}")
        names = schema.table_names(conn)
        if schema.VECTORS in names:
            problems.extend(_vector_problems(conn, names, count))
        return problems
    finally:
        conn.close()


def _vector_problems(conn: db.Connection, names: set[str], count: Callable[[str], int]) -> list[str]:
    """Vectors without a chunk, chunks without a vector, and companions out of step with the vectors."""
    problems: list[str] = []
    stray = count(f"SELECT count(*) FROM {schema.VECTORS} WHERE chunk_id NOT IN (SELECT id FROM chunks)")
    lacking = count(f"SELECT count(*) FROM chunks WHERE id NOT IN (SELECT chunk_id FROM {schema.VECTORS})")
    if stray or lacking:
        problems.append(f"{schema.VECTORS}: {stray} vectors without a chunk, {lacking} chunks without one")
    if {schema.CODES, schema.LISTS} <= names:  # the codes a reader sees: the lists' live entries and the delta
        apart = sum(vector_codes.out_of_step(conn))
        if apart:
            problems.append(f"{schema.LISTS}: {apart} codes out of step with {schema.VECTORS}")
    return problems


def stored_hashes(db_path: Path) -> dict[str, str]:
    """Stored path -> SHA-256 of every file document."""
    conn = db.connect_readonly(db_path)
    try:
        return {str(p): str(h) for p, h in conn.execute("SELECT path, sha256 FROM documents WHERE source = 'file'")}
    finally:
        conn.close()


def _json(result: tuple[int, str, str], what: str) -> Any:
    code, out, err = result
    assert "Traceback" not in err, f"{what}: {err}"
    assert code == 0, f"{what} exited {code}: {err}"
    return json.loads(out)


@dataclass
class Invariants:
    """The store of one fault test: how to run `knowledge`, where paths are stored from, what is indexed."""

    knowledge: Knowledge
    cwd: Path  # the directory `knowledge` runs in: relative stored paths are relative to it
    db_path: Path
    roots: Sequence[Path | str]  # the trees indexed, as passed to `knowledge index`
    quiesce: Callable[[], None] = field(default=lambda: None)  # stop whatever holds the write lock

    def absolute(self, stored: str) -> str:
        """The absolute path of a stored path."""
        return stored if os.path.isabs(stored) else os.path.join(os.path.realpath(self.cwd), stored)

    def on_disk(self) -> dict[str, str]:
        """What the store must hold: the files on disk now, by absolute path (realpath of the cwd)."""
        base = Path(os.path.realpath(self.cwd))
        return files_on_disk([Path(os.path.realpath(base / r)) for r in self.roots], [self.db_path.parent])

    def assert_check_passes(self) -> dict[str, Any]:
        """`knowledge check --json`: ok and complete, exit 0."""
        code, out, err = self.knowledge("check", "--json")
        assert "Traceback" not in err, err
        report = json.loads(out)
        assert code == 0 and report["ok"] and report["complete"], json.dumps(report["findings"] or report["checks"])
        return dict(report)

    def rerun(self) -> dict[str, Any]:
        """`knowledge index ROOTS --json`: exit 0 and no failure; the summary."""
        summary = _json(self.knowledge("index", *map(str, self.roots), "--json"), "the re-run")
        assert summary["failed"] == 0, summary["failures"]
        return dict(summary)

    def assert_recovered(self, check_first: bool = True) -> dict[str, Any]:
        """Every invariant of the module docstring; return the converged re-run's summary."""
        if check_first:
            self.assert_check_passes()
        first = self.rerun()
        expected = self.on_disk()
        assert first["files"] == len(expected), (first, len(expected))
        again = self.rerun()
        moved = {k: again[k] for k in ("added", "updated", "removed")}
        assert moved == {"added": 0, "updated": 0, "removed": 0} and again["unchanged"] == len(expected), again

        sources = _json(self.knowledge("sources", "--json"), "sources")
        listed = {self.absolute(d["path"]) for d in sources["documents"] if "://" not in d["path"]}
        assert sorted(listed - expected.keys()) == [], "indexed but not on disk"
        assert sorted(expected.keys() - listed) == [], "on disk but lost"
        hashes = {self.absolute(p): h for p, h in stored_hashes(self.db_path).items()}
        stale = sorted(p for p, h in expected.items() if hashes.get(p) != h)
        assert stale == [], "stored content is not the file's"

        self.assert_readers_answer(expected)
        self.quiesce()
        self.assert_check_passes()
        assert integrity_problems(self.db_path) == []
        return again

    def assert_readers_answer(self, expected: dict[str, str]) -> None:
        """search, show, match, words and stats answer ok, finding a word of a file on disk in that file."""
        stats = _json(self.knowledge("stats", "--json"), "stats")
        assert stats["status"] == "ok" and stats["documents"] >= len(expected), stats
        if not expected:
            return
        path = min(expected)
        word = next(iter(_WORD.findall(Path(path).read_text(encoding="utf-8").lower())), None)
        if word is None:
            return
        found = _json(self.knowledge("search", word, "--json"), f"search {word}")
        assert found["status"] == "ok" and found["results"], found
        ref = found["results"][0]["index_ref"]
        shown = _json(self.knowledge("show", ref, "--json"), f"show {ref}")
        assert shown["status"] == "ok" and [h["index_ref"] for h in shown["results"]] == [ref], shown
        matched = _json(self.knowledge("match", word, "--all", "--json"), f"match {word}")
        assert matched["status"] == "ok", matched
        assert path in {self.absolute(d["path"]) for d in matched["documents"]}, (word, path)
        words = _json(self.knowledge("words", f"^{word[:4]}", "--json"), "words")
        assert words["status"] == "ok" and words["count"] >= 1, words
