"""0003: prefect import state (SQLite only: released before PostgreSQL; see migrations/legacy.py)."""

from __future__ import annotations

from bridge.catalog.migrations.legacy import run_sqlite_script

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sqlite_script("0003_prefect_import_state")
