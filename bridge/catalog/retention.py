"""Retention: what of the catalog's history goes once it is older than its window, in small batches.

Each kind of history has its own window (:class:`Windows`, seconds; ``None``: kept):

- ``receivedEvents``: received events whose event time is older (an event re-sent after it went is
  taken as a new one: a re-sent event is recognised as long as it is kept);
- ``externalRuns``: received runs last seen before the window, with their facets, never the latest
  run of a job (the one its job's page shows);
- ``columnEdges``: received column edges of runs that are gone (or go in the same pass);
- ``deadLetters``: outbox rows given up on, queued before the window;
- ``deliveryErrors``: the last delivery failure of a stream or backfill, older than the window;
- ``taskRuns``: olbridge's own task runs started before the window, with their usages, unwritten
  outputs, lineage and column edges; never the latest run of a task by start nor by end, nor its
  latest by end that was not skipped (the last run health reads), nor one still running, nor one
  a pending outbox row points at. Kept unless a window is given: they are the history olbridge
  exports.
- ``deliveredOutbox``: delivered outbox rows; the stream deletes a row as it delivers it, so
  there are never any to go (the kind is counted, always 0, so that a config naming it works).
- ``pendingOutbox``: outbox rows still waiting (events no stream delivers: a catalog without an
  OpenLineage backend, or ``stream --alerts-only``'s; alerts whose webhook never took them),
  queued before the window, while no stream worker to a backend is live (asked as a pass starts
  and before each batch: the rows it retries are not given up); never of a key whose first row
  (past its dead alerts) a live claim holds. A run's rows (olbridge's own, or a received one
  forwarded) go together, in one transaction, its dead letter with them, once its last row is
  waiting and that old and an own run has ended (a run's dead letter alone is ``deadLetters``');
  an asset's changes, a job's and an alert's go row by row, oldest first, but not behind a dead
  letter (a dead alert holds none of its asset's later alerts back, and goes by ``deadLetters``
  whatever waits after it). Kept unless a window is given. The task runs and received events
  that waiting rows kept may then go too, in the same pass (``olbridge backfill`` sends what is
  kept to a backend set up later).
- ``checks``: the data-quality checks of an asset (``asset_checks``: a run's, a received event's,
  ``dbt import``'s) reported before the window, never an asset's latest reported by now (the one
  its health reads): an asset's health now is the same after a pass; only its health as of a
  time before the window may change.

What current lineage needs is never touched: placeholders, bindings, a dataset's facets, job
rows, usages and lineage of received jobs, pending outbox rows (but with ``pendingOutbox``),
received events a pending forward points at (the receiver's ``--forward``: every event from the
oldest one queued is kept).

On PostgreSQL received events are partitioned by day of their event time, received runs by the
day of their UUIDv7 run ids (:mod:`bridge.catalog.postgres.partitions`): a pass first makes the
partitions of the days ahead, then drops the partitions wholly older than the window whose every
row goes (what it counts is what they held; a day holding a run that is still the latest of its
job stays, and its other runs go in batches), and deletes the rest in batches. The real pass
deletes at most ``batch`` rows a transaction (on PostgreSQL the rows it takes are locked with
``FOR UPDATE SKIP LOCKED``: a row a writer holds is left for the next pass), with a pause
between, so a writer waits at most one batch.
:func:`count` counts with the very conditions :func:`expire` deletes by, at the same ``now``. On
SQLite a catalog whose ``auto_vacuum`` is ``INCREMENTAL`` (a new one) gives the freed pages back
to the file system (:func:`reclaim`); an older one reuses them for new rows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from bridge.catalog import sql, writes_kept
from bridge.catalog.engine import Connection, Cursor, Database, Expiring
from bridge.catalog.holders import gone, holder_id, process_space
from bridge.catalog.outbox import ALERTS_ONLY_TARGET
from bridge.catalog.sql_outbox import HOLDS_BACK
from bridge.model.times import epoch_text

KINDS = (
    "receivedEvents",
    "externalRuns",
    "columnEdges",
    "deadLetters",
    "deliveryErrors",
    "taskRuns",
    "deliveredOutbox",
    "pendingOutbox",
    "checks",
)
BATCH = 1000
PAUSE = 0.1  # seconds between two batches: how long a writer may wait on retention, at most a batch more
_NONE_QUEUED = 2**62  # above every key: no outbox row points anywhere

Seconds = float | None


@attrs.frozen
class Windows:
    """How long each kind is kept, in seconds (None: forever). ``column_edges`` is a switch: the
    received column edges of runs that are gone go (or not)."""

    received_events: Seconds = None
    external_runs: Seconds = None
    dead_letters: Seconds = None
    delivery_errors: Seconds = None
    task_runs: Seconds = None
    delivered_outbox: Seconds = None
    pending_outbox: Seconds = None
    checks: Seconds = None
    column_edges: bool = False

    @property
    def empty(self) -> bool:
        return not self.column_edges and all(
            getattr(self, f.name) is None for f in attrs.fields(Windows) if f.name != "column_edges"
        )


# --- the conditions, each written once for the count and the delete -------------------------

# (``{staying}``: the condition of the outbox rows ``q`` that stay after the pass, those that
# neither pendingOutbox nor deadLetters deletes; what they point at is kept)
_RECEIVED = f"""
    r.event_time < ?
    AND r.pk < COALESCE((SELECT min(ref) FROM outbox q WHERE q.kind = 'forward' AND {{staying}}), {_NONE_QUEUED})
