"""Published snapshots: `knowledge publish` writes generations of the store, replicas read the newest one.

A directory of generations holds, for generation N, `gNNNNNN/knowledge.db` (a `VACUUM INTO` copy,
journal mode DELETE, checked with `PRAGMA quick_check`, mode 0444) and `gNNNNNN.json`, its
manifest (counts, vector identity, SHA-256 and size of the file). The copy is made in a temporary
directory (`.tmp-*`), renamed into place, and only then is the manifest renamed in: a generation
without a manifest (a publish killed midway) is never served, and nothing published is modified
again. Pruning removes the oldest complete generations beyond `keep`, and the leftovers of killed
publishes older than the newest complete generation (their temporary copies too), only after the new
one is complete.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from config.errors import IndexNotBuilt, StoreError
from pipeline import db, schema

DB_NAME = "knowledge.db"
TEMP_PREFIX = ".tmp-"
MANIFEST_FORMAT = 1
# The routes a `knowledge serve` offers a directory of generations on (query/serve/snapshots_route.py) and
# a replica pulls them from (pipeline/pull.py): the newest manifest, and a generation's file.
LATEST_ROUTE = "/v1/snapshots/latest"
FILE_ROUTE = "/v1/snapshots/{generation:int}/" + DB_NAME


def file_route(generation: int) -> str:
    """The route of a generation's file."""
    return f"/v1/snapshots/{generation}/{DB_NAME}"


class SnapshotRefused(StoreError):
    """A generation whose manifest or file does not verify."""


@dataclass(frozen=True)
class Manifest:
    """What a generation's JSON file says about it."""

    generation: int
    format_version: int
    vector_identity: dict[str, str] | None
    documents: int
    chunks: int
    bytes: int
    sha256: str
    created: float
    source: str
    manifest_format: int = MANIFEST_FORMAT

    def to_json(self) -> dict[str, Any]:
        """The manifest as written."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Manifest:
        """A Manifest from parsed JSON with every field type-checked; SnapshotRefused naming each bad one.

        A manifest comes from another host (a primary, a shared directory): nothing in it is used
        before it is checked here, so a bad field refuses the generation instead of failing later
        (a `created: null` once made every /healthz a 500). Fields this version does not know are
        ignored (a newer primary may add some).
        """
        if not isinstance(data, dict):
            raise SnapshotRefused(f"the manifest is a JSON {type(data).__name__}, not an object")
        missing = [f.name for f in fields(cls) if f.name not in data and f.name != "manifest_format"]
        if missing:
            raise SnapshotRefused(f"the manifest lacks {', '.join(missing)}")
        bad = [f"{key} is {_shown(data[key])}, not {wanted}" for key, check, wanted in _FIELD_CHECKS
               if key in data and not check(data[key])]
        if bad:
            raise SnapshotRefused(f"the manifest's {'; '.join(bad)}")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _positive(value: object) -> bool:
    return _count(value) and value != 0


def _identity(value: object) -> bool:
    return value is None or (isinstance(value, dict) and bool(value)
                             and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()))


def _sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _time(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


# (field, check, what it must be): every field of Manifest.
_FIELD_CHECKS: tuple[tuple[str, Callable[[object], bool], str], ...] = (
    ("generation", _positive, "a whole number above 0"),
    ("format_version", _count, "a whole number"),
    ("vector_identity", _identity, "null or an object of strings"),
    ("documents", _count, "a whole number"),
    ("chunks", _count, "a whole number"),
    ("bytes", _positive, "a whole number above 0"),
    ("sha256", _sha256, "64 lowercase hex digits"),
    ("created", _time, "a Unix time"),
    ("source", lambda value: isinstance(value, str), "a string"),
    ("manifest_format", _positive, "a whole number above 0"),
)


def _shown(value: object) -> str:
    """A bad value as a refusal shows it: its JSON, cut short (the caller escapes it before printing)."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Published:
    """One publish: the manifest written, where, and how long it took."""

    manifest: Manifest
    path: Path
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The `publish --json` shape."""
        m = self.manifest
        return {"generation": m.generation, "path": str(self.path), "sha256": m.sha256, "documents": m.documents,
                "chunks": m.chunks, "bytes": m.bytes, "seconds": round(self.seconds, 3)}


def generation_dir(directory: Path, generation: int) -> Path:
    """The directory holding a generation's file."""
    return directory / f"g{generation:06d}"


def manifest_path(directory: Path, generation: int) -> Path:
    """A generation's manifest."""
    return directory / f"g{generation:06d}.json"


def _numbers(directory: Path) -> tuple[set[int], set[int]]:
    """(generations with a manifest, generation directories) found in directory."""
    complete: set[int] = set()
    dirs: set[int] = set()
    for entry in directory.iterdir() if directory.is_dir() else ():
        stem, suffix = entry.name[1:].partition(".")[::2]
        if not entry.name.startswith("g") or not stem.isdigit():
            continue
        if suffix == "json":
            complete.add(int(stem))
        elif not suffix and entry.is_dir():
            dirs.add(int(stem))
    return complete, dirs


def generations(directory: Path) -> list[int]:
    """The generations with a manifest, newest first."""
    return sorted(_numbers(directory)[0], reverse=True)


