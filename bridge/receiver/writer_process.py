"""The writer process of ``olbridge serve``: the one process that writes the catalog, fed by the
HTTP workers over a Unix socket.

The workers parse, judge and read events; the writer only writes them, in group transactions. It
runs in a process of its own so that its work never waits for a worker's requests, and so that
one group can hold the events of every worker. Each worker keeps one group in flight to the
writer: while a group is being written the next one gathers, so the groups grow with the load.

A message is a frame: its length (8 bytes, big-endian), then a pickle: one way the requests'
events, a list a request, the list of a request of many events already pickled by the request
itself as it handed them over (so that a large group is not pickled all at once when it leaves,
while the writer waits for it); the other way one result an event. A worker whose writer goes
away answers 503 (retriable) for the events in flight and connects again for the next ones; the
supervisor starts a new writer on the same socket. A message the writer cannot unpickle (a fault
of olbridge's) is answered with one :class:`~bridge.errors.Unavailable` for all its
events; the writer goes on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import pickle
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from types import FrameType
from typing import Any

import attrs

from bridge.catalog import IngestResult
from bridge.errors import BridgeError, Unavailable
from bridge.model.received import IncomingEvent
from bridge.receiver.readiness import Readiness
from bridge.receiver.writer import (
    SLICE_WEIGHT,
    CatalogWriter,
    Results,
    failed_group,
    shares,
    slices,
    unavailable,
)

_log = logging.getLogger(__name__)

_LENGTH = struct.Struct("!Q")


def _frame(value: object) -> bytes:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        count = sock.recv_into(view[got:])
        if count == 0:
            raise EOFError("the connection closed in the middle of a message")
        got += count
    return bytes(buffer)


def receive_message(sock: socket.socket) -> bytes:
    """The next message on a blocking socket, still pickled (EOFError when the other end has gone)."""
    (size,) = _LENGTH.unpack(_receive_exactly(sock, _LENGTH.size))
    return _receive_exactly(sock, size)


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next message on a stream (asyncio.IncompleteReadError, an EOFError, when it ends)."""
    (size,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
    return pickle.loads(await reader.readexactly(size))


def listen(path: str) -> socket.socket:
    """The writer's listening socket (made by the supervisor, so that a new writer can take it over)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(64)
    return sock


def _portable(result: IngestResult | Exception) -> IngestResult | Exception:
    """A result that pickles into the worker's process and keeps its meaning there."""
    if isinstance(result, IngestResult | Unavailable):
        return result
    if unavailable(result):
        return Unavailable(str(result))
    if isinstance(result, BridgeError | ValueError):
        return BridgeError(str(result))
    return Unavailable(f"the catalog could not take the event: {result}")


GATHER = 0.0005  # s the writer waits, after answering workers, for their next events

# bytes a worker's socket to the writer may hold (the system may allow less: net.core.wmem_max):
# a group of a few thousand events goes over in one write. With the default (about 200 KiB) a group
# of 800 events went in pieces, each waiting for the writer to read the last and for the worker's
# loop to turn, while the writer sat blocked in the middle of reading it (batches of 100 on SQLite
# gained a fifth: docs/benchmarks.md).
BUFFER = 4 * 1024 * 1024


PROBE_EVERY = (5.0, 1.0)  # s between probes of an idle writer while the catalog takes writes, and while not


def run_writer(listener: socket.socket, writer: CatalogWriter, readiness: Readiness | None = None) -> None:
    """Serve the workers until SIGTERM, in rounds: write what the workers sent in one group,
    answer each, and take the next round once every worker just answered has sent again (it sends
    at once what it gathered meanwhile) or :data:`GATHER` has passed.

    The wait is what lets one group hold every worker's events: a worker sends as soon as its last
    group comes back, so without it the next round took the other workers' messages (sent while
    this group was being written) and left out this one's, one group in turn each, of half the
    size with two workers. One worker sends at once or has nothing: it waits for nothing.

    ``readiness`` follows what the writer sees: each group's commit or failure and, while no
    events come, a probe every few seconds (:data:`PROBE_EVERY`); and when each began, so that a
    write or probe the catalog does not answer says not ready while it waits."""
    stopping = threading.Event()
    seen = time.monotonic()  # the last write or probe

    def tell() -> None:
        nonlocal seen
        seen = time.monotonic()
        if readiness is not None:
            available = writer.availability
            readiness.set(None if available.available else f"the catalog cannot take events: {available.reason}")

    def busy(since: float | None) -> None:
        if readiness is not None:
            readiness.busy(since)

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when the writer stops
    busy(time.monotonic())  # not the moment a writer before it (killed mid-write) began its last
    writer.probe()
    busy(None)
    tell()
    workers: list[socket.socket] = []
    round_: list[tuple[socket.socket, Sequence[IncomingEvent]]] = []
    answered: set[socket.socket] = set()  # answered by the last round, and not sent again since
    until = 0.0

    def drop(worker: socket.socket) -> None:
        workers.remove(worker)
        answered.discard(worker)
        worker.close()

    try:
        while True:
            now = time.monotonic()
            if round_ and (not answered or now >= until):
                busy(now)
                results = [_portable(r) for r in writer.write([e for _, events in round_ for e in events])]
                busy(None)
                tell()
                for (worker, _), share in zip(round_, shares(results, (len(e) for _, e in round_)), strict=True):
                    try:
                        worker.sendall(_frame(share))
                    except OSError:
                        drop(worker)
                answered = {worker for worker, _ in round_ if worker in workers}
                until = time.monotonic() + GATHER
                round_ = []
                continue
            if round_:
                timeout = until - now
            else:
                timeout = 0 if stopping.is_set() else 0.5
            ready: list[Any] = wait([listener, *workers], timeout=timeout)
            if stopping.is_set() and not ready and not round_:
                return
            idle = time.monotonic() - seen
            if not ready and not round_ and idle >= PROBE_EVERY[not writer.availability.available]:
                busy(time.monotonic())
                writer.probe()
                busy(None)
                tell()
            for item in ready:
                if item is listener:
                    with contextlib.suppress(OSError):
                        accepted, _ = listener.accept()
                        accepted.setblocking(True)
                        accepted.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)  # the results
                        workers.append(accepted)
                    continue
                try:
                    message = receive_message(item)
                except (EOFError, OSError):  # the worker is gone
                    drop(item)
                    continue
                answered.discard(item)
                try:
                    round_.append((item, [e for part in pickle.loads(message) for e in _events(part)]))
                except Exception as exc:  # a fault of olbridge's: these requests fail, the next ones go on
                    _log.exception("the writer could not read a worker's events")
                    try:
                        item.sendall(_frame(Unavailable(f"the catalog's writer could not read the events: {exc}")))
                    except OSError:
                        drop(item)
    finally:
        for worker in workers:
            worker.close()
        writer.close()


