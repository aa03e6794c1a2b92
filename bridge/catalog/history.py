"""The catalog's history read back: asset changes, task runs with their usages and column edges,
declared jobs, each under one :class:`~bridge.catalog.query.HistoryFilter`, and an asset's usages
(all of them, or the latest few with their counts).
What ``export``, ``backfill``, ``history`` and the web view read, through :class:`Catalog`'s
delegates of the same names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bridge.catalog import columns as column_queries
from bridge.catalog import rows, sql, sql_received
from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.query import (
    CHANGE_FILTERS,
    JOB_FILTERS,
    RUN_FILTERS,
    AssetUsages,
    ExternalUsage,
    HistoryFilter,
    RunUsage,
)
from bridge.errors import NotFoundError
from bridge.model import AssetChange, Statistics, StoredDeclaredJob, StoredTaskRun, StoredUsage


def iter_changes(
    conn: Connection | Cursor, filters: HistoryFilter = HistoryFilter(), *, after: tuple[str, int] | None = None
) -> Iterator[AssetChange]:
    """Asset changes in time order (none with a flow filter: they belong to no flow);
    ``after`` = (changed_at text, seq) starts after that change."""
    if filters.flow is not None:
        return
    statement = sql.select_changes(**filters.given(CHANGE_FILTERS), after=after is not None)
    for row in conn.execute(statement, [*filters.params(CHANGE_FILTERS), *(after or ())]):
        yield _change_from_row(row)


def latest_changes(conn: Connection | Cursor, asset_id: str, limit: int) -> list[AssetChange]:
    """An asset's latest ``limit`` changes, in time order (only they read and parsed)."""
    return [_change_from_row(row) for row in reversed(conn.execute(sql.LATEST_CHANGES, (asset_id, limit)).fetchall())]


def get_change(conn: Connection | Cursor, seq: int) -> AssetChange | None:
    row = conn.execute(sql.GET_CHANGE, (seq,)).fetchone()
    return _change_from_row(row) if row else None


def count_task_runs(conn: Connection | Cursor) -> int:
    return int(conn.execute(sql.COUNT_TASK_RUNS).fetchone()[0])


def count_history(conn: Connection | Cursor, filters: HistoryFilter = HistoryFilter()) -> int:
    """About how many events a read of the history with these filters gives (export,
    backfill): a START a task run and an end an ended one, a JobEvent a declared job, and
    without ``flow`` an event an asset change (with ``asset``, the declared jobs naming it,
    read to be counted)."""
    statement = sql.count_task_runs(**filters.given(RUN_FILTERS))
    runs, ended = conn.execute(statement, filters.params(RUN_FILTERS)).fetchone()
    total = int(runs) + int(ended)
    if filters.asset is None:
        statement = sql.count_declared_jobs(**filters.given(JOB_FILTERS))
        total += int(conn.execute(statement, filters.params(JOB_FILTERS)).fetchone()[0])
    else:  # as backfill picks them: by the datasets they name
        total += sum(1 for _ in iter_declared_jobs(conn, filters))
    if filters.flow is None:
        statement = sql.count_changes(**filters.given(CHANGE_FILTERS))
        total += int(conn.execute(statement, filters.params(CHANGE_FILTERS)).fetchone()[0])
    return total


def iter_task_runs(
    connection: Callable[[], Connection | Cursor],
    filters: HistoryFilter = HistoryFilter(),
    *,
    after: tuple[str, int] | None = None,
    page_size: int = 1000,
) -> Iterator[StoredTaskRun]:
    """Task runs in start order, read a page at a time (memory stays flat). An ``asset`` filter
    keeps the runs that read or wrote it; ``after`` = (started_at text, pk) starts after that run.
    Each page is read on the connection ``connection`` gives then: a reader that writes between
    pages (a backfill's checkpoints) may have had its connection replaced meanwhile (a new one
    for new plans, or after the server restarted), the one before closed."""
    statement = sql.select_task_runs(**filters.given(RUN_FILTERS))
    paged = sql.select_task_runs(**filters.given(RUN_FILTERS), after_pk=True)
    base = filters.params(RUN_FILTERS)
    while True:
        conn = connection()
        if after is None:
            page = conn.execute(statement, [*base, page_size]).fetchall()
        else:
            page = conn.execute(paged, [*base, *after, page_size]).fetchall()
        if not page:
            return
        yield from with_usages(conn, page)
        after = (page[-1][7], page[-1][0])
        if len(page) < page_size:
            return


def task_runs_by_pk(conn: Connection | Cursor, pks: Sequence[int]) -> dict[int, StoredTaskRun]:
    """The task runs with these pks (the ones that exist), with their usages."""
    found: dict[int, StoredTaskRun] = {}
    for start in range(0, len(pks), 400):
        chunk = list(pks[start : start + 400])
        page = conn.execute(sql.select_task_runs_by_pk(len(chunk)), chunk).fetchall()
        found.update((run.pk, run) for run in with_usages(conn, page))
    return found


def with_usages(conn: Connection | Cursor, page: list[Any]) -> Iterator[StoredTaskRun]:
    """The task runs of ``page`` (TASK_RUN_COLUMNS rows), with their uses, column edges and
    unwritten outputs, read :data:`USES_AT_ONCE` runs a statement (SQLite binds at most 250,000
    values in one)."""
    for start in range(0, len(page), USES_AT_ONCE):
        yield from _with_usages(conn, page[start : start + USES_AT_ONCE])


USES_AT_ONCE = 1000


