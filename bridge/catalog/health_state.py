"""The health kept: each asset's last known health, the marks writes leave, and the alerts a
change queues.

- **Marks.** A write that may change an asset's health (a task run's inputs and outputs, and
  once it ended every asset its task ever wrote, whose last run it now is; of a received group,
  the outputs of its run events, the datasets with assertions, every output of a run that ended;
  an asset set or deleted; a freshness rule set) marks the asset in its own transaction, and only
  while a health watch is live (:class:`WatchSeen`: the watch's lease, read at most every
  :data:`SEEN_FOR` seconds). A mark is a row appended to ``health_marks`` (a key that counts up,
  the asset's id): writers side by side never update a row in common, so marking the same popular
  asset makes none of them wait for another.
- **Due times.** With each judgement is kept when it changes with time alone (``due_at``:
  :func:`bridge.model.health.next_change`, the end of a freshness window or its warning, a cron
  deadline's next tick; NULL: never), so that the assets whose health time changes are found
  through an index (:data:`DUE`), not by judging every asset to find them. An asset a write
  marked is due again :data:`RECHECK_MARKED` later at the latest: a fact dated ahead of the
  watch's clock, left out as of the moment judged, counts then.
- **A pass** (:func:`judge`), by the one process holding the health watch's lease: the marked
  assets and those due (or, on the schedule, every asset) are judged as of the time given (an
  injected clock) by :func:`bridge.catalog.health.assess` (a few from their own facts, read
  through indexes, so that a pass costs what it judges, not the catalog's size; no at-risk
  flags, which are not kept); the judgements that differ from the kept one (or whose due time
  does) are written to ``asset_health``, and in the same transaction the alerts they make are
  queued in the outbox (:func:`bridge.catalog.outbox.queue_alerts`) and the marks read are
  deleted: each marked
  asset was read with its highest key and how many marks it had up to it, and its marks up to
  that key are deleted only if there are still that many (a mark written after the read has a
  higher key; one whose transaction took a lower key but committed after the read, as writers
  side by side may on PostgreSQL, makes the count differ: the asset stays marked and is judged
  again). The judging reads outside any write transaction; the writing goes in transactions of
  at most ``batch`` assets, each of which first checks that the lease is still held (``fence``),
  so a pass that lost it writes nothing.
- :func:`counts` gives the assets by kept health (``/metrics``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from bridge.catalog import sql
from bridge.catalog.engine import Connection, Cursor, Database
from bridge.catalog.health import AssetHealth, assess
from bridge.catalog.outbox import queue_alerts
from bridge.model import format_time
from bridge.model.alerts import AlertRule, Change, events_of, message, rules_for
from bridge.model.health import Health, Selector, next_change

LEASE_KIND = "health"  # the watch's lease: a row of positions (bridge.catalog.retention's leases)
SEEN_FOR = 5.0  # seconds a writer trusts what it last read of the watch's lease
# a watch that takes the lease over judges every asset again this long after (a writer may not
# have marked what it wrote meanwhile: it had read the lease free up to SEEN_FOR before, and its
# transaction was in flight)
TAKEOVER_PASS_AFTER = 3 * SEEN_FOR
LEASE = "SELECT value FROM positions WHERE kind = ? AND name = 'lease'"  # read, not locked
MARK = "INSERT INTO health_marks (asset_id) VALUES (?)"
# a task's assets whose last run its run that ends is, if it has at most so many (a task that
# writes a new asset every run, a dated file, would mark a year of them at every run's end: those
# are judged at the watch's next pass over every asset, as before any was marked)
TASK_MARKS_AT_MOST = 1000
TASK_WRITES = f"""
    SELECT asset_id FROM kept_writers WHERE flow_namespace = ? AND flow_id = ? AND task_id = ?
    LIMIT {TASK_MARKS_AT_MOST + 1}
"""
# the holder of the lease that last made a pass over every asset, and when (a row of positions
# beside the lease): what it keeps is current only once the lease's holder has made one
PASSED_NAME = "passed"
PASSED = f"SELECT value FROM positions WHERE kind = ? AND name = '{PASSED_NAME}'"
FORGET_PASSED = f"DELETE FROM positions WHERE kind = ? AND name = '{PASSED_NAME}'"
PUT_PASSED = f"""
    INSERT INTO positions (kind, name, value, updated_at) VALUES (?, '{PASSED_NAME}', ?, ?)
    ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
