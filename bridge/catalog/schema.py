"""The catalog's schema, one for both engines: SQLAlchemy ``Table`` objects, at the current version.

A new catalog is made from these (:func:`create_statements` compiles them for its engine: SQLite
or PostgreSQL); an existing one is brought to them by the migrations (``migrations/versions``,
Alembic), each of which changes these tables too, so that both ways give the same schema (a test
compares a catalog migrated from the first version with a new one). One version number for both
engines: :data:`VERSION` (``sql.SCHEMA_VERSION``), the number of the newest migration.

What differs by engine is said here once, by type variants: text is ``TEXT`` on both, with the
``"C"`` collation on PostgreSQL (bytes order, as SQLite's and Python's: the ranks the receiver
compares, and every ``ORDER BY``, sort the same on both); integers are ``INTEGER`` on SQLite (an
``INTEGER PRIMARY KEY`` is the rowid) and ``BIGINT`` on PostgreSQL, keys counting up by an identity
(``AUTOINCREMENT`` on SQLite where a number must never come back, the outbox and the changes);
times in seconds are ``REAL`` on SQLite and ``DOUBLE PRECISION`` on PostgreSQL (its ``REAL`` has
single precision). SQLAlchemy is used here and by the migrations only: the statements run on the
drivers' cursors.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from bridge.catalog.sql import (
    FILLFACTOR,
    PARTITIONED,
    UNDATED,
    UPDATED_IN_PLACE,
    partition_storage,
    undated_partition,
)
from bridge.catalog.sql import SCHEMA_VERSION as VERSION

TEXT: sa.types.TypeEngine[str] = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
INTEGER: sa.types.TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
SECONDS: sa.types.TypeEngine[float] = sa.Double[float]().with_variant(sa.REAL[float](), "sqlite")

metadata = sa.MetaData()


def _text(
    name: str,
    *args: sa.schema.SchemaItem,
    nullable: bool = False,
    default: str | None = None,
    primary_key: bool = False,
    unique: bool = False,
) -> sa.Column[str]:
    return sa.Column(
        name, TEXT, *args, nullable=nullable, server_default=default, primary_key=primary_key, unique=unique or None
    )


def _integer(name: str, *args: sa.schema.SchemaItem, nullable: bool = False) -> sa.Column[int]:
    return sa.Column(name, INTEGER, *args, nullable=nullable)


def _key(name: str) -> sa.Column[int]:
    """A key that counts up (an identity on PostgreSQL, the rowid on SQLite)."""
    return sa.Column(name, INTEGER, sa.Identity(), primary_key=True)


def _partial(name: str, column: sa.Column[Any], condition: str) -> sa.Index:
    """An index of the rows that meet a condition, on both engines."""
    return sa.Index(name, column, sqlite_where=sa.text(condition), postgresql_where=sa.text(condition))


# --- what the catalog records ----------------------------------------------------------------

assets = sa.Table(
    "assets",
    metadata,
    _text("id", primary_key=True),
    _text("type"),
    _text("namespace", nullable=True),  # NULL: a Global asset
    _text("display_name", nullable=True),
    _text("description", nullable=True),
    _text("metadata", default="{}"),  # a flat JSON object
    _text("origin"),
    _text("created_at"),
    _text("updated_at"),
    _text("deleted_at", nullable=True),
    _text("columns", nullable=True),  # JSON list of {name, type, description}
    _text("assertions", nullable=True),  # JSON list of data-quality assertions
    sa.CheckConstraint("origin IN ('declared', 'auto', 'external')"),
)
# a filter's assets in id order (the UI's list of assets: a page by id)
sa.Index("assets_type", assets.c.type, assets.c.id)
sa.Index("assets_namespace", assets.c.namespace, assets.c.id)
sa.Index("assets_namespace_type", assets.c.namespace, assets.c.type, assets.c.id)

executions = sa.Table(
    "executions",
    metadata,
    _text("flow_namespace", primary_key=True),
    _text("flow_id", primary_key=True),
    _text("execution_id", primary_key=True),
    _text("started_at"),  # the first task run's start, never changed
)

task_runs = sa.Table(
    "task_runs",
    metadata,
    _key("pk"),
    _text("flow_namespace"),
    _text("flow_id"),
    _text("task_id"),
    _text("execution_id"),
    _text("task_run_id"),
    _text("state"),
    _text("started_at"),
    _text("ended_at", nullable=True),
    _text("job"),  # JSON: integration, job type, sql, description
    _text("warnings", default="[]"),
    _text("error", nullable=True),
    _text("record_hash"),
    sa.UniqueConstraint("flow_namespace", "flow_id", "execution_id", "task_run_id"),
)
sa.Index("task_runs_started", task_runs.c.started_at, task_runs.c.pk)
# a task's runs in order of end (health: the latest run of each task, by then)
sa.Index(
    "task_runs_task",
    task_runs.c.flow_namespace,
    task_runs.c.flow_id,
    task_runs.c.task_id,
    task_runs.c.ended_at,
    task_runs.c.pk,
)
# a flow namespace's runs newest first (the UI's list of runs filtered by namespace)
sa.Index("task_runs_namespace_started", task_runs.c.flow_namespace, task_runs.c.started_at, task_runs.c.pk)

usages = sa.Table(
    "usages",
    metadata,
    _integer("task_run_pk", sa.ForeignKey("task_runs.pk"), nullable=False),
    _text("direction"),
    _integer("position"),
    _text("asset_id"),
    _text("used_at"),
    _text("statistics", nullable=True),
    sa.PrimaryKeyConstraint("task_run_pk", "direction", "asset_id"),
    sa.CheckConstraint("direction IN ('input', 'output')"),
)
# an asset's uses in one direction, newest last: its latest reads or writes are the first rows
# read backwards (migration 0027)
sa.Index("usages_asset", usages.c.asset_id, usages.c.direction, usages.c.used_at, usages.c.task_run_pk)
# the outputs a task run was to write and did not, of those the catalog held when it ended: it
# ended FAILED, KILLED, CANCELLED, RETRIED or SKIPPED (usages hold what a run wrote, and such a
# run writes none). Its events name them; where it ended FAILED, KILLED, CANCELLED or RETRIED
# (not SKIPPED), health counts its task among their writers (kept_writers), so that its run FAILs
# them though the task never wrote them (migration 0029)
unwritten_outputs = sa.Table(
    "unwritten_outputs",
    metadata,
    _integer("task_run_pk", sa.ForeignKey("task_runs.pk"), nullable=False),
    _text("asset_id"),
    sa.PrimaryKeyConstraint("task_run_pk", "asset_id"),
)
sa.Index("unwritten_outputs_asset", unwritten_outputs.c.asset_id, unwritten_outputs.c.task_run_pk)  # backfill --asset

lineage = sa.Table(
    "lineage",
    metadata,
    _text("upstream_id"),
    _text("downstream_id"),
    _integer("task_run_pk", sa.ForeignKey("task_runs.pk")),
    sa.PrimaryKeyConstraint("upstream_id", "downstream_id", "task_run_pk"),
)
sa.Index("lineage_downstream", lineage.c.downstream_id, lineage.c.upstream_id)  # upstream ones by id
# a run's edges: replaced when the run is recorded again, deleted with it by retention, and on
# PostgreSQL the foreign key's check for each run deleted (migration 0028)
sa.Index("lineage_run", lineage.c.task_run_pk)

asset_changes = sa.Table(
    "asset_changes",
    metadata,
    _key("seq"),
    _text("asset_id"),
    _text("kind"),
    _text("changed_at"),
    _text("snapshot"),  # the asset record just after the change
    sa.CheckConstraint("kind IN ('update', 'delete')"),
    sqlite_autoincrement=True,  # a seq never comes back: the outbox refers to changes by it
)
sa.Index("asset_changes_time", asset_changes.c.changed_at, asset_changes.c.seq)
sa.Index("asset_changes_asset", asset_changes.c.asset_id)

declared_jobs = sa.Table(
    "declared_jobs",
    metadata,
    _key("pk"),
    _text("flow_namespace"),
    _text("flow_id"),
    _text("task_id"),
    _text("declaration"),  # JSON: task type, inputs, outputs, enableAuto, ...
    _text("declaration_hash"),
    _text("declared_at"),  # when this declaration was first recorded as it is
    sa.UniqueConstraint("flow_namespace", "flow_id", "task_id"),
)
sa.Index("declared_jobs_time", declared_jobs.c.declared_at, declared_jobs.c.pk)

column_lineage = sa.Table(
    "column_lineage",
    metadata,
    _text("downstream_id"),
    _text("downstream_column"),  # '': the whole output (the facet's `dataset`)
    _text("upstream_id"),
    _text("upstream_column"),
    _text("transformations", default="[]"),
    _integer("task_run_pk", sa.ForeignKey("task_runs.pk"), nullable=True),
    _text("source", nullable=True),  # 'run:<runId>' or 'job:<namespace>/<name>'
    sa.CheckConstraint("(task_run_pk IS NULL) <> (source IS NULL)"),
)
sa.Index(
    "column_lineage_edge",
    column_lineage.c.downstream_id,
    column_lineage.c.downstream_column,
    column_lineage.c.upstream_id,
    column_lineage.c.upstream_column,
    column_lineage.c.transformations,
    sa.func.coalesce(column_lineage.c.task_run_pk, 0),
    sa.func.coalesce(column_lineage.c.source, ""),
    unique=True,
)
sa.Index("column_lineage_upstream", column_lineage.c.upstream_id, column_lineage.c.upstream_column)
_partial("column_lineage_run", column_lineage.c.task_run_pk, "task_run_pk IS NOT NULL")

# --- external lineage (the receiver) ---------------------------------------------------------

received_events = sa.Table(
    "received_events",
    metadata,
    _key("pk"),
    _text("digest"),
    _text("kind"),
    _text("event_type", nullable=True),
    _text("event_time"),
    _text("source", nullable=True),  # 'run:<runId>' or 'job:<namespace>/<name>'
    _text("producer"),
    _text("warnings", default="[]"),
    _text("body"),
    _text("token", nullable=True),  # serve --tokens: the name of the token that brought it
    sa.CheckConstraint("kind IN ('RunEvent', 'DatasetEvent', 'JobEvent')"),
)
# found by time and digest: events come roughly in time order, so a group's new entries share a
# few pages at the index's end
sa.Index("received_events_time_digest", received_events.c.event_time, received_events.c.digest, unique=True)
# a run's events (a run page of the UI), by its source and in time order
sa.Index(
    "received_events_source",
    received_events.c.source,
    received_events.c.event_time,
    sqlite_where=sa.text("source IS NOT NULL"),
    postgresql_where=sa.text("source IS NOT NULL"),
)

external_datasets = sa.Table(
    "external_datasets",
    metadata,
    _text("ol_namespace", primary_key=True),
    _text("ol_name", primary_key=True),
    _text("asset_id", unique=True),
    _text("first_seen"),  # event times, never the clock
    _text("last_seen"),
    _text("seen_rank"),  # '<time>|<digest>' of the latest event naming it
    _text("facets_rank", nullable=True),  # the same, of the latest event describing it
    _text("facets_digest", nullable=True),  # what that event's facets said, hashed
    # the latest event that gave it any facets, and all its facets hashed: an event that repeats
    # them changes no facet row (external_facets)
    _text("all_facets_rank", nullable=True),
    _text("all_facets_digest", nullable=True),
    sqlite_with_rowid=False,
)

external_sources = sa.Table(
    "external_sources",
    metadata,
    _text("source", primary_key=True),  # 'run:<runId>' or 'job:<namespace>/<name>'
    _text("job_namespace"),
    _text("job_name"),
    _text("run_id", nullable=True),
    _text("parent_run_id", nullable=True),
    _text("state", nullable=True),  # the latest-ranked event type
    _text("state_rank", nullable=True),  # what decides the state, order-independent
    _text("started_at", nullable=True),
    _text("ended_at", nullable=True),
    _text("first_seen"),
    _text("last_seen"),
    _text("producer"),
    _text("inputs", default="[]"),  # JSON: sorted asset ids
    _text("outputs", default="[]"),
    # a run's job is the one its earliest-ranked event names; a run named under more than one job
    # lists them all (JSON [[namespace, name], ...], sorted; NULL while there is one)
    _text("job_rank", nullable=True),
    _text("jobs", nullable=True),
    _text("warnings", default="[]"),  # the distinct warnings of its events (JSON list, sorted)
    # the day a run's id was made, where it is a UUIDv7, else '' (bridge.model.received.run_day: of
    # the source alone, so the key says no more than the source); PostgreSQL partitions by it
    _text("run_day", primary_key=True),
    sqlite_with_rowid=False,
)

# a job's runs (retention keeps the latest of each), in order of end, then source: its latest
# runs ended by a time are the first read backwards (health's reads of a few assets, migration 0036)
sa.Index(
    "external_sources_job",
    external_sources.c.job_namespace,
    external_sources.c.job_name,
    external_sources.c.ended_at,
    external_sources.c.source,
)
# the runs named under several jobs (rare: each is warned of), found at once: health's reads by
# job cannot see them under every job they were named under (bridge/catalog/health.py)
sa.Index(
    "external_sources_jobs",
    external_sources.c.source,
    sqlite_where=sa.text("jobs IS NOT NULL"),
    postgresql_where=sa.text("jobs IS NOT NULL"),
)
# received runs newest first by their start (a first sighting when no START came), all of them
# and a job namespace's: the UI's list of runs reads a page of them, not every run
_RUN_START = sa.func.coalesce(external_sources.c.started_at, external_sources.c.first_seen)
_RUNS_ONLY = "run_id IS NOT NULL"
sa.Index(
    "external_sources_started",
    _RUN_START,
    external_sources.c.source,
    sqlite_where=sa.text(_RUNS_ONLY),
    postgresql_where=sa.text(_RUNS_ONLY),
)
sa.Index(
    "external_sources_namespace_started",
    external_sources.c.job_namespace,
    _RUN_START,
    external_sources.c.source,
    sqlite_where=sa.text(_RUNS_ONLY),
    postgresql_where=sa.text(_RUNS_ONLY),
)

external_usages = sa.Table(
    "external_usages",
    metadata,
    _text("job_namespace"),
    _text("job_name"),
    _text("direction"),
    _text("asset_id"),
    sa.PrimaryKeyConstraint("job_namespace", "job_name", "direction", "asset_id"),
    sa.CheckConstraint("direction IN ('input', 'output')"),
    sqlite_with_rowid=False,
)
# the whole key, so that a probe of a usage's key through it (PostgreSQL's planner may take it,
# the smaller) is one look, not a read of every job's usage of the dataset (migration 0026)
sa.Index(
    "external_usages_asset",
    external_usages.c.asset_id,
    external_usages.c.job_namespace,
    external_usages.c.job_name,
    external_usages.c.direction,
)

external_lineage = sa.Table(
    "external_lineage",
    metadata,
    _text("upstream_id"),
    _text("downstream_id"),
    _text("job_namespace"),
    _text("job_name"),
    sa.PrimaryKeyConstraint("upstream_id", "downstream_id", "job_namespace", "job_name"),
    sqlite_with_rowid=False,
)
# the whole key, as external_usages_asset (migration 0026)
sa.Index(
    "external_lineage_downstream",
    external_lineage.c.downstream_id,
    external_lineage.c.upstream_id,
    external_lineage.c.job_namespace,
    external_lineage.c.job_name,
)

# The latest of each facet (custom ones too) of an external run ('run:<runId>'), job
# ('job:<namespace>/<name>') and dataset ('asset:<asset id>'), as the event had it.
external_facets = sa.Table(
    "external_facets",
    metadata,
    _text("owner"),
    _text("facet_key"),
    # '<time>|<digest>' of its event: the highest wins; NULL: a dataset's facet as its latest event
    # with facets has it (external_datasets.all_facets_rank)
    _text("facet_rank", nullable=True),
    _text("facet"),  # its JSON (canonical)
    sa.PrimaryKeyConstraint("owner", "facet_key"),
)

# A dataset's other names, as producers' symlinks facets give them: every one ever given, with the
# type the latest-ranked event naming it says. An asset is found by any of them.
external_identifiers = sa.Table(
    "external_identifiers",
    metadata,
    _text("namespace"),
    _text("name"),
    _text("asset_id"),
    _text("type", nullable=True),
    _text("id_rank"),
    sa.PrimaryKeyConstraint("namespace", "name", "asset_id"),
)
sa.Index("external_identifiers_asset", external_identifiers.c.asset_id)

# olbridge's lineage and the receiver's, for the lineage walks
VIEWS = {
    "all_lineage": """
        SELECT upstream_id, downstream_id FROM lineage
        UNION ALL
        SELECT upstream_id, downstream_id FROM external_lineage
    """,
}

# The assets found by a part of their id, of a name they were received under (external_datasets)
# or of a symlink (external_identifiers), for the UI's search (sql.SEARCH_ASSETS): each engine's
# own. SQLite: an FTS5 table with the trigram tokenizer, kept by triggers, in which a phrase
# matches every term that holds it (three characters or more). PostgreSQL: a view of the three,
# whose ILIKE pg_trgm's GIN indexes answer when the extension can be had (a catalog without it
# searches by reading every asset).
SEARCH_SOURCES = (  # (table, what a row adds to the search, the asset it names)
    ("assets", "{row}id", "{row}id"),
    ("external_datasets", "{row}ol_namespace || '/' || {row}ol_name", "{row}asset_id"),
    ("external_identifiers", "{row}namespace || '/' || {row}name", "{row}asset_id"),
)
# PostgreSQL's term of an asset: its id, as an expression, not the column. pg_trgm's operator
# class answers equality too, so a trigram index on the column itself is one the planner may take
# for ``assets.id = ...``: it did, for the receiver's move of sightings (a bitmap scan of every
# asset sharing the id's trigrams, 1.8 ms a row among 560 assets, growing with them, where the
# primary key takes a few µs). No statement asks for the expression but the search.
POSTGRES_TERMS = {"assets": "{row}id || ''"}


def postgres_search(table: str) -> tuple[str, str]:
    """PostgreSQL's term of a search source's table (:data:`SEARCH_SOURCES`, or
    :data:`POSTGRES_TERMS` where it says otherwise), and its index's statement."""
    [term] = [term for source, term, _ in SEARCH_SOURCES if source == table]
    expression = POSTGRES_TERMS.get(table, term).format(row="")
    return expression, f"CREATE INDEX {table}_trgm ON {table} USING gin (({expression}) gin_trgm_ops);"


