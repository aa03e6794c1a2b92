"""Received events partitioned by day of their event time, and received runs by the day of their
run ids (PostgreSQL), so that expiry drops a partition instead of deleting its rows.

``received_events`` is partitioned by range of ``event_time`` (text in olbridge's one UTC format,
compared in the "C" collation, so a day's bounds are ``'2025-03-01'`` to ``'2025-03-02'``): one
partition a day, ``received_events_pYYYYMMDD``, and a DEFAULT partition, ``received_events_default``,
that takes any event no day's partition holds (a day not made yet, or made and dropped): an event
is never refused for its time. The key is the event's own time, not its arrival: an event is
recognised when re-sent by its time and digest (a unique index, which on a partitioned table must
hold the partition key), and a re-sent event repeats its time, so it lands in the partition of the
first and meets it there. Partitioned by arrival, the re-sent copy would land in today's partition
and the index could not see the first.

``external_sources`` (received runs and jobs) is partitioned the same way by ``run_day``: the day
a run's id was made where the id is a UUIDv7, as the OpenLineage clients make them, else ''
(:func:`bridge.model.received.run_day`, of the source alone): a run's events all find its row in
one partition, whenever they come. Jobs, and runs whose ids tell no day, are in a partition of
their own, ``external_sources_undated`` (the range of '' alone; the batch deletes take its expired
runs), so that the default partition, which making a day reads whole, holds only runs of days
not made yet. :data:`TABLES` says what each table
is partitioned by.

- :func:`ensure` makes the partitions of today and the :data:`AHEAD` days after it that are
  missing (``serve`` at start-up and its writer's upkeep, :class:`DayPartitions`, once an hour;
  every retention pass; a new catalog): each is a
  table made beside the partitioned one, given the default partition's rows of its day (if any),
  then attached. ATTACH PARTITION takes SHARE UPDATE EXCLUSIVE on the partitioned table (inserts
  go on) and ACCESS EXCLUSIVE on the default partition, which is taken first, under the lock
  timeout, so that no event of the day reaches it between the move and the attach: inserts into
  the default partition (events of days not made) wait for that short transaction.
- :func:`drop_expired` drops the day partitions wholly older than a cutoff: in one short
  transaction under a lock timeout of :data:`LOCK_TIMEOUT`, tried :data:`TRIES` times, the day
  locked (SHARE), checked that every row of it may go (received events: no pending forward points
  into it; runs: every run of the day is one that retention deletes, never the latest run of its
  job, else the day stays and its other rows go in batches), its rows counted and what goes with
  them deleted (a run's facets), then DETACH and DROP, which alone hold the whole table.
  Plain DETACH, not ``DETACH ... CONCURRENTLY``: that one
  cannot run inside a transaction block, nor on a table with a default partition. DETACH waits for
  the writers in flight and holds new ones while it waits, at most the lock timeout; what it could
  not take is left to the batch deletes, which delete the same rows.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

import attrs

from bridge.catalog.engine import Cursor, Database, Engine, Expiring, Maintenance
from bridge.catalog.sql import PARTITIONED, partition_storage

AHEAD = 7  # days of partitions made ahead of today
LOCK_TIMEOUT = "50ms"  # how long dropping a partition may hold the writers back, each try
TRIES = 3
RETRY_PAUSE = 0.5  # s between two tries
MAKE_EVERY = 3600.0  # s between two looks of a receiver's writer at the days ahead
T = TypeVar("T")


@attrs.frozen
class Partitioned:
    """A table partitioned by range of a text column whose first ten characters are a day."""

    table: str
    column: str

    @property
    def default(self) -> str:
        return f"{self.table}_default"

    @property
    def undated(self) -> str:
        """The partition of rows with no day, where the table has one (received runs)."""
        return f"{self.table}_undated"

    @property
    def storage(self) -> str:
        return partition_storage(self.table)

    def day_name(self, day: date) -> str:
        return f"{self.table}_p{day:%Y%m%d}"

    def days(self, cur: Cursor | Any) -> dict[date, str]:
        """The day partitions there are, by day."""
        found: dict[date, str] = {}
        named = re.compile(rf"{self.table}_p(\d{{8}})")
        for (name,) in cur.execute(_PARTITIONS.format(table=self.table)).fetchall():
            matched = named.fullmatch(str(name))
            if matched:
                found[datetime.strptime(matched.group(1), "%Y%m%d").date()] = str(name)
        return found


TABLES = tuple(Partitioned(name, column) for name, column in PARTITIONED.items())
RECEIVED, RUNS = TABLES
BY_NAME = {table.table: table for table in TABLES}
TABLE, DEFAULT = RECEIVED.table, RECEIVED.default

# the partitions of a table, by name (the days' and the default)
_PARTITIONS = """
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = to_regclass('{table}')
"""


def day_name(day: date, table: Partitioned = RECEIVED) -> str:
    return table.day_name(day)


def bounds(day: date) -> tuple[str, str]:
    """The keys a day's partition holds: from its date to the next (text, "C" collation)."""
    return day.isoformat(), (day + timedelta(days=1)).isoformat()