"""
# the marked assets, each with its highest key and how many marks it has (the index's order)
MARKED = "SELECT asset_id, max(seq), count(*) FROM health_marks GROUP BY asset_id ORDER BY asset_id LIMIT ?"
# an asset's marks up to the key read, if there are as many as were read (one statement: one view
# of the table on either engine)
UNMARK = """
    DELETE FROM health_marks WHERE asset_id = ? AND seq <= ?
      AND (SELECT count(*) FROM health_marks WHERE asset_id = ? AND seq <= ?) = ?
"""
KEPT_COLUMNS = "asset_id, health, reasons, asset_updated_at, due_at, purged, told"
# the assets whose kept health changes with time alone by then, soonest first
DUE = "SELECT asset_id FROM asset_health WHERE due_at <= ? ORDER BY due_at, asset_id LIMIT ?"
PUT = """
    INSERT INTO asset_health (asset_id, health, reasons, asset_updated_at, judged_at, due_at, told)
    VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (asset_id) DO UPDATE SET health = excluded.health, reasons = excluded.reasons,
        asset_updated_at = excluded.asset_updated_at, judged_at = excluded.judged_at, due_at = excluded.due_at,
        told = excluded.told, purged = NULL
"""
FORGET = "DELETE FROM asset_health WHERE asset_id = ?"
# of the assets a purge takes, those kept FAIL or WARN, with what the alerts' rules match of them
PURGED_OPEN = """
    SELECT a.id, a.type, a.namespace, a.metadata FROM assets a JOIN asset_health h ON h.asset_id = a.id
    WHERE a.id IN ({values}) AND h.health IN ('FAIL', 'WARN')
"""
KEEP_PURGED = "UPDATE asset_health SET purged = ? WHERE asset_id = ?"
# a purged asset's kept row (kept until its RECOVERED is told) is no asset's health
COUNTS = "SELECT health, count(*) FROM asset_health WHERE purged IS NULL GROUP BY health"
ASSET_COLUMNS = "id, type, namespace, metadata, updated_at, deleted_at"
# an asset a write marked is judged again this long after (as if due then): a fact dated ahead of
# the watch's clock (a producer's clock a little fast) counts from its time, not from the next pass
# over every asset
RECHECK_MARKED = timedelta(minutes=5)
DOWNSTREAM_DEPTH = 100  # how far the downstream assets at risk are counted
BATCH = 1000


@attrs.define
class WatchSeen:
    """Whether a health watch is live, as a writer sees it: its lease held, until a time not yet
    past (``clock``: the watch's clock, seconds since the epoch), read again once ``seen_for``
    seconds have gone by since it was last read. A writer keeps one (a :class:`Catalog` has
    one); a watch taking the lease over makes up for the writers that had not seen it yet
    (:data:`TAKEOVER_PASS_AFTER`)."""

    clock: Callable[[], float] = time.time
    seen_for: float = SEEN_FOR
    _until: float = attrs.field(default=0.0, init=False)  # the live lease's end as last read (0: none)
    _read_at: float | None = attrs.field(default=None, init=False)

    def live(self, cur: Cursor) -> bool:
        now = self.clock()
        if self._read_at is None or not 0 <= now - self._read_at < self.seen_for:
            row = cur.execute(LEASE, (LEASE_KIND,)).fetchone()
            found = json.loads(row[0]) if row is not None else {}
            self._until = float(found.get("until", 0)) if found.get("holder") else 0.0
            self._read_at = now
        return self._until > now

    def mark(self, cur: Cursor, asset_ids: Iterable[str], *, tasks: Iterable[tuple[str, str, str]] = ()) -> None:
        """Mark assets for the health watch, in the caller's transaction, if a watch is live (else
        nothing: no watch reads marks, and one that takes over judges every asset); with
        ``tasks`` (each a task whose run ended: it is now the last run of every asset the task
        ever wrote, or was to write), those assets too, found by the index ``kept_writers_task``."""
        ids, tasks = set(asset_ids), list(tasks)
        if (ids or tasks) and self.live(cur):
            for task in tasks:
                theirs = [str(asset_id) for (asset_id,) in cur.execute(TASK_WRITES, task)]
                ids.update(theirs if len(theirs) <= TASK_MARKS_AT_MOST else ())
            cur.executemany(MARK, [(asset_id,) for asset_id in sorted(ids)])


def keep_passed(cur: Cursor, holder: str, moment: str) -> None:
    """Say, in the caller's transaction (fenced: ``holder`` holds the lease), that ``holder``
    made a pass over every asset as of ``moment``."""
    cur.execute(PUT_PASSED, (LEASE_KIND, json.dumps({"holder": holder, "at": moment}), moment))


def forget_passed(cur: Cursor) -> None:
    """No pass over every asset counts any longer (the lease taken anew, or lapsed: writers may
    have marked nothing meanwhile), in the caller's transaction."""
    cur.execute(FORGET_PASSED, (LEASE_KIND,))


