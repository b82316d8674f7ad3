"""Declare the pipeline's actors on a broker. Each actor is a thin adapter over workers.ingest/write."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dramatiq

from workers import backpressure, queues
from workers.embed import dispatch, embed_batch, give_up_batch, run_plan
from workers.ingest import batch_key, ingest_batch
from workers.runtime import current
from workers.write import apply_batch, finish_if_complete


@dataclass(frozen=True)
class Actors:
    """The actors of one broker."""

    ingest: dramatiq.Actor[Any, Any]
    write: dramatiq.Actor[Any, Any]
    finalize: dramatiq.Actor[Any, Any]
    embed: dramatiq.Actor[Any, Any] | None = None
    embed_exhausted: dramatiq.Actor[Any, Any] | None = None
    ingest_exhausted: dramatiq.Actor[Any, Any] | None = None
    resume: dramatiq.Actor[Any, Any] | None = None


def declare_actors(broker: dramatiq.Broker) -> Actors:
    """Create the ingest, write and finalize actors bound to broker."""

    def ingest(run_id: str, files: list[list[Any]], force: bool = False) -> None:
        runtime = current()
        key = ingest_batch(runtime, run_id, files, force)
        if key is not None:  # None: parked until the embedding backlog has room
            runtime.actors.write.send(run_id, key)

    def write(run_id: str, key: str) -> None:
        apply_batch(current(), run_id, key)

    def finalize(run_id: str) -> None:
        finish_if_complete(current(), run_id)

    def embed(run_id: str, index: int) -> None:
        embed_batch(current(), run_id, index)

    def ingest_exhausted(message: dict[str, Any], info: dict[str, Any]) -> None:
        # The middleware records the files as failed; a vector run must still send the batches the
        # message completed, flush its tail batch and let parked messages in.
        runtime = current()
        run_id, files = message["args"][0], message["args"][1]
        plan = run_plan(runtime, run_id)
        if plan is not None:
            dispatch(runtime, run_id, batch_key(files), plan)
            backpressure.wake(runtime, run_id, plan)

    def resume(run_id: str, token: str) -> None:
        runtime = current()
        plan = run_plan(runtime, run_id)
        if plan is not None:
            backpressure.resume(runtime, run_id, token, plan)

    def embed_exhausted(message: dict[str, Any], info: dict[str, Any]) -> None:
        run_id, index = message["args"][0], message["args"][1]
        reason = f"the embeddings server stayed unavailable through {info.get('retries', 0)} retries"
        give_up_batch(current(), run_id, int(index), reason)

    return Actors(
        ingest=dramatiq.actor(ingest, broker=broker, actor_name="ingest", queue_name=queues.INGEST,
                              on_retry_exhausted="ingest_exhausted", **queues.INGEST_OPTIONS),
        write=dramatiq.actor(write, broker=broker, actor_name="write", queue_name=queues.WRITE,
                             **queues.WRITE_OPTIONS),
        finalize=dramatiq.actor(finalize, broker=broker, actor_name="finalize", queue_name=queues.WRITE,
                                **queues.WRITE_OPTIONS),
        embed=dramatiq.actor(embed, broker=broker, actor_name="embed", queue_name=queues.EMBED,
                             on_retry_exhausted="embed_exhausted", **queues.EMBED_OPTIONS),
        embed_exhausted=dramatiq.actor(embed_exhausted, broker=broker, actor_name="embed_exhausted",
                                       queue_name=queues.EMBED, **queues.INGEST_OPTIONS),
        ingest_exhausted=dramatiq.actor(ingest_exhausted, broker=broker, actor_name="ingest_exhausted",
                                        queue_name=queues.INGEST, **queues.INGEST_OPTIONS),
        resume=dramatiq.actor(resume, broker=broker, actor_name="resume", queue_name=queues.INGEST,
                              **queues.INGEST_OPTIONS),
    )
