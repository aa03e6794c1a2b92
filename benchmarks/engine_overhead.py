"""What SQLAlchemy Core costs the receiver's and the exporter's hot paths, against the hand-written
sqlite3 statements of today, on SQLite:

    python benchmarks/engine_overhead.py [--events 24000] [--small 6000] [--runs 20000] [--repeat 3]
                                         [--read-repeat 5]

**The receiver's writer.** The events of benchmarks/ingest.py (parsed and judged beforehand, not
timed) are written by the real :class:`bridge.catalog.external.GroupIngest` (the preload reads,
the in-memory merge, the writes: received events with their dedup, dataset bindings, placeholder
assets touched or upserted, external runs claimed and merged, facets, identifiers, usages, edges
and column edges), in groups of ``--group`` (a batch
load) and of 4 (single events, as ``olbridge serve`` groups them under load), each group one
transaction, through a cursor of each kind:

- ``sqlite3``: the sqlite3 cursor, as today;
- ``sqlalchemy driver_sql``: the same SQL text through a SQLAlchemy Core ``Connection``
  (``exec_driver_sql``): the floor of what the Connection layer costs;
- ``sqlalchemy text()``: the statements as ``text()`` constructs with named parameters (an IN
  list as one expanding parameter), built once, executed with dicts (``executemany`` for the
  writes);
- ``sqlalchemy Core, once``: ``select()``, ``insert()`` (the SQLite dialect's ``ON CONFLICT``)
  and ``update()`` constructs of the catalog's own ``Table`` objects (``bridge.catalog.schema``)
  with bind parameters, each built once (one a
  shape) and executed with dicts: the least Core can cost;
- ``sqlalchemy Core, per call``: the same constructs built on every call with the values in them,
  as application code usually writes them (SQLAlchemy caches their compiled form by shape).

Every variant has the same connection (the writer's settings: WAL, ``synchronous=FULL``,
``BEGIN IMMEDIATE`` a group; SQLAlchemy's through its documented ``begin`` event) and a new catalog
file; the first 20% of the events warm it and are not timed. The catalogs the variants leave are
compared table by table: they must be equal. The figures are CPU µs an event (the process's CPU
time, which other work on the machine disturbs less than the clock): "lock" from BEGIN to the
commit's start (the reads, the merge and the writes), "commit" the commit's; "of path" is what a
variant adds, as a share of the in-process path with sqlite3 (parse and verdict, measured here
beforehand, plus the writer); "wall" is the clock's time of the writer, the commit's sync included.

**The exporter's read path.** ``Catalog.iter_task_runs`` (pages of 1,000 task runs joined with
their executions, then the usages of the page, each row made a ``StoredTaskRun``) and the asset
lookups an export makes, over ``--runs`` task runs, by each variant (the same stored runs come
back); CPU µs a task run. The whole export (``bridge.delivery.history.iter_lines``: the same
reads plus the conversion to serialized events) is timed once on sqlite3, as the denominator of
"of export".

Each figure is the best of ``--repeat`` passes (``--read-repeat`` for the reads), the variants
taking turns; every pass's figure is printed beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.pool import StaticPool

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.ingest import event  # noqa: E402
from bridge.catalog import Catalog, external, rows, schema, sql, sql_received  # noqa: E402
from bridge.catalog import columns as column_queries  # noqa: E402
from bridge.catalog.sqlite import PRAGMAS  # noqa: E402
from bridge.delivery import history  # noqa: E402
from bridge.jsontext import parse_json  # noqa: E402
from bridge.mapping import Resolver  # noqa: E402
from bridge.model import (  # noqa: E402
    AssetDeclaration,
    ColumnEdge,
    IncomingEvent,
    Statistics,
    StoredTaskRun,
    StoredUsage,
    TaskRun,
    TaskRunKey,
    TaskState,
)
from bridge.openlineage.convert import Converter  # noqa: E402
from bridge.receiver.imports import catalog_intake  # noqa: E402

VARIANTS = (
    "sqlite3",
    "sqlalchemy driver_sql",
    "sqlalchemy text()",
    "sqlalchemy Core, once",
    "sqlalchemy Core, per call",
)
RECEIVER_TABLES = (
    "received_events",
    "external_datasets",
    "assets",
    "external_sources",
    "external_usages",
    "external_lineage",
    "external_facets",
    "external_identifiers",
    "column_lineage",
)


def connect(path: Path) -> sqlite3.Connection:
    """The writer's connection: autocommit mode (transactions are begun by hand), the catalog's
    pragmas, FULL sync, checkpoints left to a checkpointer (here: none)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    for pragma in (*PRAGMAS, "PRAGMA synchronous = FULL", "PRAGMA wal_autocheckpoint = 0"):
        conn.execute(pragma)
    return conn


