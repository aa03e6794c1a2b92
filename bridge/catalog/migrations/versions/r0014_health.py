"""0014: asset health (issue 34): freshness rules set on assets, and checks as they were reported.

- ``freshness_rules``: one row an asset (``assets set ID --freshness 6h``, a dbt source's
  freshness): its rule as JSON (a window ``max`` / ``warn``, or a cron deadline ``cron`` / ``lag``
  / ``timezone``, and its source) and when it was set. Rules chosen by selector live in the
  config file.
- ``asset_checks``: the data-quality assertions a run (or ``dbt import``'s test results) reported
  on an asset, at the time they were reported, so that health as of a time takes the checks of
  then. The asset's ``assertions`` column keeps the latest, as before.
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
    op.create_table(
        "asset_checks",
        sa.Column("asset_id", TEXT, nullable=False),
        sa.Column("reported_at", TEXT, nullable=False),
        sa.Column("reporter", TEXT, nullable=False),  # the run: <namespace>/<flow>.<task>, or 'dbt import'
        sa.Column("assertions", TEXT, nullable=False),  # JSON list, as assets.assertions
        sa.PrimaryKeyConstraint("asset_id", "reported_at"),
    )