def sha256_file(path: Path) -> str:
    """The hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fsync_path(path: Path) -> None:
    """Flush a file's (or a directory's) contents to disk: what a rename after it makes durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _describe(copy: Path, generation: int, source: Path) -> Manifest:
    """Check the copy (quick_check) and read its counts and meta."""
    conn = db.open_copy(copy)
    try:
        problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise StoreError(f"the copy of {source} failed quick_check ({'; '.join(problems[:3])}); "
                             f"{db.RECOVERY}")
        meta = schema.read_meta(conn)
        documents = int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])
        chunks = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    finally:
        conn.close()
    identity = {key: meta[key] for key in (schema.MODEL_KEY, schema.DIMENSION_KEY, schema.NORMALIZED_KEY)
                if key in meta} or None
    return Manifest(generation, int(meta.get(schema.FORMAT_VERSION_KEY, "0")), identity, documents, chunks,
                    copy.stat().st_size, sha256_file(copy), time.time(), str(source))


def publish(db_path: Path, directory: Path, keep: int = 3) -> Published:
    """Write the next generation of the store at db_path into directory, then prune beyond keep."""
    started = time.monotonic()
    if not db_path.is_file():
        raise IndexNotBuilt.at(db_path)
    directory.mkdir(parents=True, exist_ok=True)
    complete, dirs = _numbers(directory)
    generation = max(complete | dirs | {0}) + 1
    temp = directory / f"{TEMP_PREFIX}{generation}-{os.getpid()}"
    temp.mkdir(mode=0o755)
    try:
        copy = temp / DB_NAME
        db.vacuum_into(db_path, copy)
        manifest = _describe(copy, generation, db_path)
        os.chmod(copy, 0o444)
        fsync_path(copy)
        final = generation_dir(directory, generation)
        os.rename(temp, final)
    except BaseException as exc:
        shutil.rmtree(temp, ignore_errors=True)
        if db.is_disk_full(exc):
            raise StoreError(f"no space left in {directory} for generation {generation}; nothing was published "
                             "and the earlier generations are intact") from exc
        raise
    write_manifest(directory, manifest)
    prune(directory, keep)
    return Published(manifest, final / DB_NAME, time.monotonic() - started)


def write_manifest(directory: Path, manifest: Manifest) -> None:
    """Write the manifest beside its generation: a temporary file, fsync-ed, renamed into place (the last step)."""
    final = manifest_path(directory, manifest.generation)
    temp = directory / f"{TEMP_PREFIX}{final.name}"
    temp.write_text(json.dumps(manifest.to_json(), indent=2) + "\n", encoding="utf-8")
    fsync_path(temp)
    os.rename(temp, final)
    fsync_path(directory)


def prune(directory: Path, keep: int) -> list[int]:
    """Remove the oldest complete generations beyond keep and the leftovers older than the newest; the removed."""
    complete, dirs = _numbers(directory)
    if not complete:
        return []
    newest = max(complete)
    kept = set(sorted(complete, reverse=True)[:max(keep, 1)])
    removed = sorted(n for n in (complete | dirs) if n not in kept and n < newest)
    for number in removed:
        manifest_path(directory, number).unlink(missing_ok=True)  # unserveable first, then its file
        target = generation_dir(directory, number)
        if target.exists():
            for inner in target.iterdir():
                os.chmod(inner, 0o644)
            shutil.rmtree(target, ignore_errors=True)
    _remove_temporaries(directory, newest)
    return removed


def _remove_temporaries(directory: Path, newest: int) -> None:
    """Remove what killed publishes left: `.tmp-N-PID` copies whose process is gone, `.tmp-gN.json` up to newest."""
    for entry in directory.iterdir():
        name = entry.name
        if not name.startswith(TEMP_PREFIX):
            continue
        rest = name[len(TEMP_PREFIX):]
        if rest.startswith("g") and rest.endswith(".json"):
            if rest[1:-5].isdigit() and int(rest[1:-5]) <= newest:
                entry.unlink(missing_ok=True)
            continue
        number, _, pid = rest.partition("-")
        if number.isdigit() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (a publish still writing its copy)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_manifest(directory: Path, generation: int) -> Manifest:
    """A generation's manifest as written; SnapshotRefused when it does not parse."""
    path = manifest_path(directory, generation)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SnapshotRefused(f"generation {generation}: unreadable manifest {path}: {exc}") from exc
    try:
        manifest = Manifest.from_json(data)
    except SnapshotRefused as exc:
        raise SnapshotRefused(f"generation {generation}: {exc} ({path})") from exc
    if manifest.generation != generation:
        raise SnapshotRefused(f"generation {generation}: its manifest names generation {manifest.generation}")
    return manifest


def verify(directory: Path, generation: int) -> Manifest:
    """The manifest of a generation whose file has the size and SHA-256 it names; else SnapshotRefused."""
    manifest = read_manifest(directory, generation)
    path = generation_dir(directory, generation) / DB_NAME
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SnapshotRefused(f"generation {generation}: its file {path} is missing") from exc
    if size != manifest.bytes:
        raise SnapshotRefused(f"generation {generation}: {path} has {size} bytes, its manifest says {manifest.bytes}")
    if manifest.format_version != schema.FORMAT_VERSION:
        raise SnapshotRefused(f"generation {generation}: format {manifest.format_version}, this knowledge reads "
                              f"{schema.FORMAT_VERSION}")
    if sha256_file(path) != manifest.sha256:
        raise SnapshotRefused(f"generation {generation}: {path} does not match its manifest's SHA-256 (tampered "
                              "or damaged)")
    return manifest
