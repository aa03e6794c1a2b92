"""0031: the assets each task wrote, by task; the kept health by health and id.

A task's run that ends is the last run of every asset the task ever wrote (or was to write), not
only of those it names: health judges each asset by its writing tasks' latest runs. The writes
marked only the assets a run named for the health watch, which so missed the others (a task that
wrote ``a`` and ``b``, then failed writing ``b`` alone, left ``a`` as it was until the watch's next
pass over every asset, an hour by default). They now mark every asset the task wrote, found in
``kept_writers`` by the index made here.

The web view's health page lists a catalog's assets of some states, as the health watch keeps
them, a page at a time by id: the index of the kept health by health holds the id too.
"""

from __future__ import annotations

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("kept_writers_task", "kept_writers", ["flow_namespace", "flow_id", "task_id"])
    op.drop_index("asset_health_health", table_name="asset_health")
    op.create_index("asset_health_health", "asset_health", ["health", "asset_id"])
