"""The backfills' bookkeeping: each backfill's checkpoint (a ``backfill`` position, see
:mod:`bridge.catalog.positions`) and the events its backend refused for good, kept until they are
sent again (``catalog.backfills``)."""

from __future__ import annotations

from collections.abc import Sequence

from bridge.catalog import positions, sql_outbox
from bridge.catalog.engine import Cursor, Database
from bridge.catalog.positions import BACKFILL, Checkpoint, RefusedItem


class Backfills:
    """The backfill checkpoints of one catalog and the events their backends refused."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def checkpoint(self, name: str) -> Checkpoint | None:
        """A backfill's checkpoint (None: it has none yet)."""
        found = positions.read(self._db.conn, BACKFILL, name)
        return Checkpoint.from_position(found) if found is not None else None

    def checkpoints(self) -> list[Checkpoint]:
        """Every backfill's checkpoint, by name."""
        return [Checkpoint.from_position(p) for p in positions.read_all(self._db.conn, BACKFILL)]

    def save(
        self,
        checkpoint: Checkpoint,
        *,
        refused: Sequence[RefusedItem] = (),
        resolved: Sequence[RefusedItem] = (),
        clear_refused: bool = False,
    ) -> None:
        """Move a backfill's checkpoint, in one transaction with the events its backend refused
        (kept until they are re-sent) and the refused ones delivered since (``resolved``: gone
        from the list). ``clear_refused`` forgets the checkpoint's earlier refusals first."""

        def work(cur: Cursor) -> None:
            positions.save(cur, checkpoint.to_position())
            if clear_refused:
                cur.execute(sql_outbox.CLEAR_REFUSED, (checkpoint.name,))
            for item in resolved:
                cur.execute(sql_outbox.DELETE_REFUSED, (checkpoint.name, item.position[1], item.position[2]))
            for item in refused:
                cur.execute(
                    sql_outbox.SAVE_REFUSED,
                    (checkpoint.name, *item.position, item.event, item.status, item.error, item.refused_at),
                )

        self._db.write(work)

    def refused(self, checkpoint: str, *, limit: int = 1_000_000) -> list[RefusedItem]:
        """The events a backfill's backend refused for good, in the backfill's order."""
        found = self._db.conn.execute(sql_outbox.SELECT_REFUSED, (checkpoint, limit))
        return [
            RefusedItem((t, order, ref), event, status, error, at) for t, order, ref, event, status, error, at in found
        ]

    def count_refused(self) -> dict[str, int]:
        """How many refused events each backfill checkpoint keeps."""
        return {name: int(count) for name, count in self._db.conn.execute(sql_outbox.COUNT_REFUSED)}


__all__ = ["Backfills"]
