"""The store's cross-process advisory write lock (a non-blocking exclusive flock).

Held for a writer's whole lifetime; the kernel releases it if the process dies, so a crash never
wedges later runs.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from config.errors import StoreBusy, StoreError, StoreReadOnly
from pipeline.db import ensure_store_dir, on_read_only_file_system, refuse_symlink

LOCK_NAME = "write.lock"
WATCH_LOCK_NAME = "watch.lock"  # held by `knowledge watch`: one watcher per store, in either shape


class WriteLock:
    """Exclusive writer lock on <store_dir>/write.lock (or another file: `role` names its holders in the
    refusal); raise StoreBusy when another holds it."""

    def __init__(self, store_dir: Path, name: str = LOCK_NAME, role: str = "writer") -> None:
        self.path = store_dir / name
        self.role = role
        self._fd: int | None = None

    def acquire(self, holder: str = "writer") -> None:
        """Take the lock without waiting."""
        ensure_store_dir(self.path.parent)
        refuse_symlink(self.path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            if exc.errno == errno.EROFS or on_read_only_file_system(self.path.parent):
                raise StoreReadOnly(
                    f"the store {self.path.parent} is on a read-only file system, so `{holder}` cannot write it; "
                    "remount it read-write (check the disk first: a kernel remounts a failing one read-only). "
                    "search, match, show and check still read it"
                ) from None
            raise StoreError(f"cannot open the store's lock file {self.path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StoreBusy(
                f"another {self.role} holds the store lock {self.path} ({other}); "
                "wait for it to finish or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{holder} pid={os.getpid()}".encode())
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder(self) -> str:
        """What the lock's holder wrote into the file ("knowledge writer pid=..."), or "" when none did."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return ""
        try:
            return os.read(fd, 200).decode(errors="replace").strip()
        finally:
            os.close(fd)

    def __enter__(self) -> WriteLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