def engine_for(path: Path) -> sa.Engine:
    """A SQLAlchemy engine on the same connection, with SQLite's documented recipe for
    transactions it begins itself (here BEGIN IMMEDIATE, as the writer takes the write lock)."""
    engine = sa.create_engine("sqlite://", creator=lambda: connect(path), poolclass=StaticPool)

    @sa.event.listens_for(engine, "begin")
    def begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


# --- the tables, as SQLAlchemy sees them: the catalog's own schema ---------------------------------

RECEIVED = schema.received_events
BINDINGS = schema.external_datasets
ASSETS = schema.assets
SOURCES = schema.external_sources
EXT_USAGES = schema.external_usages
EXT_EDGES = schema.external_lineage
FACETS = schema.external_facets
IDENTIFIERS = schema.external_identifiers
COLUMN_EDGES = schema.column_lineage
TASK_RUNS = schema.task_runs
EXECUTIONS = schema.executions
USAGES = schema.usages
ASSET_COLUMNS = [ASSETS.c[name.strip()] for name in sql.ASSET_COLUMNS.split(",")]


# --- the cursors GroupIngest writes through ---------------------------------------------------------


class DriverSQLCursor:
    """The statements' own text through a SQLAlchemy Connection."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.rowcount = -1

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.exec_driver_sql(statement, tuple(params))

    def executemany(self, statement: str, many: Sequence[Sequence[Any]]) -> None:
        self.rowcount = self.conn.exec_driver_sql(statement, [tuple(row) for row in many]).rowcount


NAMES = tuple(f"p{i}" for i in range(1024))
# statements whose last clause is an IN list of n placeholders: text() takes the list as one
# expanding parameter
IN_LISTS = ("SELECT source, inputs, outputs", "SELECT task_run_pk, ", "SELECT upstream_id, downstream_id")


class TextCursor:
    """The statements as text() constructs with named parameters (:p0, :p1, ...; an IN list as one
    expanding parameter), each built once."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.rowcount = -1
        self.texts: dict[str, sa.TextClause] = {}

    @staticmethod
    def _in_list(statement: str) -> bool:
        return statement.strip().startswith(IN_LISTS) and "IN (" in statement

    def _text(self, statement: str) -> sa.TextClause:
        found = self.texts.get(statement)
        if found is None:
            if self._in_list(statement):
                head, tail = statement.split("IN (", 1)
                found = sa.text(f"{head}IN :values{tail.split(')', 1)[1]}").bindparams(
                    sa.bindparam("values", expanding=True)
                )
            else:
                head, *rest = statement.split("?")
                found = sa.text(head + "".join(f":p{i}{part}" for i, part in enumerate(rest)))
            self.texts[statement] = found
        return found

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        if self._in_list(statement):
            return self.conn.execute(self._text(statement), {"values": list(params)})
        return self.conn.execute(self._text(statement), dict(zip(NAMES, params, strict=False)))

    def executemany(self, statement: str, many: Sequence[Sequence[Any]]) -> None:
        result = self.conn.execute(self._text(statement), [dict(zip(NAMES, row, strict=False)) for row in many])
        self.rowcount = result.rowcount


def _names(table: sa.Table, statement: str) -> tuple[str, ...]:
    """The columns of an INSERT statement, in its order."""
    inside = statement.split("(", 1)[1].split(")", 1)[0]
    names = tuple(part.strip() for part in inside.split(","))
    assert all(name in table.c for name in names), names
    return names


def _selected(table: sa.Table, statement: str) -> list[sa.Column[Any]]:
    """The columns a SELECT statement reads from ``table``, in its order."""
    inside = statement.strip().removeprefix("SELECT").split(" FROM ", 1)[0]
    return [table.c[part.strip()] for part in inside.split(",")]


def _pairs_where(first: sa.Column[Any], second: sa.Column[Any], params: Sequence[Any], *, bound: bool) -> Any:
    """``(first = ? AND second = ?) OR ...`` for the pairs of ``params``: the values in the
    construct, or bind parameters a0, b0, a1, b1, ... (``bound``) for a construct built once."""
    count = len(params) // 2
    if bound:
        pairs: list[tuple[Any, Any]] = [(sa.bindparam(f"a{i}"), sa.bindparam(f"b{i}")) for i in range(count)]
    else:
        pairs = list(zip(params[::2], params[1::2], strict=True))
    return sa.or_(*(sa.and_(first == a, second == b) for a, b in pairs))


