"""The one channel to a running `knowledge writer`: a request on the write queue, its answer in the ledger.

The writer holds the store's write lock for its lifetime, so a change outside an index run
(workers/operations.py: Remove, Rebuild, Vacuum, Reset, a SwitchStep) made while it runs is sent to
it as one `request` message (request id, the operation's name, its wire form), queued behind the
writes in flight. The writer applies the same request the engine applies when it holds the lock
itself and puts the answer under the request id (Ledger.replies); an error travels as its name and
text and is raised again in the sender through operations.ERRORS. The sender polls for the answer,
bounded, and gives up early when no writer is alive any more. A request carries the time its sender stops
waiting: a writer that reaches it later drops it, so nothing is applied once nobody waits for it.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Self

import dramatiq

from config.errors import BrokerError
from config.settings import Settings
from workers import queues
from workers.ledger.shapes import Wire
from workers.maintenance import HeldStore
from workers.operations import Operation, answer, raise_for
from workers.runtime import current

REQUEST_ACTOR = "request"
# A rebuild or vacuum of a large store rewrites every page: give it longer than a batch write.
REQUEST_OPTIONS: dict[str, Any] = {**queues.WRITE_OPTIONS, "max_retries": 2, "time_limit": 3_600_000}
ALIVE_EVERY_S = 2.0  # how often a waiting sender looks whether a writer is still alive

RequestActor = dramatiq.Actor[[str, str, dict[str, Any], float], None]


def declare_request_actor(broker: dramatiq.Broker, held: HeldStore | None) -> RequestActor:
    """The `request` actor (write queue); held is the writer's store (None where requests are only sent)."""

    def request(request_id: str, op: str, wire: dict[str, Any], expires_at: float) -> None:
        if held is None:
            raise BrokerError("a request reached a process that does not hold the store")
        if time.time() > expires_at:  # its sender gave up: applying it now would surprise everyone
            return
        current().ledger.replies.put(request_id, answer(held, {**wire, "op": op}))

    return dramatiq.actor(broker=broker, actor_name=REQUEST_ACTOR, queue_name=queues.WRITE,
                          **REQUEST_OPTIONS)(request)


class WriterChannel:
    """Requests to the store's running writer, and the store's run ledger; close() when done."""

    def __init__(self, settings: Settings) -> None:
        from workers.distributed import open_ledger

        self.broker, self.ledger = open_ledger(settings)
        self.actor = declare_request_actor(self.broker, None)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the broker connection."""
        self.broker.close()

    def writer_alive(self) -> bool:
        """True when a `knowledge writer` announced itself lately."""
        return bool(self.ledger.presence.alive("writer"))

    def ask(self, op: Operation[Any], request_id: str | None = None) -> Wire:
        """Send one operation to the writer and wait for its answer (its error raised again through ERRORS).

        BrokerError past the operation's wait_s, or once no writer is alive: the request is then never
        applied (a writer reaching it later drops it).
        """
        wait_s, name = op.wait_s, op.name
        request_id = request_id or f"{name}-{uuid.uuid4().hex[:12]}"
        self.actor.send(request_id, name, op.to_wire(), time.time() + wait_s)
        deadline = time.monotonic() + wait_s
        looked = time.monotonic()
        pause = 0.01
        while time.monotonic() < deadline:
            raw = self.ledger.replies.get(request_id)
            if raw is not None:
                reply: Wire = json.loads(raw)
                return raise_for(reply)
            if time.monotonic() - looked >= ALIVE_EVERY_S:
                looked = time.monotonic()
                if not self.writer_alive():
                    raise BrokerError(f"no `knowledge writer` is alive to answer {name!r} (the one holding the store "
                                      "stopped?); start one and run the command again")
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
        raise BrokerError(
            f"the store is held by a writer, and no `knowledge writer` answered {name!r} within {wait_s:.0f} s; "
            "a writer reaching the request later drops it: run the command again"
        )
