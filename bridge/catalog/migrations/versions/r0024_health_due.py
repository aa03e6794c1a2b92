"""0024: when each asset's kept health changes with time alone.

``asset_health.due_at``: the first moment after the health watch judged an asset at which its
verdict would be another with no new fact (its freshness window's warning or end, the next tick
of its cron deadline; NULL: never, until something is written). The watch judges the assets due
at each look, as it does the marked ones, instead of judging every asset on a schedule to find
them; ``asset_health_due`` finds them. Rows kept before have none: the first pass over every
asset (a watch taking the lease judges them all at once) sets it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.add_column("asset_health", sa.Column("due_at", TEXT, nullable=True))
    op.create_index("asset_health_due", "asset_health", ["due_at", "asset_id"])
