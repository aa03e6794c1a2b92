"""One catalog, two engines: the schema (made new, or migrated from the first version) is the same
either way and on either engine, an older SQLite catalog upgrades in place with all its data, a
PostgreSQL catalog is upgraded by ``olbridge migrate`` only, writers side by side on PostgreSQL
end as one writer would, and a password in a catalog URL is never shown."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sqlite3
import string
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.schema import CreateIndex, CreateTable

from bridge.catalog import Catalog, Position, migrate, schema, sql, sql_outbox, sql_received
from bridge.catalog.engine import masked, url_password
from bridge.catalog.migrate import head
from bridge.catalog.migrations.legacy import SQLITE_SCRIPTS
from bridge.catalog.outbox import Delivered, DeliveryError
from bridge.catalog.positions import Checkpoint, RefusedItem
from bridge.catalog.postgres import PostgresEngine, split_url, translate
from bridge.catalog.postgres.engine import SCHEMA_LOCK
from bridge.catalog.workers import StreamWorkerInfo
from bridge.delivery.claims import OutboxClaims
from bridge.delivery.history import iter_lines
from bridge.delivery.holds import outbox_hold
from bridge.delivery.lease import OutboxLease
from bridge.errors import BadValueError, Busy, CatalogError
from bridge.mapping import Resolver
from bridge.model import AssetDeclaration, Column, DeclaredFlow, DeclaredJob, parse_column_lineage
from bridge.openlineage.convert import Converter
from bridge.receiver.events import read_event
from bridge.receiver.imports import catalog_intake
from tests.backend import free_port
from tests.conftest import at
from tests.helpers import catalog_state, decl, in_threads, invoke, ol_dataset, ol_run_event, run, serve_process
from tests.postgres import PostgresServer

pytestmark = pytest.mark.both_engines

# --- one schema --------------------------------------------------------------------------------


def test_the_newest_migration_is_the_schema_version() -> None:
    assert head() == f"{sql.SCHEMA_VERSION:04d}"


SEARCH = "asset_search"


def schema_read(connection: sa.Connection) -> dict[str, Any]:
    """What the database says of each table: columns (name, type, null, default, key), indexes,
    unique constraints, foreign keys and checks, and the views; not the assets' search, which is
    each engine's own (an FTS5 table and its triggers, a view and pg_trgm's indexes: tested apart)."""
    inspector = sa.inspect(connection)
    out: dict[str, Any] = {"views": sorted(v for v in inspector.get_view_names() if v != SEARCH)}
    for table in sorted(t for t in inspector.get_table_names() if not t.startswith(SEARCH)):
        key = inspector.get_pk_constraint(table)["constrained_columns"]
        out[table] = {
            # (a key column is never null, declared so or not; a default as each engine writes it)
            "columns": [
                (
                    c["name"],
                    str(c["type"]).split(" COLLATE")[0],
                    c["nullable"] and c["name"] not in key,
                    str(c.get("default")).removesuffix("::text").strip("'\""),
                )
                for c in inspector.get_columns(table)
            ],
            "key": key,
            # (SQLAlchemy reads an index on expressions on PostgreSQL only: see the test of both)
            "indexes": sorted(
                (i["name"], tuple(str(c) for c in i["column_names"]), bool(i["unique"]))
                for i in inspector.get_indexes(table)
                if None not in i["column_names"]
                and not i.get("duplicates_constraint")
                and not i["name"].endswith("_trgm")
            ),
            "unique": sorted(tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)),
            "foreign": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"]) for f in inspector.get_foreign_keys(table)
            ),
            "checks": len(inspector.get_check_constraints(table)),
        }
    return out


def _sqliteschema_read(path: Path) -> dict[str, Any]:
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            return schema_read(connection)
    finally:
        engine.dispose()


@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_a_catalog_migrated_from_the_first_version_has_the_schema_of_a_new_one(tmp_path: Path) -> None:
    """The migrations and schema.py say the same thing: a new catalog is made from the tables,
    an old one reaches them by the migrations."""
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    conn.executescript(f"BEGIN;\n{SQLITE_SCRIPTS[0][1]}\nPRAGMA user_version = 1;\nCOMMIT;")
    conn.close()
    Catalog(old).close()  # upgraded, 0002 to the newest
    Catalog(tmp_path / "new.db").close()
    migrated, new = _sqliteschema_read(old), _sqliteschema_read(tmp_path / "new.db")
    assert migrated.keys() == new.keys() and len(new) > 20
    for table in new:
        assert migrated[table] == new[table], table


_TYPES = {"TEXT": "text", "INTEGER": "integer", "BIGINT": "integer", "REAL": "seconds", "DOUBLE PRECISION": "seconds"}


def _portable(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema with each engine's own type for a kind of value named by the kind."""
    out = dict(schema)
    for table, found in schema.items():
        if table != "views":
            columns = [(name, _TYPES.get(kind, kind), null, default) for name, kind, null, default in found["columns"]]
            out[table] = {**found, "columns": columns}
    return out


