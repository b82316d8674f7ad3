"""The one door to SQLite: the binding import, file safety, and connection setup.

The interpreter's stdlib sqlite3 cannot load extensions, so knowledge uses pysqlite3 (a current
SQLite with FTS5) and loads sqlite-vec into every connection. Writers get one connection in WAL
mode; readers open the file read-only. A store directory knowledge creates is 0700 (an existing one
is used as it is, refused when group or world writable), the file and its -wal/-shm sidecars 0600,
and a symlink at any of them is refused.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.machinery import PathFinder
from pathlib import Path

import pysqlite3.dbapi2 as sqlite

from config.errors import IndexNotBuilt, StoreDamaged, StoreError, UnsafePathError


class Connection(sqlite.Connection):
    """Every connection knowledge opens: unlike the C type, it can be weakly referenced (per-connection caches)."""


DatabaseError = sqlite.DatabaseError
OperationalError = sqlite.OperationalError
ProgrammingError = sqlite.ProgrammingError
Row = sqlite.Row

SIDECARS = ("-wal", "-shm")
BUSY_TIMEOUT_MS = 10_000
# The WAL is cut back to this size whenever a checkpoint lets it start over (it otherwise keeps its largest size
# for as long as any connection holds the file: 869 MB beside a 216 MB store after a re-index under load).
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
CHECKPOINT_ATTEMPTS = 10  # a run's closing checkpoint: tries ...
CHECKPOINT_WAIT_MS = 100  # ... each waiting this long for the readers in the WAL, then a pause of as long

_DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_DAMAGE_WORDS = ("malformed", "corrupt", "not a database")
RECOVERY = "run `knowledge check` to see where and `knowledge rebuild` to repair it"


@contextmanager
def read_snapshot(conn: Connection) -> Iterator[None]:
    """One read transaction around the block, so every statement in it sees the same store; inside an
    open transaction the block joins it (a caller's snapshot covers its callees' statements).

    The transaction is ended only if it is still open: a failed statement may have ended it, and
    that error is never masked.
    """
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        _end_open(conn)


def _end_open(conn: Connection) -> None:
    if conn.in_transaction:  # a failed statement may have ended it already
        conn.execute("COMMIT")


def is_damage(exc: BaseException) -> bool:
    """True when a SQLite error means the file or an index in it is damaged (not busy, not missing)."""
    if not isinstance(exc, sqlite.DatabaseError):
        return False
    code = str(getattr(exc, "sqlite_errorname", "") or "")
    text = str(exc).lower()
    return code.startswith(_DAMAGE_CODES) or any(word in text for word in _DAMAGE_WORDS)


def is_disk_full(exc: BaseException) -> bool:
    """True when a write failed for want of space on the store's file system (SQLITE_FULL, ENOSPC)."""
    if isinstance(exc, OSError):
        return exc.errno == errno.ENOSPC
    if not isinstance(exc, sqlite.DatabaseError):
        return False
    code = str(getattr(exc, "sqlite_errorname", "") or "")
    return code.startswith("SQLITE_FULL") or "database or disk is full" in str(exc).lower()


def damaged(where: object, exc: BaseException | str) -> StoreDamaged:
    """The one-line StoreDamaged for a store that answered with a damage error."""
    return StoreDamaged(f"the store {where} is damaged ({exc}); {RECOVERY}")


@contextmanager
def translating_damage(where: object) -> Iterator[None]:
    """Re-raise a SQLite damage error met inside the block as StoreDamaged naming check and rebuild."""
    try:
        yield
    except sqlite.DatabaseError as exc:
        if is_damage(exc):
            raise damaged(where, exc) from exc
        raise


def refuse_symlink(path: Path) -> None:
    """Raise UnsafePathError if path exists as a symlink."""
    if path.is_symlink():
        raise UnsafePathError(f"{path} is a symlink; knowledge refuses to follow it (remove the link)")


