"""The machine a benchmark ran on, and a sampler of its processes' peak memory, CPU and load while it runs."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import threading
from pathlib import Path

import redis

from bench.lib.procfs import cpu_seconds, status_kb

SAMPLE_S = 0.5


def machine() -> str:
    """One line describing this machine."""
    model = ""
    try:
        match = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        model = match.group(1).strip() if match else ""
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    server = redis.Redis.from_url("redis://127.0.0.1:6379").info("server").get("redis_version", "?")
    return (f"{os.cpu_count()} CPU ({model}), {mem:.0f} GiB, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, Redis {server}; load average at start "
            f"{os.getloadavg()[0]:.2f} (a shared machine: other jobs add noise)")


class Sampler(threading.Thread):
    """Every SAMPLE_S: the peak RSS and CPU of each named process, the WAL size and the load average."""

    def __init__(self, pids: dict[str, int], wal: Path) -> None:
        super().__init__(daemon=True)
        self.pids = dict(pids)
        self.wal = wal
        self.hwm: dict[str, int] = {}
        self.cpu: dict[str, float] = {}
        self.wal_peak = 0
        self.loads: list[float] = []
        self.stopping = threading.Event()

    def sample(self) -> None:
        for name, pid in list(self.pids.items()):
            kb = status_kb(pid, "VmHWM")
            if kb:
                self.hwm[name] = max(self.hwm.get(name, 0), kb)
                self.cpu[name] = cpu_seconds(pid)
        with contextlib.suppress(OSError):
            self.wal_peak = max(self.wal_peak, self.wal.stat().st_size)
        self.loads.append(os.getloadavg()[0])

    def run(self) -> None:
        while not self.stopping.wait(SAMPLE_S):
            self.sample()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)
        self.sample()
