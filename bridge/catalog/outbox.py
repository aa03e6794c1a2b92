"""The outbox: the catalog's changes that have OpenLineage meaning, queued for delivery.

Rows are queued in the same transaction as the change they stand for, by the writes themselves
(:func:`queue_event`), so every way into the catalog (the CLI, the Python API, the adapters)
fills the same outbox. A row is a reference, not an event: ``kind`` and ``ref`` point at the
stored record (a task run's pk for ``run-start`` / ``run-update`` / ``run-end``, an asset change's seq for
``asset-change``) and the worker renders the event when it delivers it, with the naming rules it
is configured with. ``run_key`` orders delivery: a row waits until every earlier row of its key
is delivered (or dropped), so a run's end never goes before its START; a dead letter holds the
later rows of its key back until it is retried or dropped, but for an alert's (its webhook
refused it for good: the asset's later alerts still go, in order).

Two kinds hold their message themselves, in ``payload``: ``forward``, an external event the
receiver took with ``serve --forward``, kept as it came (``ref`` is its received_events row),
queued by the receiver's write of it (:mod:`bridge.catalog.external`); and ``alert``, an
``[[alerts]]`` message for its webhook (``ref`` 0), queued by the health watch in the
transaction that records the change (:mod:`bridge.catalog.health_state`), ordered by its run key
``alert:<alert name>:<asset id>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from bridge.catalog import sql, sql_outbox
from bridge.catalog.engine import Connection, Cursor, Database
from bridge.catalog.rows import read_time
from bridge.errors import CatalogError, NotFoundError
from bridge.jsonkeys import camel_keys
from bridge.model.times import epoch_text, format_time

RUN_START = "run-start"
RUN_END = "run-end"
RUN_UPDATE = "run-update"  # a run recorded again while it runs, with new content: a RUNNING event
ASSET_CHANGE = "asset-change"
JOB = "job"  # a declared job's JobEvent (ref: declared_jobs.pk)
FORWARD = "forward"  # a received event, forwarded as it came (ref: received_events.pk; the text in payload)
ALERT = "alert"  # an [[alerts]] message (the JSON in payload, naming its alert), for its webhook
KINDS = (RUN_START, RUN_END, RUN_UPDATE, ASSET_CHANGE, JOB, FORWARD, ALERT)

# the target a stream worker of alerts alone registers (stream --alerts-only): it sends no event
# of a run, which retention's pendingOutbox needs to know
ALERTS_ONLY_TARGET = "the alerts' webhooks"
# the delivery source whose last failure is an alert's (a DeliveryError's target: its alert's name)
ALERTS_SOURCE = "alerts"
PENDING = "pending"
DEAD = "dead"
ERROR_TEXT_MAX = 2000  # response bodies and errors kept on a row are cut to this


def run_key_of_task_run(pk: int) -> str:
    return f"run:{pk}"


def queue_event(cur: Cursor, kind: str, ref: int, asset_id: str | None = None) -> None:
    """Queue one event inside the caller's transaction: a task run's (``ref`` its pk) or an asset
    change's (``ref`` its seq, ``asset_id`` its asset, whose changes go out in order)."""
    assert kind in KINDS, kind
    if kind == JOB:
        key = f"job:{ref}"
    else:
        key = f"asset:{asset_id}" if asset_id is not None else run_key_of_task_run(ref)
    cur.execute(sql_outbox.QUEUE_EVENT, (kind, ref, key))


def alert_of(run_key: str) -> tuple[str, str] | None:
    """The alert name and asset id of an alert's run key (None for another kind's key)."""
    kind, _, rest = run_key.partition(":")
    name, colon, asset_id = rest.partition(":")
    return (name, asset_id) if kind == ALERT and colon else None


def queue_alerts(cur: Cursor, alerts: Sequence[tuple[str, str, str]]) -> None:
    """Queue alerts' messages ((alert name, asset id, message) each, in order) inside the caller's
    transaction (the one recording the changes they tell): the alerts of one alert name and asset
    go out in order."""
    if alerts:
        cur.executemany(
            sql_outbox.QUEUE_PAYLOAD, [(ALERT, f"alert:{name}:{asset_id}", text) for name, asset_id, text in alerts]
        )