def ensure_store_dir(directory: Path) -> None:
    """Create the store directory 0700 (parents as needed) when it is missing.

    An existing directory (`knowledge.directory: .` names the project itself) is used as it is,
    never chmod-ed: it is refused when it is a symlink, not a directory, or writable by group or
    others, since anyone who can write there could replace the store's files.
    """
    refuse_symlink(directory)
    try:
        directory.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot create the store directory {directory}: {exc.strerror}") from exc
    else:
        refuse_symlink(directory)
        os.chmod(directory, 0o700)  # exactly 0700 whatever the umask
        return
    st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        refuse_symlink(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(f"the store directory {directory} exists and is not a directory")
    if st.st_mode & 0o022:
        raise UnsafePathError(
            f"the store directory {directory} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"run `chmod go-w {directory}` or point knowledge.directory elsewhere"
        )


def _create_file_0600(path: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise UnsafePathError(f"cannot create {path} safely: {exc.strerror}") from exc
    os.close(fd)


def assert_modes(db_path: Path) -> None:
    """Refuse symlinks at the file and its sidecars and re-assert mode 0600 on each."""
    for candidate in (db_path, *(Path(f"{db_path}{s}") for s in SIDECARS)):
        refuse_symlink(candidate)
        if candidate.exists():
            mode = stat.S_IMODE(candidate.stat().st_mode)
            if mode != 0o600:
                os.chmod(candidate, 0o600)


@functools.cache
def vec_extension() -> str:
    """The path of sqlite-vec's loadable extension (`vec0` in its package directory, as its loadable_path() says).

    Found without running the package, whose import loads the interpreter's own sqlite3 module and
    SQLite library beside pysqlite3's: a read command would pay for both and use neither.
    """
    spec = PathFinder.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise StoreError("the sqlite-vec package is not installed; reinstall knowledge")
    return os.path.join(spec.submodule_search_locations[0], "vec0")


def _load_extensions(conn: Connection) -> None:
    conn.enable_load_extension(True)
    conn.load_extension(vec_extension())
    conn.enable_load_extension(False)


def open_writer(db_path: Path) -> Connection:
    """Open (creating if needed) the store for writing: one connection, WAL, foreign keys on."""
    ensure_store_dir(db_path.parent)
    for candidate in (db_path, *(Path(f"{db_path}{s}") for s in SIDECARS)):
        refuse_symlink(candidate)
        if not candidate.exists():
            _create_file_0600(candidate)
    try:
        conn = sqlite.connect(str(db_path), isolation_level=None, check_same_thread=False, factory=Connection)
        _load_extensions(conn)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite.DatabaseError as exc:
        if is_damage(exc):
            raise damaged(db_path, exc) from exc
        raise StoreError(f"cannot open {db_path} for writing: {exc}") from exc
    assert_modes(db_path)
    return conn


def checkpoint(conn: Connection, attempts: int = CHECKPOINT_ATTEMPTS, wait_ms: int = CHECKPOINT_WAIT_MS) -> bool:
    """Copy the whole WAL into the store and truncate it to nothing (a TRUNCATE checkpoint); whether it did.

    Readers keep reading throughout: one still inside a read transaction that began before the
    last commit holds the checkpoint back, so it is waited for briefly (wait_ms at a time, never the
    10 s busy timeout, since the writer holds its lock meanwhile) and tried again, attempts times in
    all. When readers never let go, the frames are copied as far as they allow and the WAL is cut to
    JOURNAL_SIZE_LIMIT by the next checkpoint that can start it over.
    """
    conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
    try:
        for attempt in range(attempts):
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                return True
            if attempt + 1 < attempts:
                time.sleep(wait_ms / 1000)
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


_IMMUTABLE: set[str] = set()  # published generations (pipeline/publish.py): never modified once named


def treat_as_immutable(db_path: Path) -> None:
    """Open db_path immutable=1 from now on: a published generation, which nothing ever changes after its manifest."""
    _IMMUTABLE.add(str(db_path))


def open_copy(db_path: Path) -> Connection:
    """A read-write connection to a private copy being prepared for publication (no WAL, extensions loaded)."""
    conn = sqlite.connect(str(db_path), isolation_level=None, check_same_thread=False, factory=Connection)
    try:
        _load_extensions(conn)
        conn.execute("PRAGMA journal_mode = DELETE")
    except sqlite.DatabaseError:
        conn.close()
        raise
    return conn


def vacuum_into(db_path: Path, target: Path) -> None:
    """`VACUUM INTO` target: a consistent, compacted copy of the store, read through a read-only connection."""
    refuse_symlink(db_path)
    if not db_path.is_file():
        raise IndexNotBuilt.at(db_path)
    conn = sqlite.connect(f"file:{db_path}?mode=ro", uri=True, check_same_thread=False, factory=Connection)
    try:
        _load_extensions(conn)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        with translating_damage(db_path):
            conn.execute("VACUUM INTO ?", (str(target),))
    finally:
        conn.close()


def on_read_only_file_system(path: Path) -> bool:
    """Whether path (a file or directory) lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def connect_readonly(db_path: Path, temp_ddl: tuple[str, ...] = ()) -> Connection:
    """Open a raw read-only connection to the store; raise IndexNotBuilt when there is no file yet.

    temp_ddl (pipeline.schema.READER_TEMP_DDL for a query Reader) runs before the connection turns
    query-only: objects in the temp schema that live only as long as this connection.

    A published generation named by treat_as_immutable() is opened immutable: it never changes.

    On a read-only file system (a disk remounted read-only after errors) a WAL store without its
    -shm file cannot be opened the usual way; nothing can change it there, so it is opened
    immutable: the content as of its last checkpoint, which is all of it after a clean close.
    """
    refuse_symlink(db_path.parent)
    refuse_symlink(db_path)
    if not db_path.is_file():
        raise IndexNotBuilt.at(db_path)
    for side in SIDECARS:
        refuse_symlink(Path(f"{db_path}{side}"))
    immutable = "&immutable=1" if str(db_path) in _IMMUTABLE or on_read_only_file_system(db_path) else ""
    try:
        conn = sqlite.connect(f"file:{db_path}?mode=ro{immutable}", uri=True, check_same_thread=False,
                              factory=Connection)
        _load_extensions(conn)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        for statement in temp_ddl:
            conn.execute(statement)
        conn.execute("PRAGMA query_only = ON")
    except sqlite.DatabaseError as exc:
        if is_damage(exc):
            raise damaged(db_path, exc) from exc
        raise StoreError(f"cannot open {db_path} for reading: {exc}") from exc
    return conn


def memory_connection() -> Connection:
    """A scratch in-memory database with the same extensions (stems, tests)."""
    conn = sqlite.connect(":memory:", isolation_level=None, check_same_thread=False, factory=Connection)
    _load_extensions(conn)
    return conn


def sqlite_version() -> str:
    """The SQLite library version in use."""
    return str(sqlite.sqlite_version)
