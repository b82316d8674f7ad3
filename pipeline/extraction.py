"""Every file's extraction under a deadline and a memory limit, in child processes reused across files.

A format's reader (docutils, pypdf, python-docx, the HTML tokenizer, the chunker) is a parser of
input anyone with write access to one folder controls, so a crafted file can cost it hours or
gigabytes. `Extraction.call(func, *args, size=n)` runs `func(*args)` in a child process whose address
space is capped (RLIMIT_AS, `knowledge.extraction.memory`) and answers within its deadline (the
larger of `timeout` and `timeout_per_mib` x the file's MiB). The deadline counts the child's CPU
time, so a loaded machine does not skip a file a quiet one reads; four times the deadline (plus 10 s)
in wall time ends it all the same. A child past either bound is killed and the call raises FileSkipped
(`took longer than 10 s`, `needed more than 1024 MiB`); the next call starts a new child. A child
serves one call at a time and is kept for the next (a run pays Python's start-up once per ingest
thread, not once per file); children exit when their parent does, even mid-file.

`inline` runs the function in this process, unbounded: for callers that read trusted input.
The functions called must be importable module-level functions (they cross by pickle, by name).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, TypeVar

from config.errors import FileSkipped, KnowledgeError, PipelineError
from config.settings import ExtractionSettings

T = TypeVar("T")
MIB = 1024 * 1024
WALL_FACTOR = 4.0  # a child off the CPU (swapping, stopped) is ended at this many times its deadline ...
WALL_GRACE = 10.0  # ... plus this many seconds, so a busy machine's scheduling never ends a short one
_HEADER = 8
_READY = b"ready"
STARTUP_SECONDS = 30.0  # of CPU, for the child's interpreter and imports, before it serves a file
_POLL_SECONDS = 0.1
PRELOAD = ("pipeline.files",)  # what every child imports at its start (read by name: files imports this module)
_PACKAGES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Caller(Protocol):
    """How ingest runs a reader: bounded in a child (Extraction.call) or in this process (inline)."""

    def __call__(self, func: Callable[..., T], *args: Any, size: int, needs: tuple[str, ...] = ()) -> T:
        """func(*args), for input of size bytes, the modules named in needs loaded off its clock; raise what
        func raises (FileSkipped, PipelineError)."""


def inline(func: Callable[..., T], *args: Any, size: int, needs: tuple[str, ...] = ()) -> T:
    """func(*args) in this process, with no deadline and no memory limit."""
    return func(*args)


@dataclass(frozen=True)
class Bound:
    """The deadline and address-space limit of one extraction."""

    seconds: float = 10.0
    seconds_per_mib: float = 4.0
    memory_mib: int = 1024

    @classmethod
    def of(cls, settings: ExtractionSettings) -> Bound:
        """The bound knowledge.extraction configures."""
        return cls(settings.timeout, settings.timeout_per_mib, settings.memory)

    def deadline(self, size: int) -> float:
        """Seconds of CPU the extraction of size bytes may take."""
        return max(self.seconds, self.seconds_per_mib * size / MIB)


class Extraction:
    """A pool of reusable child processes that run extractions under a Bound; thread-safe."""

    def __init__(self, bound: Bound) -> None:
        self.bound = bound
        self._idle: list[_Child] = []
        self._lock = threading.Lock()
        self._closed = False

    def call(self, func: Callable[..., T], *args: Any, size: int, needs: tuple[str, ...] = ()) -> T:
        """func(*args) in a child within the bound; raise FileSkipped when it overruns, else what func raised.

        func's module and the modules named in needs (a format's reader, its library) are loaded in the
        child before the file's clock starts, once per child: loading docutils is not the file's time.
        """
        outcome = self.call_each(func, [(args, size)], needs)[0]
        if isinstance(outcome, KnowledgeError):
            raise outcome
        return outcome

    def call_each(self, func: Callable[..., T], calls: Sequence[tuple[tuple[Any, ...], int]],
                  needs: tuple[str, ...] = ()) -> list[T | FileSkipped | PipelineError]:
        """func(*args) for each (args, size) of calls, in order: what each returned, or the error it met.

        The calls go to one child in one message and their answers stream back one by one, so a batch
        of files costs one exchange, not one each; each call has its own deadline, counted from the
        answer before it. A call past its bound is its FileSkipped, and the calls after it go on in a
        fresh child.
        """
        outcomes: list[T | FileSkipped | PipelineError] = []
        while len(outcomes) < len(calls):
            outcomes += self._stream(func, calls[len(outcomes):], needs)
        return outcomes

    def _stream(self, func: Callable[..., T], calls: Sequence[tuple[tuple[Any, ...], int]],
                needs: tuple[str, ...]) -> list[T | FileSkipped | PipelineError]:
        """The outcomes of calls through one child; fewer when it had to go (the last one then that call's skip)."""
        payload = pickle.dumps(("each", func, [args for args, _ in calls]), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            child = self._take()
        except PipelineError as exc:  # no child could start: every call says so, none is lost silently
            return [exc for _ in calls]
        done: list[T | FileSkipped | PipelineError] = []
        try:
            child.load((func.__module__, *needs))
            child.send(payload)
            for _, size in calls:
                kind, value = child.reply(self.bound.deadline(size))
                if kind == "memory":  # a MemoryError may leave a library half-initialised: go on afresh
                    child.kill()
                    return [*done, FileSkipped(self._memory_reason())]
                done.append(_outcome(kind, value))
        except _Overrun as exc:
            child.kill()
            return [*done, FileSkipped(self._overrun_reason(exc, child))]
        except BaseException:
            child.kill()
            raise
        self._give_back(child)
        return done

    def close(self) -> None:
        """End every idle child; a child in use ends when its call returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for child in idle:
            child.close()

    def __enter__(self) -> Extraction:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self) -> _Child:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Child.start(self.bound.memory_mib)

    def _give_back(self, child: _Child) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(child)
                return
        child.close()

    def _overrun_reason(self, exc: _Overrun, child: _Child) -> str:
        if exc.died:
            code = child.process.poll()
            if code is not None and code < 0:  # killed by a signal: the kernel's answer to memory, or a crash
                return f"{self._memory_reason()}; its reader ended by signal {-code}"
            return f"its reader ended unexpectedly (exit {code})"
        return f"took longer than {exc.seconds:g} s to read (knowledge.extraction.timeout)"

    def _memory_reason(self) -> str:
        return f"needed more than {self.bound.memory_mib} MiB to read (knowledge.extraction.memory)"


def _outcome(kind: str, value: Any) -> Any:
    """A reply as its call's outcome: what it returned, or the skip or failure it met."""
    if kind == "ok":
        return value
    return FileSkipped(value) if kind == "skipped" else PipelineError(value)


class _Overrun(Exception):
    def __init__(self, seconds: float, died: bool = False) -> None:
        super().__init__(seconds)
        self.seconds = seconds
        self.died = died


class _Child:
    """One child process speaking length-framed pickles over its stdin and stdout."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self._pending = bytearray()  # bytes read from the child past the last frame returned
        self.loaded: set[str] = set()  # the modules the child has imported on request
        self._proc_stat = os.path.exists(f"/proc/{process.pid}/stat")  # else the deadline counts wall time

    @classmethod
    def start(cls, memory_mib: int) -> _Child:
        # The child imports this very code (its directory first on the path), whatever its working directory.
        main = f"import sys; sys.path.insert(0, {_PACKAGES!r}); from pipeline.extraction import serve; serve()"
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", main, str(memory_mib * MIB)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
            )
        except OSError as exc:
            raise PipelineError(f"cannot start the process that reads files: {exc.strerror}") from exc
        child = cls(process)
        try:  # the child's start-up (Python, the readers' common imports) is not charged to the first file
            ready = child._receive(STARTUP_SECONDS)
        except _Overrun:
            child.kill()
            raise PipelineError("the process that reads files did not start (see the messages above)") from None
        if ready != _READY:
            child.kill()
            raise PipelineError("the process that reads files did not start: it answered something else")
        return child

    def load(self, modules: tuple[str, ...]) -> None:
        """Have the child import the modules it has not yet (within STARTUP_SECONDS of its CPU)."""
        missing = tuple(name for name in modules if name not in self.loaded)
        if not missing:
            return
        self.exchange(pickle.dumps(("load", missing), protocol=pickle.HIGHEST_PROTOCOL), STARTUP_SECONDS)
        self.loaded.update(missing)

    def exchange(self, payload: bytes, deadline: float) -> tuple[str, Any]:
        """Send one request and wait for its one reply within deadline seconds of the child's CPU."""
        self.send(payload)
        return self.reply(deadline)

    def send(self, payload: bytes) -> None:
        """Write one request; _Overrun (died) when the child is gone."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(len(payload).to_bytes(_HEADER, "big") + payload)
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise _Overrun(0.0, died=True) from None

    def reply(self, deadline: float) -> tuple[str, Any]:
        """The next reply, within deadline seconds of the child's CPU from now."""
        answer: tuple[str, Any] = pickle.loads(self._receive(deadline))
        return answer

    def _receive(self, deadline: float) -> bytes:
        """The next frame, bytes read past it kept for the next call; _Overrun past deadline or at EOF."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        started_cpu = self._cpu_seconds()
        started = time.monotonic()
        while (wanted := self._frame_end()) is None or len(self._pending) < wanted:
            ready, _, _ = select.select([fd], [], [], _POLL_SECONDS)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self.process.wait()
                    raise _Overrun(deadline, died=True)
                self._pending += chunk
                continue
            used = self._cpu_seconds() - started_cpu
            if used > deadline or time.monotonic() - started > deadline * WALL_FACTOR + WALL_GRACE:
                raise _Overrun(deadline)
        frame = bytes(self._pending[_HEADER:wanted])
        del self._pending[:wanted]
        return frame

    def _frame_end(self) -> int | None:
        """Where the frame at the head of the pending bytes ends, None until its header is in."""
        if len(self._pending) < _HEADER:
            return None
        return _HEADER + int.from_bytes(self._pending[:_HEADER], "big")

    def _cpu_seconds(self) -> float:
        """The child's user + system CPU seconds (its wall time where /proc cannot tell)."""
        if not self._proc_stat:
            return time.monotonic()
        try:
            with open(f"/proc/{self.process.pid}/stat", "rb") as handle:
                fields = handle.read().rpartition(b")")[2].split()
            return (int(fields[11]) + int(fields[12])) / _TICKS
        except (OSError, IndexError, ValueError):  # gone between two looks: its pipe's EOF tells the rest
            return 0.0

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        self.close()

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def serve() -> None:
    """The child's loop: read a request, run it, write its reply; end at EOF (the parent closed stdin)."""
    import resource

    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    parent = os.getppid()
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True).start()
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what a library prints goes to stderr, never into a reply
    _load(PRELOAD)  # the readers' common imports, before the first file's clock starts

    _send(replies, _READY)
    while True:
        header = requests.read(_HEADER)
        if len(header) < _HEADER:
            return
        payload = requests.read(int.from_bytes(header, "big"))
        try:
            request = pickle.loads(payload)
        except Exception as exc:  # noqa: BLE001 - a request this child cannot read is that file's failure
            _reply(replies, ("failed", f"unexpected error: {type(exc).__name__}: {exc}"))
            continue
        if request[0] == "load":
            _reply(replies, _load(request[1]))
            continue
        _, func, calls = request  # ("each", func, [args, ...]): one reply a call, written as each is done
        for args in calls:
            _reply(replies, _run(func, args))


def _load(modules: tuple[str, ...]) -> tuple[str, Any]:
    """Import each module named (one that is missing is left to the call that needs it to report)."""
    for name in modules:
        with contextlib.suppress(Exception):  # ImportError, a broken module, MemoryError: the call reports it
            importlib.import_module(name)
    return "ok", None


def _send(replies: BinaryIO, frame: bytes) -> None:
    replies.write(len(frame).to_bytes(_HEADER, "big") + frame)
    replies.flush()


def _reply(replies: BinaryIO, reply: tuple[str, Any]) -> None:
    try:
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    except MemoryError:
        data = pickle.dumps(("memory", ""))
    _send(replies, data)


def _orphan_watch(parent: int) -> None:
    """End this child once its parent is gone (killed mid-file, the pipe's EOF would wait for the reader)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _run(func: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "ok", func(*args)
    except MemoryError:
        return "memory", ""
    except FileSkipped as exc:
        return "skipped", str(exc)
    except PipelineError as exc:
        return "failed", str(exc)
    except RecursionError:
        return "skipped", "nested too deeply to read"
    except Exception as exc:  # noqa: BLE001 - one bad file must not end the child; the parent reports it
        return "failed", f"unexpected error: {type(exc).__name__}: {exc}"

