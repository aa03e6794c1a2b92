"""A stream worker's hold on the outbox: its registration and the heartbeat that keeps it.

Two kinds share it. On SQLite, :class:`~bridge.delivery.lease.OutboxLease` holds the whole
outbox (one worker at a time); on PostgreSQL, :class:`~bridge.delivery.claims.OutboxClaims` holds
the rows it claimed (workers side by side). Either way a thread beats every ``interval`` seconds on
a connection of its own (so a long request or a long backoff sleep does not let the hold go
stale): :meth:`OutboxHold._beat_once` is each kind's beat. A beat the catalog cannot take now
(:func:`catalog_away`) is tried again at the next one; any other failure stops the heartbeat and
is kept, and :meth:`OutboxHold.check`, which the worker calls before each round, raises it as an
:class:`~bridge.errors.ExportError`: a worker whose heartbeat died stops sending, instead of
sending on while another takes what it holds over.
"""

from __future__ import annotations

import abc
import functools
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bridge.catalog import Catalog
from bridge.catalog.outbox import OutboxItem
from bridge.catalog.workers import StreamWorkerInfo
from bridge.errors import BridgeError, ExportError
from bridge.model import epoch_text

Say = Callable[[str], object]  # hears a line for the person running the worker

LEASE_TTL = 5.0  # seconds without a heartbeat after which a worker's hold may be taken over
HEARTBEAT = 1.0  # seconds between heartbeats


def hold_clock() -> float:
    """Seconds on a clock that goes on while the machine sleeps (Linux's ``CLOCK_BOOTTIME``;
    elsewhere the monotonic clock): what a round's hold is timed by, as the database's clock
    that expires claims and leases goes on too (``CLOCK_MONOTONIC`` stops while a host or a VM
    is suspended, and a round woken after would take its claims for fresh)."""
    return time.clock_gettime(BOOTTIME) if BOOTTIME is not None else time.monotonic()


BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def _quiet(text: str) -> None:
    """A :data:`Say` that hears nothing (no ``notify`` given)."""


