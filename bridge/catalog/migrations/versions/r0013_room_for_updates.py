"""0013: on PostgreSQL, room on each page of the tables whose rows are rewritten in place.

A placeholder's and a dataset's sightings move at every group of events the receiver takes that
names them, a run's row with its events, a worker's at every heartbeat. A page filled to the brim
has no room for the row's new version, so every such update wrote a new entry in each of the
table's indexes and left a dead one. With a fifth of each page kept free (fillfactor 80) the new
version stays on its page (a HOT update). Pages written before keep what they hold until they
are rewritten (``VACUUM FULL`` of these tables, at a quiet time, rewrites them now). SQLite has
no such setting: nothing to do there.
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TABLES = ("assets", "external_datasets", "external_sources", "external_facets", "stream_workers", "positions")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} SET (fillfactor = 80)")
