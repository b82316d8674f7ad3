"""Build the Dramatiq broker: StubBroker for the embedded default, RedisBroker when configured.

The broker is built here, before any actor is declared; each store gets its own Redis namespace so
two indexes on one Redis never mix messages.
"""

from __future__ import annotations

import logging

import dramatiq
from dramatiq.brokers.stub import StubBroker

from config.settings import Settings


def build_stub_broker() -> dramatiq.Broker:
    """An in-process broker for the embedded default."""
    # Two Workers (ingest threads, one writer thread) share this broker by design; dramatiq warns
    # about the second worker middleware, which is expected here.
    logging.getLogger("dramatiq.broker.StubBroker").setLevel(logging.ERROR)
    broker = StubBroker()
    broker.emit_after("process_boot")
    return broker


def namespace(settings: Settings) -> str:
    """The Redis key namespace of this store's queues."""
    return f"knowledge:{settings.store_key}"
