"""The run ledger: its protocol and the in-process implementation (RedisLedger, in
workers/ledger/redis_ledger.py, is imported only by the distributed shape)."""

from workers.ledger.memory import InMemoryLedger
from workers.ledger.protocol import (
    Backlog,
    BacklogState,
    Ledger,
    Presence,
    Replies,
    RunLock,
    RunSummary,
)

__all__ = ["Backlog", "BacklogState", "InMemoryLedger", "Ledger", "Presence", "Replies", "RunLock", "RunSummary"]
