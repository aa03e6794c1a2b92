"""0004: declared jobs (SQLite only: released before PostgreSQL; see migrations/legacy.py)."""

from __future__ import annotations

from bridge.catalog.migrations.legacy import run_sqlite_script

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    run_sqlite_script("0004_declared_jobs")
