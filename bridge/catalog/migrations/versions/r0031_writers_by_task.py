"""0031: the assets each task wrote, by task.

A task's run that ends is the last run of every asset the task ever wrote (or was to write), not
only of those it names: health judges each asset by its writing tasks' latest runs. The writes
marked only the assets a run named for the health watch, which so missed the others (a task that
wrote ``a`` and ``b``, then failed writing ``b`` alone, left ``a`` as it was until the watch's next
pass over every asset, an hour by default). They now mark every asset the task wrote, found in
``kept_writers`` by the index made here.
"""

from __future__ import annotations

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("kept_writers_task", "kept_writers", ["flow_namespace", "flow_id", "task_id"])