"""
# a received run, not the latest of its job (by last sighting, then by source)
_RUN = """
    s.run_id IS NOT NULL AND s.last_seen < ? AND EXISTS (
        SELECT 1 FROM external_sources n
        WHERE n.job_namespace = s.job_namespace AND n.job_name = s.job_name AND n.run_id IS NOT NULL
          AND (n.last_seen > s.last_seen OR (n.last_seen = s.last_seen AND n.source > s.source)))
"""
# an asset's check, not its latest reported by now (a later one of the asset, by now, exists: by
# the table's key)
_CHECK = """
    k.reported_at < ? AND EXISTS (
        SELECT 1 FROM asset_checks n
        WHERE n.asset_id = k.asset_id AND n.reported_at > k.reported_at AND n.reported_at <= ?)
"""
# a row waiting, queued before the window (a pass runs it only while no stream worker to a
# backend is live: :func:`_backend_live`), of a run key whose head no live claim holds (give or
# take a minute of the hosts' clocks; only a key's head is ever claimed, or made a dead letter:
# its first row that holds the later ones back, :data:`_KEY_HEAD`, its first row past its dead
# alerts). A run's rows (olbridge's own, or a received run's forwarded events) go together
# (:func:`_whole_runs`), its dead letter with them, once its last row is that old and waiting (a
# dead letter alone is the dead letters' to keep or not) and an own run has ended (its START waits
# for its end); the rows of other keys (an asset's changes, a job's, an alert's) go one by one,
# oldest first, while no dead letter holds them back (the dead letters' own rule keeps it and
# them; a dead alert holds none). Each look into the key is one through its index.
_RUN_KINDS = "('run-start', 'run-update', 'run-end')"
_OF_A_RUN = f"({{o}}.kind IN {_RUN_KINDS} OR substr({{o}}.run_key, 1, 13) = 'received:run:')"
_KEY_HEAD = f"""(
    SELECT m.seq FROM outbox m WHERE m.run_key = {{o}}.run_key AND {HOLDS_BACK.format(p="m")} ORDER BY m.seq LIMIT 1)"""
_PENDING = f"""
    {{o}}.queued_at < ?
    AND NOT EXISTS (
        SELECT 1 FROM outbox h
        WHERE h.seq = {_KEY_HEAD} AND h.claimed_by IS NOT NULL AND COALESCE(h.claim_expires, 0) >= ?)
    AND (
        ({_OF_A_RUN}
         AND (SELECT l.queued_at FROM outbox l WHERE l.run_key = {{o}}.run_key ORDER BY l.seq DESC LIMIT 1) < ?
         AND (SELECT l.state FROM outbox l WHERE l.run_key = {{o}}.run_key ORDER BY l.seq DESC LIMIT 1) = 'pending'
         AND NOT EXISTS (
            SELECT 1 FROM task_runs t WHERE {{o}}.kind IN {_RUN_KINDS} AND t.pk = {{o}}.ref AND t.ended_at IS NULL))
        OR (NOT {_OF_A_RUN} AND {{o}}.state = 'pending'
            AND NOT EXISTS (SELECT 1 FROM outbox h WHERE h.seq = {_KEY_HEAD} AND h.state = 'dead')))
