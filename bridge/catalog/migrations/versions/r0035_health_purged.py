"""0035: what the health watch needs of an asset purged while FAIL or WARN.

``asset_health.purged``: a purge keeps the kept health of an asset FAIL or WARN, with the asset's
type, namespace and metadata as they were (JSON), so that the watch closes its alert's incident
with a RECOVERED, matched by the alerts' rules as a deleted asset's row is; the watch forgets both
once it has told it. Before, a purge took the kept health with the asset, and nothing was told.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.add_column("asset_health", sa.Column("purged", TEXT, nullable=True))
