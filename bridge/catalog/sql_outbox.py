"""The statements of delivery's tables (the outbox and its claims, positions and a backfill's
refused events, delivery errors, stream workers and the outbox's lease), in the shared dialect of
:mod:`bridge.catalog.sql`.
"""

from __future__ import annotations

from bridge.catalog.sql import ALERTS_INDEX, EPOCH, NOW, RETRY_INDEX

# --- outbox ---------------------------------------------------------------------------------

QUEUE_EVENT = f"INSERT INTO outbox (kind, ref, run_key, queued_at) VALUES (?, ?, ?, {NOW})"
QUEUE_PAYLOAD = f"INSERT INTO outbox (kind, ref, run_key, queued_at, payload) VALUES (?, 0, ?, {NOW}, ?)"
OUTBOX_COLUMNS = "seq, kind, ref, run_key, queued_at, state, attempts, next_attempt_at, last_status, last_error"
# a row {p} that holds the later rows of its run key back: any row, pending or dead, but a dead
# alert (an alert its webhook refused for good mutes none of its asset's later alerts; a run's
# dead START keeps its end back)
HOLDS_BACK = "NOT ({p}.kind = 'alert' AND {p}.state = 'dead')"
# no earlier row of its run key holds row o back: it is its key's head
_HEAD = f"""NOT EXISTS (
    SELECT 1 FROM outbox p WHERE p.run_key = o.run_key AND p.seq < o.seq AND {HOLDS_BACK.format(p="p")})"""
# the due pending rows that are first of their run key (an earlier row of the key that holds it
# back, pending or dead, keeps it waiting), in seq order (a run key's commit order: a writer
# queueing an event of a run holds that run's row locked until it commits)
OUTBOX_HEADS = f"""
    SELECT {OUTBOX_COLUMNS} FROM outbox o
    WHERE o.state = 'pending' AND o.next_attempt_at <= ? AND {_HEAD}
    ORDER BY o.seq LIMIT ?
"""
# the same for a worker that delivers alerts alone (stream --alerts-only): the alerts through
# their own index, past the OpenLineage events that wait (an alert's run key is an alert's only)
_ALERTS_WAITING = "o.kind = 'alert' AND o.state = 'pending'"  # outbox_alerts's condition, as written
OUTBOX_ALERT_HEADS = f"""
    SELECT {OUTBOX_COLUMNS} FROM outbox o{ALERTS_INDEX}
    WHERE {_ALERTS_WAITING} AND o.next_attempt_at <= ? AND {_HEAD}
    ORDER BY o.seq LIMIT ?
"""
# the first retry due of a head (only heads are ever tried, but an alert tried behind a dead one
# is no longer its key's head once that dead one is queued again)
_RETRYING = f"outbox o{RETRY_INDEX} WHERE o.state = 'pending' AND o.attempts > 0 AND {_HEAD}"
OUTBOX_NEXT_RETRY = f"SELECT min(o.next_attempt_at) FROM {_RETRYING}"
OUTBOX_NEXT_ALERT_RETRY = f"SELECT min(o.next_attempt_at) FROM {_RETRYING} AND o.kind = 'alert'"
OUTBOX_DELETE_SOME = "DELETE FROM outbox WHERE seq IN ({values})"  # the delivered rows of a round
# the dead alerts a delivered one of the same key supersedes (it tells the asset's health since):
# sent again later they would reopen, or misstate, what the later one told
OUTBOX_SUPERSEDED = """
    DELETE FROM outbox WHERE kind = 'alert' AND state = 'dead' AND seq IN (
        SELECT o.seq FROM outbox d JOIN outbox o ON o.run_key = d.run_key AND o.seq < d.seq
        WHERE d.seq IN ({values}) AND d.kind = 'alert' AND o.kind = 'alert' AND o.state = 'dead')
"""
OUTBOX_RETRY_LATER = (
    "UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_status = ?, last_error = ? WHERE seq = ?"
)
OUTBOX_DEAD = "UPDATE outbox SET state = 'dead', attempts = ?, last_status = ?, last_error = ? WHERE seq = ?"
# a dead letter retried starts its count of attempts again (--max-attempts gives it as many anew)
OUTBOX_REQUEUE_ALL = "UPDATE outbox SET state = 'pending', next_attempt_at = 0, attempts = 0 WHERE state = 'dead'"
OUTBOX_COUNT_DELIVERED = """
    INSERT INTO outbox_delivery AS d (id, delivered, last_success_at) VALUES (1, ?, ?)
    ON CONFLICT (id) DO UPDATE SET delivered = d.delivered + excluded.delivered,
        last_success_at = excluded.last_success_at
"""
OUTBOX_DELIVERY = "SELECT delivered, last_success_at FROM outbox_delivery WHERE id = 1"
OUTBOX_COUNT = "SELECT count(*) FROM outbox WHERE state = ?"
OUTBOX_ALERTS_WAITING = f"SELECT count(*) FROM outbox o{ALERTS_INDEX} WHERE {_ALERTS_WAITING}"
OUTBOX_OLDEST = "SELECT queued_at FROM outbox WHERE state = 'pending' ORDER BY seq LIMIT 1"
# the rows that a dead letter holds back (status's held), counted from the dead letters (there are
# few) through the keys' index: a dead letter that holds its key back is the key's first row (it
# was tried as its key's head), and the rows after it were never tried (all pending)
OUTBOX_HELD = f"""
    SELECT coalesce(sum((SELECT count(*) FROM outbox o WHERE o.run_key = d.run_key AND o.seq > d.seq)), 0)
    FROM outbox d WHERE d.state = 'dead' AND {HOLDS_BACK.format(p="d")}
"""


