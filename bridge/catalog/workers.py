"""The stream workers of a catalog and the outbox's lease.

Every ``olbridge stream`` process registers itself in ``stream_workers`` (host, pid, target, when
it started) and keeps a heartbeat there. On SQLite the outbox is delivered by one worker at a
time: the one holding the single row of ``outbox_lease``. A lease whose holder's heartbeat is older
than the time to live (or whose holder is known dead, see ``is_dead``) may be taken over; a holder
that finds the lease gone (taken over while it was stalled) must stop sending.

The worker registry is not tied to the single lease: on PostgreSQL several workers share the
outbox, each claiming rows of it (:meth:`bridge.catalog.outbox.Outbox.claim`) rather than the whole
outbox, and the same registry shows them and their claims in ``olbridge status``; a worker whose
process is known gone is forgotten and its claims released (:meth:`Workers.reap`). Heartbeat
times are seconds since the epoch, from the caller's clock (claims expire by the database's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from bridge.catalog import sql_outbox
from bridge.catalog.engine import Conflict, Connection, Cursor, Database


@attrs.frozen
class StreamWorkerInfo:
    """A registered worker; ``lease_since`` is when it took the outbox's lease (None: it waits, or,
    on PostgreSQL, it shares the outbox), ``claims`` the outbox rows it holds (PostgreSQL)."""

    id: str
    host: str
    pid: int
    target: str
    started_at: str
    heartbeat_at: float
    lease_since: str | None = None
    claims: int = 0
    space: str | None = None  # where its pid means something (None: unknown); see is_dead

    def as_json(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "target": self.target,
            "startedAt": self.started_at,
            "heartbeatAgeSeconds": round(max(now - self.heartbeat_at, 0.0), 1),
            "holdsLease": self.lease_since is not None,
            "leaseSince": self.lease_since,
            "claims": self.claims,
        }


@attrs.frozen
class LeaseHolder:
    """Who holds the outbox's lease, as another worker sees it when it cannot take it."""

    worker: str
    acquired_at: str
    host: str | None
    pid: int | None
    heartbeat_at: float | None
    space: str | None = None
    target: str | None = None  # what it delivers to (a backend's URL, or the alerts' webhooks alone)

    def where(self) -> str:
        """``pid 123 on host, since <when it took the lease>``."""
        who = f"pid {self.pid} on {self.host}" if self.host is not None else f"worker {self.worker}"
        return f"{who}, since {self.acquired_at}"

    def describe(self, now: float) -> str:
        """:meth:`where`, and how old its heartbeat is."""
        beat = f", last heartbeat {max(now - self.heartbeat_at, 0.0):.1f}s ago" if self.heartbeat_at else ""
        to = f", to {self.target}" if self.target else ""
        return f"{self.where()}{to}{beat}"


@attrs.frozen
class LeaseClaim:
    """What an attempt to take the lease came to: ``taken``, from ``holder`` when it was another
    worker's (stale, or gone: ``why``); not taken, ``holder`` holds it."""

    taken: bool
    holder: LeaseHolder | None = None
    why: str = ""