def undo_runs_by_job_in_time(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0036 found it: the received runs indexed by their job alone."""
    execute("DROP INDEX external_sources_job")
    execute("CREATE INDEX external_sources_job ON external_sources (job_namespace, job_name)")


def undo_kept_writers_gone(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0038 found it: no write kept apart of the task runs retention deleted."""
    execute("ALTER TABLE kept_writers DROP COLUMN gone_write")


def undo_alerts_told(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0037 found it: nothing kept of the alerts an open FAIL or WARN was told."""
    execute("ALTER TABLE asset_health DROP COLUMN told")


def undo_health_purged(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0035 found it: nothing kept of the assets purged while FAIL or WARN."""
    execute("ALTER TABLE asset_health DROP COLUMN purged")


def undo_kept_edges(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0033 found it: no edges kept of the received runs retention deleted."""
    execute("DROP TABLE kept_edges")


def undo_alert_heads(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0032 found it: no index of the alerts waiting in the outbox."""
    execute("DROP INDEX outbox_alerts")


def undo_writers_by_task(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0031 found it: no index of the writers by task, the kept health's
    by health alone."""
    execute("DROP INDEX kept_writers_task")
    execute("DROP INDEX asset_health_health")
    execute("CREATE INDEX asset_health_health ON asset_health (health)")


def undo_unwritten_outputs(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0029 found it: no outputs kept of the runs that did not write them."""
    execute("DROP TABLE unwritten_outputs")


def undo_lineage_by_run(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0028 found it: no index of the lineage by run."""
    execute("DROP INDEX lineage_run")


def undo_uses_by_asset_in_time(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0027 found it: the own uses indexed by their asset alone."""
    execute("DROP INDEX usages_asset")
    execute("CREATE INDEX usages_asset ON usages (asset_id)")


def undo_edges_by_whole_key(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0026 found it: the received usages' and edges' indexes by dataset
    without the jobs."""
    execute("DROP INDEX external_usages_asset")
    execute("CREATE INDEX external_usages_asset ON external_usages (asset_id)")
    execute("DROP INDEX external_lineage_downstream")
    execute("CREATE INDEX external_lineage_downstream ON external_lineage (downstream_id, upstream_id)")


def undo_own_facts_kept(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0025 found it: no latest run of each task kept (the writers kept
    from the runs as well: the migration merges them into those it finds)."""
    execute("DROP TABLE latest_task_runs")


def undo_health_due(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0024 found it: no due times kept with the assets' health."""
    execute("DROP INDEX asset_health_due")
    execute("ALTER TABLE asset_health DROP COLUMN due_at")


def undo_writes_kept(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0021 found it: no writes of deleted runs kept."""
    execute("DROP TABLE kept_writes")
    execute("DROP TABLE kept_writers")


def undo_runs_partitioned(execute: Callable[[str], Any], engine: str) -> None:
    """Received runs as a catalog before migration 0022 kept them: keyed by their source alone,
    with no run day (one table on PostgreSQL, not partitioned), their rows kept."""
    runs = schema.external_sources
    execute("ALTER TABLE external_sources RENAME TO external_sources_0022")
    for index in runs.indexes:
        execute(f"DROP INDEX {index.name}")
    if engine == "postgresql":
        execute("ALTER TABLE external_sources_0022 DROP CONSTRAINT external_sources_pkey")
    compiled = schema.dialect(engine)
    made = str(CreateTable(runs).compile(dialect=compiled)).strip()
    [day] = [line for line in made.splitlines() if line.strip().startswith("run_day ")]
    execute(made.replace(day + "\n", "").replace("PRIMARY KEY (source, run_day)", "PRIMARY KEY (source)"))
    for index in runs.indexes:
        execute(str(CreateIndex(index).compile(dialect=compiled)))
    names = ", ".join(c.name for c in runs.columns if c.name != "run_day")
    execute(f"INSERT INTO external_sources ({names}) SELECT {names} FROM external_sources_0022")
    execute("DROP TABLE external_sources_0022")


def undo_asset_filters(execute: Callable[[str], Any]) -> None:
    """A catalog as migration 0020 found it: the assets' namespace and type, and the edges'
    downstream ends, indexed alone."""
    execute("DROP INDEX assets_namespace_type")
    execute("DROP INDEX assets_namespace")
    execute("DROP INDEX assets_type")
    execute("CREATE INDEX assets_type ON assets (type)")
    execute("CREATE INDEX assets_namespace ON assets (namespace)")
    for table in ("lineage", "external_lineage"):
        execute(f"DROP INDEX {table}_downstream")
        execute(f"CREATE INDEX {table}_downstream ON {table} (downstream_id)")


def undo_ui_reads(execute: Callable[[str], Any], engine: str) -> None:
    """A catalog as migration 0019 found it: the UI's indexes and the assets' search not there."""
    for index in (
        "task_runs_namespace_started",
        "received_events_source",
        "external_sources_started",
        "external_sources_namespace_started",
    ):
        execute(f"DROP INDEX {index}")
    if engine == "sqlite":
        for table, _, _ in schema.SEARCH_SOURCES:
            execute(f"DROP TRIGGER {table}_searched")
            execute(f"DROP TRIGGER {table}_unsearched")
        execute("DROP TABLE asset_search")
    else:
        execute("DROP VIEW asset_search")
        for table, _, _ in schema.SEARCH_SOURCES:
            execute(f"DROP INDEX IF EXISTS {table}_trgm")


def unpartition_received(conn: psycopg.Connection[Any]) -> None:
    """Received events as a catalog before migration 0016 kept them: one table, its rows kept."""
    conn.execute("ALTER TABLE received_events RENAME TO received_events_0016")
    conn.execute("ALTER INDEX received_events_time_digest RENAME TO received_events_0016_time_digest")
    conn.execute("ALTER SEQUENCE received_events_pk_seq RENAME TO received_events_0016_seq")
    for table in schema.received_events, *schema.received_events.indexes:
        make = CreateTable(table) if isinstance(table, sa.Table) else CreateIndex(table)
        conn.execute(str(make.compile(dialect=schema.dialect("postgresql"))))
    conn.execute("INSERT INTO received_events OVERRIDING SYSTEM VALUE SELECT * FROM received_events_0016")
    conn.execute(
        "SELECT setval(pg_get_serial_sequence('received_events', 'pk'), (SELECT max(pk) FROM received_events))"
    )
    conn.execute("DROP TABLE received_events_0016")


def _partitioned_as_one(schema: dict[str, Any]) -> dict[str, Any]:
    """PostgreSQL's schema with the partitions of received events and received runs (by day, and
    the default) left out, and received events' table as SQLite's: on PostgreSQL its key holds the
    event time (the partition key, which a key of a partitioned table must hold), counted by a
    sequence, not an identity. (Received runs' key holds their run day on both engines.)"""
    out = dict(schema)
    for table in ("received_events", "external_sources"):
        partitions = {t for t in schema if t.startswith(f"{table}_")}
        assert f"{table}_default" in partitions and len(partitions) >= 8  # today and the week ahead
        out = {t: found for t, found in out.items() if t not in partitions}
    received = out["received_events"]
    assert received["key"] == ["pk", "event_time"]
    columns = received["columns"]
    assert columns[0][3] == "nextval('received_events_pk_seq'::regclass)"
    out["received_events"] = {**received, "key": ["pk"], "columns": [(*columns[0][:3], "None"), *columns[1:]]}
    return out


@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_both_engines_have_the_sameschema_read(catalog_template: str, postgres: PostgresServer, tmp_path: Path) -> None:
    """Tables, columns, keys, indexes, constraints and views, the same on SQLite and on PostgreSQL
    (each kind of value in its engine's type)."""
    with postgres.connect() as admin:  # the template takes no connections: let this one in
        admin.execute(f'ALTER DATABASE "{catalog_template}" WITH ALLOW_CONNECTIONS true')
    engine = sa.create_engine(postgres.url(catalog_template).replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as connection:
            on_postgres = schema_read(connection)
    finally:
        engine.dispose()
        with postgres.connect() as admin:
            admin.execute(f'ALTER DATABASE "{catalog_template}" WITH ALLOW_CONNECTIONS false')
    Catalog(tmp_path / "c.db").close()
    on_sqlite = _sqliteschema_read(tmp_path / "c.db")
    on_postgres = _partitioned_as_one(on_postgres)
    assert on_postgres.keys() == on_sqlite.keys()
    for table in on_sqlite:
        assert _portable(on_postgres)[table] == _portable(on_sqlite)[table], table
    # the unique index on expressions (an edge of a run, whichever made it), on both
    sqlite_index = (
        sqlite3.connect(tmp_path / "c.db")
        .execute("SELECT sql FROM sqlite_master WHERE name = 'column_lineage_edge'")
        .fetchone()[0]
    )
    assert "UNIQUE" in sqlite_index and "coalesce(task_run_pk, 0)" in sqlite_index


# --- an older SQLite catalog, upgraded in place ---------------------------------------------


def _fill(catalog: Catalog, resolver: Resolver) -> None:
    """Something in every table a release before 0009 had."""
    catalog.record_task_runs(
        [
            run("load", inputs=(decl("raw.orders"),), outputs=(decl("mart.orders", type="Table"),)),
            run("report", inputs=(decl("mart.orders"),), outputs=(decl("s3://b/report.csv", type="File"),)),
        ]
    )
    catalog.set_asset(AssetDeclaration.create("ops.vm", type="VM", metadata={"zone": "eu"}), now=at(3))
    catalog.delete_asset("ops.vm", now=at(4))
    intake = catalog_intake(catalog, resolver)
    assert all(
        o.ok
        for o in intake.take(
            [ol_run_event("COMPLETE", inputs=[ol_dataset("s3://raw", "in")], outputs=[ol_dataset("s3://raw", "out")])]
        )
    )
    catalog.save_position(Position("marquez-import", "http://marquez:5000", {"after": "2025-03-01T08:00:00Z"}, "u1"))
    catalog.save_position(
        Position(
            "prefect-import",
            "http://prefect/api",
            {"eventsRead": 4, "lastEventIds": ["a", "b"], "lastOccurred": "2025-03-01T08:00:00.000000Z"},
            "u2",
        )
    )
    refused = RefusedItem(("2025-03-01T08:00:00.000000Z", 1, 2), "start", 400, "no", "u3")
    catalog.backfills.save(
        Checkpoint("http://backend", {"namespace": "company.data"}, ("2025-03-01T08:00:00.000000Z", 1, 1), 1, 2, "u3"),
        refused=[refused],
    )
    job = DeclaredJob("company.data", "nightly", "load", "io.kestra.Load", inputs=(decl("raw.orders"),))
    catalog.declare_flows([DeclaredFlow("company.data", "nightly", (job,))], now=at(5))
    lineage = parse_column_lineage({"fields": {"id": [{"id": "raw.c", "column": "id", "transformation": "IDENTITY"}]}})
    outputs = (decl("mart.customers", type="Table", columns=[Column("id")], column_lineage=lineage),)
    catalog.record_task_runs([run("customers", inputs=(decl("raw.c"),), outputs=outputs)])
    first = catalog.outbox.items()[0].seq
    error = DeliveryError("stream", "http://backend", "HTTP 5xx", 503, "busy", "u5")
    catalog.outbox.settle([Delivered(first)], success_at="u4", failures=[error])
    worker = StreamWorkerInfo("host:1:a", "host", 1, "http://backend", "u6", 100.0)
    catalog.workers.beat(worker, 100.0)
    assert catalog.workers.acquire(worker.id, 100.0, 5.0, acquired_at="u6").taken


def _columns_of(path: Path, columns: dict[str, list[str]]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of a SQLite catalog's tables that are in ``columns``, with only those columns."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {
            table: conn.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY 1").fetchall()
            for table, names in sorted(columns.items())
            if table in tables and table != "sqlite_sequence"
        }


def test_a_sqlite_catalog_of_the_previous_version_upgrades_in_place_and_keeps_its_data(
    tmp_path: Path, resolver: Resolver
) -> None:
    """A catalog as the previous release (schema version 8) left it, with a row in every table,
    is upgraded when opened: every row is there after, the positions as they were."""
    now = tmp_path / "now.db"
    with Catalog(now) as catalog:
        _fill(catalog, resolver)
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    for number, (_name, script) in enumerate(SQLITE_SCRIPTS, start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    # the columns of each table as that release had them (later revisions add tables and columns)
    then = {
        table: [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    then["positions"] = ["kind", "name", "value", "updated_at"]  # made by 0009 from the tables below
    expected = _columns_of(now, then)
    assert all(expected.values()), [t for t, rows in expected.items() if not rows]
    conn.execute("ATTACH DATABASE ? AS now", (str(now),))
    for table, columns in then.items():
        if table in expected and table != "positions":
            names = ", ".join(columns)
            conn.execute(f"INSERT INTO main.{table} ({names}) SELECT {names} FROM now.{table}")
    conn.execute(
        "INSERT INTO import_positions SELECT 'marquez:' || name, json_extract(value, '$.after'), updated_at "
        "FROM now.positions WHERE kind = 'marquez-import'"
    )
    conn.execute(
        "INSERT INTO prefect_import_state SELECT name, json_extract(value, '$.lastOccurred'), "
        "json_extract(value, '$.lastEventIds'), json_extract(value, '$.eventsRead'), updated_at "
        "FROM now.positions WHERE kind = 'prefect-import'"
    )
    conn.execute(
        "INSERT INTO backfill_checkpoints SELECT name, json_extract(value, '$.filters'), "
        "json_extract(value, '$.position'), json_extract(value, '$.runs'), json_extract(value, '$.events'), "
        "updated_at, json_extract(value, '$.ahead') FROM now.positions WHERE kind = 'backfill'"
    )
    conn.execute("DETACH DATABASE now")
    conn.close()
    with Catalog(old) as upgraded:
        assert (upgraded.upgraded_from, upgraded.schema_version) == (8, sql.SCHEMA_VERSION)
    assert _columns_of(old, then) == expected
    with Catalog(old) as upgraded:
        converter = Converter(resolver)
        assert list(iter_lines(upgraded, converter)) == list(iter_lines(Catalog(now), converter))
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone() == (sql.SCHEMA_VERSION,)


def test_the_migrate_command_upgrades_a_sqlite_catalog(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    for number, (_name, script) in enumerate(SQLITE_SCRIPTS, start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.close()
    code, out, err = invoke(old, "migrate")
    assert code == 0, err
    assert json.loads(out) == {"catalog": str(old), "schemaVersion": sql.SCHEMA_VERSION, "upgradedFrom": 8}
    code, out, err = invoke(old, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] is None


def test_an_older_sqlite_catalog_that_cannot_be_upgraded_where_it_is_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older catalog on a read-only mount: "the file cannot be opened" alone, where a catalog of
    this version opens there; it says the catalog is older and must be upgraded first."""
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    for number, (_name, script) in enumerate(SQLITE_SCRIPTS, start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.close()

    def read_only(engine: Any) -> None:  # as SQLite answers a write where the mount is read-only
        exc = sqlite3.OperationalError("unable to open database file")
        exc.sqlite_errorcode = 14
        raise exc

    monkeypatch.setattr(migrate, "upgrade", read_only)
    code, _, err = invoke(old, "assets", "list")
    assert (code, err) == (
        1,
        f"Error: catalog {old}: the file cannot be opened (SQLite: unable to open database file); it has schema "
        f"version 8, older than this olbridge's ({sql.SCHEMA_VERSION}), which it brings up to date before anything "
        "else: open it where it can be written (a copy), or with the olbridge that made it\n",
    )


def test_a_command_that_upgrades_a_sqlite_catalog_says_so(tmp_path: Path) -> None:
    """Any command upgrades an older SQLite catalog as it opens it (a read-only one too: the web
    view, ``assets list``), and the olbridge before cannot open it after: said on stderr, once."""
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old, isolation_level=None)
    for number, (_name, script) in enumerate(SQLITE_SCRIPTS, start=1):
        conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {number};\nCOMMIT;")
    conn.close()
    code, _, err = invoke(old, "assets", "list")
    assert (code, err) == (
        0,
        f"upgraded catalog {old} from schema version 8 to {sql.SCHEMA_VERSION}: an olbridge older than this one "
        "cannot open it now\n0 asset(s)\n",
    )
    code, _, err = invoke(old, "assets", "list")
    assert (code, err) == (0, "0 asset(s)\n")


# --- PostgreSQL: upgraded on purpose ----------------------------------------------------------


def test_a_postgresql_catalog_of_another_version_is_refused_and_migrate_names_itself(
    postgres: PostgresServer, catalog_template: str
) -> None:
    url = postgres.url(postgres.create_database(template=catalog_template))
    code, out, err = invoke(url, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] is None, err
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = %s", (f"{sql.SCHEMA_VERSION - 1:04d}",))
    code, _, err = invoke(url, "assets", "list")
    assert code == 1 and "older than this olbridge's" in err and "olbridge migrate" in err, err
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = %s", (f"{sql.SCHEMA_VERSION + 1:04d}",))
    for command in (["assets", "list"], ["migrate"], ["init"]):
        code, _, err = invoke(url, *command)
        assert code == 1 and "newer than this olbridge knows" in err, err


def test_every_foreign_key_leads_an_index_of_its_table() -> None:
    """The rows that name a task run are found by it through an index (or the primary key): a
    run recorded again before it ended replaces its usages and edges, retention deletes a batch
    of runs' rows, and PostgreSQL checks each deleted run's foreign keys; without one, each is a
    read of the whole table (the lineage's, before migration 0028)."""
    for table in schema.metadata.sorted_tables:
        leads = {index.columns[0].name for index in table.indexes if len(index.columns)}
        if len(table.primary_key.columns):
            leads.add(next(iter(table.primary_key.columns)).name)
        for key in table.foreign_keys:
            assert key.parent.name in leads, f"{table.name}.{key.parent.name} leads no index"


def test_a_runs_edges_are_replaced_through_an_index(tmp_path: Path) -> None:
    """The statement that replaces a run's edges (and retention's, a batch of runs at once) reads
    them through ``lineage_run``: SQLite's plan (the index is checked on both engines by the
    schema's test above, and PostgreSQL's schema against SQLite's)."""
    with Catalog(tmp_path / "c.db") as catalog:
        statement = f"EXPLAIN QUERY PLAN {sql.DELETE_LINEAGE_OF_RUN}"
        plan = " ".join(str(row[-1]) for row in catalog._conn.execute(statement, (1,)))
    assert "lineage_run" in plan, plan


def _fillfactors(url: str) -> dict[str, str | None]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            # a partitioned table's, as its default partition has them (it has none of its own)
            "SELECT c.relname, (SELECT option_value FROM pg_options_to_table(coalesce(d.reloptions, c.reloptions)) "
            "WHERE option_name = 'fillfactor') FROM pg_class c "
            "LEFT JOIN pg_class d ON c.relkind = 'p' AND d.relname = c.relname || '_default' "
            "WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relnamespace = 'public'::regnamespace"
        ).fetchall()
    return dict(rows)


def test_a_postgresql_migration_that_fails_on_the_way_lands_not_at_all_and_migrate_goes_on_after(
    postgres: PostgresServer, catalog_template: str
) -> None:
    """Each migration is a transaction of its own: 0036 stopped after dropping its index (here by
    an event trigger refusing CREATE INDEX; a statement timeout or a signal alike) left the
    catalog without it, its version 0035, and every later ``migrate`` failed on the index it
    found missing. Now 0035 lands, 0036 not at all, and ``migrate`` after finishes the work."""
    url = postgres.url(postgres.create_database(template=catalog_template))
    with psycopg.connect(url, autocommit=True) as conn:  # a catalog of version 0034
        undo_runs_by_job_in_time(conn.execute)
        undo_kept_writers_gone(conn.execute)  # migration 0038's
        undo_alerts_told(conn.execute)  # migration 0037's
        undo_health_purged(conn.execute)
        conn.execute("UPDATE alembic_version SET version_num = '0034'")
        conn.execute(
            "CREATE FUNCTION no_index() RETURNS event_trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'no index now'; END $$"
        )
        conn.execute(
            "CREATE EVENT TRIGGER no_index ON ddl_command_start WHEN TAG IN ('CREATE INDEX') "
            "EXECUTE FUNCTION no_index()"
        )
    code, _, err = invoke(url, "migrate")
    assert code == 1 and "no index now" in err, err

    def state() -> tuple[str, list[str]]:
        with psycopg.connect(url, autocommit=True) as conn:
            (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone() or ("",)
            found = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'external_sources_job'")
            return version, [row[0].split(" USING ")[1] for row in found]

    assert state() == ("0035", ["btree (job_namespace, job_name)"])  # 0035 landed, 0036 not at all
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP EVENT TRIGGER no_index")
    code, out, err = invoke(url, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] == 35, err
    assert state() == (f"{sql.SCHEMA_VERSION:04d}", ["btree (job_namespace, job_name, ended_at, source)"])


def test_a_migrate_that_waited_for_another_says_it_upgraded_nothing(
    postgres: PostgresServer, catalog_template: str
) -> None:
    """Two ``migrate`` at once: the second waits for the first's lock, then finds nothing to do;
    it said ``upgradedFrom`` all the same (the version it read before waiting)."""
    url = postgres.url(postgres.create_database(template=catalog_template))
    current = f"{sql.SCHEMA_VERSION:04d}"
    said: list[tuple[int, str, str]] = []
    with psycopg.connect(url, autocommit=True) as other:  # another process, migrating
        other.execute("UPDATE alembic_version SET version_num = %s", (f"{sql.SCHEMA_VERSION - 1:04d}",))
        other.execute(f"SELECT pg_advisory_lock({SCHEMA_LOCK})")
        waiting = threading.Thread(target=lambda: said.append(invoke(url, "migrate")))
        waiting.start()
        for _ in range(200):  # until the command waits for the lock
            if other.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[0]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("migrate never waited for the schema's lock")
        other.execute("UPDATE alembic_version SET version_num = %s", (current,))  # its migrations done
        other.execute(f"SELECT pg_advisory_unlock({SCHEMA_LOCK})")
        waiting.join(timeout=60)
    ((code, out, err),) = said
    assert code == 0 and json.loads(out)["upgradedFrom"] is None, (out, err)


def test_tables_updated_in_place_keep_room_on_their_pages_in_a_new_and_in_a_migrated_catalog(
    postgres: PostgresServer, catalog_template: str
) -> None:
    """On PostgreSQL the tables whose rows are rewritten in place keep a fifth of each page free
    (an update then stays on its page: no index entry written); the others fill their pages."""
    url = postgres.url(postgres.create_database(template=catalog_template))
    made = _fillfactors(url)
    assert {table for table, factor in made.items() if factor == "80"} == set(schema.UPDATED_IN_PLACE)
    assert made["received_events"] is None  # written once, never updated
    with psycopg.connect(url, autocommit=True) as conn:  # a catalog of the version before
        undo_runs_by_job_in_time(conn.execute)  # migration 0036's
        undo_kept_writers_gone(conn.execute)  # migration 0038's
        undo_alerts_told(conn.execute)  # migration 0037's
        undo_health_purged(conn.execute)  # migration 0035's
        undo_kept_edges(conn.execute)  # migration 0033's
        undo_alert_heads(conn.execute)  # migration 0032's
        undo_unwritten_outputs(conn.execute)  # migration 0029's
        undo_lineage_by_run(conn.execute)  # migration 0028's
        undo_uses_by_asset_in_time(conn.execute)  # migration 0027's
        undo_edges_by_whole_key(conn.execute)  # migration 0026's
        undo_own_facts_kept(conn.execute)  # migration 0025's
        undo_runs_partitioned(conn.execute, "postgresql")  # migration 0022's
        for table in schema.UPDATED_IN_PLACE:
            conn.execute(f"ALTER TABLE {table} RESET (fillfactor)")
        conn.execute("DROP TABLE freshness_rules, asset_checks")  # added by 0014
        conn.execute("DROP INDEX external_sources_job")  # migration 0015's
        undo_writes_kept(conn.execute)  # migration 0021's
        undo_asset_filters(conn.execute)  # migration 0020's
        undo_ui_reads(conn.execute, "postgresql")  # migration 0019's
        conn.execute("DROP TABLE asset_health, health_marks")  # added by 0018
        conn.execute("DROP INDEX task_runs_task")  # migration 0017's
        unpartition_received(conn)  # migration 0016's
        conn.execute("UPDATE alembic_version SET version_num = '0012'")
    code, out, err = invoke(url, "migrate")
    assert code == 0 and json.loads(out)["upgradedFrom"] == 12, err
    assert _fillfactors(url) == made


def test_catalog_connections_carry_keepalives_and_a_write_limit_unless_the_url_sets_its_own(
    postgres: PostgresServer,
) -> None:
    """The catalog's connections carry TCP keepalives (30 s idle, 3 probes 10 s apart) and a
    60 s limit on an unacknowledged write, which end a connection to a server gone silent in about
    a minute, not in the system's hours (libpq's settings; a server going silent is not made
    here); a URL that sets one of them keeps its own."""
    url = postgres.url(postgres.create_database())
    conn: Any = PostgresEngine(url).connect()
    with conn:
        given = conn.info.get_parameters()
    wanted = {
        "keepalives_idle": "30",
        "keepalives_interval": "10",
        "keepalives_count": "3",
        "tcp_user_timeout": "60000",
    }
    assert {key: given.get(key) for key in wanted} == wanted
    conn = PostgresEngine(f"{url}{'&' if '?' in url else '?'}keepalives_idle=5").connect()
    with conn:
        assert conn.info.get_parameters()["keepalives_idle"] == "5"


def test_an_empty_database_is_no_catalog_until_init_and_a_foreign_one_is_refused(postgres: PostgresServer) -> None:
    url = postgres.url(postgres.create_database())
    code, _, err = invoke(url, "assets", "list")
    assert code == 1 and "no catalog at" in err and "olbridge init" in err
    code, out, err = invoke(url, "init")
    assert code == 0 and json.loads(out)["schemaVersion"] == sql.SCHEMA_VERSION, err
    other = postgres.url(postgres.create_database())
    with psycopg.connect(other, autocommit=True) as conn:
        conn.execute("CREATE TABLE notes (line text)")
    code, _, err = invoke(other, "init")
    assert code == 1 and "not an olbridge catalog" in err
    with psycopg.connect(other, autocommit=True) as conn:
        assert conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone() == (1,)


def test_a_schema_parameter_keeps_the_catalog_in_its_ownschema_read(postgres: PostgresServer) -> None:
    base = postgres.url(postgres.create_database())
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("CREATE TABLE notes (line text)")  # someone else's table in public
    url = f"{base}?schema=lineage&sslmode=disable"
    assert split_url(url) == (f"{base}?sslmode=disable", "lineage")
    code, _, err = invoke(url, "init")
    assert code == 0, err
    code, _, err = invoke(url, "record", "--namespace", "n", "--flow-id", "f", "--task-id", "t", "--execution-id",
                          "e", "--start", "2025-03-01T08:00:00Z")  # fmt: skip
    assert code == 0, err
    with psycopg.connect(base, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM lineage.task_runs").fetchone() == (1,)
    # a schema named with capitals is its name as written (quoted), found again when opened
    mixed = f"{base}?schema=Lineage_B"
    for args in (("init",), ("status",)):
        code, _, err = invoke(mixed, *args)
        assert code == 0, err
    with psycopg.connect(base, autocommit=True) as conn:
        assert conn.execute('SELECT count(*) FROM "Lineage_B".assets').fetchone() == (0,)


# --- PostgreSQL: writers side by side -----------------------------------------------------------


def _events(n: int) -> list[dict[str, Any]]:
    """Events of a few runs over a few shared datasets: each run's START and COMPLETE, the same
    datasets named by every run."""
    events = []
    for i in range(n):
        run_id = f"0194a1b2-0000-7000-8000-{i:012d}"
        shared = [ol_dataset("s3://lake", f"shared{k}") for k in range(3)]
        own = ol_dataset("s3://lake", f"out{i % 5}", documentation={"description": f"v{i}"})
        minute = f"2025-03-01T08:{i % 60:02d}:00Z"
        events.append(
            ol_run_event("START", run_id=run_id, inputs=shared, job=("airflow", f"dag.t{i % 4}"), time=minute)
        )
        events.append(
            ol_run_event(
                "COMPLETE",
                run_id=run_id,
                inputs=shared,
                outputs=[own],
                job=("airflow", f"dag.t{i % 4}"),
                time=minute.replace(":00Z", ":30Z"),
            )
        )
    return events


@pytest.mark.parametrize(("runs", "group"), [(24, 3), (80, 40)])  # groups of 40: their new events streamed in
def test_writers_side_by_side_end_as_one_writer_would(
    postgres: PostgresServer, catalog_template: str, resolver: Resolver, runs: int, group: int
) -> None:
    """Four connections take overlapping groups of events at once (each run's START and COMPLETE
    to different writers, every event sent twice): the catalog equals one that took them one by
    one, every event kept once, no placeholder, usage or edge twice."""
    events = _events(runs)
    one = postgres.url(postgres.create_database(template=catalog_template))
    with Catalog(one) as alone:
        for event in events:
            assert catalog_intake(alone, resolver).take([event])[0].ok
        expected = catalog_state(alone)
    many = postgres.url(postgres.create_database(template=catalog_template))
    shares = [events[i::4] + events[(i + 1) % 4 :: 4] for i in range(4)]  # each event to two writers
    start = threading.Barrier(len(shares))

    def write(share: list[dict[str, Any]]) -> None:
        with Catalog(many) as catalog:
            intake = catalog_intake(catalog, resolver)
            start.wait()
            for begin in range(0, len(share), group):
                outcomes = intake.take(share[begin : begin + group])
                assert all(o.ok for o in outcomes), [o.message for o in outcomes]

    in_threads(write, [(share,) for share in shares], timeout=120)
    with Catalog(many) as together:
        assert catalog_state(together) == expected
        assert together.count_received()["received_events"] == len(events)


@pytest.mark.both_engines
def test_a_large_group_ends_as_its_events_one_by_one_with_the_warnings_taking_them_adds(
    new_catalog: Callable[[], Catalog], resolver: Resolver
) -> None:
    """A group of 40 events (on PostgreSQL its new events streamed in with COPY): one already kept
    (and twice in the group), another twice in the group, a run named under a second job (a
    warning taking the event adds) and an event with a warning of its own; the catalog equals one
    that took them one by one, warnings included."""
    events = _events(18)
    renamed = ol_run_event("COMPLETE", run_id="0194a1b2-0000-7000-8000-000000000003", job=("airflow", "other"))
    odd = ol_run_event("PAUSED", run_id="0194a1b2-0000-7000-8000-000000000099")  # not one of the spec's types
    group = [events[0], *events, events[5], renamed, odd]
    assert len(group) == 40
    one = new_catalog()
    for event in [events[0], *group]:
        assert catalog_intake(one, resolver).take([event])[0].ok
    expected = catalog_state(one)
    warned = {body: json.loads(w) for body, w in one._conn.execute("SELECT body, warnings FROM received_events")}
    assert any("was named under job" in " ".join(w) for w in warned.values())  # added by taking it
    assert sum(1 for w in warned.values() if w) >= 2  # and one the event came with
    together = new_catalog()
    assert catalog_intake(together, resolver).take([events[0]])[0].ok
    outcomes = catalog_intake(together, resolver).take(group)
    assert [o.status for o in outcomes].count("duplicate") == 3  # events[0] twice, events[5] once
    assert catalog_state(together) == expected


def test_placeholders_seen_group_after_group_are_the_same_on_both_engines(
    postgres: PostgresServer, catalog_template: str, resolver: Resolver
) -> None:
    """The same events in groups of 8 on SQLite (placeholders touched in SQL) and on PostgreSQL
    (their rows read, locked and rebuilt, the sightings moved): the catalogs are equal, table by
    table."""
    events = _events(40)
    states = []
    for target in (":memory:", postgres.url(postgres.create_database(template=catalog_template))):
        with Catalog(target) as catalog:
            intake = catalog_intake(catalog, resolver)
            for begin in range(0, len(events), 8):
                assert all(o.ok for o in intake.take(events[begin : begin + 8]))
            states.append(catalog_state(catalog))
    assert states[0]["assets"] and states[0] == states[1]


NOISE = "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=8000))  # does not compress


@pytest.mark.parametrize("others", [1, 40])  # 40: the group's new events streamed in with COPY
def test_a_key_past_postgresqls_index_limit_refuses_its_event_and_not_the_others(
    postgres: PostgresServer, catalog_template: str, resolver: Resolver, others: int
) -> None:
    """A btree entry holds about 2,700 bytes: an event naming a dataset past that is refused (the
    catalog cannot keep it), never retried for ever; the other events of its batch land. The
    receiver refuses it first, at its name, as on SQLite (decision table R19); one that reaches
    the catalog all the same (read past the receiver's bounds, here) is refused there, said in a
    line (the server's text named its index and a tuple)."""
    url = postgres.url(postgres.create_database(template=catalog_template))
    huge = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000077", inputs=[ol_dataset("s3://b", NOISE)])
    rest = [ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}") for n in range(others)]
    with Catalog(url) as catalog:
        outcomes = catalog_intake(catalog, resolver).take([huge, *rest])
        assert [o.status for o in outcomes] == ["refused"] + ["accepted"] * others
        assert [p.pointer for p in outcomes[0].problems] == ["/inputs/0/name"], outcomes[0]
        assert catalog.count_received()["received_events"] == others
        more = [ol_run_event(run_id=f"0194a1b2-0000-7000-8001-{n:012d}") for n in range(others)]
        past = [read_event(event, "RunEvent") for event in (huge, *more)]
        results = catalog.ingest(past, resolver)
        assert isinstance(results[0], CatalogError) and str(results[0]) == (
            "the catalog cannot store the event: a name or value in it is longer than the catalog's indexes keep "
            "(about 2,700 bytes an entry)"
        ), results[0]
        assert not any(isinstance(r, Exception) for r in results[1:]), results
        assert catalog.count_received()["received_events"] == 2 * others


def test_a_receiver_whose_catalog_was_migrated_under_it_answers_retriable_saying_so(
    postgres: PostgresServer, catalog_template: str, resolver: Resolver
) -> None:
    """A newer olbridge's ``migrate`` under a running receiver (a column its writes do not fill):
    every event was refused as the event's fault, a 400 that is never retried, with the server's
    words. It is retriable now (Busy: a 503), each saying the catalog moved and what to do."""
    url = postgres.url(postgres.create_database(template=catalog_template))
    with Catalog(url) as catalog:
        events = [ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}") for n in range(3)]
        assert [o.status for o in catalog_intake(catalog, resolver).take(events[:1])] == ["accepted"]
        with psycopg.connect(url, autocommit=True) as conn:  # the next version's migration, as it might be
            conn.execute("ALTER TABLE received_events ADD COLUMN arrived text NOT NULL DEFAULT 'x'")
            conn.execute("ALTER TABLE received_events ALTER COLUMN arrived DROP DEFAULT")
            conn.execute("UPDATE alembic_version SET version_num = %s", (f"{sql.SCHEMA_VERSION + 1:04d}",))
        said = (
            f"the catalog's schema is at version {sql.SCHEMA_VERSION + 1}, this olbridge's at {sql.SCHEMA_VERSION}: "
            "it was migrated while this process ran; restart it with the olbridge that migrated it"
        )
        with pytest.raises(Busy) as raised:  # the receiver's writer answers every event of it 503 so
            catalog.ingest([read_event(event, "RunEvent") for event in events[1:]], resolver)
        assert str(raised.value) == said
        assert catalog.unavailable_reason(raised.value) == said


def test_a_deadlock_is_run_again_and_both_writes_land(postgres: PostgresServer, catalog_template: str) -> None:
    """Two transactions lock two rows in opposite orders: PostgreSQL ends one of them (a
    deadlock), which is run again once the other has committed; both land."""
    url = postgres.url(postgres.create_database(template=catalog_template))
    with Catalog(url) as catalog:
        for name in ("x", "y"):
            catalog.save_position(Position("test", name, 0, "u"))
    both_hold_one = threading.Barrier(2, timeout=30)
    tries: dict[str, int] = {"x": 0, "y": 0}

    def write(first: str, second: str) -> None:
        def work(cur: Any) -> None:
            tries[first] += 1
            cur.execute("SELECT value FROM positions WHERE kind = 'test' AND name = ?" + sql.LOCK, (first,))
            if tries[first] == 1:
                both_hold_one.wait()
            cur.execute("SELECT value FROM positions WHERE kind = 'test' AND name = ?" + sql.LOCK, (second,))
            for name in (first, second):
                cur.execute(
                    "UPDATE positions SET value = value || '+' || ? WHERE kind = 'test' AND name = ?", (first, name)
                )

        with Catalog(url) as catalog:
            catalog.db.write(work)

    in_threads(write, [("x", "y"), ("y", "x")], timeout=60)
    assert max(tries.values()) >= 2  # ended by a deadlock, and run again (as often as it takes)
    with Catalog(url) as catalog:
        values = dict(catalog._conn.execute("SELECT name, value FROM positions WHERE kind = 'test'").fetchall())
    assert sorted(values["x"].split("+")[1:]) == sorted(values["y"].split("+")[1:]) == ["x", "y"]


def test_two_workers_never_both_take_the_outbox_lease(postgres: PostgresServer, catalog_template: str) -> None:
    from bridge.catalog.workers import StreamWorkerInfo

    url = postgres.url(postgres.create_database(template=catalog_template))
    taken: list[str] = []
    start = threading.Barrier(6, timeout=60)

    def claim(n: int) -> None:
        with Catalog(url) as catalog:
            info = StreamWorkerInfo(f"w{n}", "host", 1000 + n, "t", "s", 100.0)
            catalog.workers.beat(info, 100.0)
            start.wait()
            if catalog.workers.acquire(info.id, 100.0, 5.0, acquired_at="now").taken:
                taken.append(info.id)

    in_threads(claim, [(n,) for n in range(6)], timeout=60)
    assert len(taken) == 1
    with Catalog(url) as catalog:
        holder = catalog.workers.holder()
        assert holder is not None and holder.worker == taken[0]


def test_keys_written_as_they_were_are_counted_past(new_catalog: Callable[[], Catalog]) -> None:
    """A copy writes rows with their keys; after reset_keys the next row gets a key past them."""
    source = new_catalog()
    source.record_task_runs([run(f"t{n}", execution=f"e{n}") for n in range(3)])
    copy = new_catalog()
    for table in ("executions", "task_runs", "outbox"):
        rows = source._conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
        with copy.transaction() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    copy.reset_keys()
    [result] = copy.record_task_runs([run("next", execution="e9")])
    assert result.status == "created"
    pks = [r.pk for r in copy.iter_task_runs()]
    assert pks == [1, 2, 3, 4]
    assert [item.seq for item in copy.outbox.items()][-2:] == [7, 8]


def test_statements_are_translated_once_each() -> None:
    assert translate("SELECT a FROM t WHERE b = ? AND c LIKE 'x%'") == "SELECT a FROM t WHERE b = %s AND c LIKE 'x%%'"
    assert translate("SELECT 1 FROM t" + sql.LOCK) == "SELECT 1 FROM t FOR UPDATE"
    assert translate("SELECT 1 FROM t" + sql.SKIP_LOCKED) == "SELECT 1 FROM t FOR UPDATE SKIP LOCKED"
    assert "GREATEST(" in translate(sql_received.UPSERT_SOURCE) and "max(" not in translate(sql_received.UPSERT_SOURCE)
    assert "strftime" not in translate(sql_outbox.QUEUE_EVENT) and "INDEXED" not in translate(
        sql_outbox.OUTBOX_NEXT_RETRY
    )


# --- a password is never shown ----------------------------------------------------------------


def test_a_password_is_masked_wherever_a_url_is_shown() -> None:
    for url, shown, password in [
        ("postgresql://u:s3cret@h:5432/db", "postgresql://u:***@h:5432/db", "s3cret"),
        ("postgresql://u:p%40ss@h/db?sslmode=require", "postgresql://u:***@h/db?sslmode=require", "p@ss"),
        ("postgres://u@h/db?password=s3cret&sslmode=x", "postgres://u@h/db?password=***&sslmode=x", "s3cret"),
        ("postgresql://u@/db?host=/run/pg", "postgresql://u@/db?host=/run/pg", None),
    ]:
        assert (masked(url), url_password(url)) == (shown, password)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("sslmode=bogus", "not a PostgreSQL URL libpq can read: sslmode='bogus' is none of disable, allow, prefer"),
        ("sslmode=REQUIRE", "sslmode='REQUIRE' is none of"),
        ("gssencmode=x", "gssencmode='x' is none of disable, prefer, require"),
        ("target_session_attrs=rw", "target_session_attrs='rw' is none of any, read-write"),
        ("keepalives_idle=abc", "not a PostgreSQL URL libpq can read: keepalives_idle='abc' is not a whole number"),
        ("tcp_user_timeout=99999999999", "tcp_user_timeout='99999999999' is not a whole number"),
        ("port=abc", "the port 'abc' is not a whole number"),
        ("port=0", "the port '0' is out of range (1 to 65535)"),
        ("host=a,b&port=1,2,3", "3 ports for 2 host(s): give one port for all, or one for each host"),
        ("statement_timeout=abc", "statement_timeout='abc' is not a duration (a whole number and ms, s, min or h"),
        ("lock_timeout=99999999999999h", "lock_timeout='99999999999999h' is longer than PostgreSQL takes: at most"),
        ("lock_timeout=597h", "lock_timeout='597h' is longer than PostgreSQL takes: at most 2147483647ms"),
        ("lock_timeout=" + "9" * 5000, "is longer than PostgreSQL takes"),
        ("schema=a&schema=b", "the parameter 'schema' is given more than once; give it once"),
        ("sslmode=require&sslmode=disable", "the parameter 'sslmode' is given more than once"),
        ("password=s3cret&password=other", "the parameter 'password' is given more than once"),
    ],
)
def test_a_url_value_libpq_or_postgresql_refuses_is_a_bad_value_before_any_connection(query: str, said: str) -> None:
    """What libpq refuses before it connects (a word none of a setting's, a number that is none,
    a port out of range, more ports than hosts), a timeout that is no duration or longer than
    PostgreSQL holds, and a parameter given twice (it took the last): each a BadValueError (a
    usage error: exit status 2) saying what is wrong, no connection tried; not "cannot connect
    to the server" (exit status 1)."""
    url = f"postgresql://u:s3cret@127.0.0.1:1/db?{query}"
    with pytest.raises(BadValueError) as refused:
        PostgresEngine(url)
    assert said in str(refused.value) and "s3cret" not in str(refused.value), str(refused.value)
    code, _, err = invoke(url, "status")
    assert code == 2 and said in err and "cannot connect" not in err, err


def test_a_url_value_postgresql_takes_is_taken() -> None:
    for query in ("sslmode=verify-full&keepalives_idle=%2010%20&port=5432", "lock_timeout=596h", "port=1,2&host=a,b"):
        PostgresEngine(f"postgresql://u@127.0.0.1/db?{query}")


def test_the_config_files_catalog_may_be_a_url(tmp_path: Path) -> None:
    from bridge.config import parse_config

    assert parse_config({"catalog": "postgresql://olbridge@db/lineage"}, "x.toml", tmp_path).catalog == (
        "postgresql://olbridge@db/lineage"
    )
    assert parse_config({"catalog": "c.db"}, "x.toml", tmp_path).catalog == tmp_path / "c.db"


def test_a_password_never_appears_in_any_output_or_error(postgres: PostgresServer, tmp_path: Path) -> None:
    password = postgres.password
    name = postgres.create_database(owner=postgres.password_role)
    url = postgres.url(name, password=True)
    assert password in url
    records = tmp_path / "runs.jsonl"
    records.write_text(json.dumps({"namespace": "n", "flowId": "f", "taskId": "t", "executionId": "e",
                                   "taskRunId": "e.t", "state": "SUCCESS", "startDate": "2025-03-01T08:00:00Z",
                                   "outputs": [{"id": "a.b", "type": "Table"}]}) + "\n")  # fmt: skip
    wrong = url.replace(password, "not-" + password)
    no_database = url.rsplit("/", 1)[0] + "/nothing_here"
    nobody = url.replace(f":{postgres.port}/", f":{free_port()}/")
    masked_url = "postgresql://olbridge_pw:***@"
    # argv, environment, the error expected (None: it succeeds)
    runs: list[tuple[list[str], dict[str, str], str | None]] = [
        (["--catalog", url, "init"], {}, None),
        (["--catalog", url, "record", "--file", str(records)], {}, None),
        (["--catalog", url, "assets", "list", "--json"], {}, None),
        (["--catalog", url, "status", "--json"], {}, None),
        (["--catalog", url, "migrate"], {}, None),
        (["--catalog", url, "export"], {}, None),
        (["--catalog", url, "demo", "--in-catalog", "--dir", str(tmp_path / "demo")], {}, None),
        (["--catalog", wrong, "status"], {}, f"Error: catalog {masked_url}"),
        (["--catalog", no_database, "assets", "list"], {}, f"Error: catalog {masked_url}"),
        (["--catalog", nobody, "init"], {}, f"Error: catalog {masked_url}"),
        (["--catalog", url, "assets", "show", "no.such"], {}, "Error: no asset with id 'no.such'"),
        (["status"], {"OLBRIDGE_CATALOG": url}, None),  # the URL in the environment: no warning
        (["status"], {"OLBRIDGE_CATALOG": wrong}, f"Error: catalog {masked_url}"),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    for argv, extra, error in runs:
        done = subprocess.run(
            [sys.executable, "-m", "bridge", *argv],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        said = done.stdout + done.stderr
        shown = [a.replace(password, "***") for a in argv]
        assert (done.returncode == 0) == (error is None), f"{shown}: {said}"
        assert password not in said, f"{shown} showed the password: {said}"
        assert "Traceback" not in said, said
        warned = "Warning: the --catalog URL holds a password" in done.stderr
        assert warned == ("--catalog" in argv), f"{shown}: {done.stderr}"
        assert error is None or error in done.stderr, said
    # the password from the environment, as libpq reads it: no password anywhere, no warning
    plain = postgres.url(name, user=postgres.password_role)
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "--catalog", plain, "assets", "list", "--json"],
        env={**env, "PGPASSWORD": password},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and json.loads(done.stdout)[0]["id"] == "a.b", done.stderr
    assert done.stderr == ""


def test_the_receiver_shows_no_password(postgres: PostgresServer, tmp_path: Path) -> None:
    """``serve`` with the password on its command line: warned of, and shown nowhere else."""
    import requests

    from tests.test_receiver_http import TOKEN

    password = postgres.password
    url = postgres.url(postgres.create_database(owner=postgres.password_role), password=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    with serve_process(url, "--workers", "1", env={**env, "OLBRIDGE_TOKEN": TOKEN}) as served:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert requests.post(f"{served.url}/api/v1/lineage", json=ol_run_event(), headers=headers, timeout=10).ok
        metrics = requests.get(f"{served.url}/metrics", headers=headers, timeout=10)
        assert metrics.status_code == 200 and password not in metrics.text
    out, err = served.stdout, served.stderr
    assert served.returncode == 0, err
    assert password not in out + err and "Warning: the --catalog URL holds a password" in err
    assert "olbridge_pw:***@" in err  # the catalog it serves, as it is shown


def test_two_writers_ending_one_task_run_end_it_once(postgres: PostgresServer, catalog_template: str) -> None:
    """One process ends a running task run while another ends it otherwise: the second waits for
    the first and is refused (a task run ends once), as on SQLite; one end queued, not two."""
    from bridge.catalog import writes
    from tests.helpers import decl, run

    url = postgres.url(postgres.create_database(template=catalog_template))
    outputs = (decl("a.b", type="Table"),)
    with Catalog(url) as first, Catalog(url) as second:
        first.record_task_run(run(state="RUNNING"))
        holder: Any = first._conn
        cur = holder.cursor()
        cur.execute("BEGIN")
        ended = writes.write_task_run(cur, run(outputs=outputs, state="SUCCESS"), watch=first.watch_seen)
        assert ended.status == "updated"
        outcome: list[BaseException | str] = []

        def end_otherwise() -> None:
            try:
                outcome.append(second.record_task_run(run(outputs=outputs, state="FAILED")).status)
            except BaseException as exc:
                outcome.append(exc)

        other = threading.Thread(target=end_otherwise)
        other.start()
        with psycopg.connect(url, autocommit=True) as watcher:  # until the second waits for a lock
            deadline = time.monotonic() + 30
            while not watcher.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:  # type: ignore[index]
                assert other.is_alive() and time.monotonic() < deadline, outcome
                time.sleep(0.02)
        cur.execute("COMMIT")
        other.join(timeout=30)
        assert len(outcome) == 1 and isinstance(outcome[0], CatalogError), outcome
        assert "already ended in SUCCESS" in str(outcome[0])
        ends = holder.execute("SELECT count(*) FROM outbox WHERE kind = 'run-end'").fetchone()[0]
        assert ends == 1


def _durability(catalog: Catalog) -> str:
    conn: Any = catalog.db.conn
    if catalog.dialect == "postgresql":
        return str(conn.execute("SHOW synchronous_commit").fetchone()[0])
    return {1: "normal", 2: "full"}.get(conn.execute("PRAGMA synchronous").fetchone()[0], "other")


def test_the_connection_is_opened_again_when_its_kept_plans_are_due_and_keeps_its_durability(catalog: Catalog) -> None:
    """PostgreSQL keeps plans for a connection's prepared statements, made maybe while the tables
    were nearly empty: the catalog's connection is opened again on a growing schedule, before a
    write, with the durability set on the one before. SQLite keeps no plans: its one connection."""
    catalog.set_durability("full")  # the tests' server does not wait for the disk by default
    first: Any = catalog.db.conn
    catalog.db._replan_at = 0.0  # due now
    catalog.save_position(Position("test", "replan", "1"))
    assert (catalog.db.conn is not first) == (catalog.dialect == "postgresql")
    assert _durability(catalog) == ("on" if catalog.dialect == "postgresql" else "full")
    found = catalog.position("test", "replan")
    assert found is not None and found.value == "1"
    if catalog.dialect == "postgresql":
        assert first.closed
        second = catalog.db.conn
        assert catalog.db._replan_every == 2.0  # the next turn 2 s on, then 4, ...
        catalog.db._replan_at = math.inf  # not due: the connection stays
        catalog.save_position(Position("test", "replan", "2"))
        assert catalog.db.conn is second


def test_timeouts_and_jit_off_are_set_on_the_catalogs_connections_and_overridable(
    postgres: PostgresServer,
) -> None:
    """Every connection that reads and writes the catalog waits for a lock at most
    ``lock_timeout`` and runs a statement at most ``statement_timeout`` (5s and 60s unless the URL
    says otherwise, after its own ``options``), with the server's JIT off unless the URL's
    ``options`` set ``jit`` itself; a value that is no duration is an error naming it, never a
    traceback."""
    url = postgres.url(postgres.create_database())
    conn: Any = PostgresEngine(url).connect()
    with conn:
        assert conn.execute("SHOW lock_timeout").fetchone() == ("5s",)
        assert conn.execute("SHOW statement_timeout").fetchone() == ("1min",)
        assert conn.execute("SHOW jit").fetchone() == ("off",)  # whatever the server's default
    given = f"{url}?lock_timeout=250ms&statement_timeout=0&options=-cwork_mem%3D8MB"
    conn = PostgresEngine(given).connect()
    with conn:
        assert conn.execute("SHOW lock_timeout").fetchone() == ("250ms",)
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
        assert conn.execute("SHOW work_mem").fetchone() == ("8MB",)
        assert conn.execute("SHOW jit").fetchone() == ("off",)
    for own in ("-cjit%3Don", "-c%20JIT%3Don", "--jit%3Don"):  # the URL's own word on JIT, however written
        conn = PostgresEngine(f"{url}?options={own}").connect()
        with conn:
            assert conn.execute("SHOW jit").fetchone() == ("on",), own
    conn = PostgresEngine(f"{url}?options=-capplication_name%3Djitter%20-cjit_above_cost%3D10").connect()
    with conn:  # a setting that only holds the letters, or another JIT setting, is not a word on JIT itself
        assert conn.execute("SHOW jit").fetchone() == ("off",)
    code, _, err = invoke(f"{url}?lock_timeout=soon", "init")
    assert code == 2 and "lock_timeout='soon' is not a duration" in err and "Traceback" not in err, err


def test_each_engine_chooses_how_stream_workers_hold_the_outbox(catalog: Catalog, engine: str) -> None:
    hold = outbox_hold(catalog, "http://backend.invalid")
    assert isinstance(hold, OutboxLease if engine == "sqlite" else OutboxClaims)
    assert catalog.in_memory is (engine == "sqlite")  # the tests' SQLite catalogs are in memory


def test_a_catalog_that_must_exist_is_refused_where_the_engine_knows_it_missing(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"no catalog at .*; create one with olbridge init"):
        Catalog(tmp_path / "none.db", create=False)
    assert not (tmp_path / "none.db").exists()
    assert PostgresEngine("postgresql://u@127.0.0.1:1/db").missing() is False  # only a connection tells


def test_a_file_that_is_no_sqlite_database_is_the_drivers_word_not_a_fault(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database, and long enough to have a header " * 200)
    with pytest.raises(CatalogError, match=f"catalog {bad}: not a catalog"):
        Catalog(bad)


def test_each_engine_has_its_upkeep_beside_a_writers_commits(catalog: Catalog, engine: str, tmp_path: Path) -> None:
    """The WAL's checkpoints are SQLite's (a file's: an in-memory catalog has no WAL); a server
    keeps its own log, and PostgreSQL's upkeep makes the days ahead's partitions of received
    events, once an hour. The receiver's gathering is PostgreSQL's alone."""
    upkeep = catalog.maintenance(wal_limit=1 << 20, every=1.0)
    if engine == "postgresql":
        assert upkeep is not None and upkeep.look == 3600.0
        upkeep.close()
    else:
        assert upkeep is None  # in memory
    assert catalog.engine.gather == (0.002 if engine == "postgresql" else 0.0)
    with Catalog(tmp_path / "file.db") as on_file:
        on_file_upkeep = on_file.maintenance(wal_limit=1 << 20, every=1.0)
        assert on_file_upkeep is not None and on_file_upkeep.look == 0.1
        on_file.record_task_run(run("t"))
        on_file_upkeep.step(threading.Lock())
        assert (tmp_path / "file.db-wal").stat().st_size > 0
        on_file_upkeep.close()
        assert (tmp_path / "file.db-wal").stat().st_size == 0  # the last step truncated it
        assert on_file._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert on_file._conn.execute("PRAGMA journal_size_limit").fetchone()[0] == 1 << 20


@pytest.mark.parametrize("user_version", [0, 5, 7, 31, 32, 999])
@pytest.mark.parametrize("command", [("assets", "list"), ("init",), ("migrate",), ("status",)])
def test_another_applications_sqlite_database_that_numbers_its_versions_is_refused_untouched(
    tmp_path: Path, user_version: int, command: tuple[str, ...]
) -> None:
    """A SQLite file of another application whose ``user_version`` is set (as olbridge's catalogs
    number theirs) is no catalog: refused as such, and not a byte of it written (tables were added
    to it, or a traceback said a table was missing)."""
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (line text)")
        conn.execute(f"PRAGMA user_version = {user_version}")
    conn.close()
    before = path.read_bytes()
    code, out, err = invoke(path, *command)
    assert code == 1 and "is a SQLite database but not an olbridge catalog" in err, (out, err)
    assert "Traceback" not in err
    assert path.read_bytes() == before


def test_sqlite_opens_and_reads_while_another_process_writes_for_long(tmp_path: Path) -> None:
    """A long write (a large ``record``: one transaction) holds SQLite's write lock; under WAL
    readers do not wait for it, but every connection set ``auto_vacuum``, which waits for the
    lock on a file with pages in it: ``assets list``, ``status``, the UI's pages failed "another
    process holds it locked" until the write ended. A catalog opens and reads meanwhile; a new
    one is still made with auto_vacuum INCREMENTAL (retention gives its free pages back)."""
    path = tmp_path / "c.db"
    with Catalog(path) as catalog:
        catalog.record_task_run(run("load", outputs=(decl("mart.orders", type="Table"),)))
        assert catalog.db.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    writer = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process, in the middle of its long write
        writer.execute("UPDATE assets SET description = 'writing' WHERE id = 'mart.orders'")
        with Catalog(path) as reader:
            assert [a.id for a in reader.list_assets()] == ["mart.orders"]
        code, out, err = invoke(str(path), "assets", "list", "--json")
        assert code == 0 and "mart.orders" in out, err
    finally:
        writer.execute("ROLLBACK")
        writer.close()