def postgres_search_view() -> str:
    """The statement that makes PostgreSQL's view of the search's terms."""
    view = " UNION ALL ".join(
        f"SELECT {asset.format(row='')} AS asset_id, {postgres_search(table)[0]} AS term FROM {table}"
        for table, _, asset in SEARCH_SOURCES
    )
    return f"CREATE VIEW asset_search AS {view}"


def search_statements(engine: str) -> list[str]:
    """The statements that make the assets' search on an engine (and fill it from what the
    catalog holds)."""
    if engine == "sqlite":
        out = ["CREATE VIRTUAL TABLE asset_search USING fts5(term, asset_id UNINDEXED, tokenize = 'trigram')"]
        for table, term, asset in SEARCH_SOURCES:
            new = term.format(row="new."), asset.format(row="new.")
            old = term.format(row="old."), asset.format(row="old.")
            out.append(
                f"CREATE TRIGGER {table}_searched AFTER INSERT ON {table} BEGIN "
                f"INSERT INTO asset_search (term, asset_id) VALUES ({new[0]}, {new[1]}); END"
            )
            # a row found by its whole term (a phrase of it: by the index), or, shorter than a
            # trigram, by reading the table (the condition is checked once, before)
            out.append(
                f"CREATE TRIGGER {table}_unsearched AFTER DELETE ON {table} BEGIN "
                f"DELETE FROM asset_search WHERE rowid IN (SELECT rowid FROM asset_search WHERE asset_search MATCH "
                f"'\"' || replace({old[0]}, '\"', '\"\"') || '\"' AND term = {old[0]} AND asset_id = {old[1]}) "
                f"AND length({old[0]}) >= 3; "
                f"DELETE FROM asset_search WHERE length({old[0]}) < 3 AND term = {old[0]} AND asset_id = {old[1]}; END"
            )
        out.append(
            "INSERT INTO asset_search (term, asset_id) "
            + " UNION ALL ".join(
                f"SELECT {term.format(row='')}, {asset.format(row='')} FROM {table}"
                for table, term, asset in SEARCH_SOURCES
            )
        )
        return out
    indexes = " ".join(postgres_search(table)[1] for table, _, _ in SEARCH_SOURCES)
    return [
        postgres_search_view(),
        # in a block of its own: without the extension (not installed, or not this user's to
        # create) the catalog is made all the same, and says so
        "DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS pg_trgm; "
        + indexes
        + " EXCEPTION WHEN OTHERS THEN RAISE WARNING USING MESSAGE = "
        "'olbridge: no pg_trgm, the UI''s search reads every asset: ' || SQLERRM; END $$",
    ]