# --- outbox claims: several stream workers share one outbox (PostgreSQL) ----------------------
#
# A worker claims due head rows (no earlier row of their run key holds them back) that nobody
# holds, or whose claim expired, or that it holds itself (a round that failed before settling them:
# its heartbeat keeps them from expiring, and its rounds run one at a time), skipping rows another
# worker is claiming at that moment; it renews its claims with its heartbeat, and settles only
# rows it still holds. Claim times are the database's clock,
# so that the hosts' clocks do not matter. These statements are PostgreSQL's only (SKIP LOCKED);
# on SQLite one worker holds the whole outbox (outbox_lease) and reads OUTBOX_HEADS.

DB_EPOCH = EPOCH


_CLAIM_HEADS = f"""
    WITH due AS (
        SELECT o.seq FROM outbox o
        WHERE {{waiting}} AND o.next_attempt_at <= ?
          AND (o.claimed_by IS NULL OR o.claimed_by = ? OR o.claim_expires < {DB_EPOCH}) AND {_HEAD}
        ORDER BY o.seq LIMIT ?
        FOR UPDATE OF o SKIP LOCKED
    )
    UPDATE outbox SET claimed_by = ?, claim_expires = {DB_EPOCH} + ?
    FROM due WHERE outbox.seq = due.seq
    RETURNING {", ".join("outbox." + c for c in OUTBOX_COLUMNS.split(", "))}
"""
OUTBOX_CLAIM_HEADS = _CLAIM_HEADS.format(waiting="o.state = 'pending'")
OUTBOX_CLAIM_ALERT_HEADS = _CLAIM_HEADS.format(waiting=_ALERTS_WAITING)
# a worker's claims, renewed (all of them, or those of the seqs given, which it still holds)
OUTBOX_RENEW_CLAIMS = f"UPDATE outbox SET claim_expires = {DB_EPOCH} + ? WHERE claimed_by = ?"
OUTBOX_CONFIRM_CLAIMS = f"""
    UPDATE outbox SET claim_expires = {DB_EPOCH} + ? WHERE claimed_by = ? AND seq = ANY(?) RETURNING seq
"""
OUTBOX_RELEASE_CLAIMS = "UPDATE outbox SET claimed_by = NULL, claim_expires = NULL WHERE claimed_by = ?"
OUTBOX_RELEASE_SOME_CLAIMS = (
    "UPDATE outbox SET claimed_by = NULL, claim_expires = NULL WHERE claimed_by = ? AND seq = ANY(?)"
)
# the claims that hold their rows: an expired one (its worker gone or stalled) holds nothing
_LIVE_CLAIMS = (
    f"SELECT claimed_by, count(*) AS claims FROM outbox WHERE claimed_by IS NOT NULL AND claim_expires >= {DB_EPOCH} "
    "GROUP BY claimed_by"
)
OUTBOX_CLAIMS = _LIVE_CLAIMS
# settling a claimed row: only while the worker still holds it (one that lost it to another after
# a stall records nothing over the new holder's outcome)
OUTBOX_DELETE_SOME_CLAIMED = "DELETE FROM outbox WHERE seq IN ({values}) AND claimed_by = ?"
OUTBOX_RETRY_LATER_CLAIMED = """
    UPDATE outbox SET attempts = ?, next_attempt_at = ?, last_status = ?, last_error = ?, claimed_by = NULL,
        claim_expires = NULL
    WHERE seq = ? AND claimed_by = ?
"""
OUTBOX_DEAD_CLAIMED = """
    UPDATE outbox SET state = 'dead', attempts = ?, last_status = ?, last_error = ?, claimed_by = NULL,
        claim_expires = NULL
    WHERE seq = ? AND claimed_by = ?
"""


def select_outbox(*, state: bool = False, seqs: int = 0) -> str:
    where = []
    if state:
        where.append("state = ?")
    if seqs:
        where.append(f"seq IN ({', '.join('?' * seqs)})")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {OUTBOX_COLUMNS} FROM outbox{clause} ORDER BY seq LIMIT ?"


def outbox_payloads(count: int) -> str:
    return f"SELECT seq, payload FROM outbox WHERE seq IN ({', '.join('?' * count)})"


