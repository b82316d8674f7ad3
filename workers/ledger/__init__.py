"""The run ledger: its rules on atomic primitives and the in-process twin (RedisLedger, in
workers/ledger/redis_ledger.py, is imported only by the distributed shape)."""

from workers.ledger.backlog import Backlog
from workers.ledger.duties import Presence, Replies, RunLock
from workers.ledger.memory import InMemoryLedger
from workers.ledger.runs import Ledger
from workers.ledger.shapes import BacklogState, RunSummary

__all__ = ["Backlog", "BacklogState", "InMemoryLedger", "Ledger", "Presence", "Replies", "RunLock", "RunSummary"]
