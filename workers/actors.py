"""Declare the pipeline's actors on a broker. Each actor is a thin adapter over workers.ingest/write/embed."""

from __future__ import annotations

from typing import Any

import dramatiq

from workers import queues
from workers.embed import embed_batch
from workers.ingest import ingest_batch
from workers.queues import Actors
from workers.runtime import current
from workers.write import apply_batch, finish_if_complete


def declare_actors(broker: dramatiq.Broker) -> Actors:
    """Create the ingest, write, finalize and embed actors bound to broker."""

    def ingest(run_id: str, files: list[list[Any]], force: bool = False) -> None:
        runtime = current()
        key = ingest_batch(runtime, run_id, files, force)
        if key is not None:  # None: sent again later, when the embedding backlog has room
            runtime.actors.write.send(run_id, key)

    def write(run_id: str, key: str) -> None:
        apply_batch(current(), run_id, key)

    def finalize(run_id: str) -> None:
        finish_if_complete(current(), run_id)

    def embed(run_id: str, index: int) -> None:
        embed_batch(current(), run_id, index)

    return Actors(
        ingest=dramatiq.actor(broker=broker, actor_name="ingest", queue_name=queues.INGEST,
                              **queues.INGEST_OPTIONS)(ingest),
        write=dramatiq.actor(broker=broker, actor_name="write", queue_name=queues.WRITE,
                             **queues.WRITE_OPTIONS)(write),
        finalize=dramatiq.actor(broker=broker, actor_name="finalize", queue_name=queues.WRITE,
                                **queues.WRITE_OPTIONS)(finalize),
        embed=dramatiq.actor(broker=broker, actor_name="embed", queue_name=queues.EMBED,
                             **queues.EMBED_OPTIONS)(embed),
    )
