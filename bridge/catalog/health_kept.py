"""The health the watch keeps, read: whether a watch keeps it now, how many assets have each
health, and those of some states a page at a time (what the web view's health page shows of a
catalog larger than it judges at a request).

What is kept is each asset's health as the watch last judged it: a write's change within a
``poll`` (2 s by default), time's at its due moment, anything else at its pass over every asset
(:mod:`bridge.catalog.health_state`). It is read as current only while the watch that holds the
lease has made a pass over every asset since it took it (:data:`~bridge.catalog.health_state.PASSED`):
not while its first pass runs, nor after another process took the lease over and before its own.
No at-risk flag is kept: a caller judges the assets it shows again, with theirs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.health_state import LEASE, LEASE_KIND, PASSED, counts
from bridge.catalog.namespaces import namespaces_seen
from bridge.model.health import Health

# by namespace (a token's counts: its namespaces' alone, checked again by Scope.allows), as kept
# (an asset deleted since the watch last looked counts until it looks again, as in counts())
COUNTS_BY_NAMESPACE = """
    SELECT a.namespace, h.health, count(*) FROM asset_health h JOIN assets a ON a.id = h.asset_id
    WHERE {scope} GROUP BY a.namespace, h.health
"""
# the next kept assets of a state after an id, by id, at most so many read (asset_health_health:
# by health, then id, read in its order), with their namespaces, types, and whether they are gone
# (deleted, or purged: no type), which the caller leaves out, counting them as read
IN_STATE = """
    SELECT h.asset_id, a.namespace, a.type, a.deleted_at FROM (
        SELECT asset_id FROM asset_health WHERE health = ? AND asset_id > ? ORDER BY asset_id LIMIT ?
    ) h LEFT JOIN assets a ON a.id = h.asset_id ORDER BY h.asset_id
"""
SCANNED_AT_MOST = 20_000  # kept rows a page reads for a token's assets, at most (then it stops, to go on)
# the first asset of a namespace after an id that is not deleted (assets_namespace: by namespace,
# then id), and of the Global ones
_FIRST = "SELECT id, namespace, type FROM assets WHERE {} AND id > ? AND deleted_at IS NULL ORDER BY id LIMIT 1"
FIRST_AFTER, FIRST_GLOBAL_AFTER = _FIRST.format("namespace = ?"), _FIRST.format("namespace IS NULL")
KEPT_HEALTH = "SELECT health FROM asset_health WHERE asset_id = ?"


class Scope(Protocol):
    """The namespaces a reader sees (:class:`bridge.catalog.browse.Scope`)."""

    @property
    def patterns(self) -> tuple[str, ...]: ...

    def allows(self, namespace: str | None) -> bool: ...

    def clause(self, column: str, *, global_: bool = True) -> tuple[str, list[Any]]: ...


def watch_live(conn: Connection | Cursor, now: float) -> bool:
    """Whether a health watch holds its lease at ``now`` (seconds since the epoch) and has made a
    pass over every asset since it took it: then what it keeps is current (and writes mark what
    they change)."""
    row, passed = conn.execute(LEASE, (LEASE_KIND,)).fetchone(), conn.execute(PASSED, (LEASE_KIND,)).fetchone()
    lease = json.loads(row[0]) if row is not None else {}
    holder = lease.get("holder")
    return (
        bool(holder)
        and float(lease.get("until", 0)) > now
        and passed is not None
        and json.loads(passed[0]).get("holder") == holder
    )


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
) -> tuple[list[tuple[str, str | None, str]], str | None]:
    """At most ``limit`` assets whose kept health is one of ``states``, after ``after`` (by id), of
    those ``scope`` sees, each (id, namespace, type); and where the next page starts (None: no
    more). A page reads at most :data:`SCANNED_AT_MOST` kept rows, and then ends where it got to
    (a token that sees few of them); where that is an asset the token does not see, at the first
    asset past it that the token sees instead (:func:`_past_unseen`): where the next page starts
    is never the id of another namespace's asset."""
    found: list[tuple[str, str | None, str]] = []
    cursor, scanned, chunk, seen = after or "", 0, limit + 1, True
    while states:
        # the next ``chunk`` rows by id of each state, merged: the first ``chunk`` of them all
        read = [
            (str(asset_id), namespace, type_, gone)
            for state in dict.fromkeys(states)
            for asset_id, namespace, type_, gone in conn.execute(IN_STATE, (state, cursor, chunk))
        ]
        rows = sorted(read, key=lambda r: r[0])[:chunk]
        for asset_id, namespace, type_, gone in rows:
            scanned += 1
            cursor, seen = asset_id, False
            if type_ is None or gone is not None:  # deleted since the watch last looked
                continue
            if scope is None or scope.allows(namespace):
                if len(found) == limit:  # one more there is: the page ends before it
                    return found, found[-1][0]
                found.append((asset_id, namespace, str(type_)))
                seen = True
        if len(rows) < chunk:
            return found, None
        if scanned >= SCANNED_AT_MOST:
            if scope is None or seen:
                return found, cursor
            return _past_unseen(conn, states, found, cursor, limit, scope)
        chunk = min(max(chunk * 2, 100), 1000)
    return found, None


def _past_unseen(
    conn: Connection | Cursor,
    states: Sequence[str],
    found: list[tuple[str, str | None, str]],
    cursor: str,
    limit: int,
    scope: Scope,
) -> tuple[list[tuple[str, str | None, str]], str | None]:
    """A page that stopped at ``cursor``, an asset ``scope`` does not see (another namespace's,
    or one deleted since the watch last looked), ended instead at the first asset past it that
    ``scope`` sees, listed where its kept health is one of ``states``: found by the namespaces'
    index whatever lies between, so that the next page starts at an asset the token sees (never
    where it read another namespace's, which by ``state`` and ``after`` would tell that asset's
    id and health), and goes on past what this one read. Where it sees none past there, no more."""
    if len(found) == limit:  # a full page: the next starts after its last
        return found, found[-1][0]
    past = _first_seen_after(conn, cursor, scope)
    if past is None:
        return found, None
    asset_id, namespace, type_ = past
    kept = conn.execute(KEPT_HEALTH, (asset_id,)).fetchone()
    if kept is not None and str(kept[0]) in states:
        found.append((asset_id, namespace, type_))
    return found, asset_id


def _first_seen_after(conn: Connection | Cursor, asset_id: str, scope: Scope) -> tuple[str, str | None, str] | None:
    """The first asset by id after ``asset_id`` that ``scope`` sees and is not deleted (id,
    namespace, type), read by a probe of ``assets_namespace`` for each namespace it sees (and one
    for the Global assets); None: there is none."""
    firsts = [conn.execute(FIRST_GLOBAL_AFTER, (asset_id,)).fetchone()] if scope.allows(None) else []
    for namespace in namespaces_seen(conn, "assets", "namespace", scope.patterns, scope.allows):
        firsts.append(conn.execute(FIRST_AFTER, (namespace, asset_id)).fetchone())
    first = min((row for row in firsts if row is not None), key=lambda row: str(row[0]), default=None)
    return None if first is None else (str(first[0]), first[1], str(first[2]))


__all__ = ["kept_counts", "kept_in_states", "watch_live"]