def counts(conn: Connection | Cursor) -> dict[str, int]:
    """How many assets have each kept health (every health named, 0 when none)."""
    found = {str(h): int(n) for h, n in conn.execute(COUNTS)}
    return {h.value: found.get(h.value, 0) for h in Health}


@attrs.frozen
class Kept:
    health: Health
    reasons: tuple[str, ...]
    asset_updated_at: str
    due_at: str | None = None
    purged: str | None = None  # of an asset purged while FAIL or WARN: what its alerts' rules match (JSON)
    told: tuple[str, ...] = ()  # the [[alerts]] told its open FAIL or WARN, by name


def kept(conn: Connection | Cursor, ids: Sequence[str] | None = None) -> dict[str, Kept]:
    """The kept health of the assets ``ids`` (None: of all)."""
    rows = _rows(conn, "asset_health", "asset_id", KEPT_COLUMNS, ids)
    return {
        r[0]: Kept(Health(r[1]), tuple(json.loads(r[2])), r[3], r[4], r[5], tuple(json.loads(r[6] or "[]")))
        for r in rows
    }


def keep_purged(cur: Cursor, ids: Sequence[str], *, reason: str | None = None) -> list[str]:
    """In a purge's transaction, before the assets ``ids`` go: the kept health of those FAIL or
    WARN stays, with what the alerts' rules match of each (its type, namespace and metadata), for
    the watch to tell their RECOVERED as it tells a deleted asset's (:func:`_deleted`), with
    ``reason`` (None: :data:`DELETED`); the others' goes. The ids kept, for the purge to mark
    once their old marks are gone."""
    said = {"reason": reason} if reason else {}
    found = [
        (json.dumps({"type": t, "namespace": ns, "metadata": json.loads(md) if md else {}, **said}), str(asset_id))
        for asset_id, t, ns, md in sql.in_chunks(cur, PURGED_OPEN, ids)
    ]
    cur.executemany(KEEP_PURGED, found)
    closed = sorted(set(ids) - {asset_id for _, asset_id in found})
    for start in range(0, len(closed), sql.IN_AT_MOST):
        chunk = closed[start : start + sql.IN_AT_MOST]
        cur.execute(sql.delete_in("asset_health", len(chunk)), chunk)
    return [asset_id for _, asset_id in found]