@functools.cache
def process_space() -> str:
    """Where this process's pid means something: the kernel's boot id and the pid namespace
    (Linux); elsewhere the host's name. Containers that share the host's network share its name,
    not its processes."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat("/proc/self/ns/pid")  # named by its device and inode together
        return f"{boot}/{namespace.st_dev}:{namespace.st_ino}"
    except OSError:
        return f"host:{socket.gethostname()}"


def process_is_gone(space: str | None, pid: int) -> bool:
    """True when ``pid`` ran where this process's pids mean the same (:func:`process_space`) and
    no longer exists (a PermissionError means it does); never for a worker that did not say where
    it ran (``None``)."""
    if space is None or space != process_space():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def register_as(target: str, now: float) -> StreamWorkerInfo:
    """This process as a stream worker delivering to ``target``: its id (host, pid and a random
    part, so a restarted process with a reused pid is another worker), started and beating now."""
    host, pid = socket.gethostname(), os.getpid()
    return StreamWorkerInfo(
        id=f"{host}:{pid}:{secrets.token_hex(4)}",
        host=host,
        pid=pid,
        target=target,
        started_at=epoch_text(now),
        heartbeat_at=now,
        space=process_space(),
    )


def catalog_away(catalog: Catalog, exc: BaseException) -> bool:
    """Whether an error of a heartbeat (or of giving the outbox back) says the catalog cannot be
    written now: one of the catalog's own errors (a write that lost every race), or what
    :meth:`Catalog.unavailable` says (locked, busy, its server out of reach). Beat again next time;
    any other error is a failure."""
    return isinstance(exc, BridgeError) or catalog.unavailable(exc)


class OutboxHold(abc.ABC):
    """One stream worker's hold on the outbox (what :class:`~bridge.delivery.worker.StreamWorker`
    takes rows through): its registration, and the heartbeat thread that keeps it."""

    def __init__(
        self,
        catalog: Catalog,
        target: str,
        *,
        ttl: float = LEASE_TTL,
        interval: float = HEARTBEAT,
        clock: Callable[[], float] = time.time,
        is_dead: Callable[[str | None, int], bool] = process_is_gone,
    ) -> None:
        self.catalog = catalog
        self.ttl = ttl
        self.interval = interval
        self.clock = clock
        self.is_dead = is_dead
        self.info = register_as(target, clock())
        self.failure: BaseException | None = None  # why the heartbeat stopped, if it failed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- what each kind does --------------------------------------------------------------

    @property
    @abc.abstractmethod
    def owner(self) -> str | None:
        """What the rows this worker settles are claimed by (None: rows carry no claim)."""

    def acquire(
        self,
        *,
        wait: bool,
        stop: threading.Event,
        sleep: Callable[[float], object],
        notify: Callable[[str], object] | None = None,
    ) -> bool:
        """Register and take the hold (starting the heartbeat); False if ``stop`` came first.
        ``notify`` hears what the worker should know of the others (each kind's :meth:`_acquire`)."""
        return self._acquire(wait, stop, sleep, notify or _quiet)

    @abc.abstractmethod
    def _acquire(self, wait: bool, stop: threading.Event, sleep: Callable[[float], object], say: Say) -> bool:
        """:meth:`acquire`, with ``say`` always there to hear."""

    @abc.abstractmethod
    def take(self, now: float, limit: int, *, alerts_only: bool = False) -> list[OutboxItem]:
        """Up to ``limit`` due head rows for this worker to send (``alerts_only``: alerts alone)."""

    @abc.abstractmethod
    def confirm(self, seqs: Sequence[int]) -> set[int]:
        """Of the rows taken, those this worker still holds: the ones it may send."""

    def fresh(self, taken_at: float) -> bool:
        """Whether rows taken at ``taken_at`` (:func:`hold_clock` just before :meth:`take`)
        are held still, without asking the catalog: False unless taking them holds them."""
        return False

    @abc.abstractmethod
    def put_back(self, seqs: Sequence[int]) -> None:
        """Rows taken and not sent this round, given back for any worker's next round."""

    @abc.abstractmethod
    def _beat_once(self, own: Catalog) -> bool:
        """One heartbeat, on the heartbeat's own connection; False stops the heartbeat."""

    @abc.abstractmethod
    def _give_back(self) -> None:
        """Give back what this worker holds and unregister it."""

    # --- shared -----------------------------------------------------------------------------

    def check(self) -> None:
        """Raise an ExportError if the heartbeat failed: what this worker holds lapses ``ttl``
        seconds after its last beat and others take it over, so it must not send on."""
        if self.failure is not None:
            raise ExportError(
                f"the heartbeat of this olbridge stream on {self.catalog.path} failed: {self._cause(self.failure)}; "
                f"stopping so that nothing goes twice (what it holds is taken over {self.ttl:g}s after "
                f"its last heartbeat)"
            )

    def release(self) -> None:
        """Stop the heartbeat, give back what this worker holds and unregister (a clean exit)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        try:
            self._give_back()
        except Exception as exc:  # the catalog is away: what it held expires on its own
            if not catalog_away(self.catalog, exc):
                raise

    def _start_heartbeat(self) -> None:
        if self.catalog.in_memory:
            return  # no other process can open it
        self._stop.clear()
        self.failure = None
        self._thread = threading.Thread(target=self._beat, name="olbridge-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        """The heartbeat thread: beat every ``interval`` until stopped, a beat says stop, or a
        failure (kept in :attr:`failure`, raised by :meth:`check`)."""
        try:
            with self.catalog.reopen() as own:
                while not self._stop.wait(self.interval):
                    try:
                        if not self._beat_once(own):
                            return
                    except Exception as exc:
                        if not catalog_away(own, exc):
                            raise
        except BaseException as exc:  # any failure: the worker stops at its next check
            self.failure = exc

    def _cause(self, exc: BaseException) -> str:
        """A failure as a message says it: the catalog's storage named where it is about that."""
        if isinstance(exc, BridgeError):
            return str(exc)
        found = self.catalog.engine.storage_error(exc)
        if found is not None:
            return str(found)
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


__all__ = ["HEARTBEAT", "LEASE_TTL", "OutboxHold", "catalog_away", "process_is_gone", "process_space", "register_as"]