def days(cur: Cursor | Any, table: Partitioned = RECEIVED) -> dict[date, str]:
    """The day partitions there are of a table, by day."""
    return table.days(cur)


def ensure(db: Database, now: float, *, ahead: int = AHEAD) -> list[str]:
    """Make the day partitions of today and the ``ahead`` days after it that are missing, of each
    table of :data:`TABLES`; the names made (by this process: another may make some meanwhile)."""
    today = datetime.fromtimestamp(now, UTC).date()
    made = []
    for table in TABLES:
        have = table.days(db.conn)
        for day in (today + timedelta(days=n) for n in range(ahead + 1)):
            if day in have:
                continue
            try:
                done, new = _tried(db, functools.partial(make, day=day, table=table))
            except Exception:
                if day in table.days(db.conn):  # another process made it meanwhile
                    continue
                raise
            if not done:
                break  # the writers held the default partition each try: the next pass makes it
            if new:
                made.append(table.day_name(day))
    return made


def _tried(db: Database, work: Callable[[Any], T]) -> tuple[bool, T | None]:
    """``work`` in a transaction, tried :data:`TRIES` times while a lock is not had within
    :data:`LOCK_TIMEOUT`: whether it ran, and what it gave."""
    for attempt in range(1, TRIES + 1):
        try:
            return True, db.write(work, attempts=1)
        except Exception as exc:
            if not db.engine.busy(exc):
                raise
            if attempt < TRIES:  # the writers held the table longer than a try waits
                time.sleep(RETRY_PAUSE)
    return False, None


def make(cur: Cursor | Any, day: date, table: Partitioned = RECEIVED) -> bool:
    """One day's partition: a table like the partitioned one, the default partition's rows of the
    day moved into it, then attached. A CHECK of its bounds spares ATTACH its scan of the table.
    False when it is there already (another process made it)."""
    name, (low, high), key = table.day_name(day), bounds(day), table.column
    if cur.execute(f"SELECT to_regclass('{name}')").fetchone()[0] is not None:
        return False
    cur.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    cur.execute(f"CREATE TABLE {name} (LIKE {table.table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS){table.storage}")
    cur.execute(f"ALTER TABLE {name} ADD CONSTRAINT {name}_bounds CHECK ({key} >= '{low}' AND {key} < '{high}')")
    # held from here (ATTACH would take it anyway): no row of the day can reach the default
    # partition between the move and the attach, which would then fail on it
    cur.execute(f"LOCK TABLE {table.default} IN ACCESS EXCLUSIVE MODE")
    cur.execute(
        f"WITH moved AS (DELETE FROM {table.default} WHERE {key} >= '{low}' AND {key} < '{high}' RETURNING *) "
        f"INSERT INTO {name} SELECT * FROM moved"
    )
    cur.execute(f"ALTER TABLE {table.table} ATTACH PARTITION {name} FOR VALUES FROM ('{low}') TO ('{high}')")
    cur.execute(f"ALTER TABLE {name} DROP CONSTRAINT {name}_bounds")
    return True


def expired(cur: Cursor | Any, cutoff: str, table: Partitioned = RECEIVED) -> list[str]:
    """The day partitions of a table whose every key is older than ``cutoff`` (a time), oldest first."""
    return [name for day, name in sorted(table.days(cur).items()) if bounds(day)[1] <= cutoff]


