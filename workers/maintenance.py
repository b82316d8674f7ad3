"""Operator verbs that write outside an index run: remove documents, reset the store.

Both take the store's write lock. In the distributed shape a `knowledge writer` holds that lock
for its lifetime, so `rm` hands the removal to it as a `remove` message on the write queue and
waits (bounded) for its reply; `reset` replaces the file with an empty store and asks for the writer to stop.
"""

from __future__ import annotations

import json
import time
import uuid

import dramatiq

from config.errors import BrokerError, StoreBusy
from config.settings import Settings
from pipeline.lock import WriteLock
from pipeline.store import Emptied, Store, reset
from workers import queues
from workers.runtime import current

REMOVE_ACTOR = "remove"
REMOVE_WAIT_S = 60.0


def remove_documents(settings: Settings, paths: list[str]) -> list[str]:
    """Delete documents by path under the write lock (or through the writer); return those that were indexed."""
    if not settings.db_path.is_file():
        return []
    lock = WriteLock(settings.store_dir)
    try:
        lock.acquire("knowledge rm")
    except StoreBusy:
        if settings.broker is None:
            raise
        return remove_via_writer(settings, paths)
    try:
        store = Store(settings.db_path)
        try:
            return store.remove(paths)
        finally:
            store.close()
    finally:
        lock.release()


def reset_store(settings: Settings) -> Emptied:
    """Empty the store under the write lock (pipeline.store.reset): the schema stays, the documents go."""
    lock = WriteLock(settings.store_dir)
    try:
        lock.acquire("knowledge reset")
    except StoreBusy as exc:
        raise StoreBusy(
            f"{exc}. `knowledge reset` deletes the store file, so it needs the store to itself: stop the "
            "`knowledge writer` (scripts/stop-local.sh, or `docker compose stop writer`) and run it again"
        ) from None
    try:
        return reset(settings.db_path)
    finally:
        lock.release()


def declare_remove_actor(broker: dramatiq.Broker) -> dramatiq.Actor[[str, list[str]], None]:
    """The writer-side `remove` actor (write queue): delete paths, reply with those that existed."""

    def remove(request_id: str, paths: list[str]) -> None:
        runtime = current()
        removed = runtime.writer_store().remove(paths)
        runtime.ledger.replies.put(request_id, removed)

    return dramatiq.actor(broker=broker, actor_name=REMOVE_ACTOR, queue_name=queues.WRITE,
                          **queues.WRITE_OPTIONS)(remove)


def remove_via_writer(settings: Settings, paths: list[str], wait_s: float = REMOVE_WAIT_S) -> list[str]:
    """Send the removal to the running writer and wait for its reply (BrokerError past wait_s)."""
    from workers.distributed import open_ledger

    broker, ledger = open_ledger(settings)
    try:
        actor = declare_remove_actor(broker)
        request_id = f"rm-{uuid.uuid4().hex[:12]}"
        actor.send(request_id, list(paths))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            reply = ledger.replies.get(request_id)
            if reply is not None:
                return [str(p) for p in json.loads(reply)]
            time.sleep(0.1)
        raise BrokerError(
            f"the store is held by a writer, and no `knowledge writer` applied the removal within {wait_s:.0f} s; "
            "it stays queued and is applied when a writer consumes the write queue"
        )
    finally:
        broker.close()
