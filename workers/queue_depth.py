"""Queue depth and oldest-message age read from the Dramatiq Redis broker, for the queue gauges.

Dramatiq's Redis broker keeps each queue as a list of message ids at `namespace:queue` (its delay
queue at `namespace:queue.DQ`) and the messages in the hash `namespace:queue.msgs`; the head of the
list is the oldest waiting message, and its message_timestamp (ms) dates it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator

import redis


def sample(client: redis.Redis, namespace: str, queue_names: Iterable[str]) -> Iterator[tuple[str, int, float | None]]:
    """(queue, waiting messages, age in seconds of the oldest or None) for each queue and its delay queue."""
    names = [q for name in sorted(queue_names) for q in (name, f"{name}.DQ")]
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.llen(f"{namespace}:{name}")
        pipe.lindex(f"{namespace}:{name}", 0)
    replies = pipe.execute()
    heads: list[tuple[str, int, bytes | str | None]] = [
        (name, int(replies[2 * i]), replies[2 * i + 1]) for i, name in enumerate(names)]
    pipe = client.pipeline(transaction=False)
    for name, _, head in heads:
        pipe.hget(f"{namespace}:{name}.msgs", head or "")
    messages = pipe.execute()
    now_ms = time.time() * 1000
    for (name, depth, _), message in zip(heads, messages):
        yield name, depth, _age(message, now_ms)


def _age(message: bytes | str | None, now_ms: float) -> float | None:
    if not message:
        return None
    try:
        stamp = json.loads(message).get("message_timestamp")
    except (ValueError, AttributeError):
        return None
    return max(0.0, (now_ms - float(stamp)) / 1000) if isinstance(stamp, int | float) else None