class Workers:
    """The stream workers and the outbox's lease of one catalog (``catalog.workers``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def _conn(self) -> Connection:
        return self._db.conn

    def beat(self, worker: StreamWorkerInfo, now: float) -> bool:
        """Register a worker or renew its heartbeat (registering it again if it was forgotten as
        stale); True while it holds the outbox's lease."""

        def work(cur: Cursor) -> bool:
            cur.execute(
                sql_outbox.REGISTER_WORKER,
                (worker.id, worker.host, worker.pid, worker.target, worker.started_at, now, worker.space),
            )
            holder = cur.execute(sql_outbox.LEASE_HOLDER).fetchone()
            return holder is not None and holder[0] == worker.id

        return self._db.write(work)

    def acquire(
        self,
        worker_id: str,
        now: float,
        ttl: float,
        *,
        acquired_at: str,
        is_dead: Callable[[str | None, int], bool] = lambda space, pid: False,
    ) -> LeaseClaim:
        """Take the outbox's lease for a registered worker: when nobody holds it, when it holds it
        already, or when the holder's heartbeat is older than ``ttl`` seconds or ``is_dead(space,
        pid)`` says its process is gone (``space``: where its pid means something, None when its
        worker did not say). Workers whose heartbeat is stale are forgotten on the way."""

        def work(cur: Cursor) -> LeaseClaim:
            row = cur.execute(sql_outbox.SELECT_LEASE).fetchone()
            if row is not None and row[0] == worker_id:
                return LeaseClaim(taken=True)
            holder = _holder(row) if row is not None else None
            why = ""
            if holder is not None:
                if holder.heartbeat_at is None:
                    why = "it is no longer registered"
                elif holder.heartbeat_at < now - ttl:
                    why = f"its last heartbeat is {now - holder.heartbeat_at:.1f}s old"
                elif holder.pid is not None and is_dead(holder.space, holder.pid):
                    why = "its process is gone"
                else:
                    return LeaseClaim(taken=False, holder=holder)
                cur.execute(sql_outbox.DELETE_WORKER, (holder.worker,))
            cur.execute(sql_outbox.DELETE_STALE_WORKERS, (now - ttl, worker_id))
            # taken from the holder seen here, or from nobody: a worker that took it meanwhile wins
            # and this transaction is run again (it finds that one holding it)
            if (
                cur.execute(sql_outbox.TAKE_LEASE, (worker_id, acquired_at, holder.worker if holder else "")).rowcount
                != 1
            ):
                raise Conflict("the outbox's lease was taken meanwhile")
            return LeaseClaim(taken=True, holder=holder, why=why)

        return self._db.write(work)

    def holder(self) -> LeaseHolder | None:
        """Who holds the outbox's lease (None: nobody)."""
        row = self._conn.execute(sql_outbox.SELECT_LEASE).fetchone()
        return _holder(row) if row is not None else None

    def release(self, worker_id: str) -> None:
        """Give the lease back (if held) and unregister."""

        def work(cur: Cursor) -> None:
            cur.execute(sql_outbox.RELEASE_LEASE, (worker_id,))
            cur.execute(sql_outbox.DELETE_WORKER, (worker_id,))

        self._db.write(work)

    def reap(self, worker_id: str, is_dead: Callable[[str | None, int], bool]) -> list[StreamWorkerInfo]:
        """Forget the other workers whose process ``is_dead(space, pid)`` says is gone (killed on
        this host, in this pid namespace), their outbox claims released at once rather than when they expire; the
        workers forgotten."""
        processes = self._conn.execute(sql_outbox.WORKER_PROCESSES).fetchall()
        dead = {w_id for w_id, space, pid in processes if w_id != worker_id and is_dead(space, pid)}
        if not dead:
            return []
        gone = [w for w in self.list() if w.id in dead]  # as they stood before they are forgotten

        def work(cur: Cursor) -> None:
            for worker in gone:
                cur.execute(sql_outbox.OUTBOX_RELEASE_CLAIMS, (worker.id,))
                cur.execute(sql_outbox.DELETE_WORKER, (worker.id,))

        self._db.write(work)
        return gone

    def forget_stale(self, worker_id: str, before: float) -> int:
        """Forget the other workers whose heartbeat is older than ``before`` (by their clocks):
        gone where :meth:`reap` cannot tell (another host, another pid namespace: a pod
        restarted), else listed for ever. Their claims are left to expire by the database's
        clock (one still beating, its clock far behind, registers again at its next beat and
        keeps them); how many."""
        return self._db.write(
            lambda cur: max(int(cur.execute(sql_outbox.DELETE_STALE_WORKERS, (before, worker_id)).rowcount), 0)
        )

    def list(self) -> list[StreamWorkerInfo]:
        return [StreamWorkerInfo(*row) for row in self._conn.execute(sql_outbox.SELECT_WORKERS)]


def _holder(row: Any) -> LeaseHolder:
    worker, acquired_at, _id, host, pid, target, _started, heartbeat_at, space = row
    return LeaseHolder(
        worker=worker,
        acquired_at=acquired_at,
        host=host,
        pid=pid,
        heartbeat_at=heartbeat_at,
        space=space,
        target=target,
    )


__all__ = ["LeaseClaim", "LeaseHolder", "StreamWorkerInfo", "Workers"]
