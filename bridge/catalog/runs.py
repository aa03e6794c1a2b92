"""Runs, olbridge's own and external ones, as ``olbridge runs list / show`` shows them.

An own run (a task run the catalog recorded) is shown as its OpenLineage events name it: its run
id, its job (``<flowId>.<taskId>`` in the flow's job namespace), the state its last event gives
(RUNNING while it has not ended), the facets those events carry. An external run is shown as the
receiver kept it: the job of its earliest event (and every job, when events named the run under
more than one), the state of its highest-ranked event, its start (the first event's time, marked
inferred, when its START never came), the latest of each of its run's and job's facets and the
warnings of its events.
"""

from __future__ import annotations

import heapq
import itertools
import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from bridge.catalog import history, sql, sql_received
from bridge.catalog.engine import Connection
from bridge.catalog.query import HistoryFilter
from bridge.catalog.rows import read_time
from bridge.catalog.store import Catalog
from bridge.model import StoredTaskRun, TaskRunKey, TaskState, format_time
from bridge.model.received import run_day, run_source, run_sources
from bridge.openlineage.convert import Converter, execution_run_id, task_run_id

OWN = "olbridge"
EXTERNAL = "external"
STATES = ("START", "RUNNING", "COMPLETE", "FAIL", "ABORT")


RunKey = tuple[str, str, str]  # a run's place in a list: (start, origin, own pk or external source)


@attrs.frozen
class RunFilter:
    job: str | None = None  # the job's name
    namespace: str | None = None  # the job's namespace
    state: str | None = None  # an OpenLineage run state (STATES)
    since: datetime | None = None  # started at or after
    until: datetime | None = None  # started before
    origin: str | None = None  # OWN or EXTERNAL; None: both


@attrs.frozen
class RunView:
    run_id: str
    origin: str  # OWN or EXTERNAL
    job_namespace: str
    job_name: str
    state: str | None  # the OpenLineage state: START, RUNNING, COMPLETE, FAIL, ABORT (None: not said)
    started: str | None
    start_inferred: bool  # the start is the first event's time: no START came
    ended: str | None
    inputs: tuple[str, ...]  # asset ids
    outputs: tuple[str, ...]
    producer: str
    parent_run_id: str | None = None
    warnings: tuple[str, ...] = ()
    jobs: tuple[tuple[str, str], ...] = ()  # every job its events named, when more than one
    run_facets: dict[str, Any] = attrs.field(factory=dict)
    job_facets: dict[str, Any] = attrs.field(factory=dict)
    task_run: dict[str, Any] | None = None  # an own run's key, task state and error
    # an own run that ended FAILED (KILLED, CANCELLED, RETRIED, SKIPPED): the outputs it was to
    # write and did not, of those the catalog held then
    unwritten: tuple[str, ...] = ()
    # an external run's key as kept (run_source of its id, but for a run split in two by the
    # case of its id before schema 34, whose half received in capitals keeps its own)
    source: str | None = None

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.started or "", self.run_id)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "origin": self.origin,
            "job": {"namespace": self.job_namespace, "name": self.job_name},
            "state": self.state,
            "started": self.started,
            "startInferred": self.start_inferred,
            "ended": self.ended,
            "parentRunId": self.parent_run_id,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "producer": self.producer,
            "facets": {"run": self.run_facets, "job": self.job_facets},
            "warnings": list(self.warnings),
        }
        if self.jobs:
            out["conflictingJobs"] = [{"namespace": ns, "name": name} for ns, name in self.jobs]
        if self.task_run is not None:
            out["taskRun"] = self.task_run
        if self.unwritten:
            out["unwrittenOutputs"] = list(self.unwritten)
        return out


