"""The asset catalog, the public API of :mod:`bridge.catalog`, on SQLite or PostgreSQL.

Every write runs in one transaction: a refused input changes nothing. Reads return the records of
:mod:`bridge.model`, never rows. The engine (:mod:`bridge.catalog.engine`, the contract; its
SQLite and PostgreSQL modules) says how to reach the catalog, the SQL is in
:mod:`bridge.catalog.sql`, the schema and its versions in :mod:`bridge.catalog.schema` and
:mod:`bridge.catalog.migrate`, the row conversions in :mod:`bridge.catalog.rows` and the writes in
:mod:`bridge.catalog.writes` and :mod:`bridge.catalog.external`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import attrs

from bridge.catalog import columns as column_queries
from bridge.catalog import external, positions, rows, sql, writes
from bridge.catalog import health as health_queries
from bridge.catalog import lineage as asset_lineage
from bridge.catalog import migrate as schema_migrations
from bridge.catalog.backfills import Backfills
from bridge.catalog.columns import ColumnLineageGraph, StoredColumnEdge
from bridge.catalog.engine import Busy, Connection, Cursor, Database
from bridge.catalog.engines import open_engine, storage_error
from bridge.catalog.external import IngestResult
from bridge.catalog.health import AssetHealth
from bridge.catalog.lineage import LineageEdge, LineageGraph
from bridge.catalog.outbox import Outbox
from bridge.catalog.positions import Checkpoint, Position, RefusedItem
from bridge.catalog.query import (
    CHANGE_FILTERS,
    JOB_FILTERS,
    RUN_FILTERS,
    AssetQuery,
    ExternalSource,
    ExternalUsage,
    HistoryFilter,
    PurgeResult,
    RunUsage,
)
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
from bridge.model.health import FreshnessRule, Selector
from bridge.model.received import IncomingEvent

T = TypeVar("T")


class Catalog:
    """The asset catalog. ``Catalog(target)`` opens a catalog: a SQLite file (``":memory:"``, a
    private in-memory one) or a PostgreSQL database (a ``postgresql://`` URL, see
    :mod:`bridge.catalog.postgres`). A new one (a file that does not exist, an empty database) is
    created unless ``create=False``; an older SQLite catalog is brought to the current schema."""

    def __init__(self, target: str | Path = "olbridge.db", *, create: bool = True, migrate: bool | None = None) -> None:
        self.engine = open_engine(target)
        self.path = self.engine.location  # what messages show (a password masked)
        self._target = target
        if not create and self.engine.missing():
            raise CatalogError(f"no catalog at {self.path}; create one with olbridge init")
        try:
            self.db = Database(self.engine)
        except Exception as exc:
            raise self._open_error(exc) from exc
        self.upgraded_from: int | None = None  # the version an older catalog was brought up from
        try:
            self._open(create=create, migrate=self.engine.upgrades_on_open if migrate is None else migrate)
        except BaseException as exc:
            self.db.close()
            if isinstance(exc, Exception) and not isinstance(exc, BridgeError):
                raise self._open_error(exc) from exc
            raise

    def _open_error(self, exc: Exception) -> Exception:
        """What an error opening the catalog stands for: a CatalogError naming the catalog where it
        is about the storage (the file, the server), else the error itself (a fault)."""
        found = self.engine.storage_error(exc)
        if found is not None:
            return found
        if self.engine.driver_error(exc):
            return CatalogError(f"cannot open catalog {self.path}: {exc}")
        return exc

    # --- life cycle ------------------------------------------------------------------------

    def _open(self, *, create: bool, migrate: bool) -> None:
        """Make a new catalog (``create``), check the version of an existing one, and bring an
        older one to the current version (``migrate``)."""
        version = self.engine.version(self._conn)
        if version is None:
            if not create and not self.in_memory:  # a private in-memory catalog is always new
                raise CatalogError(f"no catalog at {self.path}; create one with olbridge init")
            schema_migrations.create(self.db)
            return
        if version > sql.SCHEMA_VERSION:
            raise CatalogError(
                f"catalog {self.path} has schema version {version}, newer than this olbridge knows "
                f"({sql.SCHEMA_VERSION}); upgrade olbridge"
            )
        if version < sql.SCHEMA_VERSION:
            if not migrate:
                raise CatalogError(
                    f"catalog {self.path} has schema version {version}, older than this olbridge's "
                    f"({sql.SCHEMA_VERSION}); bring it up to date with olbridge migrate"
                )
            self.upgraded_from = version
            schema_migrations.upgrade(self.engine)

    @property
    def _conn(self) -> Connection:
        """The connection (for reads outside a transaction, and for the tests)."""
        return self.db.conn

    def reopen(self) -> Catalog:
        """Another connection to the same catalog (for another thread), as a Catalog of its own."""
        if self.in_memory:
            raise CatalogError("an in-memory catalog cannot be opened twice")
        return Catalog(self._target, create=False)

    @property
    def in_memory(self) -> bool:
        """A private in-memory catalog (SQLite's ``:memory:``): no other connection can see it."""
        return self.engine.in_memory

    def unavailable(self, exc: BaseException) -> bool:
        """Whether an error says the catalog cannot take a write right now (locked, busy, out of
        reach, losing every race): worth trying again later, not a fault."""
        return self.engine.busy(exc)

    def unavailable_reason(self, exc: BaseException) -> str:
        """Why the catalog could not take a write, for a message or an HTTP answer: in the
        engine's words, never the driver's internals."""
        found = self.engine.reason(exc)
        if found is not None:
            return found
        if isinstance(exc, BridgeError):
            return str(exc)
        return "it cannot take writes now"

    @property
    def dialect(self) -> str:
        """The engine's name: ``sqlite`` or ``postgresql``."""
        return self.engine.name

    def check_writable(self) -> None:
        """Raise a CatalogError unless this process can write the catalog (the file, its folder for
        the journal, no other process holding it locked). Nothing is changed."""
        try:
            with self.transaction() as cur:  # the write lock
                self.engine.stamp(cur, self.schema_version)  # a write of what is there
                raise _Rollback
        except _Rollback:
            pass
        except Exception as exc:
            error = self.engine.storage_error(exc)
            if error is not None:
                raise error from exc
            if self.engine.driver_error(exc):
                raise CatalogError(f"catalog {self.path}: {exc}") from exc
            raise

    def reset_keys(self) -> None:
        """After rows were written with their keys (a copy from another catalog): the next task run,
        change, declared job, received event or outbox row gets a key past the highest."""
        self.db.write(self.engine.reset_keys)

    @property
    def schema_version(self) -> int:
        return self.engine.version(self._conn) or 0

    def pragma(self, setting: str) -> None:
        """Set a SQLite pragma on this connection (``"wal_autocheckpoint = 0"``)."""
        if self.engine.name != "sqlite":
            raise CatalogError(f"a pragma is SQLite's; catalog {self.path} is on {self.engine.name}")
        self._conn.execute(f"PRAGMA {setting}")

    def set_durability(self, level: str) -> None:
        """How sure a commit on this connection is once it returns: ``full`` (it survives a power
        loss) or ``normal`` (a crash of olbridge; SQLite's WAL default, PostgreSQL without waiting
        for the disk)."""
        if level not in ("full", "normal"):
            raise ValueError(f"durability is 'full' or 'normal', not {level!r}")
        self.db.set_durability(level)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """One write transaction: everything in it lands, or nothing does. Not run again should
        it lose a race with another writer (see :meth:`Database.write`)."""
        with self.db.transaction() as cur:
            yield cur

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
        return self._list_assets(self._conn, query)

    def _list_assets(self, conn: Connection | Cursor, query: AssetQuery) -> list[Asset]:
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
        assets = [rows.asset_from_row(r) for r in conn.execute(statement, params)]
        return [a for a in assets if all(f.matches(a.metadata) for f in query.metadata)]

    def count_assets(self) -> int:
        return int(self._conn.execute(sql.COUNT_ASSETS).fetchone()[0])

    def set_asset(self, decl: AssetDeclaration, *, now: datetime, allow_type_change: bool = False) -> Asset:
        """Create or update an asset outside any task run (Kestra's ``Set``). Metadata merges; a key
        sent with null is removed. The change is kept and exported as a DatasetEvent."""
        return self.db.write(lambda cur: writes.set_asset(cur, decl, now=now, allow_type_change=allow_type_change))

    def record(
        self, runs: Iterable[TaskRun], updates: Iterable[AssetDeclaration] = (), *, now: datetime | None = None
    ) -> tuple[list[RecordResult], list[Asset]]:
        """Record task runs, then asset updates made outside them, in one transaction."""
        each, updates = _replayable(runs), list(updates)
        assert now is not None or not updates, "updates need the time they are made"

        def work(cur: Cursor) -> tuple[list[RecordResult], list[Asset]]:
            results = [writes.write_task_run(cur, run) for run in each()]
            assets = [writes.set_asset(cur, decl, now=now, allow_type_change=False) for decl in updates if now]
            return results, assets

        return self.db.write(work)

    def delete_asset(self, asset_id: str, *, now: datetime) -> Asset:
        """Soft-delete an asset (a decommissioned resource). It is exported as a DatasetEvent with
        ``lifecycleStateChange: DROP``; a later write brings it back."""

        return self.db.write(lambda cur: writes.delete_asset(cur, asset_id, now=now))

    def purge(self, query: AssetQuery, *, usages: bool = False, lineage: bool = False) -> PurgeResult:
        """Hard-delete the assets the query matches (deleted ones included), with their change
        history, and optionally their usages and lineage records."""
        if query.is_empty:
            raise ValidationError(
                "purge needs at least one filter (namespace, id, type, metadata or end date)", rule="purge.filter"
            )
        query = attrs.evolve(query, include_deleted=True)

        def work(cur: Cursor) -> PurgeResult:
            ids = [a.id for a in self._list_assets(cur, query)]
            return PurgeResult(ids=tuple(ids), **writes.purge_assets(cur, ids, usages=usages, lineage=lineage))

        return self.db.write(work)

    def iter_changes(
        self, filters: HistoryFilter = HistoryFilter(), *, after: tuple[str, int] | None = None
    ) -> Iterator[AssetChange]:
        """Asset changes in time order (none with a flow filter: they belong to no flow);
        ``after`` = (changed_at text, seq) starts after that change."""
        if filters.flow is not None:
            return
        statement = sql.select_changes(**filters.given(CHANGE_FILTERS), after=after is not None)
        for row in self._conn.execute(statement, [*filters.params(CHANGE_FILTERS), *(after or ())]):
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

    def record_each(
        self, runs: Iterable[TaskRun], *, position: Position | None = None
    ) -> list[RecordResult | CatalogError]:
        """Record task runs in one transaction with the ``position`` of the import they come from,
        each run in a savepoint of its own: a run the catalog cannot take (one that already ended
        with other content) comes back as its CatalogError and leaves no trace, the others land."""
        runs = list(runs)

        def work(cur: Cursor) -> list[RecordResult | CatalogError]:
            results = writes.write_each(cur, runs)
            if position is not None:
                positions.save(cur, position)
            return results

        return self.db.write(work)

    def count_task_runs(self) -> int:
        return int(self._conn.execute(sql.COUNT_TASK_RUNS).fetchone()[0])

    def count_history(self, filters: HistoryFilter = HistoryFilter()) -> int:
        """About how many events a read of the history with these filters gives (export,
        backfill): a START a task run and an end an ended one, a JobEvent a declared job, and
        without ``flow`` an event an asset change (with ``asset``, the declared jobs naming it,
        read to be counted)."""
        statement = sql.count_task_runs(**filters.given(RUN_FILTERS))
        runs, ended = self._conn.execute(statement, filters.params(RUN_FILTERS)).fetchone()
        total = int(runs) + int(ended)
        if filters.asset is None:
            statement = sql.count_declared_jobs(**filters.given(JOB_FILTERS))
            total += int(self._conn.execute(statement, filters.params(JOB_FILTERS)).fetchone()[0])
        else:  # as backfill picks them: by the datasets they name
            total += sum(1 for _ in self.iter_declared_jobs(filters))
        if filters.flow is None:
            statement = sql.count_changes(**filters.given(CHANGE_FILTERS))
            total += int(self._conn.execute(statement, filters.params(CHANGE_FILTERS)).fetchone()[0])
        return total

    def iter_task_runs(
        self,
        filters: HistoryFilter = HistoryFilter(),
        *,
        after: tuple[str, int] | None = None,
        page_size: int = 1000,
    ) -> Iterator[StoredTaskRun]:
        """Task runs in start order, read a page at a time (memory stays flat). An ``asset`` filter
        keeps the runs that read or wrote it; ``after`` = (started_at text, pk) starts after that run."""
        statement = sql.select_task_runs(**filters.given(RUN_FILTERS))
        paged = sql.select_task_runs(**filters.given(RUN_FILTERS), after_pk=True)
        base = filters.params(RUN_FILTERS)
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

    def usages_of(self, asset_id: str) -> list[RunUsage | ExternalUsage]:
        """Every read and write of an asset: by olbridge's task runs (direction, time and the task
        run's key), then by the jobs the receiver heard of."""
        out: list[RunUsage | ExternalUsage] = []
        for row in self._conn.execute(sql.USAGES_OF_ASSET, (asset_id,)):
            direction, used_at, *run = row
            stored = rows.task_run_from_row(run, [])
            key = stored.key
            out.append(
                RunUsage(
                    direction,
                    used_at,
                    key.flow_namespace,
                    key.flow_id,
                    key.task_id,
                    key.execution_id,
                    key.task_run_id,
                    stored.state.value,
                )
            )
        for direction, job_ns, job_name in self._conn.execute(sql.EXTERNAL_USAGES_OF_ASSET, (asset_id,)):
            out.append(ExternalUsage(direction, job_ns, job_name))
        return out

    # --- external lineage (the receiver) -----------------------------------------------------

    def ingest(
        self, events: Sequence[IncomingEvent], resolver: Resolver, *, position: Position | None = None
    ) -> list[IngestResult | Exception]:
        """Take accepted external events in one transaction, with the ``position`` of the import
        they come from, if any. Should one of them fail, the group is taken again one event at a
        time, each in a savepoint of its own: the failing event leaves no trace and comes back as
        its exception, the others land (and the position only when none came back busy). Re-sent
        events come back as duplicates and change nothing. Where several processes write
        (PostgreSQL), a group that loses a race with another is taken again; it lands once,
        whichever process took its events first."""

        def whole(cur: Cursor) -> list[IngestResult | Exception]:
            taken: list[IngestResult | Exception] = list(
                external.ingest_events(cur, events, resolver, engine=self.engine)
            )
            if position is not None:
                positions.save(cur, position)
            return taken

        try:
            return self.db.write(whole)
        except Exception as exc:
            if isinstance(exc, Busy) or not self._one_event(exc):
                raise  # not one event's fault: the caller's to report

        def each(cur: Cursor) -> list[IngestResult | Exception]:
            results: list[IngestResult | Exception] = []
            for event in events:
                cur.execute("SAVEPOINT event")
                try:
                    results.extend(external.ingest_events(cur, [event], resolver, engine=self.engine))
                except Exception as exc:
                    if self.engine.conflict(exc) or not (self._one_event(exc) or self.engine.busy(exc)):
                        raise
                    cur.execute("ROLLBACK TO event")
                    results.append(self._event_error(exc))
                cur.execute("RELEASE event")
            # past an event the catalog could not take now, the import must read it again
            if position is not None and not any(isinstance(result, Busy) for result in results):
                positions.save(cur, position)
            return results

        return self.db.write(each)

    def _one_event(self, exc: BaseException) -> bool:
        """Whether an error of a group's write may be one event's (then each is taken alone)."""
        if isinstance(exc, Busy) or self.engine.busy(exc):
            return False
        return isinstance(exc, BridgeError | ValueError) or self.engine.refused(exc)

    def _event_error(self, exc: Exception) -> Exception:
        """What taking one event came to when it failed: its refusal, or a Busy to retry it."""
        if isinstance(exc, BridgeError | ValueError):
            return exc
        if self.engine.refused(exc):
            return CatalogError(f"the catalog cannot store the event: {exc}")
        return Busy(f"the catalog could not take the event: {self.unavailable_reason(exc)}")

    def count_received(self) -> dict[str, int]:
        """Rows of the receiver's tables: events, datasets, sources (runs and jobs), usages, edges."""
        return {name: int(self._conn.execute(q).fetchone()[0]) for name, q in sql.COUNT_TABLE.items()}

    def external_sources(self) -> list[ExternalSource]:
        """External runs and jobs with their inputs and outputs, in first-seen order."""
        found = []
        for row in self._conn.execute(sql.SELECT_SOURCES).fetchall():
            source, job_ns, job_name, run_id, parent, state, started, ended, first, last, producer, ins, outs = row
            run = (run_id, parent, state, started, ended, first, last, producer)
            inputs, outputs = tuple(json.loads(ins)), tuple(json.loads(outs))
            found.append(ExternalSource(source, job_ns, job_name, *run, inputs, outputs))
        return found

    # --- positions ---------------------------------------------------------------------------

    def position(self, kind: str, name: str) -> Position | None:
        """Where the reader or replay ``name`` of ``kind`` got to (None: nowhere yet); see
        :mod:`bridge.catalog.positions`."""
        return positions.read(self._conn, kind, name)

    def positions(self, kind: str | None = None) -> list[Position]:
        """Every position (of one kind), by kind and name."""
        return positions.read_all(self._conn, kind)

    def save_position(self, position: Position) -> None:
        """Save a position on its own (a page that brought nothing to write, say); a position that
        covers data goes in the transaction writing it (``ingest``, ``record_each``)."""
        self.db.write(lambda cur: positions.save(cur, position))

    # --- declared jobs (a flow's static lineage) -------------------------------------------

    def declare_flows(self, flows: Iterable[DeclaredFlow], *, now: datetime) -> list[DeclareResult]:
        """Record flows' declared lineage, in one transaction: each flow's declared jobs replace
        the ones it had. Declaring a flow again as it was changes nothing."""
        flows = list(flows)

        def work(cur: Cursor) -> list[DeclareResult]:
            results: list[DeclareResult] = []
            for flow in flows:
                if any((r.namespace, r.flow_id) == (flow.namespace, flow.flow_id) for r in results):
                    raise ValidationError(
                        f"flow {flow.namespace}.{flow.flow_id} is declared twice", rule="declare.flow"
                    )
                results.append(writes.declare_flow(cur, flow, now=now))
            return results

        return self.db.write(work)

    def declared_job(self, pk: int) -> StoredDeclaredJob:
        row = self._conn.execute(sql.GET_DECLARED_JOB, (pk,)).fetchone()
        if row is None:
            raise NotFoundError(f"no declared job with key {pk}")
        return rows.declared_job_from_row(row)

    def count_declared_jobs(self) -> int:
        return int(self._conn.execute(sql.COUNT_DECLARED_JOBS).fetchone()[0])

    def iter_declared_jobs(
        self, filters: HistoryFilter = HistoryFilter(), *, after: int | None = None
    ) -> Iterator[StoredDeclaredJob]:
        """Declared jobs in the order they were first declared (by key), those after key ``after``;
        an ``asset`` filter keeps the ones that name it."""
        statement = sql.select_declared_jobs(**filters.given(JOB_FILTERS), after=after is not None)
        params = [*filters.params(JOB_FILTERS), *([] if after is None else [after])]
        for row in self._conn.execute(statement, params):
            declared = rows.declared_job_from_row(row)
            if filters.keeps(declared):
                yield declared

    # --- delivery --------------------------------------------------------------------------

    @property
    def outbox(self) -> Outbox:
        """The events queued for delivery (see :mod:`bridge.catalog.outbox`)."""
        return Outbox(self.db)

    @property
    def workers(self) -> Workers:
        """The stream workers and the outbox's lease (see :mod:`bridge.catalog.workers`)."""
        return Workers(self.db)

    @property
    def backfills(self) -> Backfills:
        """The backfills' checkpoints and refused events (see :mod:`bridge.catalog.backfills`)."""
        return Backfills(self.db)

    # --- lineage ---------------------------------------------------------------------------

    def lineage(
        self, asset_id: str, *, direction: str = "both", depth: int = 5, as_of: datetime | None = None
    ) -> LineageGraph:
        """The upstream and/or downstream lineage of an asset, to a depth; with ``as_of``, as the
        catalog knew it then: the edges of the runs (olbridge's and external ones) that had
        ended by that time, and of the jobs JobEvents had declared (see :mod:`bridge.catalog.lineage`)."""
        if direction not in ("upstream", "downstream", "both"):
            raise ValidationError(f"unknown direction {direction!r}", rule="lineage.direction", value=direction)
        if depth < 1:
            raise ValidationError("depth is at least 1", rule="lineage.depth", value=depth)
        self.asset(asset_id)
        edges = asset_lineage.edges(self._conn, asset_id, direction, depth, as_of)
        ids = dict.fromkeys([asset_id, *(e.upstream for e in edges), *(e.downstream for e in edges)])
        assets = tuple(a for a in (self.get_asset(i) for i in ids) if a is not None)
        return LineageGraph(asset_id, direction, depth, tuple(edges), assets, as_of)

    def column_lineage(
        self, asset_id: str, column: str, *, direction: str = "both", depth: int = 5
    ) -> ColumnLineageGraph:
        """Where a column comes from (upstream) and what it feeds (downstream), to a depth,
        through olbridge's runs and received ones (see :mod:`bridge.catalog.columns`)."""
        return column_queries.column_lineage(self._conn, self.asset(asset_id), column, direction=direction, depth=depth)

    def column_edges(self, *, source: str | None = None, task_run_pk: int | None = None) -> list[StoredColumnEdge]:
        """The column edges a received run or job (``source``) or one of olbridge's task runs made."""
        return column_queries.edges_of(self._conn, source=source, task_run_pk=task_run_pk)

    # --- health (bridge/catalog/health.py) ---------------------------------------------------

    def set_freshness(self, asset_id: str, rule: FreshnessRule | None, *, now: datetime) -> None:
        """Set (None: remove) the freshness rule of an existing asset."""
        self.asset(asset_id)
        self.db.write(lambda cur: health_queries.set_rule(cur, asset_id, rule, now=now))

    def freshness_of(self, asset_id: str) -> FreshnessRule | None:
        """The freshness rule set on an asset (not one the config's selectors give)."""
        return health_queries.get_rule(self._conn, asset_id)

    def health(
        self, as_of: datetime, selectors: Sequence[Selector] = (), *, ids: Iterable[str] | None = None
    ) -> list[AssetHealth]:
        """The health of the assets there were at ``as_of`` (or those of ``ids``), with their
        at-risk flags, by id."""
        return health_queries.assess(self._conn, selectors, as_of, ids=ids)


def _replayable(items: Iterable[T]) -> Callable[[], Iterator[T]]:
    """A function giving ``items`` again and again, each read from ``items`` once, when first
    needed (a progress bar over them moves as the first pass goes, and a transaction run again
    reads them again)."""
    source = iter(items)
    seen: list[T] = []

    def each() -> Iterator[T]:
        yield from seen
        for item in source:
            seen.append(item)
            yield item

    return each


class _Rollback(Exception):
    """Ends a transaction that must change nothing."""


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
    "Position",
    "RecordResult",
    "RefusedItem",
    "StoredColumnEdge",
    "open_engine",
    "storage_error",
]
