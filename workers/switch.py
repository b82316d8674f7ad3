"""`knowledge vectors switch` in the distributed shape: the running `knowledge writer` applies each step.

A `knowledge writer` holds the store's write lock for its lifetime, so the switch command embeds the
sections itself (read-only on the store) and hands every write to the writer as a `shadow` message
on the write queue (start, store a batch, finish), waiting for each reply like `knowledge rm`. The
writer stays the store's only writer, and it swaps only while no index run holds the run lock: a
run planned under the old identity never writes into the new vector table.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import dramatiq

from config.errors import BrokerError, KnowledgeError, PipelineError
from config.settings import Settings
from pipeline import shadow
from pipeline.db import DatabaseError
from pipeline.vectors import VectorIdentity
from workers import queues
from workers.runtime import current

SHADOW_ACTOR = "shadow"
REPLY_WAIT_S = 120.0  # one step: a batch write, or a swap rebuilding the quantised companions
SWAP_WAIT_S = 600.0  # how long the swap waits for a running index run to end

ShadowActor = dramatiq.Actor[[str, str, dict[str, Any], list[int], list[str], list[str]], None]


def apply_step(step: str, identity: VectorIdentity, ids: list[int], vectors: list[bytes],
               digests: list[str]) -> dict[str, Any]:
    """Apply one step of a switch in this writer process; the JSON-able reply."""
    runtime = current()
    store = runtime.writer_store()
    try:
        if step == "start":
            with store.transaction() as conn:
                shadow.start(conn, identity)
            return {"ok": True}
        if step == "store":
            with store.transaction() as conn:
                return {"stored": shadow.store_vectors(conn, identity, ids, vectors, digests)}
        if step == "finish":
            holder = runtime.ledger.run_lock.holder()
            if holder is not None:  # the run planned with the pinned identity: it must end first
                done = shadow.progress(store.conn, identity)
                return {"busy": holder, "embedded": done.embedded, "total": done.total}
            with store.transaction() as conn:
                done = shadow.finish(conn, identity)
            return {"embedded": done.embedded, "total": done.total, "swapped": done.swapped}
        if step == "abandon":
            with store.transaction() as conn:
                shadow.abandon(conn)
            return {"ok": True}
    except (KnowledgeError, DatabaseError) as exc:
        return {"error": str(exc)}
    return {"error": f"unknown switch step {step!r}"}


def declare_shadow_actor(broker: dramatiq.Broker) -> ShadowActor:
    """The writer-side `shadow` actor (write queue): apply one step, reply with its outcome."""

    def shadow_step(request_id: str, step: str, identity: dict[str, Any], ids: list[int], vectors: list[str],
                    digests: list[str]) -> None:
        blobs = [base64.b64decode(v) for v in vectors]
        reply = apply_step(step, VectorIdentity.from_dict(identity), ids, blobs, digests)
        current().ledger.replies.put(request_id, reply)

    return dramatiq.actor(broker=broker, actor_name=SHADOW_ACTOR, queue_name=queues.WRITE,
                          **queues.WRITE_OPTIONS)(shadow_step)


class RemoteWriter:
    """shadow.ShadowWriter through the running writer; close() when done."""

    def __init__(self, settings: Settings, reply_wait_s: float = REPLY_WAIT_S,
                 swap_wait_s: float = SWAP_WAIT_S) -> None:
        from workers.distributed import open_ledger

        self.broker, self.ledger = open_ledger(settings)
        self.actor = declare_shadow_actor(self.broker)
        self.reply_wait_s, self.swap_wait_s = reply_wait_s, swap_wait_s

    def close(self) -> None:
        """Close the broker connection."""
        self.broker.close()

    def start(self, identity: VectorIdentity) -> None:
        self._ask("start", identity)

    def store(self, identity: VectorIdentity, ids: list[int], vectors: list[bytes], digests: list[str]) -> None:
        self._ask("store", identity, ids, [base64.b64encode(v).decode("ascii") for v in vectors], digests)

    def finish(self, identity: VectorIdentity) -> shadow.Progress:
        deadline = time.monotonic() + self.swap_wait_s
        while True:
            reply = self._ask("finish", identity)
            if "busy" not in reply or time.monotonic() >= deadline:
                return shadow.Progress(identity, int(reply["embedded"]), int(reply["total"]),
                                       bool(reply.get("swapped", False)))
            time.sleep(0.5)  # an index run holds the run lock: swap after it

    def abandon(self) -> None:
        self._ask("abandon", VectorIdentity("", 0))

    def _ask(self, step: str, identity: VectorIdentity, ids: list[int] | None = None,
             vectors: list[str] | None = None, digests: list[str] | None = None) -> dict[str, Any]:
        request_id = f"switch-{uuid.uuid4().hex[:12]}"
        self.actor.send(request_id, step, identity.to_dict(), ids or [], vectors or [], digests or [])
        deadline = time.monotonic() + self.reply_wait_s
        while time.monotonic() < deadline:
            raw = self.ledger.replies.get(request_id)
            if raw is not None:
                reply: dict[str, Any] = json.loads(raw)
                if "error" in reply:
                    raise PipelineError(f"the writer could not apply the switch step {step!r}: {reply['error']}")
                return reply
            time.sleep(0.05)
        raise BrokerError(
            f"the store is held by a writer, and no `knowledge writer` applied the switch step {step!r} within "
            f"{self.reply_wait_s:.0f} s; start one and run `knowledge vectors switch` again"
        )