def own_conditions(prefix: str, filters: RunFilter) -> tuple[list[str], list[Any]] | None:
    """The conditions on ``task_runs t`` (and their parameters) of the own runs the filters
    select, each tested by the database: the job (``<flowId>.<taskId>``), the namespace (the
    flow's, ``prefix`` put before it), the state its events give, the start; None: no own run
    (a namespace without the prefix)."""
    where: list[str] = []
    params: list[Any] = []
    if filters.namespace is not None:
        if not filters.namespace.startswith(prefix):
            return None
        where.append("t.flow_namespace = ?")
        params.append(filters.namespace[len(prefix) :])
    if filters.job is not None:
        where.append("t.flow_id || '.' || t.task_id = ?")
        params.append(filters.job)
    if filters.state == "RUNNING":
        where.append("t.ended_at IS NULL")
    elif filters.state is not None:
        states = [s.value for s in TaskState if s.run_event_type == filters.state] or [""]
        where.append(f"t.ended_at IS NOT NULL AND t.state IN ({', '.join('?' * len(states))})")
        params += states
    if filters.until is not None:
        where.append("t.started_at < ?")
        params.append(format_time(filters.until))
    if filters.since is not None:
        where.append("t.started_at >= ?")
        params.append(format_time(filters.since))
    return where, params


def own_newest(where: Sequence[str]) -> str:
    """The own runs the conditions select, newest first (by start, then key), the first ``?``:
    chosen from task_runs alone, by its start index, then joined (the planner, PostgreSQL's
    misjudging the three-column join, never joins every run to sort them)."""
    return (
        f"SELECT {sql.TASK_RUN_COLUMNS} FROM (SELECT * FROM task_runs t WHERE {' AND '.join(where) or '1 = 1'} "
        "ORDER BY t.started_at DESC, t.pk DESC LIMIT ?) t JOIN executions e ON e.flow_namespace = t.flow_namespace "
        "AND e.flow_id = t.flow_id AND e.execution_id = t.execution_id ORDER BY t.started_at DESC, t.pk DESC"
    )


def own_key(view: RunView, pk: int) -> RunKey:
    return (view.started or "", OWN, f"{pk:020d}")


def external_key(view: RunView) -> RunKey:
    return (view.started or "", EXTERNAL, view.source or run_source(view.run_id))


