"""The catalog's writes, each inside a transaction the caller holds: asset updates and task runs
with their usages, placeholders and lineage."""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog import adopt, health, sql, writes_kept
from bridge.catalog.engine import Cursor
from bridge.catalog.health_state import WatchSeen, keep_purged
from bridge.catalog.outbox import ASSET_CHANGE, JOB, RUN_END, RUN_START, RUN_UPDATE, queue_event
from bridge.catalog.rows import asset_from_row, asset_row, declared_job_json, dumps, snapshot, statistics_json
from bridge.errors import CatalogError, NotInCatalog, RunEndedError, ValidationError
from bridge.model import (
    DECLARATION_LATER_FIELDS,
    EXTERNAL,
    JOB_INFO_LATER_FIELDS,
    Asset,
    AssetDeclaration,
    DeclaredFlow,
    Origin,
    Statistics,
    TaskRun,
    TaskState,
    check_task_run,
    format_time,
    merge_metadata,
)
from bridge.model.column_lineage import ColumnEdge, missing_columns, transformations_json
from bridge.model.health import FAILED_RUN


@attrs.frozen
class RecordResult:
    """What recording one task run did."""

    status: str  # "created" | "updated" | "unchanged"
    state: TaskState
    warnings: tuple[str, ...] = ()
    placeholders: tuple[str, ...] = ()  # External placeholders this run created
    written: tuple[str, ...] = ()  # outputs written


@attrs.frozen
class DeclareResult:
    """What declaring one flow did: the tasks whose declared job was created, updated, left as it
    was, or removed (no longer declared), and the key of each declared job now kept."""

    namespace: str
    flow_id: str
    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    pks: tuple[int, ...] = ()  # every declared job of the flow now, in task order
    changed_pks: tuple[int, ...] = ()  # those created or updated: the JobEvents to send
    warnings: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.removed)


def get_asset(cur: Cursor, asset_id: str) -> Asset | None:
    """An asset, read to be written in the caller's transaction (locked where writers run side by side)."""
    row = cur.execute(sql.GET_ASSET_TO_WRITE, (asset_id,)).fetchone()
    return asset_from_row(row) if row else None


# the latest write of an asset by any of olbridge's own runs (kept for every writer, those of runs
# retention deleted too)
_LATEST_RUN_WRITE = "SELECT max(last_write) FROM kept_writers WHERE asset_id = ?"


def _later_run_write(cur: Cursor, current: Asset | None, ended_at: datetime) -> str | None:
    """When a run of olbridge's own wrote ``current`` after ``ended_at``, that write's time (the
    asset then stays as that run left it); None else. Only runs count: an asset set by hand, or a
    placeholder's sightings, are no later version a run's output may not change."""
    if current is None or current.origin is Origin.EXTERNAL:
        return None
    latest = cur.execute(_LATEST_RUN_WRITE, (current.id,)).fetchone()
    if latest is None or latest[0] is None or latest[0] <= format_time(ended_at):
        return None
    return str(latest[0])


def _held_at(cur: Cursor, ids: Iterable[str], moment: datetime) -> list[str]:
    """Of ``ids``, by id, the assets the catalog held at ``moment`` (made by then, not deleted by
    then), decided once, as the run is written: one it did not hold has no record to name it by
    in the run's events (its rule may need metadata a write brings) and no health to fail."""
    held: list[str] = []
    for asset_id in sorted(ids):
        asset = get_asset(cur, asset_id)
        if asset is not None and asset.created_at <= moment and (asset.deleted_at is None or asset.deleted_at > moment):
            held.append(asset_id)
    return held


def _make_failed_outputs(
    cur: Cursor, run: TaskRun, naming: adopt.Naming | None, warnings: list[str], watch: WatchSeen
) -> None:
    """Make each output a failed run was to write that the catalog holds no asset of (none, or
    a placeholder: one it took over, say), given with its type, as the run's success would have
    made it, never written: the run then FAILs it (a dbt model that failed the first time it ran,
    as dbt-ol's events make its dataset; a Kestra asset whose task failed keeps the status
    failed). The checks its declaration carries are not kept: no run that ended well reported
    them."""
    assert run.ended_at is not None
    for decl in run.outputs:
        if decl.type is None:
            continue
        current = _current(cur, decl, naming, warnings, watch)  # the received placeholder of its dataset, taken over
        if current is None or current.type == EXTERNAL:
            made = merged(current, attrs.evolve(decl, assertions=None), origin=run.origin, now=run.ended_at)
            cur.execute(sql.UPSERT_ASSET, asset_row(made))