def _pair_params(params: Sequence[Any]) -> dict[str, Any]:
    out = {}
    for i in range(len(params) // 2):
        out[f"a{i}"], out[f"b{i}"] = params[2 * i], params[2 * i + 1]
    return out


class CoreCursor:
    """Each statement as a Core construct: built on every call with the values in it (``once``
    False), or built once with bind parameters and executed with dicts (``once`` True: the best
    Core can do)."""

    def __init__(self, conn: sa.Connection, *, once: bool) -> None:
        self.conn = conn
        self.once = once
        self.rowcount = -1
        self.built: dict[Any, Any] = {}

        def nothing(table: sa.Table, statement: str) -> tuple[Callable[[], Any], tuple[str, ...]]:
            """An INSERT ... ON CONFLICT DO NOTHING."""
            return lambda: sqlite_insert(table).on_conflict_do_nothing(), _names(table, statement)

        self.writes: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
            sql_received.INSERT_RECEIVED: nothing(RECEIVED, sql_received.INSERT_RECEIVED),
            sql_received.INSERT_BINDING: (lambda: sa.insert(BINDINGS), _names(BINDINGS, sql_received.INSERT_BINDING)),
            sql_received.UPDATE_BINDING: (
                self._update_binding,
                (
                    "v_first",
                    "v_last",
                    "v_seen",
                    "v_facets_rank",
                    "v_facets_digest",
                    "v_all_rank",
                    "v_all_digest",
                    "k_ns",
                    "k_name",
                ),
            ),
            sql_received.TOUCH_PLACEHOLDER: (
                self._touch_placeholder,
                ("v_first", "v_last", "v_first2", "v_last2", "v_producer", "k_id"),
            ),
            sql.UPSERT_PLACEHOLDER: (self._upsert_placeholder, tuple(c.name for c in ASSET_COLUMNS)),
            sql_received.CLAIM_SOURCE: nothing(SOURCES, sql_received.CLAIM_SOURCE),
            sql_received.UPSERT_SOURCE: (self._upsert_source, _names(SOURCES, sql_received.UPSERT_SOURCE)),
            sql_received.UPSERT_FACET: (
                lambda: self._put_facet(latest=True),
                _names(FACETS, sql_received.UPSERT_FACET),
            ),
            sql_received.PUT_FACET: (lambda: self._put_facet(latest=False), _names(FACETS, sql_received.PUT_FACET)),
            sql_received.UPSERT_IDENTIFIER: (
                self._upsert_identifier,
                _names(IDENTIFIERS, sql_received.UPSERT_IDENTIFIER),
            ),
            sql_received.INSERT_EXTERNAL_USAGE: nothing(EXT_USAGES, sql_received.INSERT_EXTERNAL_USAGE),
            sql_received.INSERT_EXTERNAL_EDGE: nothing(EXT_EDGES, sql_received.INSERT_EXTERNAL_EDGE),
            sql.INSERT_COLUMN_EDGE: nothing(COLUMN_EDGES, sql.INSERT_COLUMN_EDGE),
        }

    def _construct(self, key: Any, build: Callable[[], Any]) -> Any:
        if not self.once:
            return build()
        found = self.built.get(key)
        if found is None:
            found = self.built[key] = build()
        return found

    def _by_key(self, key: Any, columns: Sequence[Any], column: sa.Column[Any], params: Sequence[Any]) -> Any:
        """``SELECT columns ... WHERE column = ?``."""
        once = self.once
        query = self._construct(
            key, lambda: sa.select(*columns).where(column == (sa.bindparam("k") if once else params[0]))
        )
        return self.conn.execute(query, {"k": params[0]} if once else None)

    def _by_pairs(self, key: Any, columns: Sequence[Any], pair: tuple[Any, Any], params: Sequence[Any]) -> Any:
        """``SELECT columns ... WHERE (first = ? AND second = ?) OR ...``."""
        once = self.once
        query = self._construct(
            (key, len(params)), lambda: sa.select(*columns).where(_pairs_where(*pair, params, bound=once))
        )
        return self.conn.execute(query, _pair_params(params) if once else None)

    def _by_key_of_four(self, table: sa.Table, key: tuple[Any, ...], text: str, params: Sequence[Any]) -> Any:
        """``SELECT ... WHERE (a = ? AND b = ? AND c = ? AND d = ?) OR ...``: whole keys of four."""
        rows = [params[at : at + 4] for at in range(0, len(params), 4)]
        wanted = sa.or_(*(sa.and_(*(c == v for c, v in zip(key, row, strict=True))) for row in rows))
        return self.conn.execute(sa.select(*_selected(table, text)).where(wanted))

    def _own_assets_of(self, params: Sequence[Any]) -> Any:
        """``SELECT id FROM assets WHERE id IN (...) AND deleted_at IS NULL``."""
        once = self.once
        query = self._construct(
            "own assets of",
            lambda: sa.select(ASSETS.c.id).where(
                ASSETS.c.id.in_(sa.bindparam("k", expanding=True) if once else list(params)),
                ASSETS.c.deleted_at.is_(None),
            ),
        )
        return self.conn.execute(query, {"k": list(params)} if once else None)

    def _symlinked_bindings_of(self, params: Sequence[Any]) -> Any:
        """``sql_received.symlinked_bindings_of(n)``: the bindings whose symlinks name the pairs."""
        once = self.once
        columns = [IDENTIFIERS.c.namespace, IDENTIFIERS.c.name, *_selected(BINDINGS, sql_received.bindings_of(1))]
        joined = IDENTIFIERS.join(BINDINGS, BINDINGS.c.asset_id == IDENTIFIERS.c.asset_id)
        pair = (IDENTIFIERS.c.namespace, IDENTIFIERS.c.name)
        query = self._construct(
            ("symlinked bindings", len(params)),
            lambda: sa.select(*columns).select_from(joined).where(_pairs_where(*pair, params, bound=once)),
        )
        return self.conn.execute(query, _pair_params(params) if once else None)

    def _by_list(self, key: Any, columns: Sequence[Any], column: sa.Column[Any], params: Sequence[Any]) -> Any:
        """``SELECT columns ... WHERE column IN (...)``."""
        once = self.once
        query = self._construct(
            key,
            lambda: sa.select(*columns).where(column.in_(sa.bindparam("k", expanding=True) if once else list(params))),
        )
        return self.conn.execute(query, {"k": list(params)} if once else None)

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        text = statement.strip()
        if statement in (sql.GET_ASSET, sql.GET_ASSET_TO_WRITE):
            return self._by_key("asset", ASSET_COLUMNS, ASSETS.c.id, params)
        if statement == sql_received.BINDING_OF_ASSET:
            return self._by_key("binding of", _selected(BINDINGS, statement), BINDINGS.c.asset_id, params)
        if statement == sql_received.FACET_ROWS_OF:
            return self._by_key("facet rows", _selected(FACETS, statement), FACETS.c.owner, params)
        if text.startswith("SELECT") and "FROM assets WHERE id IN (" in text:  # external.own_assets_of(n)
            return self._own_assets_of(params)
        if text.startswith("SELECT digest FROM received_events"):  # sql_received.received_digests(n)
            pair = (RECEIVED.c.event_time, RECEIVED.c.digest)
            return self._by_pairs("digests", [RECEIVED.c.digest], pair, params)
        if "FROM external_identifiers AS i JOIN external_datasets" in text:  # symlinked_bindings_of(n)
            return self._symlinked_bindings_of(params)
        if "FROM external_datasets WHERE (ol_namespace" in text:  # sql_received.bindings_of(n)
            pair = (BINDINGS.c.ol_namespace, BINDINGS.c.ol_name)
            return self._by_pairs("bindings", _selected(BINDINGS, text), pair, params)
        if "FROM external_usages WHERE (job_namespace" in text:  # sql_received.usages_of(n): whole keys
            usage_key = (
                EXT_USAGES.c.job_namespace,
                EXT_USAGES.c.job_name,
                EXT_USAGES.c.direction,
                EXT_USAGES.c.asset_id,
            )
            return self._by_key_of_four(EXT_USAGES, usage_key, text, params)
        if "FROM external_sources WHERE (source" in text:  # sql_received.sources_of(n): sources and run days
            pair = (SOURCES.c.source, SOURCES.c.run_day)
            return self._by_pairs("sources", _selected(SOURCES, text), pair, params)
        if "FROM external_lineage WHERE (upstream_id" in text:  # sql_received.edges_of(n): whole keys
            key = (EXT_EDGES.c.upstream_id, EXT_EDGES.c.downstream_id, EXT_EDGES.c.job_namespace, EXT_EDGES.c.job_name)
            return self._by_key_of_four(EXT_EDGES, key, text, params)
        raise AssertionError(f"no construct for {statement}")

    def executemany(self, statement: str, many: Sequence[Sequence[Any]]) -> None:
        assert statement in self.writes, f"no construct for {statement}"
        build, names = self.writes[statement]
        result = self.conn.execute(
            self._construct(statement, build), [dict(zip(names, row, strict=True)) for row in many]
        )
        self.rowcount = result.rowcount

    @staticmethod
    def _update_binding() -> Any:
        b = BINDINGS.c
        return (
            sa.update(BINDINGS)
            .where(b.ol_namespace == sa.bindparam("k_ns"), b.ol_name == sa.bindparam("k_name"))
            .values(
                first_seen=sa.bindparam("v_first"),
                last_seen=sa.bindparam("v_last"),
                seen_rank=sa.bindparam("v_seen"),
                facets_rank=sa.bindparam("v_facets_rank"),
                facets_digest=sa.bindparam("v_facets_digest"),
                all_facets_rank=sa.bindparam("v_all_rank"),
                all_facets_digest=sa.bindparam("v_all_digest"),
            )
        )

    @staticmethod
    def _touch_placeholder() -> Any:
        a = ASSETS.c
        producer: Any = sa.func.coalesce(sa.bindparam("v_producer"), sa.func.json_extract(a.metadata, "$.producer"))
        metadata = sa.func.json_set(
            a.metadata,
            "$.firstSeen",
            sa.bindparam("v_first2"),
            "$.lastSeen",
            sa.bindparam("v_last2"),
            "$.producer",
            producer,
        )
        return (
            sa.update(ASSETS)
            .where(a.id == sa.bindparam("k_id"), a.origin == "external")
            .values(
                created_at=sa.func.min(a.created_at, sa.bindparam("v_first")),
                updated_at=sa.bindparam("v_last"),
                metadata=metadata,
            )
        )

    @staticmethod
    def _upsert_placeholder() -> Any:
        statement = sqlite_insert(ASSETS)
        return statement.on_conflict_do_update(
            index_elements=[ASSETS.c.id],
            set_={c.name: statement.excluded[c.name] for c in ASSET_COLUMNS if c.name != "id"},
        )

    @staticmethod
    def _upsert_source() -> Any:
        statement = sqlite_insert(SOURCES)
        new, s = statement.excluded, SOURCES.c
        later = new.state_rank > s.state_rank
        return statement.on_conflict_do_update(
            index_elements=[s.source, s.run_day],
            set_={
                "parent_run_id": sa.func.coalesce(s.parent_run_id, new.parent_run_id),
                "state": sa.case((later, new.state), else_=s.state),
                "ended_at": sa.case((later, new.ended_at), else_=s.ended_at),
                "producer": sa.case((later, new.producer), else_=s.producer),
                "state_rank": sa.func.max(s.state_rank, new.state_rank),
                "started_at": sa.func.min(
                    sa.func.coalesce(s.started_at, new.started_at), sa.func.coalesce(new.started_at, s.started_at)
                ),
                "first_seen": sa.func.min(s.first_seen, new.first_seen),
                "last_seen": sa.func.max(s.last_seen, new.last_seen),
                **{
                    name: new[name]
                    for name in ("inputs", "outputs", "job_namespace", "job_name", "job_rank", "jobs", "warnings")
                },
            },
        )

    @staticmethod
    def _put_facet(*, latest: bool) -> Any:
        """PUT_FACET; UPSERT_FACET (``latest``): only over a lower-ranked facet."""
        statement = sqlite_insert(FACETS)
        new, f = statement.excluded, FACETS.c
        return statement.on_conflict_do_update(
            index_elements=[f.owner, f.facet_key],
            set_={"facet_rank": new.facet_rank, "facet": new.facet},
            where=new.facet_rank > f.facet_rank if latest else None,
        )

    @staticmethod
    def _upsert_identifier() -> Any:
        statement = sqlite_insert(IDENTIFIERS)
        new, i = statement.excluded, IDENTIFIERS.c
        return statement.on_conflict_do_update(
            index_elements=[i["namespace"], i["name"], i["asset_id"]],
            set_={"type": new["type"], "id_rank": new["id_rank"]},
            where=new.id_rank > i.id_rank,
        )


