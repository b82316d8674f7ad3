"""Pulling generations over HTTP: `knowledge serve --snapshots DIR --pull-from URL`.

Every poll interval the Puller asks the primary's `knowledge serve` for GET /v1/snapshots/latest. A
generation newer than the newest one in DIR (and not refused before) is downloaded, streamed in
chunks, into `DIR/.tmp-pull-gNNNNNN/knowledge.db`; a dropped connection resumes where the file ends
(`Range: bytes=N-`) within ATTEMPTS attempts. The file's size and SHA-256 are checked against the
manifest; only then is it made read-only, its directory renamed to `gNNNNNN` and the manifest written
beside it last, the same layout and order `knowledge publish` uses, so the SnapshotIndex polling DIR
(query/replica.py) verifies and swaps it in as if it had been published there. A download that does
not verify is removed, counted, logged and never tried again (the next generation is taken as usual).
The older generations beyond keep are pruned after an install. The bearer token is the replica's
own (knowledge.expose.mcp.token_env), read from the environment; it is sent, never printed.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from config.errors import ConfigError
from config.instruments import OUTCOME, STAGE, instruments
from pipeline import publish as snapshots
from pipeline import schema
from pipeline.publish import LATEST_ROUTE, file_route
from pipeline.pull_errors import (
    PullError,
    PullRefused,
    checked_url,
    file_problem,
    http_problem,
    json_or_none,
    manifest_from,
)
from pipeline.text import name
from pipeline.watchdog import Watchdog

log = logging.getLogger("knowledge.pull")

ATTEMPTS = 5  # connections per download: the first and up to four resumes
TIMEOUT_S = 30.0  # per network operation (connect 5 s)
FLOOR_S = 60.0  # the least a poll's exchange with the primary may take: asking for the latest, then a download
MIN_RATE = 256 * 1024  # bytes a second a download must average, past the floor, to finish in one poll
RETRY_PAUSE_S = 0.5
PULL_PREFIX = f"{snapshots.TEMP_PREFIX}pull-"
PER_OPERATION = httpx.Timeout(TIMEOUT_S, connect=5.0)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass
class PullRecord:
    """What a replica's /healthz says of its pulls (`pull`): the last generation pulled by this process, the pulls
    that failed, and the problem of the last poll (None when it had none)."""

    pulled: int | None = None
    failed: int = 0
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `pull` object of /healthz."""
        return asdict(self)


