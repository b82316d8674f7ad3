"""What happens when a message runs out of retries, in one place (called by KnowledgeMiddleware).

- ingest: its files are recorded as failed; in a vector run the batches it completed are sent,
  it counts as done for the embedding tail flush (so the run can still finish).
- write: the files of its staged payload are recorded as failed, and the payload is dropped.
- embed: the documents of its batch still without vectors fail (their stored version stays).
Then the run is asked to finish.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from config.observability import get_logger
from workers import embed, payloads, tally
from workers.ingest import batch_key
from workers.ledger.shapes import Outcome
from workers.runtime import Runtime

log = get_logger("knowledge.worker")


def give_up(runtime: Runtime, actor_name: str, args: Sequence[Any], retries: int, error: str) -> None:
    """Settle a message of actor_name (with args) that failed `retries` times, the last with error."""
    if len(args) < 2:
        return
    run_id = str(args[0])
    if actor_name == "embed":
        reason = f"the embeddings server stayed unavailable through {retries} retries"
        embed.give_up_batch(runtime, run_id, int(args[1]), reason)
        return
    reason = f"gave up after {retries} retries: {error}"
    paths: list[str] = []
    if actor_name == "ingest":
        paths = [str(f[0]) for f in args[1]]
    elif actor_name == "write":
        paths = [item.path for item in payloads.from_wire(runtime.ledger.staged(run_id, str(args[1])) or [])]
    if not paths:
        return
    outcomes: list[Outcome] = [(p, "failed", reason) for p in paths]
    runtime.ledger.record(run_id, outcomes)
    tally.count_outcomes(outcomes, "retries")
    if actor_name == "write":  # settled: it no longer holds room ahead of the writer
        runtime.ledger.unstage(run_id, str(args[1]))
    log.error("gave up on message", failed_paths=len(paths), error=reason)
    if actor_name == "ingest":
        plan = embed.run_plan(runtime, run_id)
        if plan is not None:
            embed.dispatch(runtime, run_id, batch_key(list(args[1])), plan)
    runtime.actors.finalize.send(run_id)