def cursor_for(variant: str, conn: sa.Connection) -> Any:
    if variant == "sqlalchemy driver_sql":
        return DriverSQLCursor(conn)
    if variant == "sqlalchemy text()":
        return TextCursor(conn)
    return CoreCursor(conn, once=variant == "sqlalchemy Core, once")


# --- the receiver's writer ------------------------------------------------------------------------


def prepared_events(count: int, work: Path, resolver: Resolver) -> tuple[list[IncomingEvent], float]:
    """The benchmark's events, parsed and judged as the receiver's workers do, and the CPU µs an
    event that took (the part of the hot path before the writer)."""
    bodies = [json.dumps(event(n), separators=(",", ":")).encode() for n in range(count)]
    verdicts = Catalog(work / "verdicts.db")
    intake = catalog_intake(verdicts, resolver)
    began = time.process_time()
    prepared = [intake.prepare(parse_json(body)) for body in bodies]
    spent = time.process_time() - began
    verdicts.close()
    events = [p for p in prepared if isinstance(p, IncomingEvent)]
    assert len(events) == count, "every benchmark event is accepted"
    return events, 1e6 * spent / count


def write_events(
    variant: str, path: Path, events: list[IncomingEvent], group: int, resolver: Resolver
) -> tuple[float, float, float]:
    """µs an event: CPU under the lock (BEGIN to the commit's start), CPU of the commit, and the
    wall-clock time of both (the commit's sync included)."""
    Catalog(path).close()  # the schema
    warm = len(events) // 5
    timed, lock, commit, wall = 0, 0.0, 0.0, 0.0
    engine = None if variant == "sqlite3" else engine_for(path)
    conn = connect(path) if engine is None else engine.connect()
    cursor = conn.cursor() if isinstance(conn, sqlite3.Connection) else cursor_for(variant, conn)
    for start in range(0, len(events), group):
        chunk = events[start : start + group]
        w0, c0 = time.perf_counter(), time.process_time()
        if isinstance(conn, sqlite3.Connection):
            cursor.execute("BEGIN IMMEDIATE")
            external.ingest_events(cursor, chunk, resolver)
            c1 = time.process_time()
            cursor.execute("COMMIT")
        else:
            transaction = conn.begin()
            external.ingest_events(cursor, chunk, resolver)
            c1 = time.process_time()
            transaction.commit()
        c2, w2 = time.process_time(), time.perf_counter()
        if start >= warm:
            timed += len(chunk)
            lock, commit, wall = lock + c1 - c0, commit + c2 - c1, wall + w2 - w0
    conn.close()
    if engine is not None:
        engine.dispose()
    return 1e6 * lock / timed, 1e6 * commit / timed, 1e6 * wall / timed