"""
# a dead letter no event of its run waits behind (its run's later events go out after it, once it
# is retried or dropped: deleting it would send a run's end without its start), nor one of an own
# run still running that started inside the window (its end, queued when it ends, would wait
# behind it; one running since before the window is taken as abandoned, a worker killed, which
# would otherwise keep its START, and with it every task run recorded after it, for ever); a dead
# alert holds no later alert of its asset back (sql_outbox.HOLDS_BACK), whatever waits after it
_DEAD = f"""
    {{o}}.state = 'dead' AND {{o}}.queued_at < ?
    AND ({{o}}.kind = 'alert'
         OR NOT EXISTS (SELECT 1 FROM outbox l WHERE l.run_key = {{o}}.run_key AND l.seq > {{o}}.seq))
    AND NOT EXISTS (
        SELECT 1 FROM task_runs t
        WHERE {{o}}.kind IN {_RUN_KINDS} AND t.pk = {{o}}.ref AND t.ended_at IS NULL AND t.started_at >= ?)
"""
_LIVE_BACKEND = "SELECT 1 FROM stream_workers WHERE target <> ? AND heartbeat_at >= ? LIMIT 1"
CLOCKS_APART = 60.0  # seconds: how far apart the hosts' clocks may be (heartbeats, claims)
_ERROR = "e.at < ?"
# an own task run, not the latest of its task by start (its page's), nor by end (health's last
# run of what the task writes), nor, as of any moment in the window, its latest by end: a later
# run of its task (not SKIPPED) ended before the window (so what health reads as of a moment in
# it, the task's last run and its writes, is kept, or folded: writes_kept.fold_own)
_TASK_RUN = f"""
    t.started_at < ?
    AND t.pk < COALESCE(
        (SELECT min(ref) FROM outbox q WHERE q.kind IN ('run-start', 'run-update', 'run-end') AND {{staying}}),
        {_NONE_QUEUED}
    )
    AND EXISTS (
        SELECT 1 FROM task_runs n
        WHERE n.flow_namespace = t.flow_namespace AND n.flow_id = t.flow_id AND n.task_id = t.task_id
          AND (n.started_at > t.started_at OR (n.started_at = t.started_at AND n.pk > t.pk)))
    AND t.ended_at IS NOT NULL AND EXISTS (
        SELECT 1 FROM task_runs n
        WHERE n.flow_namespace = t.flow_namespace AND n.flow_id = t.flow_id AND n.task_id = t.task_id
          AND (n.ended_at > t.ended_at OR (n.ended_at = t.ended_at AND n.pk > t.pk)))
    AND (t.state = 'SKIPPED' OR EXISTS (
        SELECT 1 FROM task_runs n
        WHERE n.flow_namespace = t.flow_namespace AND n.flow_id = t.flow_id AND n.task_id = t.task_id
          AND n.state <> 'SKIPPED' AND n.ended_at < ?
          AND (n.ended_at > t.ended_at OR (n.ended_at = t.ended_at AND n.pk > t.pk))))