# --- health ----------------------------------------------------------------------------------

# The freshness rule set on an asset (bridge/catalog/health.py); the config's selectors are not here.
freshness_rules = sa.Table(
    "freshness_rules",
    metadata,
    _text("asset_id", primary_key=True),
    _text("rule"),  # JSON: {max, warn} or {cron, lag, timezone}, and its source (asset, dbt)
    _text("set_at"),
)

# The checks (data-quality assertions) reported on an asset, each at the time it was reported
asset_checks = sa.Table(
    "asset_checks",
    metadata,
    _text("asset_id"),
    _text("reported_at"),
    _text("reporter"),  # the run: <namespace>/<flow>.<task>, a received run's job, or 'dbt import'
    _text("assertions"),  # JSON list, as assets.assertions
    # a received event's rank (its time and digest): of two events of one time, the higher one's
    # checks are kept; NULL for olbridge's own
    _text("check_rank", nullable=True),
    sa.PrimaryKeyConstraint("asset_id", "reported_at"),
)

# What health reads of the runs retention deleted (bridge/catalog/writes_kept.py): of the
# receiver's, each asset's latest run and latest successful write; of olbridge's own, each task
# that wrote an asset and its latest write
kept_writes = sa.Table(
    "kept_writes",
    metadata,
    _text("asset_id"),
    _text("fact"),  # run | write
    _text("job_namespace"),
    _text("job_name"),
    _text("state"),  # the received run's, as received (COMPLETE, FAIL, ABORT)
    _text("ended_at"),
    sa.PrimaryKeyConstraint("asset_id", "fact"),
    sa.CheckConstraint("fact IN ('run', 'write')"),
)
kept_writers = sa.Table(
    "kept_writers",
    metadata,
    _text("asset_id"),
    _text("flow_namespace"),
    _text("flow_id"),
    _text("task_id"),
    _text("last_write", nullable=True),
    # the latest write of the task's runs retention deleted (migration 0038): all before its
    # window, so that a moment in the window whose latest write it was still reads it
    _text("gone_write", nullable=True),
    sa.PrimaryKeyConstraint("asset_id", "flow_namespace", "flow_id", "task_id"),
)
# the received lineage of the runs retention deleted: each edge (an input and an output of one
# run) with the earliest end of a run that made it, for health's at-risk walk as of a time
kept_edges = sa.Table(
    "kept_edges",
    metadata,
    _text("upstream_id"),
    _text("downstream_id"),
    _text("since"),
    sa.PrimaryKeyConstraint("upstream_id", "downstream_id"),
)
sa.Index("kept_edges_downstream", kept_edges.c.downstream_id)
# a task's assets (whose last run its run that ends is: the health watch's marks)
sa.Index("kept_writers_task", kept_writers.c.flow_namespace, kept_writers.c.flow_id, kept_writers.c.task_id)
# Each task's latest run that ended (by end, then key), kept as runs are written: what health
# reads of the task runs of a catalog, without reading them all (bridge/catalog/writes_kept.py)
latest_task_runs = sa.Table(
    "latest_task_runs",
    metadata,
    _text("flow_namespace"),
    _text("flow_id"),
    _text("task_id"),
    _text("ended_at"),
    _integer("run_pk"),
    _text("state"),
    sa.PrimaryKeyConstraint("flow_namespace", "flow_id", "task_id"),
)