def table_digests(path: Path, tables: Sequence[str]) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        out = {}
        for table in tables:
            digest = hashlib.sha256()
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4"):
                digest.update(repr(row).encode())
            out[table] = digest.hexdigest()[:16]
    conn.close()
    return out


# --- the exporter's read path ----------------------------------------------------------------------


EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def task_runs(count: int) -> Iterator[TaskRun]:
    """A recurring history (as benchmarks/delivery.py's): each run reads one of 100 tables and writes another."""
    for i in range(count):
        start = EPOCH + timedelta(seconds=i)
        yield TaskRun(
            key=TaskRunKey("company.data", f"flow_{i % 50}", f"task_{i % 7}", f"e{i}", f"e{i}.t"),
            state=TaskState.SUCCESS,
            started_at=start,
            ended_at=start + timedelta(seconds=30),
            inputs=(AssetDeclaration.create(f"warehouse.raw.t{i % 100}"),),
            outputs=(AssetDeclaration.create(f"warehouse.mart.t{i % 100}", type="Table"),),
        )


def _runs_from(page: Sequence[Any], usage_rows: Any, edges: dict[int, list[ColumnEdge]]) -> Iterator[StoredTaskRun]:
    """The page's rows as StoredTaskRuns, as bridge.catalog.history.with_usages makes them."""
    usages: dict[int, list[StoredUsage]] = {}
    for pk, asset_id, direction, position, stats in usage_rows:
        usages.setdefault(pk, []).append(
            StoredUsage(asset_id, direction, position, Statistics(**json.loads(stats)) if stats else Statistics())
        )
    for row in page:
        yield rows.task_run_from_row(row, usages.get(row[0], []), edges.get(row[0], ()))


