"""0018: the last known health of each asset, and the assets whose health is to be judged again.

- ``asset_health``: one row an asset, its health (FAIL, WARN, PASS, UNKNOWN) and reasons as last
  judged by the health watch (``serve`` or ``stream``), the asset's ``updated_at`` then, and when it
  was judged. A change of health queues its alerts (outbox rows of kind ``alert``) in the
  transaction that writes the new row.
- ``health_marks``: the assets writes touched since they were last judged, while a watch was
  live: appended, a row a write (``seq`` counts up), never updated, so that writers side by side
  marking the same asset never wait for one another; the watch deletes an asset's marks up to the
  highest key it read, once it has judged the asset.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
INTEGER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "asset_health",
        sa.Column("asset_id", TEXT, nullable=False),
        sa.Column("health", TEXT, nullable=False),
        sa.Column("reasons", TEXT, nullable=False),  # JSON list
        sa.Column("asset_updated_at", TEXT, nullable=False),
        sa.Column("judged_at", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("asset_id"),
    )
    op.create_index("asset_health_health", "asset_health", ["health"])
    op.create_table(
        "health_marks",
        sa.Column("seq", INTEGER, sa.Identity(), nullable=False),
        sa.Column("asset_id", TEXT, nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("health_marks_asset", "health_marks", ["asset_id", "seq"])
