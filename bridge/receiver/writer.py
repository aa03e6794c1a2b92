"""Group commit: the events of many requests are committed in one transaction, so a commit's sync
is paid once per group, not once per event.

``olbridge serve`` commits through one writer process whatever the engine: every HTTP worker hands
its events to it through a :class:`~bridge.receiver.writer_process.RemoteWriter`. On SQLite it is
the catalog's only writer; on PostgreSQL the writers of other ``serve`` processes, on this host or
others, commit their own groups side by side with it.

:class:`CatalogWriter` owns the catalog's write connection and writes one group;
:class:`QueuedWriter` gathers the groups on a thread. The writer process of ``olbridge serve``
(:mod:`bridge.receiver.writer_process`) feeds it, and the workers reach that process through
:class:`bridge.receiver.writer_process.RemoteWriter`.

A request learns the outcome of each of its events only after the transaction that holds them has
committed (or failed). Events keep their own savepoints, so one bad event never takes its group
down with it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import attrs

from bridge.catalog import Catalog, IngestResult
from bridge.catalog.availability import Availability
from bridge.catalog.engine import Busy, Maintenance
from bridge.errors import CommitUnknown, Unavailable
from bridge.mapping.resolver import Resolver
from bridge.model.received import IncomingEvent

_log = logging.getLogger(__name__)

Results = list[IngestResult | Exception]


def unavailable(result: object) -> bool:
    """Whether an event's result says the catalog could not take it now (the client retries)."""
    return isinstance(result, Unavailable | Busy)


def shares(results: Results, sizes: Iterable[int]) -> Iterator[Results]:
    """A group's results cut back into each request's share, in order (``sizes``: the number of
    events each request handed over)."""
    start = 0
    for size in sizes:
        yield results[start : start + size]
        start += size


# the work of a slice of a request's events (an event, and each dataset and column edge it names):
# a request of more is written in slices, one at a time, each queued behind whatever came meanwhile,
# so that other producers wait for one slice, not for a batch of thousands of new datasets
SLICE_WEIGHT = 5_000


def weight(event: IncomingEvent) -> int:
    """An event's work for the writer: one, and one for each dataset and column edge it names."""
    return 1 + len(getattr(event, "datasets", ())) + len(getattr(event, "column_edges", ()))


def slices(events: Sequence[IncomingEvent], limit: int = SLICE_WEIGHT) -> list[Sequence[IncomingEvent]]:
    """The events in order, cut where a slice would weigh more than ``limit`` (an event heavier
    than that is a slice of its own: it is written whole, and the receiver's limits on datasets and
    column edges bound its weight); one slice, the events themselves, when they weigh less."""
    out: list[Sequence[IncomingEvent]] = []
    start, load = 0, 0
    for at, event in enumerate(events):
        heavy = weight(event)
        if load and load + heavy > limit:
            out.append(events[start:at])
            start, load = at, 0
        load += heavy
    out.append(events[start:] if out else events)
    return out


def failed_group(exc: Exception, count: int) -> Results:
    """The results of a group that could not be handed on (a fault of olbridge's): each event
    retriable, the next groups go on."""
    _log.exception("the writer could not hand a group on")
    return [Unavailable(f"the catalog's writer failed: {exc}")] * count


# bytes of SQLite's write-ahead log past which the checkpointer restarts it from its start and
# truncates it (a checkpoint that waits for the writer: a commit may wait up to a second for it);
# a checkpoint that resets the log leaves it no larger than this, too (journal_size_limit)
WAL_LIMIT = 64 * 1024 * 1024