class CoreColumnEdges:
    """The column edges of a page's task runs as a Core construct, for
    ``bridge.catalog.columns.edges_of_runs`` (which makes them ColumnEdges)."""

    def __init__(self, conn: sa.Connection, *, once: bool) -> None:
        self.conn = conn
        self.once = once
        self.built: Any = None

    def _build(self, pks: list[Any]) -> Any:
        c = COLUMN_EDGES.c
        order = (c.downstream_id, c.downstream_column, c.upstream_id, c.upstream_column, c.transformations)
        return (
            sa.select(c.task_run_pk, *order)
            .where(c.task_run_pk.in_(sa.bindparam("pks", expanding=True) if self.once else pks))
            .order_by(c.task_run_pk, *order)
        )

    def execute(self, statement: str, params: Sequence[Any]) -> Any:
        assert statement.startswith("SELECT task_run_pk, downstream_id"), statement
        if not self.once:
            return self.conn.execute(self._build(list(params)))
        if self.built is None:
            self.built = self._build([])
        return self.conn.execute(self.built, {"pks": list(params)})


def read_sqlite3(path: Path, page_size: int) -> list[StoredTaskRun]:
    with Catalog(path) as catalog:
        lookup = history.AssetLookup(catalog)
        out = []
        for run in catalog.iter_task_runs(page_size=page_size):
            lookup.of_run(run)
            out.append(run)
        return out