# The last known health of each asset, as the health watch judged it (bridge/catalog/health_state.py)
asset_health = sa.Table(
    "asset_health",
    metadata,
    _text("asset_id", primary_key=True),
    _text("health"),  # FAIL | WARN | PASS | UNKNOWN
    _text("reasons"),  # JSON list
    _text("asset_updated_at"),  # the asset's updated_at when judged: a later one is an UPDATED
    _text("judged_at"),
    _text("due_at", nullable=True),  # when its verdict changes with time alone (NULL: never)
    # of an asset purged while FAIL or WARN: its type, namespace and metadata then (JSON), which the
    # watch matches its RECOVERED against, as it does a deleted asset's row
    _text("purged", nullable=True),
    # the [[alerts]] tables told its open FAIL or WARN (JSON list of names; NULL: none open), which
    # its RECOVERED is told too, whatever they match of it by then (migration 0037)
    _text("told", nullable=True),
)
sa.Index("asset_health_health", asset_health.c.health, asset_health.c.asset_id)  # by health, a page by id
sa.Index("asset_health_due", asset_health.c.due_at, asset_health.c.asset_id)

# The assets writes touched since the health watch last judged them, while a watch was live: a
# row a write, appended, never updated (writers side by side never wait for one another on it)
health_marks = sa.Table(
    "health_marks",
    metadata,
    _key("seq"),
    _text("asset_id"),
)
sa.Index("health_marks_asset", health_marks.c.asset_id, health_marks.c.seq)

