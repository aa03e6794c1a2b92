"""The receiver's group commit on a thread of the test's own process: what an in-process
:class:`~bridge.receiver.app.ReceiverApp` writes through in the tests (``olbridge serve`` writes
through its writer process)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bridge.mapping.resolver import Resolver
from bridge.model.received import IncomingEvent
from bridge.receiver.writer import WAL_LIMIT, CatalogWriter, QueuedWriter, Results


class GroupWriter(QueuedWriter):
    """Writes the groups on a thread of this process."""

    def __init__(
        self,
        catalog_path: str | Path,
        resolver: Resolver,
        *,
        durability: str = "full",
        max_group: int = 2000,
        max_queued: int = 256,
        timeout: float = 30.0,
        on_commit: Callable[[], None] = lambda: None,
        wal_limit: int = WAL_LIMIT,
        checkpoint_every: float = 1.0,
    ) -> None:
        self.writer = CatalogWriter(
            catalog_path,
            resolver,
            durability=durability,
            on_commit=on_commit,
            wal_limit=wal_limit,
            checkpoint_every=checkpoint_every,
        )
        self.catalog = self.writer.catalog
        super().__init__(max_group=max_group, max_queued=max_queued, timeout=timeout)

    def _write(self, events: list[IncomingEvent]) -> Results:
        return self.writer.write(events)

    def _release(self) -> None:
        self.writer.close()