@attrs.frozen
class OutboxItem:
    seq: int
    kind: str
    ref: int
    run_key: str
    queued_at: str
    state: str
    attempts: int
    next_attempt_at: float  # seconds since the epoch; 0: due at once
    last_status: int | None
    last_error: str | None

    @property
    def shown_ref(self) -> str:
        """What ``outbox list`` shows of the record a row stands for: its ``ref``, but an alert's
        run key (``alert:<name>:<asset id>``), as an alert holds its message (its ``ref`` is 0)."""
        return self.run_key if self.kind == ALERT else str(self.ref)

    @property
    def queued(self) -> str:
        """When it was queued, as olbridge writes times (the database's clock writes milliseconds)."""
        return _as_written(self.queued_at)

    def as_json(self) -> dict[str, Any]:
        """The row as ``outbox list --json`` prints it: ``id`` is the number ``outbox retry`` and
        ``outbox drop`` take, times are ISO text, ``nextAttemptAt`` is when a retry is due (None
        when there is none to wait for: a row never tried or queued again, a dead letter), and
        ``alert`` and ``asset`` are an alert's name and its asset's id (None for other kinds)."""
        waits = self.state == PENDING and self.next_attempt_at > 0
        alert = alert_of(self.run_key) if self.kind == ALERT else None
        return {
            "id": self.seq,
            "kind": self.kind,
            "ref": self.ref,
            "alert": alert[0] if alert else None,
            "asset": alert[1] if alert else None,
            "runKey": self.run_key,
            "queuedAt": self.queued,
            "state": self.state,
            "attempts": self.attempts,
            "nextAttemptAt": epoch_text(self.next_attempt_at) if waits else None,
            "lastStatus": self.last_status,
            "lastError": self.last_error,
        }


@attrs.frozen
class OutboxStatus:
    pending: int
    dead: int
    held: int  # pending rows a dead letter of their run key holds back (never an alert's)
    oldest_pending: str | None  # when the oldest pending event was queued
    delivered: int  # events delivered since the catalog was made
    last_success: str | None

    def as_json(self) -> dict[str, Any]:
        return camel_keys(attrs.asdict(self))


@attrs.frozen
class Delivered:
    seq: int
    alert: bool = False  # an alert's: it supersedes its asset's dead alerts (settled with it)


@attrs.frozen
class RetryLater:
    seq: int
    attempts: int
    at: float  # seconds since the epoch
    status: int | None
    error: str


@attrs.frozen
class Dead:
    seq: int
    attempts: int
    status: int | None
    error: str


Result = Delivered | RetryLater | Dead


@attrs.frozen
class DeliveryError:
    """The last failure of a delivery ``source`` (``stream``, to ``target``; ``backfill:<checkpoint>``;
    or ``alerts``, whose ``target`` is the alert's name, its webhook never kept): ``failure`` is
    its class (connection, timeout, HTTP 5xx, HTTP 429, refused, ...)."""

    source: str
    target: str
    failure: str
    status: int | None
    detail: str
    at: str

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "failure": self.failure,
            "status": self.status,
            "detail": self.detail,
            "at": self.at,
        }


