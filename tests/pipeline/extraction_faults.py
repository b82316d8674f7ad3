"""Functions a test runs in an extraction child: each misbehaves the way a hostile file makes a reader do.

They cross to the child by name (pickle), so they live in a module the child can import.
"""

from __future__ import annotations

import os
import time

from config.errors import FileSkipped


def spin(seconds: float) -> int:
    """Burn CPU for seconds (a super-linear parser on a crafted file), then answer."""
    end = time.process_time() + seconds
    count = 0
    while time.process_time() < end:
        count += 1
    return count


def allocate(mib: int) -> int:
    """Hold mib MiB at once (a decompression bomb), then answer its length."""
    block = bytearray(mib * 1024 * 1024)
    return len(block)


def pid() -> int:
    """The process id of the child that ran this."""
    return os.getpid()


def refuse(reason: str) -> None:
    """Raise FileSkipped, as a reader does for a file it cannot read."""
    raise FileSkipped(reason)


def divide(a: int, b: int) -> float:
    """a / b: a ZeroDivisionError for b == 0, an error no reader anticipated."""
    return a / b


def die(code: int) -> None:
    """End the child at once, as a crash inside a C extension does."""
    os._exit(code)