def requeue_outbox(count: int) -> str:
    return (
        f"UPDATE outbox SET state = 'pending', next_attempt_at = 0, attempts = 0 WHERE state = 'dead' "
        f"AND seq IN ({', '.join('?' * count)})"
    )


def held_outbox(count: int) -> str:
    """The rows of ``count`` seqs that a stream worker's live claim holds (PostgreSQL), locked: a
    worker claiming at the same moment passes over them."""
    return (
        f"SELECT seq, claimed_by FROM outbox WHERE seq IN ({', '.join('?' * count)}) AND claimed_by IS NOT NULL "
        f"AND claim_expires >= {DB_EPOCH} ORDER BY seq FOR UPDATE"
    )


def delete_outbox(count: int) -> str:
    return f"DELETE FROM outbox WHERE seq IN ({', '.join('?' * count)})"


# --- positions and a backfill's refused events ----------------------------------------------

GET_POSITION = "SELECT kind, name, value, updated_at FROM positions WHERE kind = ? AND name = ?"
LIST_POSITIONS = "SELECT kind, name, value, updated_at FROM positions WHERE kind = ? ORDER BY name"
LIST_ALL_POSITIONS = "SELECT kind, name, value, updated_at FROM positions ORDER BY kind, name"
SAVE_POSITION = """
    INSERT INTO positions (kind, name, value, updated_at) VALUES (?, ?, ?, ?)
    ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
"""
REFUSED_COLUMNS = "item_time, item_order, ref, event, status, error, refused_at"
SELECT_REFUSED = (
    f"SELECT {REFUSED_COLUMNS} FROM backfill_refused WHERE checkpoint = ? ORDER BY item_time, item_order, ref LIMIT ?"
)
COUNT_REFUSED = "SELECT checkpoint, count(*) FROM backfill_refused GROUP BY checkpoint"
SAVE_REFUSED = """
    INSERT INTO backfill_refused (checkpoint, item_time, item_order, ref, event, status, error, refused_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (checkpoint, item_order, ref) DO UPDATE SET item_time = excluded.item_time, event = excluded.event,
        status = excluded.status, error = excluded.error, refused_at = excluded.refused_at
"""
DELETE_REFUSED = "DELETE FROM backfill_refused WHERE checkpoint = ? AND item_order = ? AND ref = ?"
CLEAR_REFUSED = "DELETE FROM backfill_refused WHERE checkpoint = ?"

# --- delivery errors ------------------------------------------------------------------------

SAVE_DELIVERY_ERROR = """
    INSERT INTO delivery_errors (source, target, failure, status, detail, at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (source) DO UPDATE SET target = excluded.target, failure = excluded.failure,
        status = excluded.status, detail = excluded.detail, at = excluded.at
"""
# the latest first (of one round, the backend's failure before its alerts')
SELECT_DELIVERY_ERRORS = (
    "SELECT source, target, failure, status, detail, at FROM delivery_errors ORDER BY at DESC, source DESC"
)

# --- stream workers and the outbox's lease ----------------------------------------------------

WORKER_COLUMNS = "w.id, w.host, w.pid, w.target, w.started_at, w.heartbeat_at"
REGISTER_WORKER = """
    INSERT INTO stream_workers (id, host, pid, target, started_at, heartbeat_at, space) VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at
"""
DELETE_WORKER = "DELETE FROM stream_workers WHERE id = ?"
DELETE_STALE_WORKERS = "DELETE FROM stream_workers WHERE heartbeat_at < ? AND id <> ?"
SELECT_WORKERS = f"""
    SELECT {WORKER_COLUMNS}, l.acquired_at, coalesce(c.claims, 0), w.space FROM stream_workers w
    LEFT JOIN outbox_lease l ON l.worker = w.id
    LEFT JOIN ({_LIVE_CLAIMS}) c ON c.claimed_by = w.id
    ORDER BY w.started_at, w.id
"""
# what reaping needs of the workers, at every heartbeat: no join, no count of claims
WORKER_PROCESSES = "SELECT id, space, pid FROM stream_workers"
SELECT_LEASE = f"""
    SELECT l.worker, l.acquired_at, {WORKER_COLUMNS}, w.space FROM outbox_lease l
    LEFT JOIN stream_workers w ON w.id = l.worker WHERE l.id = 1
"""
# from the holder given (the third value), or from nobody: one row changed when taken
TAKE_LEASE = """
    INSERT INTO outbox_lease (id, worker, acquired_at) VALUES (1, ?, ?)
    ON CONFLICT (id) DO UPDATE SET worker = excluded.worker, acquired_at = excluded.acquired_at
    WHERE outbox_lease.worker = ?
"""
RELEASE_LEASE = "DELETE FROM outbox_lease WHERE id = 1 AND worker = ?"
LEASE_HOLDER = "SELECT worker FROM outbox_lease WHERE id = 1"
