"""0006: received in time order (SQLite only: released before PostgreSQL; see migrations/legacy.py)."""

from __future__ import annotations

from bridge.catalog.migrations.legacy import run_sqlite_script

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sqlite_script("0006_received_in_time_order")