def read_sqlalchemy(variant: str, path: Path, page_size: int) -> list[StoredTaskRun]:
    """Catalog.iter_task_runs and the export's asset lookups, through SQLAlchemy."""
    engine = engine_for(path)
    out: list[StoredTaskRun] = []
    with engine.connect() as conn:
        if variant.startswith("sqlalchemy Core"):
            once = variant == "sqlalchemy Core, once"
            t, e, u = TASK_RUNS.c, EXECUTIONS.c, USAGES.c
            built: dict[str, Any] = {}

            def construct(key: str, build: Callable[[], Any]) -> Any:
                if not once:
                    return build()
                if key not in built:
                    built[key] = build()
                return built[key]

            def page_query(after: tuple[Any, Any] | None) -> Any:
                joined = TASK_RUNS.join(
                    EXECUTIONS,
                    sa.and_(
                        e.flow_namespace == t.flow_namespace, e.flow_id == t.flow_id, e.execution_id == t.execution_id
                    ),
                )
                columns = [*(TASK_RUNS.c[n] for n in list(TASK_RUNS.c.keys())[:12]), e.started_at]
                query = sa.select(*columns).select_from(joined)
                if after is not None:
                    bound = (sa.bindparam("after_time"), sa.bindparam("after_pk")) if once else after
                    query = query.where(sa.tuple_(t.started_at, t.pk) > sa.tuple_(*bound))
                return query.order_by(t.started_at, t.pk).limit(sa.bindparam("size") if once else page_size)

            def page(after: tuple[Any, Any] | None) -> Sequence[Any]:
                query = construct("first" if after is None else "paged", lambda: page_query(after))
                params = {
                    "size": page_size,
                    **({} if after is None else {"after_time": after[0], "after_pk": after[1]}),
                }
                return conn.execute(query, params if once else None).all()

            def usages_of(pks: list[int]) -> Any:
                query = construct(
                    "usages",
                    lambda: (
                        sa.select(u.task_run_pk, u.asset_id, u.direction, u.position, u.statistics)
                        .where(u.task_run_pk.in_(sa.bindparam("pks", expanding=True) if once else pks))
                        .order_by(u.task_run_pk, u.direction, u.position)
                    ),
                )
                return conn.execute(query, {"pks": pks} if once else None)

            def asset(asset_id: str) -> Any:
                query = construct(
                    "asset",
                    lambda: sa.select(*ASSET_COLUMNS).where(ASSETS.c.id == (sa.bindparam("id") if once else asset_id)),
                )
                return conn.execute(query, {"id": asset_id} if once else None).first()

            edges_of: Any = CoreColumnEdges(conn, once=once)

        else:
            cursor: Any = DriverSQLCursor(conn) if variant == "sqlalchemy driver_sql" else TextCursor(conn)
            first, paged = sql.select_task_runs(), sql.select_task_runs(after_pk=True)

            def page(after: tuple[Any, Any] | None) -> Sequence[Any]:
                if after is None:
                    return cursor.execute(first, (page_size,)).all()  # type: ignore[no-any-return]
                return cursor.execute(paged, (*after, page_size)).all()  # type: ignore[no-any-return]

            def usages_of(pks: list[int]) -> Any:
                return cursor.execute(sql.select_usages_of_runs(len(pks)), pks)

            def asset(asset_id: str) -> Any:
                return cursor.execute(sql.GET_ASSET, (asset_id,)).first()

            edges_of = cursor

        seen: dict[str, Any] = {}
        after = None
        while True:
            rows_ = page(after)
            if not rows_:
                break
            pks = [r[0] for r in rows_]
            for run in _runs_from(rows_, usages_of(pks), column_queries.edges_of_runs(edges_of, pks)):
                for usage in run.usages:  # the export's AssetLookup: each asset read once
                    if usage.asset_id not in seen:
                        found = asset(usage.asset_id)
                        seen[usage.asset_id] = rows.asset_from_row(found) if found else None
                out.append(run)
            after = (rows_[-1][7], rows_[-1][0])
            if len(rows_) < page_size:
                break
    engine.dispose()
    return out