"""


def _edge_condition(runs_cutoff: str | None) -> tuple[str, tuple[Any, ...]]:
    """Received column edges of a run that is gone, or goes in this pass (``runs_cutoff``)."""
    received = (
        "substr(c.source, 1, 4) = 'run:' AND NOT EXISTS (SELECT 1 FROM external_sources s WHERE s.source = c.source"
    )
    if runs_cutoff is None:
        return f"{received})", ()
    return f"{received} AND NOT ({_RUN}))", (runs_cutoff,)


@attrs.frozen
class _Kind:
    """One kind: its table (aliased), its key, its condition and that condition's parameters, and
    what goes with each row (statements taking the row's key, ``{}`` where it is compared: ``= ?``
    a row at a time, or the keys of a dropped partition). ``day``: the column that names a row's
    partition with its key (a received run's day, an event's time), given to the delete so that it
    looks in one."""

    name: str
    table: str
    key: str
    condition: str
    params: tuple[Any, ...]
    dependents: tuple[str, ...] = ()
    day: str | None = None
    # what is kept of the rows before they go, in the same transaction (given their keys)
    fold: Callable[[Cursor, list[Any]], None] | None = None
    # the rows that go with a batch's rows, in the same transaction (given their keys; theirs too)
    whole: Callable[[Cursor, list[Any]], list[Any]] | None = None
    order: str | None = None  # the order a batch takes the rows in (None: the engine's)
    # asked in each batch's transaction before it deletes: True stops the kind for this pass
    stop: Callable[[Cursor], bool] | None = None

    def count_statement(self) -> str:
        return f"SELECT count(*) FROM {self.table} WHERE {self.condition}"

    def select_statement(self) -> str:
        columns = self.key if self.day is None else f"{self.key}, {self.day}"
        order = "" if self.order is None else f" ORDER BY {self.order}"
        return f"SELECT {columns} FROM {self.table} WHERE {self.condition}{order} LIMIT ?{sql.SKIP_LOCKED}"

    def delete_statement(self) -> str:
        table = self.table.split()[0]
        by_day = "" if self.day is None else f" AND {self.day.split('.')[1]} = ?"
        return f"DELETE FROM {table} WHERE {self.key.split('.')[1]} = ?{by_day}"

    def expiring(self) -> Expiring:
        """The kind as a partitioned table's expiry takes it: what goes with the rows of a
        partition goes by their keys, all at once."""
        alias = self.table.split()[1]
        column = self.key.split(".")[1]
        dependents = tuple(d.format(f"IN (SELECT {column} FROM {{partition}})") for d in self.dependents)
        return Expiring(alias, self.condition, self.params, dependents, column, self.fold)


def _backend_live(conn: Connection | Cursor, now: float) -> bool:
    """Whether a stream worker to a backend is live (its heartbeat within a minute): it delivers
    the waiting rows, or will once its backend is back, so none of them is given up. A worker of
    alerts alone (``stream --alerts-only``) sends no run's events. Asked as a pass starts (the
    later kinds then read what is left), and again before each of pendingOutbox's batches."""
    return conn.execute(_LIVE_BACKEND, (ALERTS_ONLY_TARGET, now - CLOCKS_APART)).fetchone() is not None


def waiting_kept(conn: Connection | Cursor, windows: Windows, now: float) -> bool:
    """Whether a pass at ``now`` keeps every waiting row although ``pending_outbox`` has a window
    (a stream to a backend is live): a note for the command to say."""
    return windows.pending_outbox is not None and _backend_live(conn, now)


