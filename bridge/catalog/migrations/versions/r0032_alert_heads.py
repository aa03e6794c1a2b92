"""0032: the alerts waiting in the outbox, indexed apart.

``olbridge stream --alerts-only`` delivers the alerts the health watch queues to their webhooks,
where no OpenLineage backend takes the events: those stay pending, as many as the catalog records,
and a worker taking alerts alone must find the few alerts among them without reading them all.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

_WAITING = "kind = 'alert' AND state = 'pending'"


def upgrade() -> None:
    op.create_index(
        "outbox_alerts", "outbox", ["seq"], sqlite_where=sa.text(_WAITING), postgresql_where=sa.text(_WAITING)
    )
