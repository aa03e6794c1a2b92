"""The health the watch keeps, read: whether a watch keeps it now, how many assets have each
health, and those of some states a page at a time (what the web view's health page shows of a
catalog larger than it judges at a request).

What is kept is each asset's health as the watch last judged it: a write's change within a
``poll`` (2 s by default), time's at its due moment, anything else at its pass over every asset
(:mod:`bridge.catalog.health_state`). No at-risk flag is kept: a caller judges the assets it shows
again, with theirs (:func:`bridge.catalog.health.assess` of their ids).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.health_state import LEASE, LEASE_KIND, counts
from bridge.model.health import Health

# by namespace (a token's counts: its namespaces' alone, checked again by Scope.allows)
COUNTS_BY_NAMESPACE = """
    SELECT a.namespace, h.health, count(*) FROM asset_health h JOIN assets a ON a.id = h.asset_id
    WHERE a.deleted_at IS NULL AND {scope} GROUP BY a.namespace, h.health
"""
# the kept assets of a state after an id, by id (asset_health_health: by health, then id, read in
# its order; one state a statement, the states' pages merged, as an IN of them would be sorted whole)
IN_STATE = """
    SELECT h.asset_id, a.namespace FROM asset_health h JOIN assets a ON a.id = h.asset_id
    WHERE h.health = ? AND h.asset_id > ? AND a.deleted_at IS NULL AND {scope}
    ORDER BY h.asset_id LIMIT ?
"""
SCANNED_AT_MOST = 20_000  # rows a page reads for a token's assets, at most (then it stops, to go on)


class Scope(Protocol):
    """The namespaces a reader sees (:class:`bridge.catalog.browse.Scope`)."""

    def allows(self, namespace: str | None) -> bool: ...

    def clause(self, column: str, *, global_: bool = True) -> tuple[str, list[Any]]: ...


def watch_live(conn: Connection | Cursor, now: float) -> bool:
    """Whether a health watch holds its lease at ``now`` (seconds since the epoch): then what it
    keeps is current (and writes mark what they change)."""
    row = conn.execute(LEASE, (LEASE_KIND,)).fetchone()
    lease = json.loads(row[0]) if row is not None else {}
    return bool(lease.get("holder")) and float(lease.get("until", 0)) > now


def kept_counts(conn: Connection | Cursor, scope: Scope | None) -> dict[str, int]:
    """How many assets have each kept health (every health named), of those ``scope`` sees."""
    if scope is None:
        return counts(conn)
    clause, params = scope.clause("a.namespace")
    found = {h.value: 0 for h in Health}
    for namespace, health, n in conn.execute(COUNTS_BY_NAMESPACE.format(scope=clause), params):
        if scope.allows(namespace):
            found[str(health)] += int(n)
    return found


def kept_in_states(
    conn: Connection | Cursor, states: Sequence[str], after: str | None, limit: int, scope: Scope | None
) -> tuple[list[str], str | None]:
    """The ids of at most ``limit`` assets whose kept health is one of ``states``, after ``after``
    (by id), of those ``scope`` sees; and where the next page starts (None: no more). A token's
    page reads at most :data:`SCANNED_AT_MOST` rows and then ends where it got to."""
    if not states:
        return [], None
    clause, params = scope.clause("a.namespace") if scope is not None else ("1 = 1", [])
    statement = IN_STATE.format(scope=clause)
    found: list[str] = []
    cursor, scanned, chunk = after or "", 0, limit + 1
    while True:
        # the next ``chunk`` rows by id of each state, merged: the first ``chunk`` of them all
        rows = sorted(
            (str(asset_id), namespace)
            for state in dict.fromkeys(states)
            for asset_id, namespace in conn.execute(statement, (state, cursor, *params, chunk))
        )[:chunk]
        for asset_id, namespace in rows:
            scanned += 1
            cursor = asset_id
            if scope is None or scope.allows(namespace):
                if len(found) == limit:  # one more there is: the page ends before it
                    return found, found[-1]
                found.append(asset_id)
        if len(rows) < chunk:
            return found, None
        if scanned >= SCANNED_AT_MOST:
            return found, cursor
        chunk = min(max(chunk * 2, 100), 1000)


__all__ = ["kept_counts", "kept_in_states", "watch_live"]