def _kinds(windows: Windows, now: float, *, backend_live: bool = False, predict: bool = True) -> list[_Kind]:
    """The kinds a pass at ``now`` deletes, in order. ``predict``: for a count, whose later kinds'
    conditions leave out the outbox rows the earlier kinds delete (a pass deletes them first)."""

    def cutoff(seconds: Seconds) -> str | None:
        return None if seconds is None else epoch_text(now - seconds)

    kinds: list[_Kind] = []
    # first the outbox's rows that go (waiting, dead): the task runs and received events the
    # others point at are kept; a count leaves out the rows that go, which a pass has deleted
    # by the time it comes to the later kinds (a dry run counts what a pass deletes)
    pending = None if backend_live else cutoff(windows.pending_outbox)
    dead = cutoff(windows.dead_letters)
    going: list[tuple[str, tuple[Any, ...]]] = []  # the outbox rows (``q``) this pass deletes
    if pending is not None:
        before: str = pending
        params: tuple[Any, ...] = (before, now - CLOCKS_APART, before)

        def whole(cur: Cursor, seqs: list[Any]) -> list[Any]:
            return _whole_runs(cur, seqs, before)

        def stop(cur: Cursor) -> bool:  # a stream to a backend started since: it sends the oldest first
            return _backend_live(cur, now)

        condition = _PENDING.format(o="o")
        kinds.append(
            _Kind("pendingOutbox", "outbox o", "o.seq", condition, params, whole=whole, order="o.seq", stop=stop)
        )
        going.append((_PENDING.format(o="q"), params))
    if dead is not None:  # then the dead letters (an own run's may keep task runs, a forward's events)
        condition, params = _DEAD.format(o="o"), (dead, dead)
        if pending is not None:  # a run's dead letter may go with its run: counted there
            condition, params = f"{condition} AND NOT ({_PENDING.format(o='o')})", (dead, dead, *going[0][1])
        kinds.append(_Kind("deadLetters", "outbox o", "o.seq", condition, params))
        going.append((_DEAD.format(o="q"), (dead, dead)))
    staying: tuple[str, tuple[Any, ...]] = ("1 = 1", ())
    if predict and going:
        staying = (
            " AND ".join(f"NOT ({condition})" for condition, _ in going),
            tuple(param for _, params in going for param in params),
        )
    received = cutoff(windows.received_events)
    if received is not None:
        # an event found by its key and its time: on PostgreSQL, in its day's partition alone
        condition = _RECEIVED.format(staying=staying[0])
        kinds.append(
            _Kind("receivedEvents", "received_events r", "r.pk", condition, (received, *staying[1]), day="r.event_time")
        )
    runs = cutoff(windows.external_runs)
    if runs is not None:
        facets = "DELETE FROM external_facets WHERE owner {}"
        kinds.append(
            _Kind(
                "externalRuns",
                "external_sources s",
                "s.source",
                _RUN,
                (runs,),
                (facets,),
                "s.run_day",
                writes_kept.fold_received,
            )
        )
    if windows.column_edges:
        condition, params = _edge_condition(runs)
        kinds.append(_Kind("columnEdges", "column_lineage c", "c.rowid", condition, params))
    errors = cutoff(windows.delivery_errors)
    if errors is not None:
        kinds.append(_Kind("deliveryErrors", "delivery_errors e", "e.source", _ERROR, (errors,)))
    task_runs = cutoff(windows.task_runs)
    if task_runs is not None:
        of_run = tuple(
            f"DELETE FROM {table} WHERE task_run_pk {{}}"
            for table in ("usages", "unwritten_outputs", "lineage", "column_lineage")
        )
        kinds.append(
            _Kind(
                "taskRuns",
                "task_runs t",
                "t.pk",
                _TASK_RUN.format(staying=staying[0]),
                (task_runs, *staying[1], task_runs),
                of_run,
                fold=writes_kept.fold_own,
            )
        )
    checks = cutoff(windows.checks)
    if checks is not None:
        kinds.append(_Kind("checks", "asset_checks k", "k.rowid", _CHECK, (checks, checks)))
    return kinds


_OTHER_ROWS_OF_RUNS = f"""
    SELECT o.seq FROM outbox o
    WHERE o.queued_at < ? AND o.run_key IN (
        SELECT p.run_key FROM outbox p
        WHERE p.seq IN ({{seqs}}) AND (p.kind IN {_RUN_KINDS} OR substr(p.run_key, 1, 13) = 'received:run:'))
"""


