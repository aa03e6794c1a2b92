"""0037: the alerts an asset's open FAIL or WARN was told to.

``asset_health.told``: the names of the ``[[alerts]]`` tables the health watch told the asset's
FAIL or WARN (JSON list; NULL: none open), so that its RECOVERED goes to each of them, as well as
to those that take the asset as it is now. Before, it went to those alone: a table that matched
the asset when it failed and no longer does (its metadata, type or namespace changed meanwhile)
kept its incident open for ever.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.add_column("asset_health", sa.Column("told", TEXT, nullable=True))
