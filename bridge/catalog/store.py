"""The embedded asset catalog on SQLite.

Every write runs in one transaction: a refused input changes nothing. Reads return the records of
:mod:`bridge.model`, never rows.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from bridge.catalog import sql
from bridge.catalog.query import AssetQuery, PurgeResult
from bridge.errors import CatalogError, NotFoundError, ValidationError
from bridge.model import (
    EXTERNAL,
    Assertion,
    Asset,
    AssetChange,
    AssetDeclaration,
    Column,
    FailureBehavior,
    JobInfo,
    Origin,
    Statistics,
    StoredTaskRun,
    StoredUsage,
    TaskRun,
    TaskRunKey,
    TaskState,
    format_time,
    merge_metadata,
    normalize_type,
    parse_time,
)


@attrs.frozen
class RecordResult:
    """What recording one task run did."""

    status: str  # "created" | "updated" | "unchanged"
    state: TaskState
    warnings: tuple[str, ...] = ()
    placeholders: tuple[str, ...] = ()  # External placeholders this run created
    written: tuple[str, ...] = ()  # outputs written


@attrs.frozen
class LineageEdge:
    upstream: str
    downstream: str
    depth: int
    tasks: tuple[str, ...]  # "<flow namespace>/<flow id>.<task id>" of the runs that made the edge


@attrs.frozen
class LineageGraph:
    root: str
    direction: str
    depth: int
    edges: tuple[LineageEdge, ...]
    assets: tuple[Asset, ...]


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _time(value: str | None) -> datetime | None:
    return parse_time(value, "catalog") if value else None


def _columns_json(columns: Sequence[Column]) -> str | None:
    return _dumps([attrs.asdict(c) for c in columns]) if columns else None


def _assertions_json(assertions: Sequence[Assertion]) -> str | None:
    return _dumps([attrs.asdict(a) for a in assertions]) if assertions else None


def _asset_row(asset: Asset) -> tuple[Any, ...]:
    return (
        asset.id,
        asset.type,
        asset.namespace,
        asset.display_name,
        asset.description,
        _dumps(dict(asset.metadata)),
        asset.origin.value,
        format_time(asset.created_at),
        format_time(asset.updated_at),
        format_time(asset.deleted_at) if asset.deleted_at else None,
        _columns_json(asset.columns),
        _assertions_json(asset.assertions),
    )


def _asset_from_row(row: Sequence[Any]) -> Asset:
    created, updated = _time(row[7]), _time(row[8])
    assert created is not None and updated is not None
    return Asset(
        id=row[0],
        type=row[1],
        namespace=row[2],
        display_name=row[3],
        description=row[4],
        metadata=json.loads(row[5]),
        origin=Origin(row[6]),
        created_at=created,
        updated_at=updated,
        deleted_at=_time(row[9]),
        columns=tuple(Column(**c) for c in json.loads(row[10])) if row[10] else (),
        assertions=tuple(Assertion(**a) for a in json.loads(row[11])) if row[11] else (),
    )


def _statistics_json(stats: Statistics) -> str | None:
    return None if stats.is_empty() else _dumps(attrs.asdict(stats))


def _record_hash(run: TaskRun) -> str:
    def default(value: Any) -> Any:
        if isinstance(value, datetime):
            return format_time(value)
        raise TypeError(type(value).__name__)

    return hashlib.sha256(json.dumps(attrs.asdict(run), sort_keys=True, default=default).encode()).hexdigest()


class Catalog:
    """The asset catalog. ``Catalog(path)`` opens (and creates or migrates) a SQLite file;
    ``":memory:"`` gives a private in-memory catalog."""

    def __init__(self, path: str | Path = "olbridge.db") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise CatalogError(f"cannot open catalog {self.path}: folder {parent} does not exist")
        try:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            for pragma in sql.PRAGMAS:
                self._conn.execute(pragma)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise CatalogError(f"cannot open catalog {self.path}: {exc}") from exc

    # --- life cycle ------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > sql.SCHEMA_VERSION:
            raise CatalogError(
                f"catalog {self.path} has schema version {version}, newer than this olbridge knows "
                f"({sql.SCHEMA_VERSION}); upgrade olbridge"
            )
        for number, (_name, script) in enumerate(sql.MIGRATIONS, start=1):
            if number <= version:
                continue
            self._conn.executescript(f"BEGIN IMMEDIATE;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")

    @property
    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction: everything in it lands, or nothing does."""
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        else:
            cur.execute("COMMIT")
        finally:
            cur.close()

    # --- assets ----------------------------------------------------------------------------

    def get_asset(self, asset_id: str) -> Asset | None:
        row = self._conn.execute(sql.GET_ASSET, (asset_id,)).fetchone()
        return _asset_from_row(row) if row else None

    def asset(self, asset_id: str) -> Asset:
        found = self.get_asset(asset_id)
        if found is None:
            raise NotFoundError(f"no asset with id {asset_id!r}")
        return found

    def list_assets(self, query: AssetQuery = AssetQuery()) -> list[Asset]:
        statement = sql.select_assets(
            types=len(query.types),
            namespace=query.namespace is not None,
            include_deleted=query.include_deleted,
            ids=len(query.ids),
            updated_before=query.updated_before is not None,
        )
        params: list[Any] = [*query.ids, *query.types]
        if query.namespace is not None:
            params.append(query.namespace)
        if query.updated_before is not None:
            params.append(format_time(query.updated_before))
        assets = [_asset_from_row(r) for r in self._conn.execute(statement, params)]
        return [a for a in assets if all(f.matches(a.metadata) for f in query.metadata)]

    def count_assets(self) -> int:
        return int(self._conn.execute(sql.COUNT_ASSETS).fetchone()[0])

    def set_asset(self, decl: AssetDeclaration, *, now: datetime, allow_type_change: bool = False) -> Asset:
        """Create or update an asset outside any task run (Kestra's ``Set``). Metadata merges; a key
        sent with null is removed. The change is kept and exported as a DatasetEvent."""
        with self.transaction() as cur:
            return self._set_asset(cur, decl, now=now, allow_type_change=allow_type_change)

    def _set_asset(
        self, cur: sqlite3.Cursor, decl: AssetDeclaration, *, now: datetime, allow_type_change: bool
    ) -> Asset:
        current = self._get(cur, decl.id)
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
        asset = self._merged(current, decl, origin=origin, now=now, keep_namespace=False)
        if current is not None and attrs.evolve(current, updated_at=now) == asset:
            return current
        cur.execute(sql.UPSERT_ASSET, _asset_row(asset))
        cur.execute(sql.INSERT_CHANGE, (asset.id, "update", format_time(now), _snapshot(asset)))
        return asset

    def record(
        self, runs: Iterable[TaskRun], updates: Iterable[AssetDeclaration] = (), *, now: datetime | None = None
    ) -> tuple[list[RecordResult], list[Asset]]:
        """Record task runs, then asset updates made outside them, in one transaction."""
        with self.transaction() as cur:
            results = [self._write_task_run(cur, run) for run in runs]
            assets = []
            for decl in updates:
                assert now is not None, "updates need the time they are made"
                assets.append(self._set_asset(cur, decl, now=now, allow_type_change=False))
            return results, assets

    def delete_asset(self, asset_id: str, *, now: datetime) -> Asset:
        """Soft-delete an asset (a decommissioned resource). It is exported as a DatasetEvent with
        ``lifecycleStateChange: DROP``; a later write brings it back."""
        with self.transaction() as cur:
            current = self._get(cur, asset_id)
            if current is None:
                raise NotFoundError(f"no asset with id {asset_id!r}")
            if current.is_deleted:
                return current
            asset = attrs.evolve(current, deleted_at=now, updated_at=now)
            cur.execute(sql.UPSERT_ASSET, _asset_row(asset))
            cur.execute(sql.INSERT_CHANGE, (asset.id, "delete", format_time(now), _snapshot(asset)))
            return asset

    def purge(self, query: AssetQuery, *, usages: bool = False, lineage: bool = False) -> PurgeResult:
        """Hard-delete the assets the query matches (deleted ones included), with their change
        history, and optionally their usages and lineage records."""
        if query.is_empty:
            raise ValidationError(
                "purge needs at least one filter (namespace, id, type, metadata or end date)", rule="purge.filter"
            )
        query = attrs.evolve(query, include_deleted=True)
        with self.transaction() as cur:
            ids = [a.id for a in self.list_assets(query)]
            counts = {"assets": 0, "usages": 0, "lineage": 0}
            for start in range(0, len(ids), 400):
                chunk = ids[start : start + 400]
                counts["assets"] += cur.execute(sql.delete_assets(len(chunk)), chunk).rowcount
                cur.execute(sql.delete_changes_of(len(chunk)), chunk)
                if usages:
                    counts["usages"] += cur.execute(sql.delete_usages_of(len(chunk)), chunk).rowcount
                if lineage:
                    counts["lineage"] += cur.execute(sql.delete_lineage_of(len(chunk)), chunk * 2).rowcount
            return PurgeResult(ids=tuple(ids), **counts)

    def iter_changes(
        self, *, since: datetime | None = None, until: datetime | None = None, namespace: str | None = None
    ) -> Iterator[AssetChange]:
        statement = sql.select_changes(
            since=since is not None, until=until is not None, namespace=namespace is not None
        )
        params = [format_time(t) for t in (since, until) if t is not None]
        if namespace is not None:
            params.append(namespace)
        for seq, kind, changed_at, snapshot in self._conn.execute(statement, params):
            moment = _time(changed_at)
            assert moment is not None
            yield AssetChange(seq=seq, kind=kind, changed_at=moment, asset=_from_snapshot(snapshot))

    # --- task runs -------------------------------------------------------------------------

    def record_task_run(self, run: TaskRun) -> RecordResult:
        """Record one task run with its usages, in one transaction."""
        with self.transaction() as cur:
            return self._write_task_run(cur, run)

    def record_task_runs(self, runs: Iterable[TaskRun]) -> list[RecordResult]:
        """Record many task runs in one transaction: all land, or none does."""
        with self.transaction() as cur:
            return [self._write_task_run(cur, run) for run in runs]

    def count_task_runs(self) -> int:
        return int(self._conn.execute(sql.COUNT_TASK_RUNS).fetchone()[0])

    def iter_task_runs(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        namespace: str | None = None,
        flow: str | None = None,
        page_size: int = 1000,
    ) -> Iterator[StoredTaskRun]:
        """Task runs in start order, read a page at a time (memory stays flat)."""
        statement = sql.select_task_runs(
            since=since is not None, until=until is not None, namespace=namespace is not None, flow=flow is not None
        )
        paged = sql.select_task_runs(
            since=since is not None,
            until=until is not None,
            namespace=namespace is not None,
            flow=flow is not None,
            after_pk=True,
        )
        base: list[Any] = [format_time(t) for t in (since, until) if t is not None]
        base += [v for v in (namespace, flow) if v is not None]
        after: tuple[str, int] | None = None
        while True:
            if after is None:
                rows = self._conn.execute(statement, [*base, page_size]).fetchall()
            else:
                rows = self._conn.execute(paged, [*base, *after, page_size]).fetchall()
            if not rows:
                return
            usages: dict[int, list[StoredUsage]] = {}
            pks = [r[0] for r in rows]
            for pk, asset_id, direction, position, stats in self._conn.execute(
                sql.select_usages_of_runs(len(pks)), pks
            ):
                usages.setdefault(pk, []).append(
                    StoredUsage(
                        asset_id, direction, position, Statistics(**json.loads(stats)) if stats else Statistics()
                    )
                )
            for row in rows:
                yield _task_run_from_row(row, usages.get(row[0], []))
            after = (rows[-1][7], rows[-1][0])
            if len(rows) < page_size:
                return

    def usages_of(self, asset_id: str) -> list[dict[str, Any]]:
        """Every read and write of an asset: direction, time and the task run's key."""
        out = []
        for row in self._conn.execute(sql.USAGES_OF_ASSET, (asset_id,)):
            direction, used_at, *run = row
            stored = _task_run_from_row(run, [])
            out.append(
                {
                    "direction": direction,
                    "time": used_at,
                    "namespace": stored.key.flow_namespace,
                    "flowId": stored.key.flow_id,
                    "taskId": stored.key.task_id,
                    "executionId": stored.key.execution_id,
                    "taskRunId": stored.key.task_run_id,
                    "state": stored.state.value,
                }
            )
        return out

    # --- lineage ---------------------------------------------------------------------------

    def lineage(self, asset_id: str, *, direction: str = "both", depth: int = 5) -> LineageGraph:
        """The upstream and/or downstream lineage of an asset, to a depth."""
        if direction not in ("upstream", "downstream", "both"):
            raise ValidationError(f"unknown direction {direction!r}", rule="lineage.direction", value=direction)
        if depth < 1:
            raise ValidationError("depth is at least 1", rule="lineage.depth", value=depth)
        self.asset(asset_id)
        rows: list[tuple[str, str, int]] = []
        if direction in ("upstream", "both"):
            rows += self._conn.execute(sql.UPSTREAM, (asset_id, depth)).fetchall()
        if direction in ("downstream", "both"):
            rows += self._conn.execute(sql.DOWNSTREAM, (asset_id, depth)).fetchall()
        edges = []
        for up, down, level in rows:
            tasks = tuple(f"{ns}/{flow}.{task}" for ns, flow, task in self._conn.execute(sql.EDGE_TASKS, (up, down)))
            edges.append(LineageEdge(up, down, level, tasks))
        ids = dict.fromkeys([asset_id, *(e.upstream for e in edges), *(e.downstream for e in edges)])
        assets = tuple(a for a in (self.get_asset(i) for i in ids) if a is not None)
        return LineageGraph(asset_id, direction, depth, tuple(edges), assets)

    # --- internals -------------------------------------------------------------------------

    def _get(self, cur: sqlite3.Cursor, asset_id: str) -> Asset | None:
        row = cur.execute(sql.GET_ASSET, (asset_id,)).fetchone()
        return _asset_from_row(row) if row else None

    @staticmethod
    def _merged(
        current: Asset | None, decl: AssetDeclaration, *, origin: Origin, now: datetime, keep_namespace: bool
    ) -> Asset:
        """The asset after ``decl`` is written over ``current``."""
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
        namespace = decl.namespace if decl.namespace is not None else current.namespace
        if keep_namespace and current.namespace is not None and decl.namespace is None:
            namespace = current.namespace
        return attrs.evolve(
            current,
            type=decl.type or current.type,
            namespace=namespace,
            origin=origin,
            updated_at=now,
            deleted_at=None,
            display_name=decl.display_name if decl.display_name is not None else current.display_name,
            description=decl.description if decl.description is not None else current.description,
            metadata=merge_metadata(current.metadata, decl.metadata),
            columns=decl.columns or current.columns,
            assertions=decl.assertions if decl.assertions is not None else current.assertions,
        )

    def _write_failure(self, current: Asset | None, decl: AssetDeclaration) -> str | None:
        """Why an output cannot be written over the stored asset, or None."""
        if current is None:
            if decl.type is None:
                return f"output {decl.id!r} is a new asset and has no type"
            return None
        if current.origin is Origin.EXTERNAL or current.type == EXTERNAL:
            return None  # a placeholder becomes the real asset
        if decl.type is not None and decl.type != current.type:
            return f"output {decl.id!r} is a {current.type}; this task writes it as {decl.type}"
        if decl.namespace is not None and current.namespace is not None and decl.namespace != current.namespace:
            return f"output {decl.id!r} belongs to namespace {current.namespace}, not {decl.namespace}"
        return None

    def _write_task_run(self, cur: sqlite3.Cursor, run: TaskRun) -> RecordResult:
        key = run.key
        digest = _record_hash(run)
        found = cur.execute(
            sql.FIND_TASK_RUN, (key.flow_namespace, key.flow_id, key.execution_id, key.task_run_id)
        ).fetchone()
        status = "created"
        if found is not None:
            pk, task_id, state, stored_hash = found
            if task_id != key.task_id:
                raise ValidationError(
                    f"task run {key.task_run_id!r} of execution {key.execution_id!r} is recorded for task "
                    f"{task_id!r}, not {key.task_id!r}",
                    rule="taskrun.task",
                    value=key.task_id,
                    where="taskId",
                )
            if stored_hash == digest:
                return RecordResult("unchanged", TaskState(state))
            if TaskState(state).is_terminal:
                raise CatalogError(
                    f"task run {key.task_run_id!r} of execution {key.execution_id!r} already ended in {state}; "
                    "a task run ends once (record it with another taskRunId)"
                )
            cur.execute(sql.DELETE_USAGES_OF_RUN, (pk,))
            cur.execute(sql.DELETE_LINEAGE_OF_RUN, (pk,))
            status = "updated"
        if run.outputs and not run.state.is_terminal:
            raise ValidationError(
                f"outputs are written when a task run ends; state {run.state.value} has not ended",
                rule="taskrun.outputs",
                value=run.state.value,
                where="outputs",
            )
        if run.ended_at is not None and run.ended_at < run.started_at:
            raise ValidationError(
                "a task run cannot end before it starts",
                rule="taskrun.times",
                value=format_time(run.ended_at),
                where="endDate",
            )
        if run.state.is_terminal and run.ended_at is None:
            raise ValidationError(
                f"state {run.state.value} ends the task run, so it needs an end time",
                rule="taskrun.times",
                where="endDate",
            )
        cur.execute(
            sql.INSERT_EXECUTION, (key.flow_namespace, key.flow_id, key.execution_id, format_time(run.started_at))
        )
        warnings: list[str] = []
        placeholders: list[str] = []
        started = run.started_at
        used: list[tuple[str, str, int, datetime, Statistics]] = []
        for position, decl in enumerate(run.inputs):
            current = self._get(cur, decl.id)
            if current is None:
                placeholder = Asset(
                    id=decl.id,
                    type=EXTERNAL,
                    namespace=decl.namespace,
                    origin=Origin.EXTERNAL,
                    created_at=started,
                    updated_at=started,
                    display_name=decl.display_name,
                    description=decl.description,
                    metadata=merge_metadata({}, decl.metadata),
                    columns=decl.columns,
                )
                cur.execute(sql.UPSERT_ASSET, _asset_row(placeholder))
                placeholders.append(decl.id)
            elif current.origin is Origin.EXTERNAL and (decl.metadata or decl.description or decl.display_name):
                merged = attrs.evolve(
                    current,
                    metadata=merge_metadata(current.metadata, decl.metadata),
                    description=decl.description or current.description,
                    display_name=decl.display_name or current.display_name,
                )
                if merged != current:
                    cur.execute(
                        sql.UPSERT_ASSET, _asset_row(attrs.evolve(merged, updated_at=max(started, current.updated_at)))
                    )
            elif merge_metadata(current.metadata, decl.metadata) != dict(sorted(current.metadata.items())) or (
                decl.description not in (None, current.description)
            ):
                warnings.append(
                    f"input {decl.id!r}: its metadata and description were not applied, because flows produce "
                    "this asset (declare them on the output)"
                )
            used.append((decl.id, "input", position, started, decl.statistics))

        state = run.state
        written: list[str] = []
        if run.outputs and not state.writes_outputs:
            warnings.append(f"{len(run.outputs)} output(s) not written: the task run ended {state.value}")
        elif run.outputs:
            ended = run.ended_at
            assert ended is not None
            plan: list[tuple[AssetDeclaration, Asset]] = []
            failures: list[str] = []
            for decl in run.outputs:
                current = self._get(cur, decl.id)
                failure = self._write_failure(current, decl)
                if failure:
                    failures.append(failure)
                else:
                    plan.append((decl, self._merged(current, decl, origin=run.origin, now=ended, keep_namespace=True)))
            if failures:
                state = run.failure_behavior.apply(state)
                warnings += [f"asset write failed ({run.failure_behavior.value}): {f}" for f in failures]
            if state.writes_outputs:
                for position, (decl, asset) in enumerate(plan):
                    cur.execute(sql.UPSERT_ASSET, _asset_row(asset))
                    used.append((asset.id, "output", position, ended, decl.statistics))
                    written.append(asset.id)
            else:
                warnings.append(f"{len(run.outputs)} output(s) not written: the task run ended {state.value}")

        job = _dumps(attrs.asdict(run.job))
        times = (format_time(run.started_at), format_time(run.ended_at) if run.ended_at else None)
        if found is None:
            cur.execute(
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
                    _dumps(warnings),
                    run.error,
                    digest,
                ),
            )
            pk = cur.lastrowid
        else:
            cur.execute(sql.UPDATE_TASK_RUN, (state.value, *times, job, _dumps(warnings), run.error, digest, pk))
        for asset_id, direction, position, moment, stats in used:
            cur.execute(
                sql.INSERT_USAGE, (pk, direction, position, asset_id, format_time(moment), _statistics_json(stats))
            )
        inputs = [u[0] for u in used if u[1] == "input"]
        for down in written:
            for up in inputs:
                if up != down:
                    cur.execute(sql.INSERT_LINEAGE, (up, down, pk))
        return RecordResult(status, state, tuple(warnings), tuple(placeholders), tuple(written))