class Runs:
    """Own and external runs of one catalog, named as ``converter`` names its events."""

    def __init__(self, catalog: Catalog, converter: Converter) -> None:
        self.catalog = catalog
        self.converter = converter

    @property
    def _conn(self) -> Connection:
        return self.catalog._conn

    # --- external ----------------------------------------------------------------------------

    def _facets(self, owners: Sequence[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {owner: {} for owner in owners}
        unique = list(found)
        for start in range(0, len(unique), 400):
            chunk = unique[start : start + 400]
            for owner, key, facet in self._conn.execute(sql_received.facets_of(len(chunk)), chunk):
                found[owner][key] = json.loads(facet)
        return found

    def _external(self, statement: str, params: Sequence[Any], *, facets: bool = True) -> list[RunView]:
        rows = self._conn.execute(statement, params).fetchall()
        out = []
        for row in rows:
            source, job_ns, job_name, run_id, parent, state, started, ended, first, _last = row[:10]
            producer, inputs, outputs, jobs, warnings = row[10:]
            out.append(
                RunView(
                    run_id=run_id,
                    origin=EXTERNAL,
                    job_namespace=job_ns,
                    job_name=job_name,
                    state=state,
                    started=started or first,
                    start_inferred=started is None,
                    ended=ended,
                    inputs=tuple(json.loads(inputs)),
                    outputs=tuple(json.loads(outputs)),
                    producer=producer,
                    parent_run_id=parent,
                    warnings=tuple(json.loads(warnings)),
                    jobs=tuple((ns, name) for ns, name in json.loads(jobs)) if jobs else (),
                    source=source,
                )
            )
        return self._with_facets(out) if facets else out

    def _with_facets(self, views: Sequence[RunView]) -> list[RunView]:
        """External runs' views with the latest of each of their run's and job's facets, read at once."""
        found = self._facets([owner for view in views for owner in _owners(view)])
        return [
            attrs.evolve(view, run_facets=found[run_owner], job_facets=found[job_owner])
            for view, (run_owner, job_owner) in zip(views, map(_owners, views), strict=True)
        ]

    def external(self, filters: RunFilter = RunFilter(), *, facets: bool = True) -> list[RunView]:
        statement = sql_received.select_external_runs(
            job=filters.job is not None,
            namespace=filters.namespace is not None,
            state=filters.state is not None,
            since=filters.since is not None,
            until=filters.until is not None,
        )
        params: list[Any] = [v for v in (filters.job, filters.namespace, filters.state) if v is not None]
        params += [format_time(t) for t in (filters.since, filters.until) if t is not None]
        return self._external(statement, params, facets=facets)

    # --- own ---------------------------------------------------------------------------------

    def _own(self, run: StoredTaskRun, *, facets: bool = True) -> RunView:
        converter = self.converter
        key = run.key
        state = run.state.run_event_type if run.ended_at is not None else "RUNNING"
        run_facets, job_facets = converter.run_facets(run) if facets else ({}, {})
        return RunView(
            run_id=task_run_id(key, run.started_at),
            origin=OWN,
            job_namespace=converter.job_namespace(key),
            job_name=f"{key.flow_id}.{key.task_id}",
            state=state,
            started=format_time(run.started_at),
            start_inferred=False,
            ended=format_time(run.ended_at) if run.ended_at is not None else None,
            inputs=tuple(u.asset_id for u in run.inputs),
            outputs=tuple(u.asset_id for u in run.outputs),
            unwritten=run.unwritten,
            producer=converter.options.producer,
            parent_run_id=execution_run_id(key, run.execution_started_at),
            warnings=run.warnings,
            run_facets=run_facets,
            job_facets=job_facets,
            task_run={
                "flowNamespace": key.flow_namespace,
                "flowId": key.flow_id,
                "taskId": key.task_id,
                "executionId": key.execution_id,
                "taskRunId": key.task_run_id,
                "taskState": run.state.value,
                "error": run.error,
            },
        )

    def own(self, filters: RunFilter = RunFilter()) -> Iterator[RunView]:
        for view, _ in self._own_runs(filters, facets=True):
            yield view

    def _own_runs(self, filters: RunFilter, *, facets: bool) -> Iterator[tuple[RunView, StoredTaskRun]]:
        prefix = self.converter.options.job_namespace_prefix
        flow_namespace = None
        if filters.namespace is not None:
            if not filters.namespace.startswith(prefix):
                return
            flow_namespace = filters.namespace[len(prefix) :]
        runs = self.catalog.iter_task_runs(
            HistoryFilter(since=filters.since, until=filters.until, namespace=flow_namespace)
        )
        for run in runs:
            if filters.job is not None and f"{run.key.flow_id}.{run.key.task_id}" != filters.job:
                continue
            view = self._own(run, facets=facets)
            if filters.state is None or view.state == filters.state:
                yield view, run

    # --- both --------------------------------------------------------------------------------

    def _candidates(self, filters: RunFilter) -> Iterator[tuple[RunView, StoredTaskRun | None]]:
        """Every run the filters select, as a view without facets (and, for an own run, its task run)."""
        external = self.external(filters, facets=False) if filters.origin in (None, EXTERNAL) else []
        own = self._own_runs(filters, facets=False) if filters.origin in (None, OWN) else iter(())
        return itertools.chain(((view, None) for view in external), own)

    def _rendered(self, chosen: Sequence[tuple[RunView, StoredTaskRun | None]]) -> list[RunView]:
        """The chosen runs' views with their facets, read and rendered for these runs only."""
        external = iter(self._with_facets([view for view, run in chosen if run is None]))
        return [self._own(run) if run is not None else next(external) for _, run in chosen]

    def list(self, filters: RunFilter = RunFilter(), *, limit: int | None = None) -> list[RunView]:
        """The runs the filters select, by start (then run id); the first ``limit`` of them. The
        views are made without their facets, and the facets read and rendered only for the runs
        kept: a catalog of a million runs lists its first thousand without rendering the rest."""
        candidates = self._candidates(filters)
        chosen: list[tuple[RunView, StoredTaskRun | None]]
        if limit is None:
            chosen = sorted(candidates, key=_by_start)
        else:  # the own runs streamed: no more than ``limit`` of them held at once
            chosen = heapq.nsmallest(limit, candidates, key=_by_start)
        return self._rendered(chosen)

    def page(self, filters: RunFilter = RunFilter(), *, limit: int, offset: int = 0) -> RunPage:
        """The runs the filters select, newest first (by start, then olbridge's before external
        ones, then by key), as the web view lists them: ``limit`` of them after the first
        ``offset``, and how many the filters select in all (counted by the database). Each side
        reads its newest ``offset + limit`` runs by its start index, the filters tested by the
        database, and the facets are rendered only for the runs of the page: a page costs what
        the pages up to it hold, not the catalog's history."""
        wanted, total = min(offset + limit, sql.INTEGER_MOST), 0  # a LIMIT past a bigint is refused
        # each run's key, and its own row (its uses read for the page's alone) or its view
        found: list[tuple[RunKey, Sequence[Any] | None, RunView | None]] = []
        conditions = own_conditions(self.converter.options.job_namespace_prefix, filters)
        if filters.origin in (None, OWN) and conditions is not None:
            where, params = conditions
            clause = " AND ".join(where) or "1 = 1"
            total += int(self._conn.execute(f"SELECT count(*) FROM task_runs t WHERE {clause}", params).fetchone()[0])
            for row in self._conn.execute(own_newest(where), [*params, wanted]).fetchall():
                started = read_time(row[7])
                found.append(((format_time(started) if started else "", OWN, f"{row[0]:020d}"), row, None))
        if filters.origin in (None, EXTERNAL):
            flags = {
                "job": filters.job is not None,
                "namespace": filters.namespace is not None,
                "state": filters.state is not None,
                "since": filters.since is not None,
                "until": filters.until is not None,
            }
            params = [v for v in (filters.job, filters.namespace, filters.state) if v is not None]
            params += [format_time(t) for t in (filters.since, filters.until) if t is not None]
            total += int(self._conn.execute(sql_received.count_external_runs(**flags), params).fetchone()[0])
            newest = self._external(
                sql_received.select_external_runs(newest=True, **flags), [*params, wanted], facets=False
            )
            found += [(external_key(view), None, view) for view in newest]
        chosen = heapq.nlargest(wanted, found, key=lambda item: item[0])[offset:]
        own = {run.pk: run for run in history.with_usages(self._conn, [row for _, row, _ in chosen if row is not None])}
        shown: list[tuple[RunView, StoredTaskRun | None]] = []
        for _, row, view in chosen:
            if row is not None:
                run = own[row[0]]
                shown.append((self._own(run, facets=False), run))
            else:
                assert view is not None
                shown.append((view, None))
        return RunPage(runs=self._rendered(shown), total=total, offset=offset)

    def get(self, run_id: str) -> RunView | None:
        """The run with this OpenLineage run id: an external one, or one of olbridge's (whose run
        ids are UUIDv7 made from the start time, so only the task runs started in that
        millisecond are looked at)."""
        for source in run_sources(run_id):
            found = self._external(sql_received.select_external_runs(source=True), [source, run_day(source)])
            if found:
                return found[0]
        try:
            parsed = uuid.UUID(run_id)
        except ValueError:
            return None
        if parsed.version != 7 or str(parsed) != run_id:
            return None
        start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=parsed.int >> 80)
        # each run's key alone (its id is made of it), the run itself read once found: a moment
        # many runs started at (a history recorded to the second) costs a few µs a run
        moment = (format_time(start), format_time(start + timedelta(milliseconds=1)))
        for pk, *key, started in self._conn.execute(_STARTED_IN, moment):
            began = read_time(started)
            if began is not None and task_run_id(TaskRunKey(*key), began) == run_id:
                found_run = self.catalog.task_runs_by_pk([pk]).get(pk)
                return self._own(found_run) if found_run is not None else None
        return None


# the keys of the task runs started within a moment, by their start's index
_STARTED_IN = (
    "SELECT pk, flow_namespace, flow_id, task_id, execution_id, task_run_id, started_at FROM task_runs "
    "WHERE started_at >= ? AND started_at < ?"
)


@attrs.frozen
class RunPage:
    """A page of :meth:`Runs.page`: its runs, how many the filters select in all, and how many
    newer ones come before it."""

    runs: list[RunView]
    total: int
    offset: int


def _by_start(pair: tuple[RunView, StoredTaskRun | None]) -> tuple[str, str]:
    return pair[0].sort_key


def _owners(view: RunView) -> tuple[str, str]:
    """Whose facets an external run's view shows: its run's and its job's (as the receiver keeps them)."""
    return view.source or run_source(view.run_id), f"job:{view.job_namespace}/{view.job_name}"


__all__ = [
    "EXTERNAL",
    "OWN",
    "STATES",
    "RunFilter",
    "RunKey",
    "RunPage",
    "RunView",
    "Runs",
    "external_key",
    "own_conditions",
    "own_key",
    "own_newest",
]
