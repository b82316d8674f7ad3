"""Build the Dramatiq broker: StubBroker for the embedded default, RedisBroker when configured.

The broker is built here, before any actor is declared; each store gets its own Redis namespace so
two indexes on one Redis never mix messages.
"""

from __future__ import annotations

import dramatiq
from dramatiq.brokers.stub import StubBroker

from config.settings import Settings


def build_stub_broker() -> dramatiq.Broker:
    """An in-process broker for the embedded default."""
    broker = StubBroker()
    broker.emit_after("process_boot")
    return broker


def namespace(settings: Settings) -> str:
    """The Redis key namespace of this store's queues."""
    return f"knowledge:{settings.store_key}"
