"""The asset catalog, the public API of :mod:`bridge.catalog`, on SQLite or PostgreSQL.

Every write runs in one transaction: a refused input changes nothing. Reads return the records of
:mod:`bridge.model`, never rows. The engine (:mod:`bridge.catalog.engine`, the contract; its
SQLite and PostgreSQL modules) says how to reach the catalog, the SQL is in
:mod:`bridge.catalog.sql` (and ``sql_received``, ``sql_outbox``), the schema and its versions in
:mod:`bridge.catalog.schema` and :mod:`bridge.catalog.migrate`, the row conversions in
:mod:`bridge.catalog.rows`. The ``Catalog`` runs no SQL of its own: each method hands its work to
the module of its job (the reads to ``assets``, ``history``, ``received``, ``lineage``,
``columns``, ``health``; the writes to ``writes``, ``external`` and ``ingest``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import attrs

from bridge.catalog import adopt, assets, health_kept, history, ingest, positions, received, sql, writes
from bridge.catalog import columns as column_queries
from bridge.catalog import health as health_queries
from bridge.catalog import lineage as asset_lineage
from bridge.catalog import migrate as schema_migrations
from bridge.catalog.backfills import Backfills
from bridge.catalog.columns import ColumnLineageGraph, StoredColumnEdge
from bridge.catalog.engine import Connection, Cursor, Database, Maintenance, unavailable_reason
from bridge.catalog.engines import open_engine, storage_error
from bridge.catalog.external import IngestResult
from bridge.catalog.health import AssetHealth
from bridge.catalog.health_state import Kept, WatchSeen, kept
from bridge.catalog.lineage import LineageEdge, LineageGraph
from bridge.catalog.outbox import Outbox
from bridge.catalog.positions import Checkpoint, Position, RefusedItem
from bridge.catalog.query import (
    AssetQuery,
    AssetUsages,
    ExternalSource,
    ExternalUsage,
    HistoryFilter,
    PurgeResult,
    RunUsage,
)
from bridge.catalog.workers import Workers
from bridge.catalog.writes import DeclareResult, RecordResult
from bridge.errors import BridgeError, CatalogError, NotInCatalog, RunEndedError, ValidationError
from bridge.mapping.resolver import Resolver
from bridge.model import (
    Assertion,
    Asset,
    AssetChange,
    AssetDeclaration,
    DeclaredFlow,
    StoredDeclaredJob,
    StoredTaskRun,
    TaskRun,
)
from bridge.model.health import FreshnessRule, Selector
from bridge.model.received import IncomingEvent

T = TypeVar("T")


class Catalog:
    """The asset catalog. ``Catalog(target)`` opens a catalog: a SQLite file (``":memory:"``, a
    private in-memory one) or a PostgreSQL database (a ``postgresql://`` URL, see
    :mod:`bridge.catalog.postgres`). A new one (a file that does not exist, an empty database) is
    created unless ``create=False``; an older SQLite catalog is brought to the current schema."""

    def __init__(
        self,
        target: str | Path = "olbridge.db",
        *,
        create: bool = True,
        migrate: bool | None = None,
        naming: Resolver | None = None,
    ) -> None:
        self.engine = open_engine(target)
        self.path = self.engine.location  # what messages show (a password masked)
        self._target = target
        missing = self.engine.missing()  # nothing at the path before this opening (made new, if at all)
        if not create and missing:
            raise CatalogError(f"no catalog at {self.path}; create one with olbridge init")
        try:
            self.db = Database(self.engine)
        except Exception as exc:
            raise self._open_error(exc) from exc
        self.upgraded_from: int | None = None  # the version an older catalog was brought up from
        self.made = False  # whether this opening made the catalog where nothing was (see discard)
        self._missing = missing
        # whether a health watch is live, as this catalog's writes last read it: they mark the
        # assets they touch only then (bridge/catalog/health_state.py)
        self.watch_seen = WatchSeen()
        # how olbridge's events name its assets (the config's rules): an asset its writes make
        # takes over the received placeholder of the dataset it is named as (bridge/catalog/adopt.py)
        self._naming = naming
        try:
            self._open(create=create, migrate=self.engine.upgrades_on_open if migrate is None else migrate)
        except BaseException as exc:
            self.db.close()
            if isinstance(exc, Exception) and not isinstance(exc, BridgeError):
                raise self._open_error(exc) from exc
            raise

    @property
    def naming(self) -> adopt.Naming:
        """What the catalog's own writes take received placeholders over by (bridge/catalog/
        adopt.py): the rules olbridge's events name assets by (those the catalog was opened with,
        else the built-in ones) and the engine's lock."""
        if self._naming is None:
            self._naming = Resolver.load()
        return adopt.Naming(self._naming, self.engine.adoption_lock(exclusive=True))

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
            self.made = self._missing
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
            try:  # the version this process upgraded from (None: another process did it first)
                self.upgraded_from = schema_migrations.upgrade(self.engine)
            except Exception as exc:
                found = self.engine.storage_error(exc) if self.engine.upgrades_on_open else None
                if found is None:  # (PostgreSQL's migrate: the server's error, as any command's)
                    raise
                # (a SQLite file on a read-only mount is read by a newer olbridge only once upgraded)
                raise CatalogError(
                    f"{found}; it has schema version {version}, older than this olbridge's ({sql.SCHEMA_VERSION}), "
                    "which it brings up to date before anything else: open it where it can be written (a copy), or "
                    "with the olbridge that made it"
                ) from exc

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
        return unavailable_reason(self.engine, exc)

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

    def maintenance(self, *, wal_limit: int, every: float) -> Maintenance | None:
        """The upkeep a long-running writer on this connection runs beside its commits (see
        :meth:`bridge.catalog.engine.Engine.maintenance`); None: none is needed."""
        return self.engine.maintenance(self._conn, wal_limit=wal_limit, every=every)

    def set_durability(self, level: str) -> None:
        """How sure a commit on this connection is once it returns: ``full`` (it survives a power
        loss) or ``normal`` (a crash of olbridge; SQLite's WAL default, PostgreSQL without waiting
        for the disk)."""
        if level not in ("full", "normal"):
            raise ValueError(f"durability is 'full' or 'normal', not {level!r}")
        self.db.set_durability(level)

    def close(self) -> None:
        self.db.close()

    def discard(self) -> bool:
        """Close and remove a catalog this opening made that still holds nothing (a command's
        input refused at its first write): a refused input leaves no new, empty catalog behind,
        which would then open as one that holds nothing rather than as none. Only a SQLite file
        (with its journal's files); False, and nothing done, for any other catalog."""
        if not self.made or not self.engine.removable() or not self._holds_nothing():
            return False
        # alone on it, or not at all: another process that opened the new catalog meanwhile (a
        # receiver started at the same path) keeps it; checked again under the lock
        if not self.engine.take_alone(self._conn):
            return False
        if not self._holds_nothing():
            self.engine.release_alone(self._conn)
            return False
        self.engine.remove()  # under the lock: nobody opens it between the check and this
        self.close()
        self.made = False  # gone: nothing more to discard
        return True

    def _holds_nothing(self) -> bool:
        from bridge.catalog.schema import metadata  # only here: sqlalchemy is slow to import

        return all(
            self._conn.execute(f"SELECT 1 FROM {table.name} LIMIT 1").fetchone() is None
            for table in metadata.sorted_tables
        )

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
        return assets.read_asset(self._conn, asset_id)

    def get_assets(self, asset_ids: Iterable[str]) -> dict[str, Asset]:
        """The records of those of ``asset_ids`` that are there, as :meth:`get_asset` gives each,
        read in a few statements (:func:`bridge.catalog.assets.read_assets`)."""
        return assets.read_assets(self._conn, asset_ids)

    def find_asset_id(self, text: str, resolver: Resolver | None = None) -> str:
        """The id of the asset ``text`` names: its id, or a dataset name it was received under
        (``<olNamespace>/<olName>``, or a symlink identifier's ``<namespace>/<name>``), or with
        ``resolver`` the name olbridge's events give it. A NotFoundError when none does; a
        ValidationError naming them when several do."""
        return assets.find_asset_id(self._conn, text, resolver)

    def named_in_openlineage(self, text: str, resolver: Resolver) -> list[str]:
        """The own assets ``text`` names as the OpenLineage ``<namespace>/<name>`` olbridge's
        events give them (:func:`bridge.catalog.assets.named_in_openlineage`)."""
        return assets.named_in_openlineage(self._conn, resolver, text)

    def asset(self, asset_id: str) -> Asset:
        found = self.get_asset(asset_id)
        if found is None:
            raise NotInCatalog(f"no asset with id {asset_id!r}")
        return found

    def list_assets(self, query: AssetQuery = AssetQuery()) -> list[Asset]:
        return assets.list_assets(self._conn, query)

    def count_assets(self) -> int:
        return assets.count_assets(self._conn)

    def search_indexed(self) -> bool:
        """Whether the UI's search of assets is answered by an index (PostgreSQL: when pg_trgm
        could be had); without one it reads every asset."""
        return self.engine.search_indexed(self._conn)

    def set_asset(self, decl: AssetDeclaration, *, now: datetime, allow_type_change: bool = False) -> Asset:
        """Create or update an asset outside any task run (Kestra's ``Set``). Metadata merges; a key
        sent with null is removed. The change is kept and exported as a DatasetEvent."""

        def work(cur: Cursor) -> Asset:
            return writes.set_asset(
                cur, decl, now=now, allow_type_change=allow_type_change, watch=self.watch_seen, naming=naming
            )

        naming = self.naming
        if decl.type is not None:  # a new asset has one
            naming = attrs.evolve(naming, moved=self.take_over_first([decl]))
        return self.db.write(work)

    def record(
        self,
        runs: Iterable[TaskRun],
        updates: Iterable[AssetDeclaration] = (),
        *,
        now: datetime | None = None,
        made_at: Mapping[str, datetime] | None = None,
        restarts: bool = False,
    ) -> tuple[list[RecordResult], list[Asset]]:
        """Record task runs, then asset updates made outside them, in one transaction: each update
        at ``now``, or at its asset's time in ``made_at``. With ``restarts``, a run that ended
        already and ends again is its next attempt (:func:`writes.write_attempt`)."""
        write = writes.write_attempt if restarts else writes.write_task_run
        each, updates = _replayable(runs), list(updates)
        assert now is not None or not updates, "updates need the time they are made"

        naming = self.naming

        def work(cur: Cursor) -> tuple[list[RecordResult], list[Asset]]:
            results = []
            for index, run in enumerate(each()):
                try:
                    results.append(write(cur, run, watch=self.watch_seen, naming=naming))
                except RunEndedError as exc:  # which of them (a file's line: two may hold one run)
                    raise RunEndedError(str(exc), exc.key, index) from None
            times, seen = made_at or {}, self.watch_seen
            assets = [
                writes.set_asset(cur, d, now=times.get(d.id, now), allow_type_change=False, watch=seen, naming=naming)
                for d in updates
                if now
            ]
            return results, assets

        if naming.lock is not None:  # reads the runs once before the write
            decls = [*_declarations(each()), *(decl for decl in updates if decl.type is not None)]
            naming = attrs.evolve(naming, moved=self.take_over_first(decls, _reads(each())))
        return self.db.write(work)

    def _apart_first(self, current: Asset, decl: AssetDeclaration) -> adopt.Apart | None:
        """Where receivers write beside the catalog's writes, the received placeholder ``current``
        moved apart (:func:`adopt.kept_apart`) in a short transaction of its own, before the
        write that declares its id as another dataset (which says so in its result)."""
        naming = self.naming
        if adopt.apart_from(self._conn, naming.rules, current, decl.type, decl.metadata) is None:  # type: ignore[arg-type]
            return None

        def work(cur: Cursor) -> adopt.Apart | None:
            found = writes.get_asset(cur, current.id)
            apart = adopt.kept_apart(cur, naming, found, decl.type, decl.metadata) if found is not None else None
            if apart is not None:
                self.watch_seen.mark(cur, [apart.asset_id])
            return apart

        return self.db.write(work)

    def take_over_first(self, decls: Iterable[AssetDeclaration], reads: Iterable[str] = ()) -> dict[str, adopt.Apart]:
        """Where receivers write beside the catalog's writes (PostgreSQL), the received
        placeholders that the new assets among ``decls`` are to take over (bridge/catalog/adopt.py),
        each taken over in a short transaction of its own before the write that makes the asset:
        a takeover holds the receivers back until it commits, and a write (a dbt import's first
        run of many models) may take long. A write refused after leaves the placeholder under the
        asset's id, which the rules name as the placeholder's dataset: nothing else of it lands.
        Likewise a received placeholder of another dataset under an id ``decls`` declare (an
        output with its type, or an input: ``reads``) is moved apart first (what was moved, by
        id, is returned for the write to say; one refused after leaves it apart, as the receiver
        would have kept it had the asset come first). Where one writer holds the whole catalog
        (SQLite), the write itself takes them over and moves them apart."""
        naming = self.naming
        moved: dict[str, adopt.Apart] = {}
        if naming.lock is None:
            return moved
        wanted: dict[str, AssetDeclaration] = {}
        reads = set(reads)
        for decl in decls:
            wanted.setdefault(decl.id, decl)
        for asset_id, decl in wanted.items():
            current = self.get_asset(asset_id)
            if current is not None:
                # a received placeholder of another dataset under the id, moved apart first (an
                # output without its type cannot make the asset: its write is refused, nothing moved)
                if decl.type is not None or asset_id in reads:
                    apart = self._apart_first(current, decl)
                    if apart is not None:
                        moved[asset_id] = apart
                continue
            if adopt.placeholder_for(self._conn, naming.rules, asset_id, decl.type, decl.metadata) is None:  # type: ignore[arg-type]
                continue

            def work(cur: Cursor, decl: AssetDeclaration = decl) -> None:
                if adopt.adopted(cur, naming, decl.id, decl.type, decl.metadata):
                    self.watch_seen.mark(cur, [decl.id])

            self.db.write(work)
        return moved

    def delete_asset(self, asset_id: str, *, now: datetime) -> Asset:
        """Soft-delete an asset (a decommissioned resource). It is exported as a DatasetEvent with
        ``lifecycleStateChange: DROP``; a later write brings it back."""

        return self.db.write(lambda cur: writes.delete_asset(cur, asset_id, now=now, watch=self.watch_seen))

    def adopt_placeholders(self, *, dry_run: bool = False) -> list[adopt.Adoption]:
        """Join the lineage split in two before takeovers were made (bridge/catalog/adopt.py):
        each received placeholder that one of the catalog's assets bound to no dataset is named
        as by the rules (:attr:`naming`) is taken over by it, each in a short transaction of its
        own (on PostgreSQL the receivers wait for it); with ``dry_run``, only said. Reads every
        such asset."""
        naming = self.naming
        found = adopt.adoptions(self._conn, naming.rules)  # type: ignore[arg-type]
        if dry_run:
            return found
        taken: list[adopt.Adoption] = []
        for adoption in found:

            def work(cur: Cursor, adoption: adopt.Adoption = adoption) -> bool:
                if naming.lock is not None:
                    cur.execute(naming.lock)
                asset = writes.get_asset(cur, adoption.asset_id)
                if asset is None or asset.deleted_at is not None:
                    return False
                again = adopt.placeholder_for(cur, naming.rules, asset.id, asset.type, asset.metadata)
                if again != adoption.placeholder:  # no longer so, now that no receiver writes
                    return False
                adopt.take_over(cur, adoption.placeholder, adoption.asset_id)
                self.watch_seen.mark(cur, [adoption.asset_id])
                return True

            if self.db.write(work):
                taken.append(adoption)
        return taken

    def purge(self, query: AssetQuery, *, usages: bool = False, lineage: bool = False) -> PurgeResult:
        """Hard-delete the assets the query matches (deleted ones included), with their change
        history, and optionally their usages and lineage records."""
        if query.is_empty:
            raise ValidationError(
                "purge needs at least one filter (namespace, id, type, metadata or end date)", rule="purge.filter"
            )
        query = attrs.evolve(query, include_deleted=True)

        def work(cur: Cursor) -> PurgeResult:
            ids = [a.id for a in assets.list_assets(cur, query)]
            counts = writes.purge_assets(cur, ids, usages=usages, lineage=lineage, watch=self.watch_seen)
            return PurgeResult(ids=tuple(ids), **counts)

        return self.db.write(work)

    def iter_changes(
        self, filters: HistoryFilter = HistoryFilter(), *, after: tuple[str, int] | None = None
    ) -> Iterator[AssetChange]:
        """Asset changes in time order (none with a flow filter: they belong to no flow);
        ``after`` = (changed_at text, seq) starts after that change."""
        return history.iter_changes(self._conn, filters, after=after)

    def get_change(self, seq: int) -> AssetChange | None:
        return history.get_change(self._conn, seq)

    def latest_changes(self, asset_id: str, limit: int) -> list[AssetChange]:
        """An asset's latest ``limit`` changes, in time order."""
        return history.latest_changes(self._conn, asset_id, limit)

    # --- task runs -------------------------------------------------------------------------

    def record_task_run(self, run: TaskRun) -> RecordResult:
        """Record one task run with its usages, in one transaction."""
        return self.record([run])[0][0]

    def record_task_runs(self, runs: Iterable[TaskRun], *, restarts: bool = False) -> list[RecordResult]:
        """Record many task runs in one transaction: all land, or none does (``restarts``: as
        :meth:`record` takes it)."""
        return self.record(runs, restarts=restarts)[0]

    def record_each(
        self, runs: Iterable[TaskRun], *, position: Position | None = None
    ) -> list[RecordResult | CatalogError]:
        """Record task runs in one transaction with the ``position`` of the import they come from,
        each run in a savepoint of its own: a run the catalog cannot take (one that already ended
        with other content) comes back as its CatalogError and leaves no trace, the others land."""
        runs = list(runs)

        naming = attrs.evolve(self.naming, moved=self.take_over_first(_declarations(runs), _reads(runs)))

        def work(cur: Cursor) -> list[RecordResult | CatalogError]:
            results = writes.write_each(cur, runs, watch=self.watch_seen, naming=naming)
            if position is not None:
                positions.save(cur, position)
            return results

        return self.db.write(work)

    def count_task_runs(self) -> int:
        return history.count_task_runs(self._conn)

    def count_history(self, filters: HistoryFilter = HistoryFilter()) -> int:
        """About how many events a read of the history with these filters gives (export,
        backfill): a START a task run and an end an ended one, a JobEvent a declared job, and
        without ``flow`` an event an asset change (with ``asset``, the declared jobs naming it,
        read to be counted)."""
        return history.count_history(self._conn, filters)

    def iter_task_runs(
        self,
        filters: HistoryFilter = HistoryFilter(),
        *,
        after: tuple[str, int] | None = None,
        page_size: int = 1000,
    ) -> Iterator[StoredTaskRun]:
        """Task runs in start order, read a page at a time (memory stays flat). An ``asset`` filter
        keeps the runs that read or wrote it; ``after`` = (started_at text, pk) starts after that run."""
        return history.iter_task_runs(lambda: self._conn, filters, after=after, page_size=page_size)

    def task_runs_by_pk(self, pks: Sequence[int]) -> dict[int, StoredTaskRun]:
        """The task runs with these pks (the ones that exist), with their usages."""
        return history.task_runs_by_pk(self._conn, pks)

    def usages_of(self, asset_id: str) -> list[RunUsage | ExternalUsage]:
        """Every read and write of an asset: by olbridge's task runs (direction, time and the task
        run's key), then by the jobs the receiver heard of."""
        return history.usages_of(self._conn, asset_id)

    def latest_usages(self, asset_id: str, limit: int = 20) -> AssetUsages:
        """An asset's latest ``limit`` reads and writes by olbridge's task runs (newest first)
        and its first ``limit`` received jobs, with how many there are of each: a few rows read
        however long its history (``assets show``)."""
        return history.latest_usages(self._conn, asset_id, limit)

    # --- external lineage (the receiver) -----------------------------------------------------

    def ingest(
        self, events: Sequence[IncomingEvent], resolver: Resolver, *, position: Position | None = None
    ) -> list[IngestResult | Exception]:
        """Take accepted external events, with the ``position`` of the import they come from, if any
        (see :func:`bridge.catalog.ingest.ingest`): each comes back as its result or its error."""
        return ingest.ingest(self.db, events, resolver, position=position, watch=self.watch_seen)

    def count_received(self) -> dict[str, int]:
        """Rows of the receiver's tables: events, datasets, sources (runs and jobs), usages, edges."""
        return received.count_received(self._conn)

    def external_sources(self) -> list[ExternalSource]:
        """External runs and jobs with their inputs and outputs, in first-seen order."""
        return received.external_sources(self._conn)

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
        return history.declared_job(self._conn, pk)

    def count_declared_jobs(self) -> int:
        return history.count_declared_jobs(self._conn)

    def iter_declared_jobs(
        self, filters: HistoryFilter = HistoryFilter(), *, after: int | None = None
    ) -> Iterator[StoredDeclaredJob]:
        """Declared jobs in the order they were first declared (by key), those after key ``after``;
        an ``asset`` filter keeps the ones that name it."""
        return history.iter_declared_jobs(self._conn, filters, after=after)

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

        def work(cur: Cursor) -> None:
            health_queries.set_rule(cur, asset_id, rule, now=now)
            self.watch_seen.mark(cur, [asset_id])

        self.db.write(work)

    def freshness_of(self, asset_id: str) -> FreshnessRule | None:
        """The freshness rule set on an asset (not one the config's selectors give)."""
        return health_queries.get_rule(self._conn, asset_id)

    def health(
        self,
        as_of: datetime,
        selectors: Sequence[Selector] = (),
        *,
        ids: Iterable[str] | None = None,
        namespace: str | None = None,
    ) -> list[AssetHealth]:
        """The health of the assets there were at ``as_of`` (or those of ``ids``; of those of
        ``namespace``), with their at-risk flags, by id."""
        return health_queries.assess(self._conn, selectors, as_of, ids=ids, namespace=namespace)

    def health_watch_live(self) -> bool:
        """Whether a health watch keeps the assets' health now (by the clock the writes read its
        lease by)."""
        return health_kept.watch_live(self._conn, self.watch_seen.clock())

    def kept_health_counts(self, scope: health_kept.Scope | None = None) -> dict[str, int]:
        """How many assets (of those ``scope`` sees) have each health the watch keeps."""
        return health_kept.kept_counts(self._conn, scope)

    def kept_health_page(
        self, states: Sequence[str], after: str | None, limit: int, scope: health_kept.Scope | None = None
    ) -> tuple[list[tuple[str, str | None, str]], str | None]:
        """A page of the assets whose kept health is one of ``states``, by id (each id, namespace
        and type), and where the next starts (:func:`bridge.catalog.health_kept.kept_in_states`)."""
        return health_kept.kept_in_states(self._conn, states, after, limit, scope)

    def kept_health_of(self, ids: Sequence[str]) -> dict[str, Kept]:
        """The health the watch keeps of these assets (those that have one)."""
        return kept(self._conn, ids)

    def latest_checks(self, ids: Iterable[str], as_of: datetime) -> dict[str, tuple[Assertion, ...]]:
        """The latest checks reported by ``as_of`` of each of these assets that has any (those
        its health reads: a run's, a received event's, ``dbt import``'s)."""
        return health_queries.latest_checks(self._conn, ids, as_of)

    def health_of_few(
        self,
        as_of: datetime,
        selectors: Sequence[Selector],
        ids: Iterable[str] | None = None,
        *,
        namespace: str | None = None,
        paths: bool = True,
        at_most: int = health_queries.SOME_AT_MOST,
    ) -> list[AssetHealth] | None:
        """The health of a few assets (``ids``; those of ``namespace``), with their at-risk flags
        (``paths``), only where their own facts and those upstream of them answer it, ``at_most``
        assets in all; None where more, or the whole catalog's, would be read
        (:func:`bridge.catalog.health.assess_few`)."""
        return health_queries.assess_few(
            self._conn, selectors, as_of, ids, namespace=namespace, paths=paths, at_most=at_most
        )


# a catalog, or what opens it once wanted: a command that reads its input first takes the latter, so
# that an input it refuses leaves no new, empty catalog behind (it is made once the input is read)
CatalogSource = Catalog | Callable[[], Catalog]


def opened(source: CatalogSource) -> Catalog:
    """The catalog of ``source``, opened (and made, where the command makes one) now."""
    return source if isinstance(source, Catalog) else source()


def _declarations(runs: Iterable[TaskRun]) -> list[AssetDeclaration]:
    """The assets task runs name (inputs and outputs), as they name them."""
    return [decl for run in runs for decl in (*run.inputs, *run.outputs)]


def _reads(runs: Iterable[TaskRun]) -> set[str]:
    """The ids of the assets task runs read."""
    return {decl.id for run in runs for decl in run.inputs}


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


__all__ = [
    "Catalog",
    "CatalogSource",
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
    "opened",
    "storage_error",
]