def _whole_runs(cur: Cursor, seqs: list[Any], before: str) -> list[Any]:
    """The other rows of the runs a batch of pendingOutbox takes rows of, so that a run's rows go
    in one transaction (a stream never finds its end without its start): every row of such a run
    meets the condition with them (it holds of a run's rows all together); one queued since the
    batch was read (``before``: the window's start) is not taken."""
    found: dict[Any, None] = {}
    for start in range(0, len(seqs), 500):
        chunk = seqs[start : start + 500]
        statement = _OTHER_ROWS_OF_RUNS.format(seqs=", ".join("?" * len(chunk)))
        found.update(dict.fromkeys(row[0] for row in cur.execute(statement, (before, *chunk)).fetchall()))
    return list(found)


def _row_key(kind: _Kind, row_id: str) -> _Kind:
    """column_lineage has no key column, asset_checks a key of two: the engine's own row id
    (:attr:`Engine.row_id`)."""
    alias, column = kind.key.split(".")
    if column == "rowid":
        return attrs.evolve(kind, key=f"{alias}.{row_id}")
    return kind


def count(db: Database, windows: Windows, now: float) -> dict[str, int]:
    """How many rows of each kind a pass at ``now`` deletes (every kind, 0 where none goes), all
    counted on one snapshot of the catalog: beside a pass that deletes meanwhile, the counts are
    those of one moment, not each kind's after the pass went on."""
    counts = dict.fromkeys(KINDS, 0)
    with db.snapshot() as cur:
        for kind in _kinds(windows, now, backend_live=_backend_live(cur, now)):
            counts[kind.name] = int(cur.execute(kind.count_statement(), kind.params).fetchone()[0])
    return counts


def expire(
    db: Database,
    windows: Windows,
    now: float,
    *,
    batch: int = BATCH,
    pause: float = PAUSE,
    between: Callable[[], None] = lambda: None,
    stop: Callable[[], bool] = lambda: False,
) -> dict[str, int]:
    """Delete what has outlived its window at ``now``, kind after kind, ``batch`` rows a
    transaction with ``pause`` seconds between; ``between()`` is called after each batch (a
    lease's renewal, say). The rows deleted of each kind; :class:`Stopped` with them when
    ``stop()`` says so between two batches (a signal)."""
    counts = dict.fromkeys(KINDS, 0)

    def after_batch() -> None:
        between()
        if stop():
            raise Stopped(counts)

    prepare(db, now)
    kinds = _kinds(windows, now, backend_live=_backend_live(db.conn, now), predict=False)
    for kind in (_row_key(k, db.engine.row_id) for k in kinds):
        if stop():
            raise Stopped(counts)
        if kind.table.split()[0] in sql.PARTITIONED:  # whole partitions first, where the engine has them
            table = kind.table.split()[0]
            going = attrs.evolve(kind.expiring(), lock=_fold_lock(db, kind))
            counts[kind.name] += db.engine.drop_expired_partitions(db, table, kind.params[0], going)
            after_batch()
        for deleted in _batches(db, kind, batch):
            counts[kind.name] += deleted
            after_batch()
            if pause and deleted >= batch:  # another batch follows: the writers go first
                time.sleep(pause)
    return counts


class Stopped(Exception):
    """A pass asked to stop (:func:`expire`'s ``stop``) did, between two batches: ``counts``, the
    rows it deleted of each kind before."""

    def __init__(self, counts: dict[str, int]) -> None:
        super().__init__("the retention pass was stopped before its end")
        self.counts = counts


def prepare(db: Database, now: float) -> list[str]:
    """Make the partitions the days ahead need, where the engine partitions received events by
    time (PostgreSQL); the names made. Run by every pass and by ``serve`` as it starts."""
    return db.engine.prepare_partitions(db, now)


def _fold_lock(db: Database, kind: _Kind) -> str | None:
    """The received runs' fold keeps rows under the ids the runs name: a placeholder taken over
    meanwhile (:mod:`bridge.catalog.adopt`) would keep them under its old id. So a transaction
    that folds them takes the takeovers' lock shared before anything else, as a receiver's group
    does (first: a takeover holding it may wait for the rows the transaction would lock). Own
    runs' fold needs none: no placeholder an own run names is taken over."""
    return db.engine.adoption_lock(exclusive=False) if kind.fold is writes_kept.fold_received else None


