"""0009: positions, one table for every "where was I" (bridge/catalog/positions.py).

It takes over the Marquez import positions, the Prefect import state and the backfill checkpoints
(their rows moved, their tables dropped), which only SQLite catalogs have: a PostgreSQL catalog
begins at this version or later.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "positions",
        sa.Column("kind", TEXT, nullable=False),  # marquez-import | prefect-import | backfill | ...
        sa.Column("name", TEXT, nullable=False),  # the source's URL, the checkpoint's name
        sa.Column("value", TEXT, nullable=False),  # JSON
        sa.Column("updated_at", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("kind", "name"),
    )
    if op.get_bind().dialect.name != "sqlite":
        return  # the tables it takes over were SQLite's only
    op.execute(
        "INSERT INTO positions (kind, name, value, updated_at) "
        "SELECT 'marquez-import', substr(source, 9), json_object('after', position), updated_at "
        "FROM import_positions WHERE source LIKE 'marquez:%'"
    )
    op.execute(
        "INSERT INTO positions (kind, name, value, updated_at) "
        "SELECT 'prefect-import', api_url, json_object('eventsRead', events_read, "
        "'lastEventIds', json(last_event_ids), 'lastOccurred', last_occurred), updated_at "
        "FROM prefect_import_state"
    )
    op.execute(
        "INSERT INTO positions (kind, name, value, updated_at) "
        "SELECT 'backfill', name, json_object('ahead', json(ahead), 'events', events, 'filters', json(filters), "
        "'position', json(position), 'runs', runs), updated_at "
        "FROM backfill_checkpoints"
    )
    for table in ("import_positions", "prefect_import_state", "backfill_checkpoints"):
        op.drop_table(table)