def _with_usages(conn: Connection | Cursor, page: list[Any]) -> Iterator[StoredTaskRun]:
    if not page:  # nothing to read (and ``IN ()`` is no SQL PostgreSQL takes)
        return
    usages: dict[int, list[StoredUsage]] = {}
    pks = [r[0] for r in page]
    for pk, asset_id, direction, position, stats in conn.execute(sql.select_usages_of_runs(len(pks)), pks):
        usage = (
            StoredUsage(asset_id, direction, position, Statistics(**json.loads(stats)))
            if stats
            else StoredUsage(asset_id, direction, position)  # the shared empty Statistics
        )
        found = usages.get(pk)
        if found is None:
            usages[pk] = [usage]
        else:
            found.append(usage)
    edges = column_queries.edges_of_runs(conn, pks)
    unwritten: dict[int, list[str]] = {}
    for pk, asset_id in conn.execute(sql.select_unwritten_of_runs(len(pks)), pks):
        unwritten.setdefault(pk, []).append(asset_id)
    for row in page:
        yield rows.task_run_from_row(row, usages.get(row[0], []), edges.get(row[0], ()), unwritten.get(row[0], ()))


def usages_of(conn: Connection | Cursor, asset_id: str) -> list[RunUsage | ExternalUsage]:
    """Every read and write of an asset: by olbridge's task runs (direction, time and the task
    run's key), then by the jobs the receiver heard of. All of them: :func:`latest_usages` reads
    a few, whatever the asset's history."""
    out: list[RunUsage | ExternalUsage] = [_run_usage(row) for row in conn.execute(sql.USAGES_OF_ASSET, (asset_id,))]
    for direction, job_ns, job_name in conn.execute(sql_received.EXTERNAL_USAGES_OF_ASSET, (asset_id,)):
        out.append(ExternalUsage(direction, job_ns, job_name))
    return out


def latest_usages(conn: Connection | Cursor, asset_id: str, limit: int) -> AssetUsages:
    """An asset's latest ``limit`` uses by olbridge's task runs (newest first) and its first
    ``limit`` received jobs (by namespace and name), with how many there are of each: the rows
    shown read through usages_asset backwards and external_usages_asset, the rest counted there."""
    found: list[Sequence[Any]] = []
    for direction in ("input", "output"):
        found += conn.execute(sql.LATEST_USAGES_OF_ASSET, (asset_id, direction, limit)).fetchall()
    found.sort(key=lambda row: (row[1], row[2]), reverse=True)  # used_at, then the task run's key
    jobs = conn.execute(sql_received.FIRST_EXTERNAL_USAGES_OF_ASSET, (asset_id, limit)).fetchall()
    own = dict(conn.execute(sql.COUNT_USAGES_OF_ASSET, (asset_id,)).fetchall())
    theirs = dict(conn.execute(sql_received.COUNT_EXTERNAL_USAGES_OF_ASSET, (asset_id,)).fetchall())
    return AssetUsages(
        runs=tuple(_run_usage(row) for row in found[:limit]),
        jobs=tuple(ExternalUsage(direction, job_ns, job_name) for direction, job_ns, job_name in jobs),
        reads=int(own.get("input", 0)),
        writes=int(own.get("output", 0)),
        job_reads=int(theirs.get("input", 0)),
        job_writes=int(theirs.get("output", 0)),
    )


def _run_usage(row: Sequence[Any]) -> RunUsage:
    """A use by one of olbridge's task runs from its row: direction, time, the task run's columns."""
    direction, used_at, *run = row
    stored = rows.task_run_from_row(run, [])
    key = stored.key
    return RunUsage(
        direction,
        used_at,
        key.flow_namespace,
        key.flow_id,
        key.task_id,
        key.execution_id,
        key.task_run_id,
        stored.state.value,
    )


def declared_job(conn: Connection | Cursor, pk: int) -> StoredDeclaredJob:
    row = conn.execute(sql.GET_DECLARED_JOB, (pk,)).fetchone()
    if row is None:
        raise NotFoundError(f"no declared job with key {pk}")
    return rows.declared_job_from_row(row)


def count_declared_jobs(conn: Connection | Cursor) -> int:
    return int(conn.execute(sql.COUNT_DECLARED_JOBS).fetchone()[0])


def iter_declared_jobs(
    conn: Connection | Cursor, filters: HistoryFilter = HistoryFilter(), *, after: int | None = None
) -> Iterator[StoredDeclaredJob]:
    """Declared jobs in the order they were first declared (by key), those after key ``after``;
    an ``asset`` filter keeps the ones that name it."""
    statement = sql.select_declared_jobs(**filters.given(JOB_FILTERS), after=after is not None)
    params = [*filters.params(JOB_FILTERS), *([] if after is None else [after])]
    for row in conn.execute(statement, params):
        declared = rows.declared_job_from_row(row)
        if filters.keeps(declared):
            yield declared


def _change_from_row(row: Sequence[Any]) -> AssetChange:
    seq, kind, changed_at, snapshot = row
    moment = rows.read_time(changed_at)
    assert moment is not None
    return AssetChange(seq=seq, kind=kind, changed_at=moment, asset=rows.from_snapshot(snapshot))


__all__ = [
    "count_declared_jobs",
    "count_history",
    "count_task_runs",
    "declared_job",
    "get_change",
    "iter_changes",
    "iter_declared_jobs",
    "iter_task_runs",
    "latest_changes",
    "latest_usages",
    "task_runs_by_pk",
    "usages_of",
]