def _batches(db: Database, kind: _Kind, batch: int) -> Iterator[int]:
    """Each batch's count of deleted rows, until a batch finds fewer than ``batch``."""
    select, delete = kind.select_statement(), kind.delete_statement()

    dependents = [dependent.format("= ?") for dependent in kind.dependents]
    lock = _fold_lock(db, kind)

    def work(cur: Cursor) -> int:
        if kind.stop is not None and kind.stop(cur):
            return 0
        if lock is not None:
            cur.execute(lock)
        rows = [tuple(row) for row in cur.execute(select, (*kind.params, batch)).fetchall()]
        if rows and kind.whole is not None:
            taken = {row[0] for row in rows}
            rows += [(key,) for key in kind.whole(cur, [row[0] for row in rows]) if key not in taken]
        if rows:
            if kind.fold is not None:  # what health reads of them, kept first
                kind.fold(cur, [row[0] for row in rows])
            for dependent in dependents:
                cur.executemany(dependent, [row[:1] for row in rows])
            cur.executemany(delete, rows)
        return len(rows)

    while True:
        deleted = db.write(work)
        if deleted:
            yield deleted
        if deleted < batch:  # (a batch made whole may hold more: then another follows)
            return


def reclaim(db: Database) -> str | None:
    """The catalog's free space given back where its engine can (:meth:`Engine.reclaim`); None
    when done or nothing to do, else why not (a note for stderr)."""
    return db.engine.reclaim(db.conn)


# --- one pass at a time across every process on the catalog ----------------------------------

LEASE_KIND, LEASE_NAME = "retention", "lease"
_INSERT_LEASE = "INSERT INTO positions (kind, name, value, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
_SELECT_LEASE = f"SELECT value FROM positions WHERE kind = ? AND name = ?{sql.LOCK}"
_SWAP_LEASE = "UPDATE positions SET value = ?, updated_at = ? WHERE kind = ? AND name = ? AND value = ?"
_READ_LEASE = "SELECT value, updated_at FROM positions WHERE kind = ? AND name = ?"


@attrs.frozen
class HeldLease:
    """A live lease as a process that could not take it sees it: its ``holder``
    (:func:`holder_id`), when it was last taken or renewed, and when it lapses unless renewed."""

    holder: str
    renewed_at: str
    until: float

    def describe(self) -> str:
        """``pid 123 on host-a, renewed at <time>, lapsing at <time> unless renewed``."""
        host, _, rest = self.holder.partition(":")
        pid = rest.partition(":")[0]
        who = f"pid {pid} on {host}" if pid.isdigit() else f"holder {self.holder}"
        return f"{who}, renewed at {self.renewed_at}, lapsing at {epoch_text(self.until)} unless renewed"


def lease_holder(conn: Connection, now: float, *, kind: str = LEASE_KIND) -> HeldLease | None:
    """Who holds the lease of ``kind`` at ``now`` (None: nobody, or a holder whose lease lapsed)."""
    row = conn.execute(_READ_LEASE, (kind, LEASE_NAME)).fetchone()
    if row is None:
        return None
    found = json.loads(row[0])
    until = float(found.get("until", 0))
    if _free(found, now):
        return None
    return HeldLease(str(found["holder"]), str(row[1]), until)


def _free(found: Mapping[str, Any], now: float) -> bool:
    """Whether a lease (its row's value) may be taken: nobody holds it, its end has passed, or its
    holder is a process of this host that is gone (stopped or killed before it gave it back;
    :mod:`bridge.catalog.holders`). A holder of another host keeps it until it lapses."""
    holder = str(found.get("holder") or "")
    return not holder or float(found.get("until", 0)) <= now or gone(holder, found.get("space"))


