"""0038: the latest write of a task's runs that retention deleted, kept apart.

``kept_writers.gone_write``: of each task that wrote an asset, the latest write of its runs that
retention deleted (all before its window). ``last_write`` is the task's latest write of all; as
of a moment in the window before a later run wrote the asset again, the asset's last write was
one of the deleted runs', which ``health --as-of`` then read as none (UNKNOWN, or stale for
longer than it was). Writes deleted before this version are in ``last_write`` alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def upgrade() -> None:
    op.add_column("kept_writers", sa.Column("gone_write", TEXT, nullable=True))