@attrs.frozen
class PassResult:
    """What a pass did: assets judged, kept judgements written (changed), alerts queued; ``lost``
    when the lease went before it was done (what it wrote before stays: each batch whole)."""

    judged: int = 0
    marks: int = 0  # the marked assets it read (at most its batch unless it judged every asset)
    changed: int = 0
    alerts: int = 0
    lost: bool = False
    due: int = 0  # the assets it read as due (at most its batch; none when it judged every asset)
    moved: int = 0  # of those changed, the assets whose kept health itself changed (or came, or went)
    ahead: int = 0  # of the marks, those kept for a later look (their assets dated a little ahead)


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
    """One pass: the marked assets and those due by ``as_of`` (at most ``batch`` of each), or
    with ``every`` all of them (and the marks there were), judged as of ``as_of``; see the module
    docstring."""
    conn = db.conn
    moment = format_time(as_of)
    marks = [(str(a), int(seq), int(n)) for a, seq, n in conn.execute(MARKED, (2**62 if every else batch,))]
    due = [] if every else [str(a) for (a,) in conn.execute(DUE, (moment, batch))]
    if not every and not marks and not due:
        return PassResult()
    marked = {asset_id for asset_id, _, _ in marks}
    ids = None if every else sorted(marked.union(due))
    found = {h.asset_id: h for h in assess(conn, selectors, as_of, ids=ids, paths=False)}  # no at-risk flags kept
    assets = {r[0]: r for r in _rows(conn, "assets", "id", ASSET_COLUMNS, ids)}
    before = kept(conn, ids)
    # what to write: a judgement unlike the kept one (or changing at another time), or an asset
    # gone (None)
    todo: list[tuple[str, AssetHealth | None, str | None]] = []
    soon = format_time(as_of + RECHECK_MARKED)  # a write dated ahead of the moment, to this: judged then
    for asset_id in sorted(set(found) | set(before)):
        now, prior = found.get(asset_id), before.get(asset_id)
        if now is None or asset_id not in assets:  # gone (deleted, or purged meanwhile)
            if prior is not None:
                todo.append((asset_id, None, None))
            continue
        changes = next_change(now.verdict, as_of)
        if asset_id in marked and (changes is None or as_of + RECHECK_MARKED < changes):
            changes = as_of + RECHECK_MARKED
        due_at = format_time(changes) if changes is not None else None
        written = assets[asset_id][4]
        if moment < written <= soon:  # written a little ahead of the moment judged: judged again then
            due_at = written if due_at is None else min(due_at, written)
        if (
            prior is not None
            and prior.due_at is not None
            and moment < prior.due_at
            and (due_at is None or prior.due_at < due_at)
        ):  # a recheck still to come (a mark's, for a fact dated ahead) is not dropped by a look unmarked
            due_at = prior.due_at
        if prior is None or (prior.health, prior.reasons, prior.asset_updated_at, prior.due_at) != (
            now.health,
            now.verdict.reasons,
            _seen_written(written, moment, soon, prior),
            due_at,
        ):
            todo.append((asset_id, now, due_at))
    result = PassResult(judged=len(found), marks=len(marks), due=len(due))
    # an asset written with a time a little ahead of this clock (another host's) is none yet as
    # of it: its mark stays, for a later look to judge it once it is (it was dropped, and the
    # asset not judged until the next pass over every asset); one dated further ahead than a
    # marked asset's recheck is left to that pass, as before (its mark, kept, would be read again
    # at every look until then, taking a batch's room from the others)
    ahead = {
        asset_id
        for asset_id in marked
        if asset_id not in found
        and asset_id in assets
        and assets[asset_id][5] is None
        and moment < assets[asset_id][4] <= soon
    }
    unmark = [(asset_id, seq, asset_id, seq, n) for asset_id, seq, n in marks if asset_id not in ahead]
    result = attrs.evolve(result, ahead=len(ahead))
    for start in range(0, max(len(todo), 1), batch):
        chunk = todo[start : start + batch]
        last = start + batch >= len(todo)
        # what the batch writes, made before its transaction (the walk that counts the assets at
        # risk below each is a read, one for the batch): its rows then go in a statement each
        gone = [asset_id for asset_id, now, _ in chunk if now is None]
        made = [
            _record(now, before.get(asset_id), assets[asset_id], alerts, moment, due_at, asset_id in marked, soon)
            for asset_id, now, due_at in chunk
            if now is not None
        ]
        puts = [put for put, _, _, _ in made]
        # on the catalog's connection as it now is (a write may have opened a new one)
        risk = _downstream(db.conn, [change.asset_id for _, change, _, counted in made if change and counted])
        queued: list[tuple[str, str, str]] = []
        for _, change, wanted, _ in made:
            if change is not None:
                told = attrs.evolve(change, at_risk_downstream=risk.get(change.asset_id, 0))
                queued += [(r.name, told.asset_id, json.dumps(message(r.name, e, told, web_url))) for e, r in wanted]
        for asset_id in gone:
            change, wanted = _deleted(asset_id, before.get(asset_id), assets.get(asset_id), alerts, moment)
            if change is not None:
                queued += [(r.name, asset_id, json.dumps(message(r.name, e, change, web_url))) for e, r in wanted]

        def work(
            cur: Cursor, writes: tuple[list[Any], list[Any], list[Any]] = (gone, puts, queued), last: bool = last
        ) -> bool:
            if not fence(cur):
                return False
            forgotten, kept_now, told = writes
            if forgotten:
                cur.executemany(FORGET, [(asset_id,) for asset_id in forgotten])
            if kept_now:
                cur.executemany(PUT, kept_now)
            queue_alerts(cur, told)
            if last:
                cur.executemany(UNMARK, unmark)
            return True

        if not db.write(work):
            return attrs.evolve(result, lost=True)
        moved = sum(
            1 for asset_id, now, _ in chunk if now is None or _health_of(before.get(asset_id)) is not now.health
        )
        result = attrs.evolve(
            result, changed=result.changed + len(chunk), alerts=result.alerts + len(queued), moved=result.moved + moved
        )
    return result