# --- delivery --------------------------------------------------------------------------------

# A reference outbox: each row points at the stored record whose event it stands for
# (task_runs.pk for run-start / run-update / run-end, asset_changes.seq for asset-change, declared_jobs.pk for
# job); the worker renders the event when it delivers it. Delivered rows are deleted.
outbox = sa.Table(
    "outbox",
    metadata,
    _key("seq"),  # commit order
    _text("kind"),  # run-start | run-update | run-end | asset-change | job
    _integer("ref"),
    _text("run_key"),  # events of one key go out in seq order
    _text("queued_at"),
    _text("state", default="pending"),
    sa.Column("attempts", INTEGER, nullable=False, server_default=sa.text("0")),
    sa.Column("next_attempt_at", SECONDS, nullable=False, server_default=sa.text("0")),  # seconds since the epoch
    _integer("last_status", nullable=True),  # the backend's last HTTP status
    _text("last_error", nullable=True),  # its response body or the error (truncated)
    # serve --forward: a received event's text as it came (kind 'forward', ref its received_events pk)
    _text("payload", nullable=True),
    # PostgreSQL: the stream worker (stream_workers.id) that claimed the row, until when (seconds
    # since the epoch, the database's clock); empty on SQLite, where one worker holds outbox_lease
    _text("claimed_by", nullable=True),
    sa.Column("claim_expires", SECONDS, nullable=True),
    sa.CheckConstraint("state IN ('pending', 'dead')"),
    sqlite_autoincrement=True,  # a seq never comes back
)
sa.Index("outbox_state", outbox.c.state, outbox.c.seq)
sa.Index("outbox_run_key", outbox.c.run_key, outbox.c.seq)
_partial("outbox_retrying", outbox.c.next_attempt_at, "state = 'pending' AND attempts > 0")
_partial("outbox_claimed", outbox.c.claimed_by, "claimed_by IS NOT NULL")
# the alerts waiting, for a stream that delivers alerts alone (stream --alerts-only) past the
# OpenLineage events that wait for a backend
_partial("outbox_alerts", outbox.c.seq, "kind = 'alert' AND state = 'pending'")