def _held(holder: str, now: float, ttl: float) -> str:
    """A lease's value: held by ``holder`` (of this process space) until ``now + ttl``."""
    return json.dumps({"holder": holder, "until": now + ttl, "space": process_space()})


def take_lease(db: Database, holder: str, now: float, ttl: float, *, kind: str = LEASE_KIND) -> bool:
    """Take (or renew) the lease of ``kind`` (retention's; the health watch's is ``health``) for
    ``ttl`` seconds: True when ``holder`` has it, the lease being free, expired, its own, or
    held by a process of this host that is gone; one holder at a time across the catalog's
    processes (a row of ``positions``, compared and swapped in one transaction)."""

    def work(cur: Cursor) -> bool:
        cur.execute(_INSERT_LEASE, (kind, LEASE_NAME, json.dumps({"holder": "", "until": 0}), epoch_text(now)))
        value = cur.execute(_SELECT_LEASE, (kind, LEASE_NAME)).fetchone()[0]
        found = json.loads(value)
        if found.get("holder") != holder and not _free(found, now):
            return False
        new = _held(holder, now, ttl)
        return bool(cur.execute(_SWAP_LEASE, (new, epoch_text(now), kind, LEASE_NAME, value)).rowcount == 1)

    return db.write(work)


def holds_lease(cur: Cursor, holder: str, now: float, *, kind: str = LEASE_KIND) -> bool:
    """True when ``holder`` holds the lease of ``kind`` at ``now``, the row locked until the
    caller's transaction ends (a fence: what that transaction writes, it writes as the holder)."""
    row = cur.execute(_SELECT_LEASE, (kind, LEASE_NAME)).fetchone()
    if row is None:
        return False
    found = json.loads(row[0])
    return bool(found.get("holder") == holder and float(found.get("until", 0)) > now)


def renew_lease(cur: Cursor, holder: str, now: float, ttl: float, *, kind: str = LEASE_KIND) -> str | None:
    """A fence that renews: when ``holder`` is still named in the lease of ``kind``, its end moved
    to ``now + ttl`` in the caller's transaction (the row locked until it ends) and ``"held"``, or
    ``"lapsed"`` when its end had passed meanwhile (nobody took it over: a takeover names another
    holder, but writers that read it lapsed may have left things unmarked); None when another
    process holds it."""
    row = cur.execute(_SELECT_LEASE, (kind, LEASE_NAME)).fetchone()
    if row is None or json.loads(row[0]).get("holder") != holder:
        return None
    lapsed = float(json.loads(row[0]).get("until", 0)) <= now
    new = _held(holder, now, ttl)
    cur.execute(_SWAP_LEASE, (new, epoch_text(now), kind, LEASE_NAME, row[0]))
    return "lapsed" if lapsed else "held"


def release_lease(db: Database, holder: str, *, kind: str = LEASE_KIND) -> None:
    """Give the lease of ``kind`` back if ``holder`` has it."""

    def work(cur: Cursor) -> None:
        row = cur.execute(_SELECT_LEASE, (kind, LEASE_NAME)).fetchone()
        if row is not None and json.loads(row[0]).get("holder") == holder:
            free = json.dumps({"holder": "", "until": 0})
            cur.execute(_SWAP_LEASE, (free, epoch_text(time.time()), kind, LEASE_NAME, row[0]))

    db.write(work)


def windows_of(settings: Mapping[str, Any]) -> Windows:
    """Windows from a mapping of the fields' names (the config's ``[retention]``, parsed)."""
    return Windows(**{k: v for k, v in settings.items() if k in attrs.fields_dict(Windows)})


__all__ = [
    "BATCH",
    "KINDS",
    "PAUSE",
    "HeldLease",
    "Stopped",
    "Windows",
    "count",
    "expire",
    "holder_id",
    "holds_lease",
    "lease_holder",
    "prepare",
    "reclaim",
    "release_lease",
    "renew_lease",
    "take_lease",
    "waiting_kept",
]
