"""0007: delivery bookkeeping (SQLite only: released before PostgreSQL; see migrations/legacy.py)."""

from __future__ import annotations

from bridge.catalog.migrations.legacy import run_sqlite_script

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sqlite_script("0007_delivery_bookkeeping")
