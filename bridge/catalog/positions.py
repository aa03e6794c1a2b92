"""Positions: where a reader of a source, or a replay to a backend, got to.

One concept for every "where was I" of olbridge, one row a ``(kind, name)`` in the ``positions``
table, its ``value`` JSON of the kind's own shape, which only the caller reads:

- ``marquez-import``, by the Marquez URL: ``{"after": <time>}``, the event time to resume from;
- ``prefect-import``, by the Prefect API URL: the newest event time read and the ids read at it;
- ``backfill``, by the checkpoint's name: :class:`Checkpoint` (the filters, the last item settled,
  the items settled past it, the counts).

A position is written in the same transaction as the data it covers (:meth:`Catalog.ingest` and
:meth:`Catalog.record_each` take one; a backfill's goes with the events its backend refused), so
it never says more was done than was committed. The kinds are the callers'; the catalog stores any.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from bridge.catalog import sql_outbox
from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.rows import dumps
from bridge.errors import ValidationError


@attrs.frozen
class Position:
    """``value`` is any JSON value; ``updated_at`` is when it was saved (the saver's clock)."""

    kind: str
    name: str
    value: Any
    updated_at: str = ""

    def __attrs_post_init__(self) -> None:
        for field in ("kind", "name"):
            text = getattr(self, field)
            if not isinstance(text, str) or not text:
                raise ValidationError(f"a position's {field} is a non-empty string", rule="position", value=text)


def read(conn: Connection | Cursor, kind: str, name: str) -> Position | None:
    row = conn.execute(sql_outbox.GET_POSITION, (kind, name)).fetchone()
    return _from_row(row) if row is not None else None


def read_all(conn: Connection | Cursor, kind: str | None) -> list[Position]:
    if kind is None:
        return [_from_row(row) for row in conn.execute(sql_outbox.LIST_ALL_POSITIONS)]
    return [_from_row(row) for row in conn.execute(sql_outbox.LIST_POSITIONS, (kind,))]


def save(cur: Cursor, position: Position) -> None:
    """Save a position inside the caller's transaction (the one writing what it covers)."""
    cur.execute(sql_outbox.SAVE_POSITION, (position.kind, position.name, dumps(position.value), position.updated_at))


def _from_row(row: Sequence[Any]) -> Position:
    kind, name, value, updated_at = row
    return Position(kind, name, json.loads(value), updated_at)


# --- the backfill's positions -----------------------------------------------------------------

BACKFILL = "backfill"

ItemPosition = tuple[str, int, int]  # (time, 0 change | 1 run, seq | pk); ("", -1, pk) a declared job


@attrs.frozen
class Checkpoint:
    """Where a backfill stopped: ``position`` is the last item before which every event was
    delivered or refused for good (None: none yet), as (time, 0 for an asset change or 1 for a
    task run, its seq or pk; ("", -1, pk) for a declared job). ``ahead`` holds the items past it
    that a window half done already settled, each with how many of its events (1: a run's START,
    so its end is next). ``jobs_through`` is the highest key of the declared jobs it delivered (or
    refused for good): a job declared after the checkpoint passed the jobs goes out when it resumes
    (None: a checkpoint kept before it was kept, whose later jobs are not known). Kept as the value
    of the ``backfill`` position of its name."""

    name: str
    filters: dict[str, Any]
    position: ItemPosition | None
    runs: int
    events: int
    updated_at: str
    ahead: tuple[tuple[ItemPosition, int], ...] = ()
    jobs_through: int | None = None

    def to_position(self) -> Position:
        value = {
            "filters": self.filters,
            "position": None if self.position is None else list(self.position),
            "runs": self.runs,
            "events": self.events,
            "ahead": [[list(p), settled] for p, settled in self.ahead],
        }
        if self.jobs_through is not None:  # a checkpoint from before it was kept has none
            value["jobsThrough"] = self.jobs_through
        return Position(BACKFILL, self.name, value, self.updated_at)

    @classmethod
    def from_position(cls, position: Position) -> Checkpoint:
        value = position.value
        where = value["position"]
        return cls(
            position.name,
            value["filters"],
            _item(where) if where is not None else None,
            int(value["runs"]),
            int(value["events"]),
            position.updated_at,
            tuple((_item(p), int(settled)) for p, settled in value["ahead"]),
            int(value["jobsThrough"]) if value.get("jobsThrough") is not None else None,
        )


@attrs.frozen
class RefusedItem:
    """An event a backfill's backend refused for good: its item's position, which event
    (``start`` or ``end`` of a task run, ``event`` of the others; a refused START holds its run's
    end), the backend's status and answer."""

    position: ItemPosition
    event: str
    status: int | None
    error: str
    refused_at: str


def _item(value: Any) -> ItemPosition:
    time, order, ref = value
    return (str(time), int(order), int(ref))


__all__ = ["BACKFILL", "Checkpoint", "ItemPosition", "Position", "RefusedItem", "read", "read_all", "save"]