outbox_delivery = sa.Table(
    "outbox_delivery",
    metadata,
    sa.Column("id", INTEGER, primary_key=True, autoincrement=False),
    _integer("delivered"),
    _text("last_success_at"),
    sa.CheckConstraint("id = 1"),
)

# The stream workers running on this catalog, each with its heartbeat, and the outbox's lease
# (one holder at a time on SQLite).
stream_workers = sa.Table(
    "stream_workers",
    metadata,
    _text("id", primary_key=True),  # '<host>:<pid>:<random>'
    _text("host"),
    _integer("pid"),
    _text("target"),  # where it delivers
    _text("started_at"),
    sa.Column("heartbeat_at", SECONDS, nullable=False),  # seconds since the epoch
    # where its pid means something: the kernel's boot id and pid namespace (NULL: unknown)
    _text("space", nullable=True),
)

outbox_lease = sa.Table(
    "outbox_lease",
    metadata,
    sa.Column("id", INTEGER, primary_key=True, autoincrement=False),  # the whole outbox: one holder
    _text("worker"),  # stream_workers.id; stale with its heartbeat
    _text("acquired_at"),
    sa.CheckConstraint("id = 1"),
)

# The last delivery failure of the stream ('stream') and of each backfill ('backfill:<name>').
delivery_errors = sa.Table(
    "delivery_errors",
    metadata,
    _text("source", primary_key=True),
    _text("target"),
    _text("failure"),  # connection | timeout | HTTP 5xx | HTTP 429 | ...
    _integer("status", nullable=True),
    _text("detail"),
    _text("at"),
)

