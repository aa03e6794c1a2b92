"""0014: freshness rules set on assets (``assets set ID --freshness 6h``), issue 34.

One row an asset: its rule as JSON (a window ``max`` / ``warn``, or a cron deadline ``cron`` /
``lag`` / ``timezone``) and when it was set. Rules chosen by selector live in the config file.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "freshness_rules",
        sa.Column("asset_id", TEXT, nullable=False),
        sa.Column("rule", TEXT, nullable=False),  # JSON, with its source (asset, dbt)
        sa.Column("set_at", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("asset_id"),
    )