class Puller:
    """Fetches newer generations from a primary into a directory of generations."""

    def __init__(self, base_url: str, directory: Path, keep: int, token: str | None = None,
                 attempts: int = ATTEMPTS, token_env: str | None = None, floor_s: float = FLOOR_S,
                 min_rate: float = MIN_RATE) -> None:
        self.base = checked_url(base_url)
        self.directory = directory
        self.keep = keep
        self.attempts = attempts
        self.token_env = token_env
        self.floor_s = floor_s
        self.min_rate = min_rate
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.refused: set[int] = set()
        self.record = PullRecord()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._said = ""
        self._watchdog: Watchdog | None = None

    @contextmanager
    def _exchange(self, seconds: float) -> Iterator[tuple[httpx.Client, Watchdog]]:
        """A client of its own (every connection traced) under a watchdog that cuts it after seconds."""
        with Watchdog(seconds, PER_OPERATION) as watchdog, \
                httpx.Client(headers=self._headers, timeout=PER_OPERATION) as client:
            self._watchdog = watchdog
            try:
                yield client, watchdog
            finally:
                self._watchdog = None

    def latest(self) -> snapshots.Manifest | None:
        """The newest generation the primary offers (None while it has published none); PullError otherwise."""
        url = self.base + LATEST_ROUTE
        with self._exchange(self.floor_s) as (client, watchdog):
            try:
                reply = client.get(url, timeout=watchdog.timeout(), extensions={"trace": watchdog.trace})
            except httpx.TransportError as exc:
                if watchdog.expired():
                    raise PullError(f"the primary at {self.base} took longer than {self.floor_s:g} s to say which "
                                    "generation is the latest; asking again next poll") from exc
                raise PullError(f"cannot reach the primary at {self.base} ({_reason(exc)}); start its `knowledge "
                                "serve` or fix --pull-from") from exc
        data = json_or_none(reply)
        if reply.status_code == 404 and isinstance(data, dict) and data.get("status") == "not_found":
            return None
        if reply.status_code != 200 or not isinstance(data, dict):
            raise PullError(http_problem(reply, LATEST_ROUTE, self.base, self.token_env))
        return manifest_from(data.get("manifest"))

    def pull(self) -> int | None:
        """One look at the primary: download, verify and install a newer generation; the one installed, else None."""
        try:
            manifest = self.latest()
            if manifest is None or manifest.generation in self.refused:
                return None
            have = snapshots.generations(self.directory)
            if have and manifest.generation <= have[0]:
                return None
            self._fetch(manifest)
        except PullRefused as exc:
            if exc.generation in self.refused:  # its manifest is still offered: refused (and said) once
                return None
            self.refused.add(exc.generation)
            instruments().snapshot_refused.add(1, {STAGE: "pull"})
            instruments().snapshot_pulls.add(1, {OUTCOME: "refused"})
            raise
        except PullError:
            instruments().snapshot_pulls.add(1, {OUTCOME: "failed"})
            self.record.failed += 1
            raise
        instruments().snapshot_pulls.add(1, {OUTCOME: "pulled"})
        self.record.pulled = manifest.generation
        snapshots.prune(self.directory, self.keep)
        return manifest.generation

    def _fetch(self, manifest: snapshots.Manifest) -> None:
        """Download a generation into its temporary directory, verify it, then install it (file, then manifest)."""
        number = manifest.generation
        if manifest.format_version != schema.FORMAT_VERSION:
            raise PullRefused(f"generation {number} is format {manifest.format_version}, this knowledge reads "
                              f"{schema.FORMAT_VERSION}: run the primary's version of knowledge on this replica",
                              number)
        self.directory.mkdir(parents=True, exist_ok=True)
        temp = self.directory / f"{PULL_PREFIX}g{number:06d}"
        if temp.is_symlink():
            raise PullError(f"{temp} is a symlink; refused: remove it")
        temp.mkdir(mode=0o755, exist_ok=True)
        part = temp / snapshots.DB_NAME
        self._room_for(manifest, part)
        try:
            self._download(manifest, part)
        except PullRefused:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        size = part.stat().st_size
        digest = snapshots.sha256_file(part)
        if size != manifest.bytes or digest != manifest.sha256:
            shutil.rmtree(temp, ignore_errors=True)
            raise PullRefused(f"generation {number} from {self.base} does not match its manifest ({size} bytes, "
                              f"sha256 {digest[:12]}; the manifest says {manifest.bytes} bytes, sha256 "
                              f"{manifest.sha256[:12]}): tampered or damaged, not served", number)
        self._install(manifest, temp)

    def _room_for(self, manifest: snapshots.Manifest, part: Path) -> None:
        have = part.stat().st_size if part.exists() else 0
        free = shutil.disk_usage(self.directory).free
        if manifest.bytes - have > free:
            raise PullError(f"no space in {self.directory} for generation {manifest.generation} ({manifest.bytes} "
                            f"bytes, {free} free); free some, or lower knowledge.publish.keep")

    def _download(self, manifest: snapshots.Manifest, part: Path) -> None:
        """Stream the file into part, resuming from its length after a dropped connection (bounded attempts),
        all within a deadline of the floor plus the bytes still missing at the least rate."""
        url = self.base + file_route(manifest.generation)
        missing = manifest.bytes - (part.stat().st_size if part.exists() else 0)
        seconds = self.floor_s + max(missing, 0) / self.min_rate
        problem = ""
        with self._exchange(seconds) as (client, watchdog):
            for attempt in range(1, self.attempts + 1):
                if self._stop.is_set():
                    raise PullError(f"stopped while downloading generation {manifest.generation}")
                have = part.stat().st_size if part.exists() else 0
                if have == manifest.bytes:
                    return
                if have > manifest.bytes:
                    part.unlink()
                    have = 0
                try:
                    if self._stream(client, watchdog, url, part, have, manifest):
                        return
                    problem = "the connection ended before the whole file came"
                except httpx.TransportError as exc:
                    problem = _reason(exc)
                if watchdog.expired():
                    have = part.stat().st_size if part.exists() else 0
                    raise PullError(f"gave up on generation {manifest.generation} from {self.base}: the download "
                                    f"took longer than {round(seconds, 1):g} s ({have} of {manifest.bytes} bytes; "
                                    f"{self.floor_s:g} s and {self.min_rate:g} bytes a second allowed); the "
                                    "next poll goes on where the file ends")
                if attempt < self.attempts:
                    self._stop.wait(RETRY_PAUSE_S * attempt)
        raise PullError(f"gave up on generation {manifest.generation} from {self.base} after {self.attempts} "
                        f"attempts ({problem}); the next poll starts again where the file ends")

    def _stream(self, client: httpx.Client, watchdog: Watchdog, url: str, part: Path, have: int,
                manifest: snapshots.Manifest) -> bool:
        """One request from byte `have` on, appended to part; whether the file is now whole."""
        headers = {"Range": f"bytes={have}-"} if have else {}
        total = manifest.bytes
        with client.stream("GET", url, headers=headers, timeout=watchdog.timeout(),
                           extensions={"trace": watchdog.trace}) as reply:
            if reply.status_code == 200:
                have = 0  # the whole file came (no Range, or the server ignored it): start over
            elif reply.status_code != 206 or not reply.headers.get("content-range", "").startswith(f"bytes {have}-"):
                reply.read()
                if reply.status_code == 206:
                    part.unlink()  # a range from elsewhere: the next attempt starts the file again
                raise PullError(file_problem(reply, url, self.base, self.token_env))
            with open(part, "r+b" if have else "wb") as out:
                out.seek(have)
                out.truncate()
                for block in reply.iter_bytes():  # as it arrives: a dropped connection keeps every byte read
                    have += len(block)
                    if have > total:
                        raise PullRefused(f"{url} sent more than the {total} bytes its manifest names; not served",
                                          manifest.generation)
                    out.write(block)
                    if self._stop.is_set() or watchdog.expired():
                        return False
        return have == total

    def _install(self, manifest: snapshots.Manifest, temp: Path) -> None:
        """Read-only file, directory renamed to gNNNNNN, manifest written last (publish's order)."""
        file = temp / snapshots.DB_NAME
        os.chmod(file, 0o444)
        snapshots.fsync_path(file)
        final = snapshots.generation_dir(self.directory, manifest.generation)
        if final.exists():  # a leftover without a manifest (a pull killed between the two renames)
            for inner in final.iterdir():
                os.chmod(inner, 0o644)
            shutil.rmtree(final)
        os.rename(temp, final)
        snapshots.write_manifest(self.directory, manifest)
        for leftover in self.directory.glob(f"{PULL_PREFIX}g*"):
            shutil.rmtree(leftover, ignore_errors=True)

    def say(self, problem: str) -> None:
        """Print a warning line once per kind of problem (a primary down for an hour is one line, not 1800): two
        problems differing only in their numbers (free bytes, seconds, bytes downloaded) are one kind."""
        shown = name(problem)  # notes come from the primary: no control sequences reach the terminal
        self.record.problem = shown
        kind = _kind(problem)
        if kind != self._said:
            self._said = kind
            log.warning("pull from %s: %s", name(self.base), shown)
            print(f"knowledge: warning: {shown}; still serving what {name(str(self.directory))} holds",
                  file=sys.stderr, flush=True)

    def pull_once(self, installed: Callable[[int], object]) -> None:
        """One pull, its problem said once; installed(generation) after a generation is in place."""
        try:
            number = self.pull()
        except PullError as exc:
            self.say(str(exc))
            return
        except OSError as exc:  # the directory unwritable, a disk error: said, tried again next poll
            self.say(f"cannot write {self.directory}: {exc}")
            return
        self._said = ""  # a poll without a problem: the next problem is said again
        self.record.problem = None
        if number is not None:
            print(f"knowledge: pulled generation {number} from {self.base} into {self.directory}", file=sys.stderr,
                  flush=True)
            installed(number)

    def start(self, interval: float, installed: Callable[[int], object]) -> None:
        """Pull every interval seconds in a daemon thread until close(); installed() after each new generation."""
        instruments().snapshot_refused.add(0, {STAGE: "pull"})  # every series at 0 first: increase() sees the first
        for outcome in ("pulled", "failed", "refused"):
            instruments().snapshot_pulls.add(0, {OUTCOME: outcome})
        def run() -> None:
            self.pull_once(installed)
            while not self._stop.wait(interval):
                self.pull_once(installed)

        self._thread = threading.Thread(target=run, name="knowledge-pull", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop pulling: an exchange in progress is cut at once, a download stops at its next chunk."""
        self._stop.set()
        watchdog = self._watchdog
        if watchdog is not None:
            watchdog.cut()
        if self._thread is not None:
            self._thread.join(timeout=TIMEOUT_S)


def startup_check(puller: Puller) -> str:
    """Ask the primary once at start: raise ConfigError for what only the operator can fix (token, Host, URL);
    a primary not answering yet is a warning (returned), pulled from later."""
    try:
        puller.latest()
    except PullError as exc:
        text = str(exc)
        if "(401)" in text or "(421)" in text or "(403)" in text or "(404)" in text:
            raise ConfigError(text) from exc
        return text
    return ""


def _kind(problem: str) -> str:
    """A problem with its numbers left out: what say() tells apart."""
    return _NUMBER.sub("#", problem)


def _reason(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError) and "refused" in text.lower():
        return "connection refused"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {TIMEOUT_S:.0f} s"
    return text[:200]