def merged(current: Asset | None, decl: AssetDeclaration, *, origin: Origin, now: datetime) -> Asset:
    """The asset after ``decl`` is written over ``current``: given fields win, the rest are kept,
    metadata merges (null removes a key), and a write brings a deleted asset back."""
    if current is None:
        assert decl.type is not None
        return Asset(
            id=decl.id,
            type=decl.type,
            namespace=decl.namespace,
            origin=origin,
            created_at=now,
            updated_at=now,
            display_name=decl.display_name,
            description=decl.description,
            metadata=merge_metadata({}, decl.metadata),
            columns=decl.columns,
            assertions=decl.assertions or (),
        )
    return attrs.evolve(
        current,
        type=decl.type or current.type,
        namespace=decl.namespace if decl.namespace is not None else current.namespace,
        origin=origin,
        updated_at=now,
        deleted_at=None,
        display_name=decl.display_name if decl.display_name is not None else current.display_name,
        description=decl.description if decl.description is not None else current.description,
        metadata=merge_metadata(current.metadata, decl.metadata),
        columns=decl.columns or current.columns,
        assertions=decl.assertions if decl.assertions is not None else current.assertions,
    )


def set_asset(
    cur: Cursor,
    decl: AssetDeclaration,
    *,
    now: datetime,
    allow_type_change: bool,
    watch: WatchSeen,
    naming: adopt.Naming | None = None,
) -> Asset:
    """Create or update an asset outside any task run, keeping the change for its DatasetEvent.
    A new asset takes over the received placeholder of the dataset ``naming`` exports it as
    (:mod:`bridge.catalog.adopt`)."""
    current = _current(cur, decl, naming if decl.type is not None else None, watch=watch)  # a new asset has a type
    if current is None and decl.type is None:
        raise ValidationError(
            f"asset {decl.id!r} does not exist yet; give its type", rule="type.required", where="type"
        )
    if (
        current is not None
        and decl.type is not None
        and decl.type != current.type
        and current.type != EXTERNAL
        and not allow_type_change
    ):
        raise ValidationError(
            f"asset {decl.id!r} is a {current.type}; changing its type to {decl.type} needs "
            "allow_type_change (--allow-type-change)",
            rule="type.change",
            value=decl.type,
            where="type",
        )
    origin = current.origin if current is not None and decl.type is None else Origin.DECLARED
    asset = merged(current, decl, origin=origin, now=now)
    if current is not None and attrs.evolve(current, updated_at=now) == asset:
        if _record_test_results(cur, decl, now):  # results as the stored ones are a later report still
            watch.mark(cur, [asset.id])
        return current
    cur.execute(sql.UPSERT_ASSET, asset_row(asset))
    _record_test_results(cur, decl, now)
    seq = cur.execute(sql.INSERT_CHANGE, (asset.id, "update", format_time(now), snapshot(asset))).fetchone()[0]
    queue_event(cur, ASSET_CHANGE, seq, asset.id)
    watch.mark(cur, [asset.id])
    return asset


def _record_test_results(cur: Cursor, decl: AssetDeclaration, now: datetime) -> bool:
    """Keep the test results a declaration carries (``dbt import``'s, of an asset that did not run
    now) as its checks at ``now``, whether or not they change the asset (another reporter's checks
    may have come between): whether it carried any."""
    if decl.assertions is None:
        return False
    health.record_checks(cur, decl.id, now, "dbt import", decl.assertions)
    return True


def _record_hash(run: TaskRun) -> str:
    def default(value: Any) -> Any:
        if isinstance(value, datetime):
            return format_time(value)
        raise TypeError(type(value).__name__)

    def keep(attribute: attrs.Attribute[Any], value: Any) -> bool:
        later = attribute.name in JOB_INFO_LATER_FIELDS or attribute.name in DECLARATION_LATER_FIELDS
        return not (later and value is None)

    record = attrs.asdict(run, filter=keep)
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=default).encode()).hexdigest()