def _no_forward_into(cur: Cursor | Any, name: str, going: Expiring) -> bool:
    """Received events: no pending forward points at a row of the partition or after it (those
    rows are kept). The whole of retention's condition on a day wholly past its window, checked
    by two lookups of keys rather than a read of the day's rows."""
    queued = cur.execute("SELECT min(ref) FROM outbox WHERE kind = 'forward'").fetchone()[0]
    if queued is None:
        return True
    newest = cur.execute(f"SELECT max(pk) FROM {name}").fetchone()[0]
    return newest is None or int(newest) < int(queued)


def _every_row_goes(cur: Cursor | Any, name: str, going: Expiring) -> bool:
    """Every row of the partition meets the condition of what goes (received runs: none is still
    the latest run of its job, nor seen since the window began)."""
    statement = f"SELECT EXISTS (SELECT 1 FROM {name} {going.alias} WHERE NOT ({going.condition}))"
    return not cur.execute(statement, going.params).fetchone()[0]


_DROPPABLE = {RECEIVED.table: _no_forward_into}


def drop_expired(db: Database, cutoff: str, going: Expiring, table: Partitioned = RECEIVED) -> int:
    """Drop the day partitions of a table wholly older than ``cutoff`` whose every row goes; the
    rows they held. A partition whose lock could not be had in :data:`TRIES` tries, or that holds
    a row that stays (a pending forward points into it; the latest run of a job), stays (its rows
    go in batches, or stay, as the batch deletes decide)."""
    gone = 0
    for name in expired(db.conn, cutoff, table):
        try:
            gone += _tried(db, functools.partial(_drop, name=name, table=table, going=going))[1] or 0
        except _Kept:
            continue  # rolled back: it stays attached
        except Exception:
            if name not in table.days(db.conn).values():  # another pass (olbridge retention) dropped it
                continue
            raise
    return gone


def _drop(cur: Cursor | Any, name: str, table: Partitioned, going: Expiring) -> int:
    """Check the day may go and count its rows while only that day is held (an insert into it, an
    event of that old day, or of a run of that day, waits; the other days' do not), delete what
    goes with its rows (and keep what is kept of them), then DETACH and DROP, which hold the whole
    table, but only for themselves: all in one transaction."""
    cur.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    if going.fold is not None and going.lock is not None:  # before any other lock (retention.py)
        cur.execute(going.lock)
    cur.execute(f"LOCK TABLE {name} IN SHARE MODE")
    if not _DROPPABLE.get(table.table, _every_row_goes)(cur, name, going):
        raise _Kept(name)
    rows = int(cur.execute(f"SELECT count(*) FROM {name}").fetchone()[0])
    if going.fold is not None:  # what is kept of its rows first (what health reads of its runs)
        going.fold(cur, [row[0] for row in cur.execute(f"SELECT {going.key} FROM {name}").fetchall()])
    for dependent in going.dependents:
        cur.execute(dependent.format(partition=name))
    cur.execute(f"ALTER TABLE {table.table} DETACH PARTITION {name}")
    cur.execute(f"DROP TABLE {name}")
    return rows


class DayPartitions(Maintenance):
    """A receiver's writer's upkeep on PostgreSQL: the days ahead's partitions made every
    :data:`MAKE_EVERY` seconds, on a connection of its own, so that a receiver left running for
    weeks with no retention schedule keeps its events out of the default partition."""

    def __init__(self, engine: Engine, *, every: float = MAKE_EVERY) -> None:
        self.look = every
        self._engine = engine
        self._db: Database | None = None

    def step(self, between_commits: AbstractContextManager[Any]) -> None:
        # not in the writer's turn: the attach waits at most its lock timeout, on its own connection
        try:
            if self._db is None:
                self._db = Database(self._engine)
            ensure(self._db, time.time())
        except Exception as exc:
            if not (self._engine.busy(exc) or self._engine.storage_error(exc)):
                raise
            self.close()  # the next step tries again, on a new connection

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(Exception):
                self._db.close()
            self._db = None


class _Kept(Exception):
    """A partition holding a row that stays: it stays attached (the transaction rolls back)."""


__all__ = [
    "AHEAD",
    "BY_NAME",
    "DEFAULT",
    "RECEIVED",
    "RUNS",
    "TABLE",
    "TABLES",
    "DayPartitions",
    "Partitioned",
    "drop_expired",
    "ensure",
    "expired",
]
