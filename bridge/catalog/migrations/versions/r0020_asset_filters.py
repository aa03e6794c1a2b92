"""0020: the assets a filter of the UI's list selects, found in id order.

The list of assets reads a page in id order (``ORDER BY id LIMIT``). With an index on the
namespace alone (or the type alone), a filter the assets rarely meet (a namespace with no asset of
that type, say) was answered by reading the key in id order and checking every asset: on a
catalog of a million assets, a second. The indexes now end in the id, so a namespace, a type, or
both give their assets in id order at once:

- ``assets_namespace``: (namespace, id), was (namespace);
- ``assets_type``: (type, id), was (type);
- ``assets_namespace_type``: (namespace, type, id), new.
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("assets_namespace", table_name="assets")
    op.drop_index("assets_type", table_name="assets")
    op.create_index("assets_namespace", "assets", ["namespace", "id"])
    op.create_index("assets_type", "assets", ["type", "id"])
    op.create_index("assets_namespace_type", "assets", ["namespace", "type", "id"])
