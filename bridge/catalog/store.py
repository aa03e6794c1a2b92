"""The embedded asset catalog on SQLite.

Every write runs in one transaction: a refused input changes nothing. Reads return the records of
:mod:`bridge.model`, never rows. The SQL is in :mod:`bridge.catalog.sql`, the row conversions in
:mod:`bridge.catalog.rows` and the writes in :mod:`bridge.catalog.writes`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from bridge.catalog import columns as column_queries
from bridge.catalog import external, rows, sql, writes
from bridge.catalog.columns import ColumnLineageGraph, StoredColumnEdge
from bridge.catalog.external import IngestResult
from bridge.catalog.outbox import ASSET_CHANGE, Outbox, queue_event
from bridge.catalog.query import AssetQuery, PurgeResult
from bridge.catalog.workers import Workers
from bridge.catalog.writes import DeclareResult, RecordResult
from bridge.errors import BridgeError, CatalogError, NotFoundError, ValidationError
from bridge.mapping.resolver import Resolver
from bridge.model import (
    Asset,
    AssetChange,
    AssetDeclaration,
    DeclaredFlow,
    Identifier,
    Origin,
    Statistics,
    StoredDeclaredJob,
    StoredTaskRun,
    StoredUsage,
    TaskRun,
    format_time,
)
from bridge.model.received import IncomingEvent


@attrs.frozen
class LineageEdge:
    upstream: str
    downstream: str
    depth: int
    # "<flow namespace>/<flow id>.<task id>" of the runs that made the edge, and
    # "<job namespace>/<job name> (external)" of the external jobs
    tasks: tuple[str, ...]


@attrs.frozen
class LineageGraph:
    root: str
    direction: str
    depth: int
    edges: tuple[LineageEdge, ...]
    assets: tuple[Asset, ...]
    as_of: datetime | None = None  # the graph as the catalog knew it then (None: now)


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
            raise storage_error(exc, self.path) or CatalogError(f"cannot open catalog {self.path}: {exc}") from exc

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

    def check_writable(self) -> None:
        """Raise a CatalogError unless this process can write the catalog (the file, its folder for
        the journal, no other process holding it locked). Nothing is changed."""
        cur = self._conn.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")  # the write lock
            try:
                cur.execute(f"PRAGMA user_version = {self.schema_version}")  # a write of what is there
            finally:
                cur.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise storage_error(exc, self.path) or CatalogError(f"catalog {self.path}: {exc}") from exc
        finally:
            cur.close()

    @property
    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def pragma(self, setting: str) -> None:
        """Set a SQLite pragma on this connection (``"synchronous = FULL"``)."""
        self._conn.execute(f"PRAGMA {setting}")

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

    def read_one(self, statement: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of a read, outside any write transaction (it takes no write lock)."""
        row = self._conn.execute(statement, params).fetchone()
        return tuple(row) if row is not None else None

    # --- assets ----------------------------------------------------------------------------

    def get_asset(self, asset_id: str) -> Asset | None:
        """An asset's record; an External placeholder's with what producers said of it (the
        latest of each dataset facet, every symlink identifier)."""
        row = self._conn.execute(sql.GET_ASSET, (asset_id,)).fetchone()
        if not row:
            return None
        asset = rows.asset_from_row(row)
        if asset.origin is not Origin.EXTERNAL:
            return asset
        facets = {
            key: json.loads(text) for _, key, text in self._conn.execute(sql.facets_of(1), (f"asset:{asset_id}",))
        }
        identifiers = tuple(Identifier(*row) for row in self._conn.execute(sql.IDENTIFIERS_OF_ASSET, (asset_id,)))
        if not facets and not identifiers:
            return asset
        return attrs.evolve(asset, received_facets=facets, identifiers=identifiers)

    def find_asset_id(self, text: str) -> str:
        """The id of the asset ``text`` names: its id, or a dataset name it was received under
        (``<olNamespace>/<olName>``, or a symlink identifier's ``<namespace>/<name>``). A
        NotFoundError when none does; a ValidationError naming them when several do."""
        if self._conn.execute(sql.GET_ASSET, (text,)).fetchone():
            return text
        found: dict[str, None] = {}
        start = text.find("/")
        while start != -1:
            namespace, name = text[:start], text[start + 1 :]
            if namespace and name:
                params = (namespace, name, namespace, name)
                found.update((asset_id, None) for (asset_id,) in self._conn.execute(sql.ASSETS_NAMED, params))
            start = text.find("/", start + 1)
        existing = [asset_id for asset_id in found if self._conn.execute(sql.GET_ASSET, (asset_id,)).fetchone()]
        if not existing:
            raise NotFoundError(f"no asset with id {text!r}, nor one received under that name or symlink")
        if len(existing) > 1:
            raise ValidationError(
                f"{text!r} names several assets: {', '.join(sorted(existing))}; give one by its id",
                rule="asset.ambiguous",
                value=text,
            )
        return existing[0]

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
        assets = [rows.asset_from_row(r) for r in self._conn.execute(statement, params)]
        return [a for a in assets if all(f.matches(a.metadata) for f in query.metadata)]

    def count_assets(self) -> int:
        return int(self._conn.execute(sql.COUNT_ASSETS).fetchone()[0])

    def set_asset(self, decl: AssetDeclaration, *, now: datetime, allow_type_change: bool = False) -> Asset:
        """Create or update an asset outside any task run (Kestra's ``Set``). Metadata merges; a key
        sent with null is removed. The change is kept and exported as a DatasetEvent."""
        with self.transaction() as cur:
            return writes.set_asset(cur, decl, now=now, allow_type_change=allow_type_change)

    def record(
        self, runs: Iterable[TaskRun], updates: Iterable[AssetDeclaration] = (), *, now: datetime | None = None
    ) -> tuple[list[RecordResult], list[Asset]]:
        """Record task runs, then asset updates made outside them, in one transaction."""
        with self.transaction() as cur:
            results = [writes.write_task_run(cur, run) for run in runs]
            assets = []
            for decl in updates:
                assert now is not None, "updates need the time they are made"
                assets.append(writes.set_asset(cur, decl, now=now, allow_type_change=False))
            return results, assets

    def delete_asset(self, asset_id: str, *, now: datetime) -> Asset:
        """Soft-delete an asset (a decommissioned resource). It is exported as a DatasetEvent with
        ``lifecycleStateChange: DROP``; a later write brings it back."""
        with self.transaction() as cur:
            current = writes.get_asset(cur, asset_id)
            if current is None:
                raise NotFoundError(f"no asset with id {asset_id!r}")
            if current.is_deleted:
                return current
            asset = attrs.evolve(current, deleted_at=now, updated_at=now)
            cur.execute(sql.UPSERT_ASSET, rows.asset_row(asset))
            cur.execute(sql.INSERT_CHANGE, (asset.id, "delete", format_time(now), rows.snapshot(asset)))
            assert cur.lastrowid is not None
            queue_event(cur, ASSET_CHANGE, cur.lastrowid, asset.id)
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
                cur.execute(sql.delete_bindings_of(len(chunk)), chunk)
                cur.execute(sql.delete_identifiers_of(len(chunk)), chunk)
                cur.execute(sql.delete_facets_of(len(chunk)), [f"asset:{asset_id}" for asset_id in chunk])
                if usages:
                    counts["usages"] += cur.execute(sql.delete_usages_of(len(chunk)), chunk).rowcount
                if lineage:
                    counts["lineage"] += cur.execute(sql.delete_lineage_of(len(chunk)), chunk * 2).rowcount
                    cur.execute(sql.delete_column_lineage_of(len(chunk)), chunk * 2)
            return PurgeResult(ids=tuple(ids), **counts)

    def iter_changes(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        namespace: str | None = None,
        asset: str | None = None,
        after: tuple[str, int] | None = None,
    ) -> Iterator[AssetChange]:
        """Asset changes in time order; ``after`` = (changed_at text, seq) starts after that change."""
        statement = sql.select_changes(
            since=since is not None,
            until=until is not None,
            namespace=namespace is not None,
            asset=asset is not None,
            after=after is not None,
        )
        params: list[Any] = [format_time(t) for t in (since, until) if t is not None]
        params += [v for v in (namespace, asset) if v is not None]
        params += list(after or ())
        for row in self._conn.execute(statement, params):
            yield _change_from_row(row)

    def get_change(self, seq: int) -> AssetChange | None:
        row = self._conn.execute(sql.GET_CHANGE, (seq,)).fetchone()
        return _change_from_row(row) if row else None

    # --- task runs -------------------------------------------------------------------------

    def record_task_run(self, run: TaskRun) -> RecordResult:
        """Record one task run with its usages, in one transaction."""
        return self.record([run])[0][0]

    def record_task_runs(self, runs: Iterable[TaskRun]) -> list[RecordResult]:
        """Record many task runs in one transaction: all land, or none does."""
        return self.record(runs)[0]

    def count_task_runs(self) -> int:
        return int(self._conn.execute(sql.COUNT_TASK_RUNS).fetchone()[0])

    def count_task_runs_matching(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        namespace: str | None = None,
        flow: str | None = None,
        asset: str | None = None,
    ) -> tuple[int, int]:
        """How many task runs the filters select, and how many of those have ended."""
        filters, params = _run_filters(since, until, namespace, flow, asset)
        total, ended = self._conn.execute(sql.count_task_runs(**filters), params).fetchone()
        return int(total), int(ended)

    def iter_task_runs(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        namespace: str | None = None,
        flow: str | None = None,
        asset: str | None = None,
        after: tuple[str, int] | None = None,
        page_size: int = 1000,
    ) -> Iterator[StoredTaskRun]:
        """Task runs in start order, read a page at a time (memory stays flat). ``asset`` keeps
        the runs that read or wrote it; ``after`` = (started_at text, pk) starts after that run."""
        filters, base = _run_filters(since, until, namespace, flow, asset)
        statement = sql.select_task_runs(**filters)
        paged = sql.select_task_runs(**filters, after_pk=True)
        while True:
            if after is None:
                page = self._conn.execute(statement, [*base, page_size]).fetchall()
            else:
                page = self._conn.execute(paged, [*base, *after, page_size]).fetchall()
            if not page:
                return
            yield from self._with_usages(page)
            after = (page[-1][7], page[-1][0])
            if len(page) < page_size:
                return

    def task_runs_by_pk(self, pks: Sequence[int]) -> dict[int, StoredTaskRun]:
        """The task runs with these pks (the ones that exist), with their usages."""
        found: dict[int, StoredTaskRun] = {}
        for start in range(0, len(pks), 400):
            chunk = list(pks[start : start + 400])
            page = self._conn.execute(sql.select_task_runs_by_pk(len(chunk)), chunk).fetchall()
            found.update((run.pk, run) for run in self._with_usages(page))
        return found

    def _with_usages(self, page: list[Any]) -> Iterator[StoredTaskRun]:
        usages: dict[int, list[StoredUsage]] = {}
        pks = [r[0] for r in page]
        for pk, asset_id, direction, position, stats in self._conn.execute(sql.select_usages_of_runs(len(pks)), pks):
            usages.setdefault(pk, []).append(
                StoredUsage(asset_id, direction, position, Statistics(**json.loads(stats)) if stats else Statistics())
            )
        edges = column_queries.edges_of_runs(self._conn, pks)
        for row in page:
            yield rows.task_run_from_row(row, usages.get(row[0], []), edges.get(row[0], ()))

    def usages_of(self, asset_id: str) -> list[dict[str, Any]]:
        """Every read and write of an asset: direction, time and the task run's key."""
        out = []
        for row in self._conn.execute(sql.USAGES_OF_ASSET, (asset_id,)):
            direction, used_at, *run = row
            stored = rows.task_run_from_row(run, [])
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
        for direction, job_ns, job_name in self._conn.execute(sql.EXTERNAL_USAGES_OF_ASSET, (asset_id,)):
            out.append({"direction": direction, "external": True, "jobNamespace": job_ns, "jobName": job_name})
        return out

    # --- external lineage (the receiver) -----------------------------------------------------

    def ingest(self, events: Sequence[IncomingEvent], resolver: Resolver) -> list[IngestResult | Exception]:
        """Take accepted external events in one transaction. Should one of them fail, the group is
        taken again one event at a time, each in a savepoint of its own: the failing event leaves
        no trace and comes back as its exception, the others land. Re-sent events come back as
        duplicates and change nothing."""
        try:
            with self.transaction() as cur:
                return list(external.ingest_events(cur, events, resolver))
        except (sqlite3.IntegrityError, BridgeError, ValueError):
            pass  # one of them: find it
        with self.transaction() as cur:
            results: list[IngestResult | Exception] = []
            for event in events:
                cur.execute("SAVEPOINT event")
                try:
                    results.extend(external.ingest_events(cur, [event], resolver))
                except (sqlite3.Error, BridgeError, ValueError) as exc:
                    cur.execute("ROLLBACK TO event")
                    results.append(exc)
                cur.execute("RELEASE event")
            return results

    def count_received(self) -> dict[str, int]:
        """Rows of the receiver's tables: events, datasets, sources (runs and jobs), usages, edges."""
        return {name: int(self._conn.execute(q).fetchone()[0]) for name, q in sql.COUNT_TABLE.items()}

    def external_sources(self) -> list[dict[str, Any]]:
        """External runs and jobs with their inputs and outputs, in first-seen order."""
        out = []
        for row in self._conn.execute(sql.SELECT_SOURCES).fetchall():
            source, job_ns, job_name, run_id, parent, state, started, ended, first, last, producer, ins, outs = row
            out.append(
                {
                    "source": source,
                    "job": {"namespace": job_ns, "name": job_name},
                    "runId": run_id,
                    "parentRunId": parent,
                    "state": state,
                    "started": started,
                    "ended": ended,
                    "firstSeen": first,
                    "lastSeen": last,
                    "producer": producer,
                    "inputs": json.loads(ins),
                    "outputs": json.loads(outs),
                }
            )
        return out

    def import_position(self, source: str) -> str | None:
        row = self._conn.execute(sql.GET_IMPORT_POSITION, (source,)).fetchone()
        return str(row[0]) if row else None

    def set_import_position(self, source: str, position: str, *, now: datetime) -> None:
        with self.transaction() as cur:
            cur.execute(sql.SET_IMPORT_POSITION, (source, position, format_time(now)))

    # --- declared jobs (a flow's static lineage) -------------------------------------------

    def declare_flows(self, flows: Iterable[DeclaredFlow], *, now: datetime) -> list[DeclareResult]:
        """Record flows' declared lineage, in one transaction: each flow's declared jobs replace
        the ones it had. Declaring a flow again as it was changes nothing."""
        with self.transaction() as cur:
            results: list[DeclareResult] = []
            for flow in flows:
                if any((r.namespace, r.flow_id) == (flow.namespace, flow.flow_id) for r in results):
                    raise ValidationError(
                        f"flow {flow.namespace}.{flow.flow_id} is declared twice", rule="declare.flow"
                    )
                results.append(writes.declare_flow(cur, flow, now=now))
            return results

    def declared_job(self, pk: int) -> StoredDeclaredJob:
        row = self._conn.execute(sql.GET_DECLARED_JOB, (pk,)).fetchone()
        if row is None:
            raise NotFoundError(f"no declared job with key {pk}")
        return rows.declared_job_from_row(row)

    def count_declared_jobs(self) -> int:
        return int(self._conn.execute(sql.COUNT_DECLARED_JOBS).fetchone()[0])

    def iter_declared_jobs(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        namespace: str | None = None,
        flow: str | None = None,
        after: int | None = None,
    ) -> Iterator[StoredDeclaredJob]:
        """Declared jobs in the order they were first declared (by key), those after key ``after``."""
        statement = sql.select_declared_jobs(
            since=since is not None,
            until=until is not None,
            namespace=namespace is not None,
            flow=flow is not None,
            after=after is not None,
        )
        params: list[Any] = [format_time(t) for t in (since, until) if t is not None]
        params += [v for v in (namespace, flow, after) if v is not None]
        for row in self._conn.execute(statement, params):
            yield rows.declared_job_from_row(row)

    # --- delivery --------------------------------------------------------------------------

    @property
    def outbox(self) -> Outbox:
        """The events queued for delivery (see :mod:`bridge.catalog.outbox`)."""
        return Outbox(self._conn, self.transaction)

    @property
    def workers(self) -> Workers:
        """The stream workers and the outbox's lease (see :mod:`bridge.catalog.workers`)."""
        return Workers(self._conn, self.transaction)

    def get_checkpoint(self, name: str) -> Checkpoint | None:
        row = self._conn.execute(sql.GET_CHECKPOINT, (name,)).fetchone()
        return _checkpoint_from_row(row) if row is not None else None

    def list_checkpoints(self) -> list[Checkpoint]:
        return [_checkpoint_from_row(row) for row in self._conn.execute(sql.LIST_CHECKPOINTS)]

    def save_checkpoint(
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
        position = None if checkpoint.position is None else list(checkpoint.position)
        ahead = [[list(p), settled] for p, settled in checkpoint.ahead]
        with self.transaction() as cur:
            cur.execute(
                sql.SAVE_CHECKPOINT,
                (
                    checkpoint.name,
                    rows.dumps(checkpoint.filters),
                    rows.dumps(position),
                    checkpoint.runs,
                    checkpoint.events,
                    checkpoint.updated_at,
                    rows.dumps(ahead),
                ),
            )
            if clear_refused:
                cur.execute(sql.CLEAR_REFUSED, (checkpoint.name,))
            for item in resolved:
                cur.execute(sql.DELETE_REFUSED, (checkpoint.name, item.position[1], item.position[2]))
            for item in refused:
                cur.execute(
                    sql.SAVE_REFUSED,
                    (checkpoint.name, *item.position, item.event, item.status, item.error, item.refused_at),
                )

    def refused_items(self, checkpoint: str, *, limit: int = 1_000_000) -> list[RefusedItem]:
        """The events a backfill's backend refused for good, in the backfill's order."""
        found = self._conn.execute(sql.SELECT_REFUSED, (checkpoint, limit))
        return [
            RefusedItem((t, order, ref), event, status, error, at) for t, order, ref, event, status, error, at in found
        ]

    def count_refused(self) -> dict[str, int]:
        """How many refused events each backfill checkpoint keeps."""
        return {name: int(count) for name, count in self._conn.execute(sql.COUNT_REFUSED)}

    def delete_checkpoint(self, name: str) -> None:
        with self.transaction() as cur:
            cur.execute(sql.DELETE_CHECKPOINT, (name,))

    # --- lineage ---------------------------------------------------------------------------

    def lineage(
        self, asset_id: str, *, direction: str = "both", depth: int = 5, as_of: datetime | None = None
    ) -> LineageGraph:
        """The upstream and/or downstream lineage of an asset, to a depth; with ``as_of``, as the
        catalog knew it then: the edges of the runs (olbridge's and external ones) that had
        ended by that time, and of the jobs JobEvents had declared."""
        if direction not in ("upstream", "downstream", "both"):
            raise ValidationError(f"unknown direction {direction!r}", rule="lineage.direction", value=direction)
        if depth < 1:
            raise ValidationError("depth is at least 1", rule="lineage.depth", value=depth)
        self.asset(asset_id)
        if as_of is not None:
            edges = self._lineage_as_of(asset_id, direction, depth, format_time(as_of))
        else:
            found: list[tuple[str, str, int]] = []
            if direction in ("upstream", "both"):
                found += self._conn.execute(sql.UPSTREAM, (asset_id, depth)).fetchall()
            if direction in ("downstream", "both"):
                found += self._conn.execute(sql.DOWNSTREAM, (asset_id, depth)).fetchall()
            edges = []
            for up, down, level in found:
                tasks = tuple(label for (label,) in self._conn.execute(sql.EDGE_TASKS, (up, down, up, down)))
                edges.append(LineageEdge(up, down, level, tasks))
        ids = dict.fromkeys([asset_id, *(e.upstream for e in edges), *(e.downstream for e in edges)])
        assets = tuple(a for a in (self.get_asset(i) for i in ids) if a is not None)
        return LineageGraph(asset_id, direction, depth, tuple(edges), assets, as_of)

    def _lineage_as_of(self, asset_id: str, direction: str, depth: int, moment: str) -> list[LineageEdge]:
        """The walk of :meth:`lineage` over the edges known at ``moment``: each edge once a
        direction, at the least depth it is reached, ordered as the SQL walk orders them."""
        tasks: dict[tuple[str, str], set[str]] = {}
        for up, down, label in self._conn.execute(sql.OWN_EDGES_ENDED_BY, (moment,)):
            tasks.setdefault((up, down), set()).add(label)
        for job_ns, job_name, inputs, outputs in self._conn.execute(sql.EXTERNAL_SOURCES_KNOWN_BY, (moment, moment)):
            label = f"{job_ns}/{job_name} (external)"
            for up in json.loads(inputs):
                for down in json.loads(outputs):
                    if up != down:
                        tasks.setdefault((up, down), set()).add(label)
        edges: list[LineageEdge] = []
        for walk in ("upstream", "downstream"):
            if direction not in (walk, "both"):
                continue
            step: dict[str, list[tuple[str, str]]] = {}
            for up, down in tasks:
                step.setdefault(down if walk == "upstream" else up, []).append((up, down))
            levels: dict[tuple[str, str], int] = {}
            frontier, level = [asset_id], 1
            while frontier and level <= depth:
                reached = []
                for node in frontier:
                    for edge in step.get(node, ()):
                        if edge not in levels:
                            levels[edge] = level
                            reached.append(edge[0] if walk == "upstream" else edge[1])
                frontier, level = reached, level + 1
            ordered = sorted(levels.items(), key=lambda item: (item[1], item[0]))
            edges += [LineageEdge(up, down, lvl, tuple(sorted(tasks[up, down]))) for (up, down), lvl in ordered]
        return edges

    def column_lineage(
        self, asset_id: str, column: str, *, direction: str = "both", depth: int = 5
    ) -> ColumnLineageGraph:
        """Where a column comes from (upstream) and what it feeds (downstream), to a depth,
        through olbridge's runs and received ones (see :mod:`bridge.catalog.columns`)."""
        return column_queries.column_lineage(self._conn, self.asset(asset_id), column, direction=direction, depth=depth)

    def column_edges(self, *, source: str | None = None, task_run_pk: int | None = None) -> list[StoredColumnEdge]:
        """The column edges a received run or job (``source``) or one of olbridge's task runs made."""
        return column_queries.edges_of(self._conn, source=source, task_run_pk=task_run_pk)


Position = tuple[str, int, int]  # (time, 0 change | 1 run, seq | pk); ("", -1, pk) a declared job


@attrs.frozen
class Checkpoint:
    """Where a backfill stopped: ``position`` is the last item before which every event was
    delivered or refused for good (None: none yet), as (time, 0 for an asset change or 1 for a
    task run, its seq or pk; ("", -1, pk) for a declared job). ``ahead`` holds the items past it
    that a window half done already settled, each with how many of its events (1: a run's START,
    so its end is next)."""

    name: str
    filters: dict[str, Any]
    position: Position | None
    runs: int
    events: int
    updated_at: str
    ahead: tuple[tuple[Position, int], ...] = ()


@attrs.frozen
class RefusedItem:
    """An event a backfill's backend refused for good: its item's position, which event
    (``start`` or ``end`` of a task run, ``event`` of the others; a refused START holds its run's
    end), the backend's status and answer."""

    position: Position
    event: str
    status: int | None
    error: str
    refused_at: str


# SQLite's primary result codes that mean the file, the disk or another process is in the way,
# never a fault in olbridge's SQL: https://www.sqlite.org/rescode.html
_STORAGE_CODES = {
    3: "permission denied",  # SQLITE_PERM
    5: "another process holds it locked; try again",  # SQLITE_BUSY
    6: "it is locked",  # SQLITE_LOCKED
    8: "it cannot be written (read-only file, folder or file system)",  # SQLITE_READONLY
    10: "a disk input/output error",  # SQLITE_IOERR
    11: "the file is damaged",  # SQLITE_CORRUPT
    13: "the disk is full",  # SQLITE_FULL
    14: "the file cannot be opened",  # SQLITE_CANTOPEN
    15: "its lock protocol failed",  # SQLITE_PROTOCOL
    26: "not a catalog: the file is not a SQLite database",  # SQLITE_NOTADB
}


def storage_error(exc: sqlite3.Error, path: str | Path) -> CatalogError | None:
    """The CatalogError that a SQLite error about the catalog's file, disk or lock stands for,
    naming the catalog; None for any other SQLite error (a fault in olbridge, left to surface)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in _STORAGE_CODES:
        return None
    return CatalogError(f"catalog {path}: {_STORAGE_CODES[code & 0xFF]} (SQLite: {exc})")


def _run_filters(
    since: datetime | None, until: datetime | None, namespace: str | None, flow: str | None, asset: str | None
) -> tuple[dict[str, bool], list[Any]]:
    """The task-run filters given, for :mod:`sql`, and their placeholders' values in order."""
    given = {"since": since, "until": until, "namespace": namespace, "flow": flow, "asset": asset}
    params: list[Any] = [format_time(t) for t in (since, until) if t is not None]
    params += [v for v in (namespace, flow, asset) if v is not None]
    return {name: value is not None for name, value in given.items()}, params


def _position(value: Any) -> Position:
    time, order, ref = value
    return (str(time), int(order), int(ref))


def _checkpoint_from_row(row: Sequence[Any]) -> Checkpoint:
    name, filters, position, runs, events, updated_at, ahead = row
    where = json.loads(position)
    return Checkpoint(
        name,
        json.loads(filters),
        _position(where) if where is not None else None,
        runs,
        events,
        updated_at,
        tuple((_position(p), int(settled)) for p, settled in json.loads(ahead)),
    )


def _change_from_row(row: Sequence[Any]) -> AssetChange:
    seq, kind, changed_at, snapshot = row
    moment = rows.read_time(changed_at)
    assert moment is not None
    return AssetChange(seq=seq, kind=kind, changed_at=moment, asset=rows.from_snapshot(snapshot))


__all__ = [
    "Catalog",
    "Checkpoint",
    "ColumnLineageGraph",
    "DeclareResult",
    "IngestResult",
    "LineageEdge",
    "LineageGraph",
    "RecordResult",
    "RefusedItem",
    "StoredColumnEdge",
    "storage_error",
]