# Events a backfill's backend refused for good, kept until a backfill with --retry-refused
# delivers them (item_order: -1 declared job, 0 asset change, 1 task run; ref its pk or seq; event:
# the first one not delivered, 'start' / 'end' of a run or 'event').
backfill_refused = sa.Table(
    "backfill_refused",
    metadata,
    _text("checkpoint"),
    _text("item_time"),
    _integer("item_order"),
    _integer("ref"),
    _text("event"),
    _integer("status", nullable=True),
    _text("error"),
    _text("refused_at"),
    sa.PrimaryKeyConstraint("checkpoint", "item_order", "ref"),
)

# Where each reader of a source, or replay to a backend, got to (bridge/catalog/positions.py).
positions = sa.Table(
    "positions",
    metadata,
    _text("kind"),  # marquez-import | prefect-import | backfill | ...
    _text("name"),  # the source's URL, the checkpoint's name
    _text("value"),  # JSON
    _text("updated_at"),
    sa.PrimaryKeyConstraint("kind", "name"),
)


# (UPDATED_IN_PLACE, in bridge.catalog.sql: their pages keep a fifth free on PostgreSQL)
for _name in UPDATED_IN_PLACE:
    metadata.tables[_name].dialect_kwargs["postgresql_with"] = {"fillfactor": FILLFACTOR}


