"""0005: outbox (SQLite only: released before PostgreSQL; see migrations/legacy.py)."""

from __future__ import annotations

from bridge.catalog.migrations.legacy import run_sqlite_script

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sqlite_script("0005_outbox")