def _task_run_from_row(row: Sequence[Any], usages: list[StoredUsage]) -> StoredTaskRun:
    started, execution_started = _time(row[7]), _time(row[12])
    assert started is not None and execution_started is not None
    return StoredTaskRun(
        pk=row[0],
        key=TaskRunKey(row[1], row[2], row[3], row[4], row[5]),
        state=TaskState(row[6]),
        started_at=started,
        ended_at=_time(row[8]),
        execution_started_at=execution_started,
        job=JobInfo(**json.loads(row[9])),
        warnings=tuple(json.loads(row[10])),
        error=row[11],
        usages=tuple(usages),
    )


def _snapshot(asset: Asset) -> str:
    record = asset.to_json()
    record["columns"] = [attrs.asdict(c) for c in asset.columns]
    record["assertions"] = [attrs.asdict(a) for a in asset.assertions]
    return _dumps(record)


def _from_snapshot(text: str) -> Asset:
    d = json.loads(text)
    created, updated = _time(d["created"]), _time(d["updated"])
    assert created is not None and updated is not None
    return Asset(
        id=d["id"],
        type=normalize_type(d["type"]),
        namespace=d["namespace"],
        origin=Origin(d["origin"]),
        created_at=created,
        updated_at=updated,
        display_name=d["displayName"],
        description=d["description"],
        metadata=d["metadata"],
        deleted_at=_time(d["deleted"]),
        columns=tuple(Column(**c) for c in d.get("columns", [])),
        assertions=tuple(Assertion(**a) for a in d.get("assertions", [])),
    )


__all__ = ["Catalog", "FailureBehavior", "LineageEdge", "LineageGraph", "RecordResult"]
