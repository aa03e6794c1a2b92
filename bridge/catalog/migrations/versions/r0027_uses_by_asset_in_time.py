"""0027: an asset's uses found newest first, a page at a time.

An asset's page lists the latest runs that read or wrote it, and says when it was last written.
``usages_asset`` held the asset alone, so each of these read every use the asset ever had and
sorted them: for a table every run reads, a read of its whole history at every view of its page
(and "last written" was looked for among the latest twenty uses only, which a table read more
often than written may not hold). The index is now (asset_id, direction, used_at, task_run_pk): an
asset's latest reads, or its latest writes, are the first rows of it.
"""

from __future__ import annotations

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("usages_asset", table_name="usages")
    op.create_index("usages_asset", "usages", ["asset_id", "direction", "used_at", "task_run_pk"])