def dialect(name: str) -> sa.Dialect:
    """SQLAlchemy's dialect of an engine (to compile statements; it connects to nothing)."""
    if name == "sqlite":
        return sqlite.base.SQLiteDialect()
    if name == "postgresql":
        return postgresql.base.PGDialect()  # type: ignore[no-untyped-call]  # SQLAlchemy leaves it untyped
    raise ValueError(f"no dialect {name!r}")


def partitioned(name: str, statement: str) -> list[str]:
    """PostgreSQL's statements that make a table, from the CREATE TABLE compiled for it: a table of
    :data:`PARTITIONED` partitioned by range of its column (received events' key counted by a
    sequence, as an identity cannot be a partitioned table's on every supported PostgreSQL; the
    primary key holding the partition key; storage parameters left to the partitions, which a
    partitioned table has none of), any other as compiled."""
    column = PARTITIONED.get(name)
    if column is None:
        return [statement]
    made = re.sub(r"\s+WITH \([^)]*\)$", "", statement)
    if not made.endswith(")"):
        raise AssertionError(f"unexpected CREATE TABLE {name}: {statement}")
    before: list[str] = []
    after: list[str] = []
    if name == "received_events":
        identity = re.search(r"pk BIGINT GENERATED BY DEFAULT AS IDENTITY[^,]*,", made)
        key = "PRIMARY KEY (pk)"
        if identity is None or key not in made:
            raise AssertionError(f"unexpected CREATE TABLE {name}: {statement}")
        made = made.replace(identity.group(0), f"pk BIGINT DEFAULT nextval('{name}_pk_seq') NOT NULL,")
        made = made.replace(key, "PRIMARY KEY (pk, event_time)")
        before = [f"CREATE SEQUENCE {name}_pk_seq"]
        after = [f"ALTER SEQUENCE {name}_pk_seq OWNED BY {name}.pk"]
    return [*before, made + f" PARTITION BY RANGE ({column})", *after]


@functools.cache
def create_statements(engine: str) -> tuple[str, ...]:
    """The statements that make the schema in an empty database of an engine, in order."""
    compiled = dialect(engine)
    statements: list[str] = []
    for table in metadata.sorted_tables:
        made = str(CreateTable(table).compile(dialect=compiled)).strip()
        statements += partitioned(table.name, made) if engine == "postgresql" else [made]
    for table in metadata.sorted_tables:
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            statements.append(str(CreateIndex(index).compile(dialect=compiled)).strip())
    if engine == "postgresql":
        statements += [
            f"CREATE TABLE {name}_default PARTITION OF {name} DEFAULT{partition_storage(name)}" for name in PARTITIONED
        ]
        statements += [undated_partition(name) for name in UNDATED]
    statements += [f"CREATE VIEW {name} AS {query.strip()}" for name, query in VIEWS.items()]
    statements += search_statements(engine)
    return tuple(statements)


__all__ = [
    "PARTITIONED",
    "UPDATED_IN_PLACE",
    "VERSION",
    "VIEWS",
    "create_statements",
    "dialect",
    "metadata",
    "search_statements",
]