def _record(
    now: AssetHealth,
    prior: Kept | None,
    asset: Sequence[Any],
    alerts: Sequence[AlertRule],
    moment: str,
    due_at: str | None,
    marked: bool,
    soon: str,
) -> tuple[tuple[Any, ...], Change | None, list[tuple[str, AlertRule]], bool]:
    """What keeping one judgement (and when it changes with time alone) writes: its row of
    :data:`PUT`; the change it tells (None: it makes no alert), with the (event, alert) pairs it
    makes; and whether the assets at risk below it are to be counted for them (it turned FAIL or
    WARN: the change's count is then filled in). The asset was written since it was judged if
    its ``updated_at`` moved; or, judged for the first time, if a write ``marked`` it (new, or
    back from a delete, while a watch was live: an asset that was there before the watch began
    is judged for the first time unmarked, and tells no UPDATED)."""
    _id, type, namespace, metadata_text, written, _deleted_at = asset
    updated_at = _seen_written(written, moment, soon, prior)
    reasons = now.verdict.reasons
    updated = prior.asset_updated_at != updated_at if prior is not None else marked
    events = events_of(prior.health if prior else None, now.health, updated=updated)
    metadata = json.loads(metadata_text) if metadata_text else {}
    wanted = [(e, r) for e in events for r in rules_for(alerts, e, now.asset_id, type, namespace, metadata)]
    wanted += _told_before(alerts, events, prior, wanted)
    told = _told(prior, now.health, wanted)
    put = (now.asset_id, now.health.value, json.dumps(list(reasons)), updated_at, moment, due_at, told)
    if not wanted:
        return put, None, [], False
    change = Change(now.asset_id, type, namespace, prior.health if prior else None, now.health, reasons, 0, moment)
    return put, change, wanted, now.health in (Health.FAIL, Health.WARN)


_OPEN = ("FAIL", "WARN")  # the events that open an incident, which RECOVERED closes


def _told_before(
    alerts: Sequence[AlertRule], events: Sequence[str], prior: Kept | None, wanted: Sequence[tuple[str, AlertRule]]
) -> list[tuple[str, AlertRule]]:
    """The RECOVERED of the ``[[alerts]]`` told the asset's open FAIL or WARN (``prior.told``)
    that no longer take the asset as it is now (its metadata, type or namespace changed since),
    and still take RECOVERED: what they opened is closed."""
    if prior is None or not prior.told or "RECOVERED" not in events:
        return []
    taken = {r.name for e, r in wanted if e == "RECOVERED"}
    return [("RECOVERED", r) for r in alerts if r.name in prior.told and r.name not in taken and "RECOVERED" in r.on]