class CatalogWriter:
    """The catalog's one write connection: writes groups of events, each in one transaction, and
    runs its engine's upkeep beside the commits, in a thread of its own (SQLite: the WAL
    checkpointed on a connection of its own, a PASSIVE checkpoint every ``checkpoint_every`` s and
    a TRUNCATE one once the WAL has grown past ``wal_limit`` bytes:
    :class:`bridge.catalog.sqlite.WalCheckpoints`)."""

    def __init__(
        self,
        catalog_path: str | Path,
        resolver: Resolver,
        *,
        durability: str = "full",
        on_commit: Callable[[], None] = lambda: None,
        availability: Availability | None = None,
        wal_limit: int = WAL_LIMIT,
        checkpoint_every: float = 1.0,
    ) -> None:
        if durability not in ("full", "normal"):
            raise ValueError(f"durability is 'full' or 'normal', not {durability!r}")
        # whether the catalog takes this writer's writes, from its last write or probe
        self.availability = availability or Availability(lambda message: None)
        self.catalog = Catalog(catalog_path, naming=resolver)
        self.catalog.set_durability(durability)
        self.resolver = resolver
        self.on_commit = on_commit
        self._stop = threading.Event()
        self._turn = threading.Lock()  # a group's transaction, or a checkpoint that restarts the WAL
        self._checkpointer: threading.Thread | None = None
        # the engine's upkeep beside the commits (SQLite: the WAL's checkpoints), if any
        maintenance = self.catalog.maintenance(wal_limit=wal_limit, every=checkpoint_every)
        if maintenance is not None:
            self._checkpointer = threading.Thread(
                target=self._upkeep, args=(maintenance,), name="olbridge-checkpoint", daemon=True
            )
            self._checkpointer.start()

    def write(self, events: Sequence[IncomingEvent]) -> Results:
        """One result per event, after the group's transaction has committed; every event gets
        :class:`Unavailable` when the commit itself failed (nothing of the group landed), or
        when the connection was lost as it committed and the catalog could not be asked since
        whether it landed (:class:`CommitUnknown`: a retry of an event that did is answered
        duplicate). A group whose connection was lost as it committed, and that landed, gets its
        results (:func:`bridge.catalog.ingest.ingest` asks)."""
        try:
            with self._turn:
                results = self.catalog.ingest(events, self.resolver)
        except CommitUnknown as exc:
            self.availability.down(str(exc))
            return [Unavailable(f"the catalog may not have committed: {exc}; retry")] * len(events)
        except Exception as exc:
            reason = self.catalog.unavailable_reason(exc)
            self.availability.down(reason)
            return [Unavailable(f"the catalog could not commit: {reason}")] * len(events)
        self.availability.up()
        self.on_commit()
        return results

    def probe(self) -> None:
        """While no events come: whether the catalog would take a write now (a write transaction
        that writes what is there, rolled back), into :attr:`availability`."""
        try:
            self.catalog.check_writable()
        except Exception as exc:  # the driver's error, rather than the message naming the catalog
            self.availability.down(self.catalog.unavailable_reason(exc.__cause__ or exc))
        else:
            self.availability.up()

    def _upkeep(self, maintenance: Maintenance) -> None:
        try:
            while not self._stop.wait(maintenance.look):
                maintenance.step(self._turn)
        finally:
            maintenance.close()

    def close(self) -> None:
        self._stop.set()
        if self._checkpointer is not None:
            self._checkpointer.join()
        self.catalog.close()


@attrs.define
class Job:
    """Events handed over by one request, and their results once written."""

    events: Sequence[IncomingEvent]
    done: threading.Event = attrs.field(factory=threading.Event)
    results: Results = attrs.field(factory=list)

    def finish(self, results: Results) -> None:
        self.results = results
        self.done.set()


class QueuedWriter:
    """Takes event lists from any thread of this process and hands them on in groups, one group
    at a time, from a thread of its own: subclasses say where a group goes (:meth:`_write`)."""

    slice_weight = SLICE_WEIGHT

    def __init__(self, *, max_group: int = 2000, max_queued: int = 256, timeout: float = 30.0) -> None:
        self.max_group = max_group
        self.timeout = timeout
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=max_queued)
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="olbridge-writer", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stopping

    def submit(self, events: Sequence[IncomingEvent]) -> Results:
        """Write events; returns one result per event once they are committed (or have failed):
        many in slices (:func:`slices`), each behind the requests queued meanwhile."""
        results: Results = []
        for piece in slices(events, self.slice_weight):
            try:
                results += self._submit(piece)
            except Unavailable as exc:  # the slices before are committed; these, and those after, are not
                if not results:
                    raise
                return results + [exc] * (len(events) - len(results))
        return results

    def _submit(self, events: Sequence[IncomingEvent]) -> Results:
        if not events:
            return []
        if not self.alive:
            raise Unavailable("the receiver is stopping")
        job = Job(events)
        try:
            self._queue.put(job, timeout=self.timeout)
        except queue.Full:
            raise Unavailable("the catalog is busy: too many requests waiting to be written") from None
        if not job.done.wait(self.timeout):
            raise Unavailable(f"the catalog did not commit within {self.timeout:g} s")
        return job.results

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs, count = [first], len(first.events)
            while count < self.max_group:  # and the jobs queued behind it
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:  # stop after this group: put it back for the next turn
                    self._queue.put_nowait(None)
                    break
                jobs.append(more)
                count += len(more.events)
            events = [e for job in jobs for e in job.events]
            try:
                results = self._write(events)
            except Exception as exc:  # a fault of the writer's: these requests fail, the next ones go on
                results = failed_group(exc, len(events))
            for job, share in zip(jobs, shares(results, (len(job.events) for job in jobs)), strict=True):
                job.finish(share)

    def _write(self, events: list[IncomingEvent]) -> Results:
        raise NotImplementedError

    def _release(self) -> None:
        """Let go of what the writer holds, once the queue is done."""

    def close(self) -> None:
        """Hand on what is queued, then stop the thread."""
        if self._stopping:
            return
        self._stopping = True
        self._queue.put(None)
        self._thread.join()
        self._release()