WRITE_FAILED = "asset write failed"  # how a run's warning of an output it could not write begins
# the id such a warning names (as Python's repr writes it, in either quotes)
_FAILED_OUTPUT = re.compile(WRITE_FAILED + r""" \([A-Z]+\): output ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def failed_outputs(warnings: Iterable[str]) -> list[str]:
    """The ids of the outputs a run's warnings say it could not write (:func:`_write_failure`'s):
    assets the run names nowhere else, of any namespace."""
    found = []
    for warning in warnings:
        match = _FAILED_OUTPUT.match(warning)
        if match is not None:
            found.append(str(ast.literal_eval(match.group(1))))
    return found


def _write_failure(current: Asset | None, decl: AssetDeclaration) -> str | None:
    """Why an output cannot be written over the stored asset, or None."""
    if current is None:
        return f"output {decl.id!r} is a new asset and has no type" if decl.type is None else None
    if current.origin is Origin.EXTERNAL or current.type == EXTERNAL:
        return None  # a placeholder becomes the real asset
    if decl.type is not None and decl.type != current.type:
        return f"output {decl.id!r} is a {current.type}; this task writes it as {decl.type}"
    if decl.namespace is not None and current.namespace is not None and decl.namespace != current.namespace:
        return f"output {decl.id!r} belongs to namespace {current.namespace}, not {decl.namespace}"
    return None


def _current(
    cur: Cursor,
    decl: AssetDeclaration,
    naming: adopt.Naming | None,
    said: list[str] | None = None,
    watch: WatchSeen | None = None,
    *,
    apart: bool = True,
) -> Asset | None:
    """The stored asset a declaration names; for one not stored yet, the received placeholder of
    its dataset (by ``naming``) taken over under its id, if there is one. With ``apart`` (a
    declaration that may make the asset: an input, an output with its type), a received
    placeholder of another dataset under the id the declaration's metadata names otherwise is
    moved apart first (:func:`adopt.kept_apart`; said in ``said``, its health marked for
    ``watch``)."""
    current = get_asset(cur, decl.id)
    if naming is not None and apart:
        moved = None
        if current is not None:
            moved = adopt.kept_apart(cur, naming, current, decl.type, decl.metadata)
            if moved is not None:
                current = None
                if watch is not None:
                    watch.mark(cur, [moved.asset_id])
        else:  # moved apart before the write (where receivers write beside it)
            moved = naming.moved.get(decl.id)
        if moved is not None and said is not None:
            said.append(
                f"asset {decl.id!r} was the received dataset {moved.dataset[0]} {moved.dataset[1]}, which its "
                f"metadata does not name: that dataset is kept apart as {moved.asset_id!r}"
            )
    if current is not None or naming is None:
        return current
    taken = adopt.adopted(cur, naming, decl.id, decl.type, decl.metadata)
    # read again where taken over, or where a lock may have waited for another writer's commit
    return get_asset(cur, decl.id) if taken or naming.lock is not None else None


def _read_input(
    cur: Cursor,
    decl: AssetDeclaration,
    started: datetime,
    naming: adopt.Naming | None,
    warnings: list[str],
    watch: WatchSeen,
) -> tuple[bool, str | None]:
    """Record what an input declaration says about its asset: (created a placeholder, warning;
    a received dataset moved apart is said in ``warnings``)."""
    current = _current(cur, decl, naming, warnings, watch)
    if current is None:
        placeholder = merged(None, attrs.evolve(decl, type=EXTERNAL), origin=Origin.EXTERNAL, now=started)
        cur.execute(sql.UPSERT_ASSET, asset_row(placeholder))
        return True, None
    said = (
        merge_metadata(current.metadata, decl.metadata) != dict(current.metadata)
        or decl.description not in (None, current.description)
        or decl.display_name not in (None, current.display_name)
    )
    # a placeholder without columns learns them from a reader that lists them (dbt's catalog.json)
    learns_columns = bool(decl.columns) and not current.columns and current.origin is Origin.EXTERNAL
    if not said and not learns_columns:
        return False, None
    if current.origin is Origin.EXTERNAL:  # a placeholder learns what its readers say of it
        columns = decl.columns if learns_columns else ()
        update = attrs.evolve(decl, type=None, namespace=None, columns=columns, assertions=None, column_lineage=None)
        now = max(started, current.updated_at)
        cur.execute(sql.UPSERT_ASSET, asset_row(merged(current, update, origin=Origin.EXTERNAL, now=now)))
        return False, None
    return False, (
        f"input {decl.id!r}: its metadata, description and display name were not applied, because flows "
        "produce this asset "
        "(declare them on the output)"
    )


ATTEMPTS_AT_MOST = 100  # a task run's attempts a restarting scheduler's import records (write_attempt)


def write_attempt(cur: Cursor, run: TaskRun, *, watch: WatchSeen, naming: adopt.Naming | None = None) -> RecordResult:
    """Record a task run of a scheduler that restarts a task run under its own id (Kestra's
    restart of an execution keeps its execution's and its task runs' ids): a run that ended
    already, given again with another ending (state or end time), is its next attempt, recorded
    as ``<taskRunId>:attempt-N`` (N from 2, as Metaflow's retries are) with a warning saying so.
    An ending one of its attempts holds already changes nothing (whatever else of the record
    differs); a run not ended yet, or one of another task, is recorded as :func:`write_task_run`
    records it (a start that moved refused, another task's refused). Past
    :data:`ATTEMPTS_AT_MOST` attempts, refused."""
    key = run.key
    ending = (run.state.value, format_time(run.ended_at) if run.ended_at is not None else None)
    for attempt in range(1, ATTEMPTS_AT_MOST + 1):
        tried = run
        if attempt > 1:
            tried = attrs.evolve(run, key=attrs.evolve(key, task_run_id=f"{key.task_run_id}:attempt-{attempt}"))
        found = cur.execute(
            _ENDING, (key.flow_namespace, key.flow_id, key.execution_id, tried.key.task_run_id)
        ).fetchone()
        if found is not None and found[2] == key.task_id and TaskState(found[0]).is_terminal:
            if (found[0], found[1]) == ending:  # this attempt's ending, given again
                return RecordResult("unchanged", TaskState(found[0]), ())
            continue  # ended otherwise: the next attempt's
        result = write_task_run(cur, tried, watch=watch, naming=naming)
        if attempt == 1:
            return result
        said = (
            f"task run {key.task_run_id!r} of execution {key.execution_id!r} ended again (restarted): recorded as "
            f"its attempt {attempt}, {tried.key.task_run_id!r}"
        )
        return attrs.evolve(result, warnings=(said, *result.warnings))
    raise RunEndedError(
        f"task run {key.task_run_id!r} of execution {key.execution_id!r} ended {ATTEMPTS_AT_MOST} times already, "
        "each otherwise: no more attempts of it are recorded",
        key,
    )


# a task run's state and end, by its key (write_attempt)
_ENDING = (
    "SELECT state, ended_at, task_id FROM task_runs "
    "WHERE flow_namespace = ? AND flow_id = ? AND execution_id = ? AND task_run_id = ?"
)


def write_task_run(cur: Cursor, run: TaskRun, *, watch: WatchSeen, naming: adopt.Naming | None = None) -> RecordResult:
    """Record a task run: its inputs (External placeholders for unknown ones), the outputs it may
    write under its failure behaviour (those a failed run was to write, new ones made), its usages
    and lineage. An input or output new to the catalog takes over the received placeholder of the
    dataset ``naming`` exports it as (:mod:`bridge.catalog.adopt`)."""
    check_task_run(run)
    key = run.key
    digest = _record_hash(run)
    found = cur.execute(
        sql.FIND_TASK_RUN, (key.flow_namespace, key.flow_id, key.execution_id, key.task_run_id)
    ).fetchone()
    status = "created"
    if found is not None:
        pk, task_id, stored_state, stored_hash, stored_start, stored_warnings = found
        if task_id != key.task_id:
            raise ValidationError(
                f"task run {key.task_run_id!r} of execution {key.execution_id!r} is recorded for task "
                f"{task_id!r}, not {key.task_id!r}",
                rule="taskrun.task",
                value=key.task_id,
                where="taskId",
            )
        if stored_hash == digest:  # what it was told the first time (an output not written), again
            return RecordResult("unchanged", TaskState(stored_state), tuple(json.loads(stored_warnings or "[]")))
        if TaskState(stored_state).is_terminal:
            raise RunEndedError(
                f"task run {key.task_run_id!r} of execution {key.execution_id!r} already ended in {stored_state}; "
                "a task run ends once (record it with another taskRunId)",
                key,
            )
        if stored_start != format_time(run.started_at):
            # its OpenLineage runId is made from its start: moved, its end would go under another
            # id than the START already queued (or sent), and that run would stay RUNNING for ever
            raise RunEndedError(
                f"task run {key.task_run_id!r} of execution {key.execution_id!r} is recorded as started at "
                f"{stored_start}; a run's start does not move (its OpenLineage runId is made from it): record "
                f"its end with that start, or record it again with another taskRunId",
                key,
            )
        cur.execute(sql.DELETE_USAGES_OF_RUN, (pk,))
        cur.execute(sql.DELETE_UNWRITTEN_OF_RUN, (pk,))
        cur.execute(sql.DELETE_LINEAGE_OF_RUN, (pk,))
        cur.execute(sql.DELETE_COLUMN_LINEAGE_OF_RUN, (pk,))
        status = "updated"
    cur.execute(sql.INSERT_EXECUTION, (key.flow_namespace, key.flow_id, key.execution_id, format_time(run.started_at)))

    warnings: list[str] = []
    placeholders: list[str] = []
    used: list[tuple[str, str, int, datetime, Statistics]] = []
    for position, decl in enumerate(run.inputs):
        created, warning = _read_input(cur, decl, run.started_at, naming, warnings, watch)
        if created:
            placeholders.append(decl.id)
        if warning:
            warnings.append(warning)
        used.append((decl.id, "input", position, run.started_at, decl.statistics))

    state = run.state
    written: list[str] = []
    edges: list[ColumnEdge] = []
    if run.outputs and state.writes_outputs:
        assert run.ended_at is not None
        plan: list[tuple[AssetDeclaration, Asset]] = []
        for decl in run.outputs:
            current = _current(cur, decl, naming, warnings, watch, apart=decl.type is not None)
            failure = _write_failure(current, decl)
            if failure:
                warnings.append(f"{WRITE_FAILED} ({run.failure_behavior.value}): {failure}")
            elif (later := _later_run_write(cur, current, run.ended_at)) is not None:
                # a run recorded after a later run's write of its output (an older dbt invocation
                # imported after a newer one, history replayed out of order): the output was
                # written, the asset stays as the later run left it
                assert current is not None
                warnings.append(f"output {decl.id!r} was written by a later run (at {later}): kept as that left it")
                plan.append((decl, current))
            else:
                plan.append((decl, merged(current, decl, origin=run.origin, now=run.ended_at)))
        if len(plan) < len(run.outputs):
            state = run.failure_behavior.apply(state)
        if state.writes_outputs:
            for position, (decl, asset) in enumerate(plan):
                if decl.column_lineage is not None and not decl.columns:  # checked against the stored ones
                    where = f"outputs[{run.outputs.index(decl)}].columnLineage"
                    try:
                        missing_columns(decl.column_lineage, asset.id, [c.name for c in asset.columns], where)
                    except ValidationError as exc:
                        raise exc.at(f"task run {key.task_run_id!r} of execution {key.execution_id!r}") from None
                cur.execute(sql.UPSERT_ASSET, asset_row(asset))
                if decl.assertions is not None:  # its checks, as of this run (asset health)
                    reporter = f"{key.flow_namespace}/{key.flow_id}.{key.task_id}"
                    health.record_checks(cur, asset.id, run.ended_at, reporter, decl.assertions)
                used.append((asset.id, "output", position, run.ended_at, decl.statistics))
                written.append(asset.id)
                if decl.column_lineage is not None:
                    edges.extend(decl.column_lineage.edges(asset.id))
    # the outputs an ended run was to write and did not: its events name them (Marquez makes a
    # job's outputs of its run's datasets). Where its state FAILs them (FAILED, KILLED, CANCELLED,
    # RETRIED) its task is one of their writers for health, and its run FAILs them though the task
    # never wrote them, a new one it gave the type of made first; a SKIPPED run says nothing of
    # them (its events say it was skipped)
    unwritten: list[str] = []
    if run.outputs and not state.writes_outputs:
        warnings.append(f"{len(run.outputs)} output(s) not written: the task run ended {state.value}")
        if run.ended_at is not None and (state.value in FAILED_RUN or state is TaskState.SKIPPED):
            if state.value in FAILED_RUN:
                _make_failed_outputs(cur, run, naming, warnings, watch)
            unwritten = _held_at(cur, {decl.id for decl in run.outputs}, run.ended_at)

    job = dumps(attrs.asdict(run.job))
    times = (format_time(run.started_at), format_time(run.ended_at) if run.ended_at else None)
    if found is None:
        pk = cur.execute(
            sql.INSERT_TASK_RUN,
            (
                key.flow_namespace,
                key.flow_id,
                key.task_id,
                key.execution_id,
                key.task_run_id,
                state.value,
                *times,
                job,
                dumps(warnings),
                run.error,
                digest,
            ),
        ).fetchone()[0]
    else:
        cur.execute(sql.UPDATE_TASK_RUN, (state.value, *times, job, dumps(warnings), run.error, digest, pk))
    for asset_id, direction, position, moment, stats in used:
        cur.execute(sql.INSERT_USAGE, (pk, direction, position, asset_id, format_time(moment), statistics_json(stats)))
    for asset_id in unwritten:
        cur.execute(sql.INSERT_UNWRITTEN, (pk, asset_id))
    if times[1] is not None or found is not None:  # what health reads of it, kept (as it now stands)
        task = (key.flow_namespace, key.flow_id, key.task_id)
        failed = unwritten if state.value in FAILED_RUN else ()
        writes_kept.keep_own(cur, task, pk, times[1], written, failed)
    inputs = [u[0] for u in used if u[1] == "input"]
    for down in written:
        for up in inputs:
            if up != down:
                cur.execute(sql.INSERT_LINEAGE, (up, down, pk))
    for edge in edges:
        cur.execute(
            sql.INSERT_COLUMN_EDGE,
            (
                edge.downstream_id,
                edge.downstream_column or "",
                edge.upstream_id,
                edge.upstream_column,
                transformations_json(edge.transformations),
                pk,
                None,
            ),
        )
    assert pk is not None
    # its inputs' checks, its outputs' writes, and its state for the outputs it was to write; ended,
    # it is its task's latest run, the last run of every asset the task wrote
    ended_task = [(key.flow_namespace, key.flow_id, key.task_id)] if times[1] is not None else []
    watch.mark(cur, [*(u[0] for u in used), *(decl.id for decl in run.outputs)], tasks=ended_task)
    ended = run.ended_at is not None and state.run_event_type != "START"
    if status == "created":
        queue_event(cur, RUN_START, pk)
    if ended:
        queue_event(cur, RUN_END, pk)
    elif status == "updated":  # still running, with new content: a RUNNING event (one START a run)
        queue_event(cur, RUN_UPDATE, pk)
    return RecordResult(status, state, tuple(warnings), tuple(placeholders), tuple(written))


def declare_flow(cur: Cursor, flow: DeclaredFlow, *, now: datetime) -> DeclareResult:
    """Replace a flow's declared lineage: a task declared as before keeps its row and time, a changed
    one is updated in place (same key), a new one is added and one no longer declared is removed."""
    stored = {
        task: (pk, digest)
        for pk, task, digest in cur.execute(sql.DECLARED_JOBS_OF_FLOW, (flow.namespace, flow.flow_id))
    }
    seen: dict[str, str] = {}
    out: dict[str, list[str]] = {"created": [], "updated": [], "unchanged": []}
    pks: list[int] = []
    changed: list[int] = []
    for job in flow.jobs:
        if (job.flow_namespace, job.flow_id) != (flow.namespace, flow.flow_id):
            raise ValidationError(
                f"task {job.task_id!r} is declared for flow {job.flow_namespace}.{job.flow_id}, not "
                f"{flow.namespace}.{flow.flow_id}",
                rule="declare.flow",
            )
        if job.task_id in seen:
            raise ValidationError(f"task {job.task_id!r} is declared twice", rule="declare.task", where=job.task_id)
        text = declared_job_json(job)
        digest = hashlib.sha256(text.encode()).hexdigest()
        seen[job.task_id] = digest
        found = stored.get(job.task_id)
        if found is None:
            pk = cur.execute(
                sql.INSERT_DECLARED_JOB, (flow.namespace, flow.flow_id, job.task_id, text, digest, format_time(now))
            ).fetchone()[0]
            pks.append(pk)
            changed.append(pk)
            out["created"].append(job.task_id)
        elif found[1] != digest:
            cur.execute(sql.UPDATE_DECLARED_JOB, (text, digest, format_time(now), found[0]))
            pks.append(found[0])
            changed.append(found[0])
            out["updated"].append(job.task_id)
        else:
            pks.append(found[0])
            out["unchanged"].append(job.task_id)
    for pk in changed:  # its JobEvent goes out with the change, as run events do
        queue_event(cur, JOB, pk)
    removed = [task for task in stored if task not in seen]
    for task in removed:
        cur.execute(sql.DELETE_DECLARED_JOB, (stored[task][0],))
    return DeclareResult(
        namespace=flow.namespace,
        flow_id=flow.flow_id,
        created=tuple(out["created"]),
        updated=tuple(out["updated"]),
        unchanged=tuple(out["unchanged"]),
        removed=tuple(removed),
        pks=tuple(pks),
        changed_pks=tuple(changed),
        warnings=flow.warnings,
    )


def delete_asset(cur: Cursor, asset_id: str, *, now: datetime, watch: WatchSeen) -> Asset:
    """Soft-delete an asset: kept, marked deleted, its change queued (a DatasetEvent with
    ``lifecycleStateChange: DROP``); an asset deleted already is left as it is."""
    current = get_asset(cur, asset_id)
    if current is None:
        raise NotInCatalog(f"no asset with id {asset_id!r}")
    if current.is_deleted:
        return current
    asset = attrs.evolve(current, deleted_at=now, updated_at=now)
    cur.execute(sql.UPSERT_ASSET, asset_row(asset))
    seq = cur.execute(sql.INSERT_CHANGE, (asset.id, "delete", format_time(now), snapshot(asset))).fetchone()[0]
    queue_event(cur, ASSET_CHANGE, seq, asset.id)
    watch.mark(cur, [asset.id])
    return asset


def purge_assets(cur: Cursor, ids: Sequence[str], *, usages: bool, lineage: bool, watch: WatchSeen) -> dict[str, int]:
    """Hard-delete the assets ``ids`` with their change history, received bindings, identifiers,
    facets, freshness rules, checks and kept writes, and optionally their usages (and the writers
    kept of deleted runs) and lineage: how many assets, usages and lineage edges went. Their kept
    health goes too, but for those FAIL or WARN, kept and marked for the health watch to tell
    their RECOVERED, as for an asset deleted (:func:`bridge.catalog.health_state.keep_purged`)."""
    counts = {"assets": 0, "usages": 0, "lineage": 0}
    for start in range(0, len(ids), 400):
        chunk = list(ids[start : start + 400])
        size = len(chunk)
        still_open = keep_purged(cur, chunk)
        counts["assets"] += cur.execute(sql.delete_in("assets", size, "id"), chunk).rowcount
        for table in (
            "asset_changes",
            "external_datasets",
            "external_identifiers",
            "freshness_rules",
            "asset_checks",
            "health_marks",
            "kept_writes",
        ):
            cur.execute(sql.delete_in(table, size), chunk)
        watch.mark(cur, still_open)
        cur.execute(sql.delete_in("external_facets", size, "owner"), [f"asset:{asset_id}" for asset_id in chunk])
        if usages:
            counts["usages"] += cur.execute(sql.delete_in("usages", size), chunk).rowcount
            cur.execute(sql.delete_in("unwritten_outputs", size), chunk)  # what failed or skipped runs were to write
            cur.execute(sql.delete_in("kept_writers", size), chunk)  # the usages of runs retention deleted
        if lineage:
            ends = ("upstream_id", "downstream_id")
            counts["lineage"] += cur.execute(sql.delete_in("lineage", size, *ends), chunk * 2).rowcount
            cur.execute(sql.delete_in("column_lineage", size, *ends), chunk * 2)
            cur.execute(sql.delete_in("kept_edges", size, *ends), chunk * 2)  # of runs retention deleted
    return counts


def write_each(
    cur: Cursor, runs: Iterable[TaskRun], *, watch: WatchSeen, naming: adopt.Naming | None = None
) -> list[RecordResult | CatalogError]:
    """Write task runs, each in a savepoint of its own: a run the catalog cannot take comes back
    as its CatalogError and leaves no trace, the others are written."""
    results: list[RecordResult | CatalogError] = []
    for run in runs:
        cur.execute("SAVEPOINT task_run")
        try:
            results.append(write_task_run(cur, run, watch=watch, naming=naming))
        except CatalogError as exc:
            cur.execute("ROLLBACK TO task_run")
            results.append(exc)
        cur.execute("RELEASE task_run")
    return results