class Outbox:
    """The outbox of one catalog (``catalog.outbox``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def _conn(self) -> Connection:
        return self._db.conn

    def held(self) -> int:
        """How many pending rows wait behind a dead letter of their run key (until it is retried
        or dropped): a run's later events, an asset's later changes; never an alert."""
        return int(self._conn.execute(sql_outbox.OUTBOX_HELD).fetchone()[0])

    def heads(self, now: float, limit: int, *, alerts_only: bool = False) -> list[OutboxItem]:
        """Pending rows due at ``now`` that no earlier row of their run key holds back (pending, or
        dead but for a dead alert), in commit order: at most one per run key (``alerts_only``: of
        the alerts alone)."""
        statement = sql_outbox.OUTBOX_ALERT_HEADS if alerts_only else sql_outbox.OUTBOX_HEADS
        return self._items(self._conn.execute(statement, (now, limit)))

    def next_retry_at(self, *, alerts_only: bool = False) -> float | None:
        """When the first row waiting for a retry is due (None when none waits; ``alerts_only``:
        of the alerts alone)."""
        statement = sql_outbox.OUTBOX_NEXT_ALERT_RETRY if alerts_only else sql_outbox.OUTBOX_NEXT_RETRY
        found = self._conn.execute(statement).fetchone()[0]
        return float(found) if found is not None else None

    def settle(
        self,
        results: Iterable[Result],
        *,
        success_at: str,
        failures: Sequence[DeliveryError] = (),
        claimed_by: str | None = None,
    ) -> int:
        """Apply what delivery did, in one transaction: delivered rows go, the others wait for
        a retry or become dead letters; each of ``failures`` is kept as its source's last one. With
        ``claimed_by`` (a worker sharing the outbox, see :meth:`claim`), only the rows that worker
        still holds are settled, and released; returns how many rows were settled."""
        results = list(results)

        def work(cur: Cursor) -> int:
            delivered = settled = 0
            for failure in failures:
                _save_error(cur, failure)
            sent = [result.seq for result in results if isinstance(result, Delivered) and result.alert]
            for start in range(0, len(sent), sql.IN_AT_MOST):  # (none for the events: no statement)
                chunk = sent[start : start + sql.IN_AT_MOST]
                cur.execute(sql_outbox.OUTBOX_SUPERSEDED.format(values=", ".join("?" * len(chunk))), chunk)
            # the delivered rows a few hundred a statement (a round's, in one), the others one by one
            gone = [result.seq for result in results if isinstance(result, Delivered)]
            remove = sql_outbox.OUTBOX_DELETE_SOME if claimed_by is None else sql_outbox.OUTBOX_DELETE_SOME_CLAIMED
            for start in range(0, len(gone), sql.IN_AT_MOST):
                chunk = gone[start : start + sql.IN_AT_MOST]
                by = () if claimed_by is None else (claimed_by,)
                delivered += int(cur.execute(remove.format(values=", ".join("?" * len(chunk))), (*chunk, *by)).rowcount)
            settled = delivered
            for result in results:
                params: tuple[Any, ...]
                match result:
                    case Delivered():
                        continue
                    case RetryLater(seq, attempts, at, status, error):
                        statement, params = (
                            sql_outbox.OUTBOX_RETRY_LATER,
                            (attempts, at, status, error[:ERROR_TEXT_MAX], seq),
                        )
                    case Dead(seq, attempts, status, error):
                        statement, params = sql_outbox.OUTBOX_DEAD, (attempts, status, error[:ERROR_TEXT_MAX], seq)
                if claimed_by is not None:
                    statement, params = _CLAIMED[statement], (*params, claimed_by)
                settled += int(cur.execute(statement, params).rowcount)
            if delivered:
                cur.execute(sql_outbox.OUTBOX_COUNT_DELIVERED, (delivered, success_at))
            return settled

        return self._db.write(work)

    # --- claims: several workers sharing the outbox (PostgreSQL) ----------------------------

    def claim(self, worker: str, now: float, limit: int, ttl: float, *, alerts_only: bool = False) -> list[OutboxItem]:
        """Claim for ``worker`` up to ``limit`` pending rows due at ``now`` that no earlier row of
        their run key holds back and that no other worker holds (or whose claim expired; those it
        holds itself, from a round that failed before settling them, it takes again), for ``ttl``
        seconds; rows another worker is claiming at the same moment are skipped. In
        ``seq`` order, which is a run key's commit order too: whoever queues an event of a run
        holds that run's row locked until it commits; at most one per run key, so a run's events
        go out in order whichever worker sends them (``alerts_only``: alerts alone). PostgreSQL only
        (SQLite: :meth:`heads` under the outbox's lease)."""
        statement = sql_outbox.OUTBOX_CLAIM_ALERT_HEADS if alerts_only else sql_outbox.OUTBOX_CLAIM_HEADS

        def work(cur: Cursor) -> list[OutboxItem]:
            found = cur.execute(statement, (now, worker, limit, worker, ttl)).fetchall()
            return self._items(iter(found))

        return sorted(self._db.write(work), key=lambda item: item.seq)

    def confirm(self, worker: str, seqs: Sequence[int], ttl: float) -> set[int]:
        """Of ``seqs``, those ``worker`` still holds, their claims renewed for ``ttl`` seconds
        (what it may send: another worker took the others over while it was stalled)."""
        if not seqs:
            return set()

        def work(cur: Cursor) -> set[int]:
            return {
                row[0] for row in cur.execute(sql_outbox.OUTBOX_CONFIRM_CLAIMS, (ttl, worker, list(seqs))).fetchall()
            }

        return self._db.write(work)

    def renew(self, worker: str, ttl: float) -> int:
        """Renew every claim ``worker`` holds for ``ttl`` seconds (its heartbeat); how many."""
        return self._db.write(lambda cur: int(cur.execute(sql_outbox.OUTBOX_RENEW_CLAIMS, (ttl, worker)).rowcount))

    def release_some(self, worker: str, seqs: Sequence[int]) -> int:
        """Give back ``worker``'s claims of ``seqs`` (rows it did not send); how many it held."""
        return self._db.write(
            lambda cur: int(cur.execute(sql_outbox.OUTBOX_RELEASE_SOME_CLAIMS, (worker, list(seqs))).rowcount)
        )

    def release_claims(self, worker: str) -> int:
        """Give back every claim ``worker`` holds (a worker stopping, or one found dead)."""
        return self._db.write(lambda cur: int(cur.execute(sql_outbox.OUTBOX_RELEASE_CLAIMS, (worker,)).rowcount))

    def claims(self) -> dict[str, int]:
        """How many rows each worker holds."""
        return {worker: int(count) for worker, count in self._conn.execute(sql_outbox.OUTBOX_CLAIMS)}

    def record_error(self, error: DeliveryError) -> None:
        """Keep a delivery source's last failure (``olbridge status`` shows it)."""
        self._db.write(lambda cur: _save_error(cur, error))

    def errors(self) -> list[DeliveryError]:
        """The last failure of each delivery source, the latest first."""
        return [DeliveryError(*row) for row in self._conn.execute(sql_outbox.SELECT_DELIVERY_ERRORS)]

    def items(self, *, dead: bool = False, limit: int = 1000) -> list[OutboxItem]:
        if dead:
            return self._items(self._conn.execute(sql_outbox.select_outbox(state=True), (DEAD, limit)))
        return self._items(self._conn.execute(sql_outbox.select_outbox(), (limit,)))

    def get(self, seqs: Sequence[int]) -> list[OutboxItem]:
        found: list[OutboxItem] = []
        for chunk in _chunks(seqs):
            found += self._items(self._conn.execute(sql_outbox.select_outbox(seqs=len(chunk)), [*chunk, len(chunk)]))
        return found

    def payloads(self, seqs: Sequence[int]) -> dict[int, str | None]:
        """The texts that rows of kind ``forward`` hold, by seq (rows gone are left out)."""
        found: dict[int, str | None] = {}
        for chunk in _chunks(seqs):
            found.update(self._conn.execute(sql_outbox.outbox_payloads(len(chunk)), chunk).fetchall())
        return found

    def retry(self, seqs: Sequence[int] | None = None) -> int:
        """Queue dead letters again (all of them with ``None``); returns how many. Should a seq
        given not be a dead letter, a NotFoundError names it and nothing is queued."""

        def work(cur: Cursor) -> int:
            if seqs is None:
                return int(cur.execute(sql_outbox.OUTBOX_REQUEUE_ALL).rowcount)
            _check_seqs(cur, seqs, DEAD, "no dead letter with id", "nothing was queued")
            return sum(
                int(cur.execute(sql_outbox.requeue_outbox(len(c)), c).rowcount) for c in _chunks(sorted(set(seqs)))
            )

        return self._db.write(work)

    def drop(self, seqs: Sequence[int], *, must_exist: bool = False) -> int:
        """Remove rows (dead letters or pending) for good; returns how many. With ``must_exist``,
        should a seq given not be in the outbox, a NotFoundError names it and nothing is dropped;
        should a stream worker hold one (a live claim: its event may be on its way), a
        CatalogError names the worker and nothing is dropped."""

        def work(cur: Cursor) -> int:
            if must_exist:
                _check_seqs(cur, seqs, None, "no outbox row with id", "nothing was dropped")
                if self._db.engine.outbox_hold == "claims":  # else one worker's lease holds the whole outbox
                    _check_unclaimed(cur, seqs)
            return sum(
                int(cur.execute(sql_outbox.delete_outbox(len(c)), c).rowcount) for c in _chunks(sorted(set(seqs)))
            )

        return self._db.write(work)

    def alerts_pending(self) -> int:
        """How many alerts wait (what a stream of alerts alone leaves when it gives up)."""
        return int(self._conn.execute(sql_outbox.OUTBOX_ALERTS_WAITING).fetchone()[0])

    def status(self) -> OutboxStatus:
        pending = self._conn.execute(sql_outbox.OUTBOX_COUNT, (PENDING,)).fetchone()[0]
        dead = self._conn.execute(sql_outbox.OUTBOX_COUNT, (DEAD,)).fetchone()[0]
        oldest = self._conn.execute(sql_outbox.OUTBOX_OLDEST).fetchone()
        delivery = self._conn.execute(sql_outbox.OUTBOX_DELIVERY).fetchone()
        return OutboxStatus(
            pending=pending,
            dead=dead,
            held=self.held(),
            oldest_pending=_as_written(oldest[0]) if oldest else None,
            delivered=delivery[0] if delivery else 0,
            last_success=delivery[1] if delivery else None,
        )

    @staticmethod
    def _items(rows: Iterator[Any]) -> list[OutboxItem]:
        return [OutboxItem(*row) for row in rows]


# each settling statement, for a row the worker settling it must still hold
_CLAIMED = {
    sql_outbox.OUTBOX_RETRY_LATER: sql_outbox.OUTBOX_RETRY_LATER_CLAIMED,
    sql_outbox.OUTBOX_DEAD: sql_outbox.OUTBOX_DEAD_CLAIMED,
}


def _check_seqs(cur: Cursor, seqs: Sequence[int], state: str | None, missing: str, outcome: str) -> None:
    """Raise a NotFoundError naming the seqs that have no row (in ``state``, when given)."""
    wanted = sorted(set(seqs))
    found: set[int] = set()
    for chunk in _chunks(wanted):
        params = [*([state] if state else []), *chunk, len(chunk)]
        found.update(
            row[0] for row in cur.execute(sql_outbox.select_outbox(state=state is not None, seqs=len(chunk)), params)
        )
    absent = [seq for seq in wanted if seq not in found]
    if absent:
        shown = ", ".join(map(str, absent[:10])) + (f" and {len(absent) - 10} more" if len(absent) > 10 else "")
        raise NotFoundError(f"{missing} {shown}; {outcome}")


def _save_error(cur: Cursor, e: DeliveryError) -> None:
    cur.execute(
        sql_outbox.SAVE_DELIVERY_ERROR, (e.source, e.target, e.failure, e.status, e.detail[:ERROR_TEXT_MAX], e.at)
    )


def _check_unclaimed(cur: Cursor, seqs: Sequence[int]) -> None:
    """Raise a CatalogError naming the rows a stream worker holds, and the worker; the others are
    locked until the transaction ends, so that no worker claims them meanwhile."""
    held: list[tuple[int, str]] = []
    for chunk in _chunks(sorted(set(seqs))):
        held.extend((int(seq), str(worker)) for seq, worker in cur.execute(sql_outbox.held_outbox(len(chunk)), chunk))
    if held:
        workers = sorted({worker for _, worker in held})
        shown = ", ".join(str(seq) for seq, _ in held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
        raise CatalogError(
            f"outbox row(s) {shown} held by stream worker {', '.join(workers)}, whose events may be on their "
            "way; nothing was dropped: try again once the worker has settled them (olbridge status lists its claims)"
        )


def _chunks(values: Sequence[int], size: int = 400) -> Iterator[list[int]]:
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def _as_written(text: str) -> str:
    """A time the database's clock wrote (milliseconds), as olbridge writes times."""
    moment = read_time(text)
    return format_time(moment) if moment is not None else text


__all__ = [
    "ASSET_CHANGE",
    "FORWARD",
    "KINDS",
    "RUN_END",
    "RUN_START",
    "Dead",
    "Delivered",
    "DeliveryError",
    "Outbox",
    "OutboxItem",
    "OutboxStatus",
    "RetryLater",
    "queue_event",
]