async def _connect(address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, address)
        return await asyncio.open_unix_connection(sock=sock)
    except BaseException:
        sock.close()
        raise


def _events(part: bytes | list[IncomingEvent]) -> list[IncomingEvent]:
    """A request's events from a worker's message (pickled by the request, or as they are)."""
    events: list[IncomingEvent] = pickle.loads(part) if isinstance(part, bytes) else part
    return events


PICKLED_FROM = 8  # events in a request from which the request pickles them itself: a pickle of its
# own costs a few microseconds more (each class named once in it), which a single event would feel


@attrs.frozen
class _Job:
    """A request's events on their way to the writer (pickled when there are many), how many, and
    where their results go."""

    events: bytes | list[IncomingEvent]
    count: int
    done: asyncio.Future[Results]

    def answer(self, results: Results) -> None:
        """The request's results, unless it was answered already (timed out)."""
        if not self.done.done():
            self.done.set_result(results)


def _framed(jobs: list[_Job]) -> tuple[list[_Job], bytes]:
    """The group's message to the writer: each request's events (pickled by the request when
    there are many). A request whose events cannot be pickled (a fault of olbridge's) is answered
    with that failure, alone: the others go on, in a message without it."""
    try:
        return jobs, _frame([job.events for job in jobs])
    except Exception:
        kept = []
        for job in jobs:
            try:
                pickle.dumps(job.events, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                job.answer(failed_group(exc, job.count))
                continue
            kept.append(job)
        try:
            return kept, _frame([job.events for job in kept]) if kept else b""
        except Exception as exc:  # the group's pickle fails where no request's alone does (memory, say)
            for job in kept:
                job.answer(failed_group(exc, job.count))
            return [], b""


SMALL_GROUP = 64  # events: below, a group's fixed cost (its transaction) weighs on each of its events


class RemoteWriter:
    """A worker's way to the writer process, on the worker's event loop: each request hands its
    events over and awaits their results; they go on to the writer in groups, one group in flight
    at a time (:meth:`start` on the loop first, :meth:`close` on it last).

    ``gather``: seconds to wait, once a group of several requests but few events
    (:data:`SMALL_GROUP`) is answered, for as many requests again as were waiting plus those just
    answered (their clients send their next ones at once when they have more) before the next
    group goes, so that the next group holds them too. The idea of PostgreSQL's own commit_delay:
    where a group costs much whatever its size (each of its statements a round trip to a server),
    fewer, larger groups take more events a second (`olbridge serve` waits 2 ms on PostgreSQL,
    docs/benchmarks.md; not on SQLite, where a group costs little and the wait more than it saves)."""

    def __init__(
        self,
        address: str,
        *,
        max_group: int = 2000,
        max_queued: int = 1024,
        timeout: float = 30.0,
        gather: float = 0.0,
        down: Callable[[], str | None] | None = None,
    ) -> None:
        self.address = address
        self.down = down  # why no writer runs now (None: one does), to answer at once rather than wait
        self.max_group = max_group
        self.max_queued = max_queued  # requests waiting; past it a request is answered busy (retry)
        self.timeout = timeout
        self.gather = gather
        self.slice_weight = SLICE_WEIGHT
        self._jobs: collections.deque[_Job] = collections.deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._stopping = False

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and not self._stopping

    def start(self) -> None:
        """Start handing groups on, from a task of the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="olbridge-writer")

    async def submit(self, events: Sequence[IncomingEvent]) -> Results:
        """One result per event once they are committed (or have failed); :class:`Unavailable`
        when the writer cannot take them now. Many events go in slices (:func:`slices`), each
        queued behind the requests that came meanwhile: they wait for a slice, not the whole."""
        results: Results = []
        for piece in slices(events, self.slice_weight):
            try:
                results += await self._submit(piece)
            except Unavailable as exc:  # the slices before are committed; these, and those after, are not
                if not results:
                    raise
                return results + [exc] * (len(events) - len(results))
        return results

    async def _submit(self, events: Sequence[IncomingEvent]) -> Results:
        if not events:
            return []
        if not self.alive:
            raise Unavailable("the receiver is stopping")
        why = self.down() if self.down is not None else None
        if why is not None:
            raise Unavailable(why)
        if len(self._jobs) >= self.max_queued:
            raise Unavailable("the catalog is busy: too many requests waiting to be written")
        part: bytes | list[IncomingEvent] = list(events)
        if len(part) >= PICKLED_FROM:
            try:  # here, in the request's turn, rather than the whole group's when it leaves
                part = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # a fault of olbridge's: this request fails, the next ones go on
                return failed_group(exc, len(events))
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Results] = loop.create_future()

        def too_late() -> None:
            if not done.done():
                done.set_exception(Unavailable(f"the catalog did not commit within {self.timeout:g} s"))

        timer = loop.call_later(self.timeout, too_late)
        self._jobs.append(_Job(part, len(events), done))
        self._wake.set()
        try:
            return await done
        finally:
            timer.cancel()

    async def _run(self) -> None:
        while True:
            if not self._jobs:
                if self._stopping:
                    return
                await self._wake.wait()
                self._wake.clear()
                continue
            jobs = [self._jobs.popleft()]
            count = jobs[0].count
            while self._jobs and count + self._jobs[0].count <= self.max_group:  # and the jobs queued behind it
                jobs.append(self._jobs.popleft())
                count += jobs[-1].count
            jobs, frame = _framed(jobs)
            if not jobs:
                continue
            count = sum(job.count for job in jobs)
            try:
                results = await self._write(frame, count)
            except Exception as exc:  # a fault of the writer's: these requests fail, the next ones go on
                results = failed_group(exc, count)
            for job, share in zip(jobs, shares(results, (job.count for job in jobs)), strict=True):
                job.answer(share)
            if self.gather > 0 and len(jobs) > 1 and count < SMALL_GROUP:
                await self._gather(len(self._jobs) + len(jobs))

    async def _gather(self, requests: int) -> None:
        """Wait until this many requests are waiting, :attr:`gather` seconds at most."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self.gather
        while len(self._jobs) < min(requests, self.max_queued) and not self._stopping:
            left = until - loop.time()
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except TimeoutError:
                return

    async def _write(self, frame: bytes, count: int) -> Results:
        """The results of a group: ``frame``, its requests' events (:func:`_framed`), ``count``
        events in all."""
        if self._stream is not None and (self._stream[0].at_eof() or self._stream[1].is_closing()):
            # a connection kept to a writer that died since (its end closed): a new one, to the
            # writer started again, rather than this group's 503 (one a worker, after a restart)
            self._release()
        try:
            if self._stream is None:
                self._stream = await _connect(self.address)
            reader, writer = self._stream
            writer.write(frame)
            await writer.drain()
            results: Results | Unavailable = await read_frame(reader)
            if isinstance(results, Unavailable):  # the writer could not read the group: none of it written
                return [results] * count
            return results
        except (OSError, EOFError) as exc:  # asyncio.IncompleteReadError is an EOFError
            self._release()
            return [Unavailable(f"the catalog's writer is not reachable: {str(exc) or 'it went away'}")] * count

    def _release(self) -> None:
        if self._stream is not None:
            self._stream[1].close()
            self._stream = None

    async def close(self) -> None:
        """Hand on what is queued (within the timeout: a writer that never answers does not hold
        the worker's shutdown), then stop."""
        if self._stopping:
            return
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, self.timeout)
            except TimeoutError:  # the task is cancelled; what it held was answered retriable already
                _log.warning("the writer did not answer within %g s; stopping without it", self.timeout)
        self._release()
