"""0016: received events partitioned by day of their event time (PostgreSQL only; SQLite unchanged).

Retention then drops a day's partition instead of deleting its rows
(:mod:`bridge.catalog.postgres.partitions`). The table is made again, partitioned, and its rows
copied in: the old one renamed, its key, index and sequence freed; the new one made with its
default partition and a partition for each day of the last :data:`RECENT_DAYS` that holds events
and for today and the week ahead; the rows copied (each key kept: a pending forward still points
at its event), the key's sequence set past them, the old table dropped. Events older than that go
to the default partition, from which retention deletes them in batches once they expire.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

RECENT_DAYS = 92
AHEAD = 7
OLD = "received_events_unpartitioned"
COLUMNS = "pk, digest, kind, event_type, event_time, source, producer, warnings, body, token"
TABLE = """
    CREATE TABLE received_events (
        pk BIGINT DEFAULT nextval('received_events_pk_seq') NOT NULL,
        digest TEXT COLLATE "C" NOT NULL,
        kind TEXT COLLATE "C" NOT NULL,
        event_type TEXT COLLATE "C",
        event_time TEXT COLLATE "C" NOT NULL,
        source TEXT COLLATE "C",
        producer TEXT COLLATE "C" NOT NULL,
        warnings TEXT COLLATE "C" DEFAULT '[]' NOT NULL,
        body TEXT COLLATE "C" NOT NULL,
        token TEXT COLLATE "C",
        PRIMARY KEY (pk, event_time),
        CHECK (kind IN ('RunEvent', 'DatasetEvent', 'JobEvent'))
    ) PARTITION BY RANGE (event_time)
"""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    run = bind.exec_driver_sql
    run(f"ALTER TABLE received_events RENAME TO {OLD}")
    run(f"ALTER TABLE {OLD} DROP CONSTRAINT IF EXISTS received_events_pkey")
    run("DROP INDEX IF EXISTS received_events_time_digest")
    run(f"ALTER TABLE {OLD} ALTER COLUMN pk DROP IDENTITY IF EXISTS")  # frees received_events_pk_seq
    run("CREATE SEQUENCE received_events_pk_seq")
    run(TABLE)
    run("ALTER SEQUENCE received_events_pk_seq OWNED BY received_events.pk")
    run("CREATE UNIQUE INDEX received_events_time_digest ON received_events (event_time, digest)")
    run("CREATE TABLE received_events_default PARTITION OF received_events DEFAULT")
    today = datetime.fromtimestamp(time.time(), UTC).date()
    since = (today - timedelta(days=RECENT_DAYS)).isoformat()
    found = run(
        f"SELECT DISTINCT substr(event_time, 1, 10) FROM {OLD} WHERE event_time >= '{since}' AND event_time < '9999'"
    ).fetchall()
    days = {today + timedelta(days=n) for n in range(AHEAD + 1)}
    for (text,) in found:
        try:
            days.add(date.fromisoformat(str(text)))
        except ValueError:  # not a time olbridge wrote: the default partition holds it
            continue
    for day in sorted(days):
        run(
            f"CREATE TABLE received_events_p{day:%Y%m%d} PARTITION OF received_events "
            f"FOR VALUES FROM ('{day.isoformat()}') TO ('{(day + timedelta(days=1)).isoformat()}')"
        )
    run(f"INSERT INTO received_events ({COLUMNS}) SELECT {COLUMNS} FROM {OLD}")
    run(f"SELECT setval('received_events_pk_seq', coalesce((SELECT max(pk) FROM {OLD}), 0) + 1, false)")
    run(f"DROP TABLE {OLD}")