def _told(prior: Kept | None, health: Health, wanted: Sequence[tuple[str, AlertRule]]) -> str | None:
    """The ``[[alerts]]`` told the asset's open FAIL or WARN once this judgement is kept (JSON;
    None: none open): those told before, while it stays FAIL or WARN, and those told it now."""
    if health not in (Health.FAIL, Health.WARN):
        return None
    names = set(prior.told) if prior is not None and prior.health in (Health.FAIL, Health.WARN) else set()
    names.update(r.name for e, r in wanted if e in _OPEN)
    return json.dumps(sorted(names)) if names else None


def _seen_written(written: str, moment: str, soon: str, prior: Kept | None) -> str:
    """The asset's last update as of ``moment``, as kept: a write dated after it, up to ``soon`` (a
    host's clock a little ahead of the watch's), is not seen yet, so that the judgement that
    counts it (its due time, above) tells UPDATED with the health it makes, not this one, which
    leaves it out; one dated further ahead is seen now (a clock hours or years off would hold its
    UPDATED as long)."""
    if written <= moment or written > soon or prior is None:
        return written
    return prior.asset_updated_at


DELETED = "the asset was deleted"


def _deleted(
    asset_id: str, prior: Kept | None, asset: Sequence[Any] | None, alerts: Sequence[AlertRule], moment: str
) -> tuple[Change | None, list[tuple[str, AlertRule]]]:
    """What an asset gone (deleted, or purged) tells: from FAIL or WARN, RECOVERED, its health now
    UNKNOWN with the reason that it was deleted (an alert that opened an incident is closed), to
    the rules that take it as it was (its row, deleted; what its purge kept, purged); nothing
    from any other health."""
    if prior is None or prior.health not in (Health.FAIL, Health.WARN) or not alerts:
        return None, []
    gone = _gone_as(asset, prior)
    if gone is None:
        return None, []
    type, namespace, metadata = gone
    events = events_of(prior.health, Health.UNKNOWN, updated=False)
    wanted = [(e, r) for e in events for r in rules_for(alerts, e, asset_id, type, namespace, metadata)]
    wanted += _told_before(alerts, events, prior, wanted)
    if not wanted:
        return None, []
    reason = json.loads(prior.purged).get("reason") if asset is None and prior.purged is not None else None
    return Change(asset_id, type, namespace, prior.health, Health.UNKNOWN, (reason or DELETED,), 0, moment), wanted


def _gone_as(asset: Sequence[Any] | None, prior: Kept) -> tuple[str, str | None, dict[str, Any]] | None:
    """What the alerts' rules match of an asset gone: (type, namespace, metadata) of its row,
    deleted, else of what its purge kept; None: neither (its row not deleted: not judged for
    another reason, made after the moment judged)."""
    if asset is not None:
        _id, type, namespace, metadata_text, _updated, deleted_at = asset
        if deleted_at is None:
            return None
        return type, namespace, json.loads(metadata_text) if metadata_text else {}
    if prior.purged is None:
        return None
    purged = json.loads(prior.purged)
    return purged["type"], purged["namespace"], purged["metadata"]


def _health_of(kept: Kept | None) -> Health | None:
    return kept.health if kept is not None else None


def _downstream(conn: Connection | Cursor, asset_ids: Sequence[str]) -> dict[str, int]:
    """How many assets are downstream of each of ``asset_ids`` (each at risk while it is FAIL or
    WARN): one walk from them all (none downstream: not in the answer)."""
    found = sql.in_chunks(conn, sql.DOWNSTREAM_COUNTS, asset_ids, before=(DOWNSTREAM_DEPTH,))
    return {str(asset_id): int(n) for asset_id, n in found}


def _rows(
    conn: Connection | Cursor, table: str, key: str, columns: str, ids: Sequence[str] | None
) -> Iterator[Sequence[Any]]:
    if ids is None:
        yield from conn.execute(f"SELECT {columns} FROM {table}")
        return
    yield from sql.in_chunks(conn, f"SELECT {columns} FROM {table} WHERE {key} IN ({{values}})", ids)


__all__ = [
    "LEASE_KIND",
    "SEEN_FOR",
    "TAKEOVER_PASS_AFTER",
    "Kept",
    "PassResult",
    "WatchSeen",
    "counts",
    "forget_passed",
    "judge",
    "keep_passed",
    "kept",
]
