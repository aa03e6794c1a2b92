"""0019: what the UI reads on a large catalog, by index.

- ``task_runs_namespace_started``: a flow namespace's runs newest first (the list of runs
  filtered by namespace).
- ``received_events_source``: a run's events (a run page), by source and time.
- ``external_sources_started``, ``external_sources_namespace_started``: received runs newest
  first by their start (a first sighting when no START came), all of them and a job namespace's
  (the list of runs reads a page of them, not every run).
- The assets' search (``asset_search``, :func:`bridge.catalog.schema.search_statements`): on
  SQLite an FTS5 trigram table kept by triggers and filled here; on PostgreSQL a view, with
  pg_trgm's GIN indexes where the extension can be had (a catalog without it is made all the
  same, and its search reads every asset).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from bridge.catalog.schema import search_statements

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

RUNS_ONLY = sa.text("run_id IS NOT NULL")


def upgrade() -> None:
    bind = op.get_bind()
    op.create_index("task_runs_namespace_started", "task_runs", ["flow_namespace", "started_at", "pk"])
    op.create_index(
        "received_events_source",
        "received_events",
        ["source", "event_time"],
        sqlite_where=sa.text("source IS NOT NULL"),
        postgresql_where=sa.text("source IS NOT NULL"),
    )
    start = sa.text("coalesce(started_at, first_seen)")
    op.create_index(
        "external_sources_started",
        "external_sources",
        [start, "source"],
        sqlite_where=RUNS_ONLY,
        postgresql_where=RUNS_ONLY,
    )
    op.create_index(
        "external_sources_namespace_started",
        "external_sources",
        ["job_namespace", start, "source"],
        sqlite_where=RUNS_ONLY,
        postgresql_where=RUNS_ONLY,
    )
    for statement in search_statements(bind.dialect.name):
        bind.exec_driver_sql(statement)
