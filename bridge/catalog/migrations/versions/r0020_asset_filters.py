"""0020: the assets a filter of the UI's list selects, and an asset's upstream neighbours, found in
id order.

The list of assets reads a page in id order (``ORDER BY id LIMIT``). With an index on the
namespace alone (or the type alone), a filter the assets rarely meet (a namespace with no asset of
that type, say) was answered by reading the key in id order and checking every asset: on a
catalog of a million assets, a second. The indexes now end in the id, so a namespace, a type, or
both give their assets in id order at once:

- ``assets_namespace``: (namespace, id), was (namespace);
- ``assets_type``: (type, id), was (type);
- ``assets_namespace_type``: (namespace, type, id), new;
- ``lineage_downstream``, ``external_lineage_downstream``: (downstream_id, upstream_id), were
  (downstream_id): an asset's upstream assets in id order, so that a page of them, or a capped
  count, reads only the edges it needs (an asset's downstream ones are in the key's order).
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
    for table in ("lineage", "external_lineage"):
        op.drop_index(f"{table}_downstream", table_name=table)
        op.create_index(f"{table}_downstream", table, ["downstream_id", "upstream_id"])
