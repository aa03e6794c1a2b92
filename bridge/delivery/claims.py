"""Stream workers side by side on a PostgreSQL catalog: each claims outbox rows, not the outbox.

A worker registers itself (host, pid, target, start time), then each round claims the head rows it
will send (:meth:`bridge.catalog.outbox.Outbox.claim`: due, first of their run key, held by nobody
or by a claim that expired; rows another worker is claiming at that moment are skipped, ``FOR
UPDATE SKIP LOCKED``). Before it sends, it confirms that it still holds them, unless it claimed
them a moment before (:meth:`OutboxClaims.fresh`); it settles only the rows it still holds. A
thread renews its heartbeat and its claims every ``interval`` seconds, on a connection of its own,
so that a long request or a backoff sleep does not let them lapse, and forgets the workers whose
process is gone, releasing their claims at once: those that ran where its pids mean the same (this
host, the same pid namespace: :func:`~bridge.delivery.heartbeat.process_space`).

So a run's events go out in order whichever workers run (a row is claimable only once every
earlier row of its run key is delivered or dropped), each row is sent by one worker at a time, and
a worker killed with SIGKILL has its claims taken over within a heartbeat (on the same host, in
the same pid namespace) or ``ttl`` seconds (elsewhere). Duplicates happen only then, and only for
what it had in flight: the events it had sent but not yet settled. A worker stalled past ``ttl``
loses its claims to others; what it then settles is not recorded over their outcome, and what it
had not sent yet it does not send. A worker whose heartbeat failed stops before its next round,
with an error naming why
(:mod:`bridge.delivery.heartbeat`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from bridge.catalog import Catalog
from bridge.catalog.outbox import OutboxItem
from bridge.delivery.heartbeat import OutboxHold, Say, hold_clock

# seconds without a heartbeat after which another worker's registration is forgotten (its claims
# expired long before): a worker that ran on another host, or in another pid namespace (a pod
# restarted), whose death no one here can see
FORGET_AFTER = 600.0
# the share of the ttl after its claim within which a round sends what it claimed without
# confirming it (the rest of the round's half of the ttl is for its requests)
FRESH = 0.125


class OutboxClaims(OutboxHold):
    """One worker's share of a PostgreSQL catalog's outbox: its registration, its claims and the
    heartbeat that keeps them (what :class:`~bridge.delivery.worker.StreamWorker` takes rows through)."""

    @property
    def owner(self) -> str:
        """The worker's id, which its claims carry."""
        return self.info.id

    def _acquire(self, wait: bool, stop: threading.Event, sleep: Callable[[float], object], say: Say) -> bool:
        """Register and start the heartbeat: a worker never waits for another here (``wait``,
        ``stop`` and ``sleep`` are the lease's, for the same call)."""
        now = self.clock()
        self.catalog.workers.beat(self.info, now)
        self.catalog.workers.forget_stale(self.info.id, now - FORGET_AFTER)
        others = [w for w in self.catalog.workers.list() if w.id != self.info.id]
        gone = self.catalog.workers.reap(self.info.id, self.is_dead)
        for worker in gone:
            say(f"released the claims of pid {worker.pid} on {worker.host}: its process is gone")
        live = len(others) - len(gone)
        if live > 0:
            say(f"sharing the outbox with {live} other olbridge stream worker(s); each claims its own events")
        self._start_heartbeat()
        return True

    def take(self, now: float, limit: int, *, alerts_only: bool = False) -> list[OutboxItem]:
        """Claim up to ``limit`` due head rows for this worker (``alerts_only``: alerts alone)."""
        return self.catalog.outbox.claim(self.info.id, now, limit, self.ttl, alerts_only=alerts_only)

    def confirm(self, seqs: Sequence[int]) -> set[int]:
        """Of the rows claimed, those this worker still holds (renewed): the ones it may send."""
        return self.catalog.outbox.confirm(self.info.id, seqs, self.ttl)

    def fresh(self, taken_at: float) -> bool:
        """True within :data:`FRESH` of the ttl after the claim: a claim holds its rows for ``ttl``
        seconds from the moment the catalog made it, which was after ``taken_at``, so a round that
        sends at once need not confirm them (a transaction a round less); past it, it confirms."""
        return hold_clock() - taken_at < FRESH * self.ttl

    def put_back(self, seqs: Sequence[int]) -> None:
        """Release the claims of rows not sent this round (its heartbeat would keep them from the
        other workers while this one waits)."""
        if seqs:
            self.catalog.outbox.release_some(self.info.id, seqs)

    # check(): a claim lost while stalled is simply not settled by this worker; only a failed
    # heartbeat stops it (OutboxHold.check)

    def _give_back(self) -> None:
        self.catalog.outbox.release_claims(self.info.id)
        self.catalog.workers.release(self.info.id)

    def _beat_once(self, own: Catalog) -> bool:
        """Renew the heartbeat and the claims, and forget the workers whose process is gone
        (releasing their claims), and those silent for :data:`FORGET_AFTER` seconds."""
        now = self.clock()
        own.workers.beat(self.info, now)
        own.outbox.renew(self.info.id, self.ttl)
        own.workers.reap(self.info.id, self.is_dead)
        own.workers.forget_stale(self.info.id, now - FORGET_AFTER)
        return True


__all__ = ["OutboxClaims"]