# --- the report ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=24_000, help="events for the batch groups")
    parser.add_argument("--group", type=int, default=400)
    parser.add_argument("--small", type=int, default=6_000, help="events for the groups of 4")
    parser.add_argument("--runs", type=int, default=20_000, help="task runs for the read path")
    parser.add_argument("--repeat", type=int, default=3, help="passes of each variant's writes")
    parser.add_argument("--read-repeat", type=int, default=5, help="passes of each variant's reads")
    args = parser.parse_args(argv)
    resolver = Resolver.load()
    print(f"SQLAlchemy {sa.__version__}, SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="olbridge-engine-") as folder:
        work = Path(folder)
        events, before_writer = prepared_events(max(args.events, args.small), work, resolver)
        for group, count in ((args.group, args.events), (4, args.small)):
            lock: dict[str, list[float]] = {v: [] for v in VARIANTS}
            commit: dict[str, list[float]] = {v: [] for v in VARIANTS}
            wall: dict[str, list[float]] = {v: [] for v in VARIANTS}
            digests: dict[str, dict[str, str]] = {}
            for turn in range(args.repeat):
                for variant in VARIANTS[turn % len(VARIANTS) :] + VARIANTS[: turn % len(VARIANTS)]:
                    path = work / f"w{group}-{turn}-{VARIANTS.index(variant)}.db"
                    held, committed, took = write_events(variant, path, events[:count], group, resolver)
                    lock[variant].append(held)
                    commit[variant].append(committed)
                    wall[variant].append(took)
                    digests.setdefault(variant, table_digests(path, RECEIVER_TABLES))
                    for suffix in ("", "-wal", "-shm"):
                        Path(f"{path}{suffix}").unlink(missing_ok=True)
            assert all(d == digests["sqlite3"] for d in digests.values()), digests
            cpu = {v: [a + b for a, b in zip(lock[v], commit[v], strict=True)] for v in VARIANTS}
            best = {v: min(range(args.repeat), key=cpu[v].__getitem__) for v in VARIANTS}
            base = cpu["sqlite3"][best["sqlite3"]]
            whole = before_writer + base
            print(
                f"\nreceiver's writer, {count:,} events in groups of {group}, CPU µs an event (best pass; the catalogs"
                " left equal);"
                f" the in-process path with sqlite3, CPU: parse and verdict {before_writer:.1f} + writer {base:.1f}"
                f" = {whole:.1f}"
            )
            print(
                f"  {'':26} {'lock':>6} {'commit':>6} {'writer':>6} {'ratio':>6} {'of path':>8} {'wall':>7}"
                "   writer CPU, each pass"
            )
            for variant in VARIANTS:
                pick = best[variant]
                held, committed, total = lock[variant][pick], commit[variant][pick], cpu[variant][pick]
                passes = " ".join(f"{c:.1f}" for c in cpu[variant])
                print(
                    f"  {variant:26} {held:6.1f} {committed:6.1f} {total:6.1f} {total / base:5.2f}x"
                    f" {100 * (total - base) / whole:+7.1f}% {wall[variant][pick]:7.1f}   {passes}"
                )

        db = work / "runs.db"
        with Catalog(db) as catalog:
            catalog.record_task_runs(task_runs(args.runs))
        expected = read_sqlite3(db, 1000)
        reads: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for turn in range(args.read_repeat):
            for variant in VARIANTS[turn % len(VARIANTS) :] + VARIANTS[: turn % len(VARIANTS)]:
                t0 = time.process_time()
                got = read_sqlite3(db, 1000) if variant == "sqlite3" else read_sqlalchemy(variant, db, 1000)
                reads[variant].append(1e6 * (time.process_time() - t0) / args.runs)
                assert got == expected, f"{variant} read other task runs"
        with Catalog(db) as catalog:
            converter = Converter(resolver)
            t0 = time.process_time()
            lines = sum(1 for _ in history.iter_lines(catalog, converter))
            whole_export = 1e6 * (time.process_time() - t0) / args.runs
        base = min(reads["sqlite3"])
        print(
            f"\nexporter's read path, {args.runs:,} task runs in pages of 1,000, CPU µs a task run (best pass; the"
            " same runs read);"
            f" the whole export with sqlite3 (iter_lines, {lines:,} events): {whole_export:.1f}"
        )
        print(f"  {'':26} {'reads':>7} {'ratio':>7} {'of export':>9}   each pass")
        for variant in VARIANTS:
            least = min(reads[variant])
            passes = " ".join(f"{r:.1f}" for r in reads[variant])
            print(
                f"  {variant:26} {least:7.1f} {least / base:6.2f}x {100 * (least - base) / whole_export:+8.1f}%"
                f"   {passes}"
            )


if __name__ == "__main__":
    main()
