"""0022: received runs keyed by their source and run day, and on PostgreSQL partitioned by it.

``external_sources`` gains ``run_day``: the day a run's id was made where it is a UUIDv7, else ''
(:func:`bridge.model.received.run_day`, of the source alone), and its key becomes (source,
run_day), the key a partitioned table must have. The table is made again on both engines (a key
cannot be changed in place on SQLite): the old one renamed and its indexes dropped, the new one
made (on PostgreSQL partitioned by range of ``run_day``, with its default partition, a partition
of the rows with no day (jobs, runs whose ids tell none: ``external_sources_undated``, so that
the default partition, which making a day's partition reads whole, holds only runs of days not
made), and a partition for each day of the last :data:`RECENT_DAYS` that holds runs and for
today and the week ahead),
each run's day worked out here (in Python: the one function the receiver uses) and the rows
copied with it, the old table dropped. Runs of older days go to the default partition, from which
retention deletes them in batches once they expire. Every run's source is read once, so the
migration takes a while on a catalog of millions of runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

import sqlalchemy as sa
from alembic import op

from bridge.model.received import NO_DAY, run_day

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

RECENT_DAYS = 92
AHEAD = 7
OLD = "external_sources_0020"
COLUMNS = (
    "source, job_namespace, job_name, run_id, parent_run_id, state, state_rank, started_at, ended_at, "
    "first_seen, last_seen, producer, inputs, outputs, job_rank, jobs, warnings"
)
TABLE = """
    CREATE TABLE external_sources (
        source TEXT{c} NOT NULL,
        job_namespace TEXT{c} NOT NULL,
        job_name TEXT{c} NOT NULL,
        run_id TEXT{c},
        parent_run_id TEXT{c},
        state TEXT{c},
        state_rank TEXT{c},
        started_at TEXT{c},
        ended_at TEXT{c},
        first_seen TEXT{c} NOT NULL,
        last_seen TEXT{c} NOT NULL,
        producer TEXT{c} NOT NULL,
        inputs TEXT{c} DEFAULT '[]' NOT NULL,
        outputs TEXT{c} DEFAULT '[]' NOT NULL,
        job_rank TEXT{c},
        jobs TEXT{c},
        warnings TEXT{c} DEFAULT '[]' NOT NULL,
        run_day TEXT{c} NOT NULL,
        PRIMARY KEY (source, run_day)
    ) {tail}
"""
START, RUNS_ONLY = sa.text("coalesce(started_at, first_seen)"), sa.text("run_id IS NOT NULL")
# the table's indexes as 0015 and 0019 made them: name, columns, the rows indexed (None: all)
INDEXES: dict[str, tuple[list[str | sa.TextClause], sa.TextClause | None]] = {
    "external_sources_job": (["job_namespace", "job_name"], None),
    "external_sources_started": ([START, "source"], RUNS_ONLY),
    "external_sources_namespace_started": (["job_namespace", START, "source"], RUNS_ONLY),
}
# and made here: the runs named under several jobs (health's reads by job cannot see them under
# every job), found at once
NEW_INDEXES: dict[str, tuple[list[str | sa.TextClause], sa.TextClause | None]] = {
    "external_sources_jobs": (["source"], sa.text("jobs IS NOT NULL")),
}
STORAGE = " WITH (fillfactor = 80)"  # the partitions of a table updated in place (bridge.catalog.sql)


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    run = bind.exec_driver_sql
    run(f"ALTER TABLE external_sources RENAME TO {OLD}")
    for index in [*INDEXES, *NEW_INDEXES]:
        run(f"DROP INDEX IF EXISTS {index}")
    if postgres:
        run(f"ALTER TABLE {OLD} DROP CONSTRAINT IF EXISTS external_sources_pkey")
        run(TABLE.format(c=' COLLATE "C"', tail="PARTITION BY RANGE (run_day)"))
    else:
        run(TABLE.format(c="", tail="WITHOUT ROWID"))
    days = _run_days(bind)
    if postgres:
        run(f"CREATE TABLE external_sources_default PARTITION OF external_sources DEFAULT{STORAGE}")
        # the rows with no day (jobs, runs whose ids tell none) apart from the default partition
        undated = "CREATE TABLE external_sources_undated PARTITION OF external_sources FOR VALUES FROM ('') TO ('1')"
        run(f"{undated}{STORAGE}")
        for day in _days_made(days.values()):
            run(
                f"CREATE TABLE external_sources_p{day:%Y%m%d} PARTITION OF external_sources "
                f"FOR VALUES FROM ('{day.isoformat()}') TO ('{(day + timedelta(days=1)).isoformat()}'){STORAGE}"
            )
    run("CREATE TEMPORARY TABLE run_days_0022 (source TEXT PRIMARY KEY, run_day TEXT NOT NULL)")
    if days:
        bind.execute(
            sa.text("INSERT INTO run_days_0022 (source, run_day) VALUES (:source, :day)"),
            [{"source": source, "day": day} for source, day in days.items()],
        )
    run(
        f"INSERT INTO external_sources ({COLUMNS}, run_day) "
        f"SELECT {', '.join(f'o.{c}' for c in COLUMNS.split(', '))}, coalesce(d.run_day, '{NO_DAY}') "
        f"FROM {OLD} o LEFT JOIN run_days_0022 d ON d.source = o.source"
    )
    run("DROP TABLE run_days_0022")
    run(f"DROP TABLE {OLD}")
    for name, (columns, rows) in {**INDEXES, **NEW_INDEXES}.items():
        op.create_index(name, "external_sources", columns, sqlite_where=rows, postgresql_where=rows)


def _run_days(bind: sa.Connection) -> dict[str, str]:
    """The run day of each run whose id tells one, by source."""
    found = bind.exec_driver_sql(f"SELECT source FROM {OLD} WHERE run_id IS NOT NULL").fetchall()
    days = {str(source): run_day(str(source)) for (source,) in found}
    return {source: day for source, day in days.items() if day != NO_DAY}


def _days_made(run_days: Iterable[str]) -> list[date]:
    """The day partitions to make: today and the week ahead, and each recent day that holds runs
    (the runs of the others, before or after, go to the default partition)."""
    today = datetime.fromtimestamp(time.time(), UTC).date()
    since = today - timedelta(days=RECENT_DAYS)
    days = {today + timedelta(days=n) for n in range(AHEAD + 1)}
    days.update(day for day in map(date.fromisoformat, set(run_days)) if since <= day < today)
    return sorted(days)
