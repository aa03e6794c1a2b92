"""The health kept: each asset's last known health, the marks writes leave, and the alerts a
change queues.

- **Marks.** A write that may change an asset's health (a task run's inputs and outputs, a
  received event's datasets, an asset set or deleted, a freshness rule set) marks the asset in
  its own transaction (:func:`mark`: one upsert into ``health_marks``, no judging).
- **A pass** (:func:`judge`), by the one process holding the health watch's lease: the marked
  assets (or, on the schedule, every asset) are judged as of the time given (an injected clock)
  by :func:`bridge.catalog.health.assess`; the judgements that differ from the kept one are
  written to ``asset_health``, and in the same transaction the alerts they make are queued in the
  outbox (:func:`bridge.catalog.outbox.queue_alert`) and the marks read are cleared (only those
  no write has bumped since: a mark's ``n`` counts its writes). The judging reads outside any
  write transaction; the writing goes in transactions of at most ``batch`` assets, each of which
  first checks that the lease is still held (``fence``), so a pass that lost it writes nothing.
- :func:`counts` gives the assets by kept health (``/metrics``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog import sql
from bridge.catalog.engine import Connection, Cursor, Database
from bridge.catalog.health import AssetHealth, assess
from bridge.catalog.outbox import queue_alert
from bridge.model import format_time
from bridge.model.alerts import AlertRule, Change, events_of, message, rules_for
from bridge.model.health import Health, Selector

MARK = """
    INSERT INTO health_marks (asset_id, n) VALUES (?, 1)
    ON CONFLICT (asset_id) DO UPDATE SET n = health_marks.n + 1
"""
MARKED = "SELECT asset_id, n FROM health_marks ORDER BY asset_id LIMIT ?"
UNMARK = "DELETE FROM health_marks WHERE asset_id = ? AND n = ?"
KEPT_COLUMNS = "asset_id, health, reasons, asset_updated_at"
PUT = """
    INSERT INTO asset_health (asset_id, health, reasons, asset_updated_at, judged_at) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (asset_id) DO UPDATE SET health = excluded.health, reasons = excluded.reasons,
        asset_updated_at = excluded.asset_updated_at, judged_at = excluded.judged_at
"""
FORGET = "DELETE FROM asset_health WHERE asset_id = ?"
COUNTS = "SELECT health, count(*) FROM asset_health GROUP BY health"
ASSET_COLUMNS = "id, type, namespace, metadata, updated_at"
DOWNSTREAM_DEPTH = 100  # how far the downstream assets at risk are counted
BATCH = 1000


def mark(cur: Cursor, asset_ids: Iterable[str]) -> None:
    """Mark assets for the health watch, in the caller's transaction (in id order: writers side
    by side take the marks' row locks in one order)."""
    ids = sorted(set(asset_ids))
    if ids:
        cur.executemany(MARK, [(asset_id,) for asset_id in ids])


def counts(conn: Connection | Cursor) -> dict[str, int]:
    """How many assets have each kept health (every health named, 0 when none)."""
    found = {str(h): int(n) for h, n in conn.execute(COUNTS)}
    return {h.value: found.get(h.value, 0) for h in Health}


@attrs.frozen
class Kept:
    health: Health
    reasons: tuple[str, ...]
    asset_updated_at: str


def kept(conn: Connection | Cursor, ids: Sequence[str] | None = None) -> dict[str, Kept]:
    """The kept health of the assets ``ids`` (None: of all)."""
    rows = _rows(conn, "asset_health", "asset_id", KEPT_COLUMNS, ids)
    return {r[0]: Kept(Health(r[1]), tuple(json.loads(r[2])), r[3]) for r in rows}


@attrs.frozen
class PassResult:
    """What a pass did: assets judged, kept judgements written (changed), alerts queued; ``lost``
    when the lease went before it was done (what it wrote before stays: each batch whole)."""

    judged: int = 0
    marks: int = 0  # the marks it read (at most its batch unless it judged every asset)
    changed: int = 0
    alerts: int = 0
    lost: bool = False


