"""One stream worker at a time on a SQLite catalog: the outbox's lease, held with a heartbeat.

A worker registers itself (host, pid, target, start time) and takes the lease before it sends
anything. While it holds it, a thread renews its heartbeat every ``interval`` seconds on a
connection of its own (so a long request or a long backoff sleep does not let it go stale). A
worker that finds the lease held waits for it (``olbridge stream``: a standby that takes over
when the holder stops) or refuses, naming the holder (``stream --once``). The lease is taken over
when the holder's heartbeat is older than ``ttl`` seconds, or at once when the holder ran on this
host and its process is gone (a SIGKILL). A holder that was stalled past ``ttl`` and finds the
lease taken stops before its next round: at most the requests it had in flight go twice. So does
a holder whose heartbeat failed (:mod:`bridge.delivery.heartbeat`), with an error naming why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from bridge.catalog import Catalog
from bridge.catalog.outbox import OutboxItem
from bridge.catalog.workers import LeaseClaim, LeaseHolder
from bridge.delivery.heartbeat import HEARTBEAT, LEASE_TTL, OutboxHold, Say, process_is_gone, register_as
from bridge.errors import ExportError
from bridge.model import epoch_text


class OutboxLease(OutboxHold):
    """One worker's lease on a SQLite catalog's whole outbox, kept by its heartbeat."""

    lost_to: LeaseHolder | None = None  # who took the lease over while this worker was stalled
    held: bool = False

    @property
    def owner(self) -> None:
        """Rows carry no claim: the lease covers the whole outbox."""
        return None

    def take(self, now: float, limit: int, *, alerts_only: bool = False) -> list[OutboxItem]:
        """The due head rows (the holder of the lease sends them all; ``alerts_only``: alerts alone)."""
        return self.catalog.outbox.heads(now, limit, alerts_only=alerts_only)

    def confirm(self, seqs: Sequence[int]) -> set[int]:
        """Every row while this worker still holds the lease (renewed with its heartbeat), none
        once another took it over (it was stalled past the ttl: :meth:`check` then stops it)."""
        if self.catalog.workers.beat(self.info, self.clock()):
            return set(seqs)
        self._taken_over(self.catalog)
        return set()

    def put_back(self, seqs: Sequence[int]) -> None:
        """Nothing to give back: the lease holds the whole outbox, no row of its own."""

    def try_acquire(self) -> LeaseClaim:
        """Take the lease if it is free or stale (see :meth:`Workers.acquire`)."""
        now = self.clock()
        self.catalog.workers.beat(self.info, now)  # registered, its heartbeat fresh
        claim = self.catalog.workers.acquire(
            self.info.id, now, self.ttl, acquired_at=epoch_text(now), is_dead=self.is_dead
        )
        if claim.taken and not self.held:
            self.held = True
            self._start_heartbeat()
        return claim

    def _acquire(self, wait: bool, stop: threading.Event, sleep: Callable[[float], object], say: Say) -> bool:
        """Take the lease. Held by a live worker: with ``wait``, wait until it is free or stale,
        or until ``stop`` (then False); without, an ExportError naming the holder. ``say``
        hears when it starts waiting, and whom it took the lease over from."""
        waited_for: LeaseHolder | None = None
        while not stop.is_set():
            claim = self.try_acquire()
            holder = claim.holder
            if claim.taken:
                if holder is not None:
                    say(f"took the outbox over from {holder.where()}: {claim.why}")
                elif waited_for is not None:
                    say(f"took the outbox over from {waited_for.where()}: it stopped")
                return True
            assert holder is not None
            if not wait:
                self.release()
                raise ExportError(
                    f"the outbox of {self.catalog.path} is being delivered by another olbridge stream "
                    f"({holder.describe(self.clock())}); nothing is sent twice, so this one stops. Run it "
                    f"again when that one is done (or without --once, to wait and take over)"
                )
            if waited_for is None:
                say(
                    f"waiting: the outbox is being delivered by another olbridge stream "
                    f"({holder.describe(self.clock())}); this one takes over when it stops, or "
                    f"{self.ttl:g}s after its last heartbeat"
                )
            waited_for = holder
            sleep(self.interval)
        self.release()
        return False

    def check(self) -> None:
        """Raise if the heartbeat failed, or if another worker took the lease over (this one was
        stalled past the ttl)."""
        super().check()
        if self.lost_to is not None:
            raise ExportError(
                f"another olbridge stream took the outbox of {self.catalog.path} over "
                f"({self.lost_to.describe(self.clock())}) while this one was stalled for more than "
                f"{self.ttl:g}s; stopping so that nothing goes twice"
            )

    def release(self) -> None:
        """Stop the heartbeat, give the lease back and unregister (what a clean exit does)."""
        super().release()
        self.held = False

    def _give_back(self) -> None:
        self.catalog.workers.release(self.info.id)

    def _beat_once(self, own: Catalog) -> bool:
        """Renew the heartbeat; a worker that finds the lease taken over keeps who took it and stops
        beating (:meth:`check` raises)."""
        if own.workers.beat(self.info, self.clock()):
            return True
        self._taken_over(own)
        return False

    def _taken_over(self, catalog: Catalog) -> None:
        """Keep who took the lease over (:meth:`check` says so and stops)."""
        self.lost_to = catalog.workers.holder() or LeaseHolder("(nobody)", "-", None, None, None)


__all__ = ["HEARTBEAT", "LEASE_TTL", "OutboxLease", "process_is_gone", "register_as"]
