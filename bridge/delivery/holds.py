"""The stream worker's hold on the outbox, as the catalog's engine chooses it
(:attr:`bridge.catalog.engine.Engine.outbox_hold`): the single lease where one worker at a time
delivers (:class:`~bridge.delivery.lease.OutboxLease`, SQLite), claims on the rows each sends where
workers run side by side (:class:`~bridge.delivery.claims.OutboxClaims`, PostgreSQL).
"""

from __future__ import annotations

from bridge.catalog import Catalog
from bridge.delivery.claims import OutboxClaims
from bridge.delivery.heartbeat import OutboxHold
from bridge.delivery.lease import OutboxLease

HOLDS: dict[str, type[OutboxClaims] | type[OutboxLease]] = {"lease": OutboxLease, "claims": OutboxClaims}


def outbox_hold(catalog: Catalog, target: str) -> OutboxHold:
    """A new hold on ``catalog``'s outbox for a worker delivering to ``target``, of its engine's kind."""
    return HOLDS[catalog.engine.outbox_hold](catalog, target)


__all__ = ["HOLDS", "outbox_hold"]