def judge(
    db: Database,
    selectors: Sequence[Selector],
    alerts: Sequence[AlertRule],
    as_of: datetime,
    *,
    every: bool,
    fence: Callable[[Cursor], bool] = lambda cur: True,
    web_url: str | None = None,
    batch: int = BATCH,
) -> PassResult:
    """One pass: the marked assets (at most ``batch``), or with ``every`` all of them (and the
    marks there were), judged as of ``as_of``; see the module docstring."""
    conn = db.conn
    marks: list[tuple[str, int]] = [(str(a), int(n)) for a, n in conn.execute(MARKED, (2**62 if every else batch,))]
    if not every and not marks:
        return PassResult()
    ids = None if every else [asset_id for asset_id, _ in marks]
    found = {h.asset_id: h for h in assess(conn, selectors, as_of, ids=ids)}
    assets = {r[0]: r for r in _rows(conn, "assets", "id", ASSET_COLUMNS, ids)}
    before = kept(conn, ids)
    moment = format_time(as_of)
    # what to write: a judgement unlike the kept one, or an asset gone (None)
    todo: list[tuple[str, AssetHealth | None]] = []
    for asset_id in sorted(set(found) | set(before)):
        now, prior = found.get(asset_id), before.get(asset_id)
        if now is None or asset_id not in assets:  # gone (deleted, or purged meanwhile)
            if prior is not None:
                todo.append((asset_id, None))
        elif prior is None or (prior.health, prior.reasons, prior.asset_updated_at) != (
            now.health,
            now.verdict.reasons,
            assets[asset_id][4],
        ):
            todo.append((asset_id, now))
    result = PassResult(judged=len(found), marks=len(marks))
    unmark = list(marks)
    for start in range(0, max(len(todo), 1), batch):
        chunk = todo[start : start + batch]
        last = start + batch >= len(todo)

        def work(cur: Cursor, chunk: list[tuple[str, AssetHealth | None]] = chunk, last: bool = last) -> int | None:
            if not fence(cur):
                return None
            queued = 0
            for asset_id, now in chunk:
                if now is None:
                    cur.execute(FORGET, (asset_id,))
                    continue
                queued += _record(cur, now, before.get(asset_id), assets[asset_id], alerts, moment, web_url)
            if last:
                cur.executemany(UNMARK, unmark)
            return queued

        queued = db.write(work)
        if queued is None:
            return attrs.evolve(result, lost=True)
        result = attrs.evolve(result, changed=result.changed + len(chunk), alerts=result.alerts + queued)
    return result


def _record(
    cur: Cursor,
    now: AssetHealth,
    prior: Kept | None,
    asset: Sequence[Any],
    alerts: Sequence[AlertRule],
    moment: str,
    web_url: str | None,
) -> int:
    """Keep one judgement and queue the alerts it makes; how many."""
    _id, type, namespace, metadata_text, updated_at = asset
    reasons = now.verdict.reasons
    cur.execute(PUT, (now.asset_id, now.health.value, json.dumps(list(reasons)), updated_at, moment))
    updated = prior is not None and prior.asset_updated_at != updated_at
    events = events_of(prior.health if prior else None, now.health, updated=updated)
    if not events or not alerts:
        return 0
    metadata = json.loads(metadata_text) if metadata_text else {}
    wanted = [(e, r) for e in events for r in rules_for(alerts, e, now.asset_id, type, namespace, metadata)]
    if not wanted:
        return 0
    risk = _downstream(cur, now.asset_id) if now.health in (Health.FAIL, Health.WARN) else 0
    change = Change(now.asset_id, type, namespace, prior.health if prior else None, now.health, reasons, risk, moment)
    for event, rule in wanted:
        queue_alert(cur, rule.name, now.asset_id, json.dumps(message(rule.name, event, change, web_url)))
    return len(wanted)


def _downstream(cur: Cursor, asset_id: str) -> int:
    """How many assets are downstream of one (each at risk while it is FAIL or WARN)."""
    return len({down for _up, down, _level in cur.execute(sql.DOWNSTREAM, (asset_id, DOWNSTREAM_DEPTH))})


def _rows(
    conn: Connection | Cursor, table: str, key: str, columns: str, ids: Sequence[str] | None
) -> Iterator[Sequence[Any]]:
    if ids is None:
        yield from conn.execute(f"SELECT {columns} FROM {table}")
        return
    for start in range(0, len(ids), 400):
        chunk = list(ids[start : start + 400])
        yield from conn.execute(f"SELECT {columns} FROM {table} WHERE {key} IN ({', '.join('?' * len(chunk))})", chunk)


__all__ = ["PassResult", "counts", "judge", "kept", "mark"]
