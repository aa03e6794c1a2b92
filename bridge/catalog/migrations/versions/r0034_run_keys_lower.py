"""0034: the keys of received runs whose runId is a UUID, in lower case.

Marquez reads a runId as a UUID, whatever its case: one run. The receiver now keeps a run under
``run:<runId>`` with a UUID in lower case (:func:`bridge.model.received.run_source`); the runs
received before were kept under their id as it came, and an event of one of them in another case
(or in the same case, now read in lower case) would make a second run. Their keys are moved to
lower case where the run has no row under that key already and no row under another spelling (a
run already split in two, received in two cases before, stays as it was: a second spelling would
move to the same key): its row, its events, its column edges, its facets, and the outbox's rows
forwarding its events (``received:run:<runId>``: one key, in their order). The facets a run gone
(its row deleted by retention) left stay where they are.
"""

from __future__ import annotations

from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def _uuid_key(column: str, prefix: str, postgresql: bool) -> str:
    """A condition: ``column`` is ``prefix`` then a UUID with some capital letter."""
    n = len(prefix)
    dashes = " AND ".join(f"substr({column}, {n + at}, 1) = '-'" for at in (9, 14, 19, 24))
    rest = f"lower(substr({column}, {n + 1}))"
    hex_only = f"{rest} ~ '^[0-9a-f-]+$'" if postgresql else f"{rest} NOT GLOB '*[^0-9a-f-]*'"
    return (
        f"substr({column}, 1, {n}) = '{prefix}' AND length({column}) = {n + 36} AND lower({column}) <> {column} "
        f"AND {dashes} AND {hex_only}"
    )


def upgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    runs = _uuid_key("source", "run:", postgresql)
    # the runs received under two spellings or more, none in lower case (found in one pass: a
    # lookup of each spelling's other spellings would read the table once a row)
    split = (
        f"SELECT lower(source) FROM external_sources WHERE {runs} "
        "GROUP BY lower(source) HAVING count(DISTINCT source) > 1"
    )
    # a run's facets first, while its row is under the key as it came: those of a run whose row
    # moves (a facet of a run gone, whose row retention deleted, stays where it is: it belongs to
    # no run, and under another spelling of a live run's id it would take that run's key)
    owners = _uuid_key("owner", "run:", postgresql)
    op.execute(
        f"UPDATE external_facets SET owner = lower(owner) WHERE {owners} "
        "AND EXISTS (SELECT 1 FROM external_sources s WHERE s.source = external_facets.owner) "
        "AND NOT EXISTS (SELECT 1 FROM external_sources s WHERE s.source = lower(external_facets.owner)) "
        f"AND lower(owner) NOT IN ({split}) "
        "AND NOT EXISTS (SELECT 1 FROM external_facets f WHERE f.owner = lower(external_facets.owner) "
        "AND f.facet_key = external_facets.facet_key)"
    )
    op.execute(
        f"UPDATE external_sources SET source = lower(source) WHERE {runs} "
        "AND NOT EXISTS (SELECT 1 FROM external_sources s WHERE s.source = lower(external_sources.source)) "
        f"AND lower(source) NOT IN ({split})"
    )
    # what belongs to a run whose key moved (none is left under the key as it came)
    for table, column in (("received_events", "source"), ("column_lineage", "source")):
        op.execute(
            f"UPDATE {table} SET {column} = lower({column}) WHERE {_uuid_key(column, 'run:', postgresql)} "
            f"AND NOT EXISTS (SELECT 1 FROM external_sources s WHERE s.source = {table}.{column})"
        )
    op.execute(f"UPDATE outbox SET run_key = lower(run_key) WHERE {_uuid_key('run_key', 'received:run:', postgresql)}")
