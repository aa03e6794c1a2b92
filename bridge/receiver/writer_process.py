"""The writer process of ``olbridge serve``: the one process that writes the catalog, fed by the
HTTP workers over a Unix socket.

The workers parse, judge and read events; the writer only writes them, in group transactions. It
runs in a process of its own so that its work never waits for a worker's requests, and so that
one group can hold the events of every worker. The writer asks the workers for their events when
it is free to write them: while a group is being written the next one gathers in the workers, so
the groups grow with the load.

A message is a frame: its length (8 bytes, big-endian), then a pickle: None (the writer asks for
events), a list of events (a worker's answer), a list of one result an event (the writer's). A
worker whose writer goes away answers 503 (retriable) for the events in flight; the next ones
wait for the writer the supervisor starts on the same socket, within their time.
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
from collections.abc import Sequence
from multiprocessing.connection import wait
from types import FrameType
from typing import Any

from bridge.catalog import IngestResult
from bridge.errors import BridgeError
from bridge.model.received import IncomingEvent
from bridge.receiver.writer import CatalogWriter, Results, Unavailable, unavailable

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


def receive_frame(sock: socket.socket) -> Any:
    """The next message on a blocking socket (EOFError when the other end has gone)."""
    (size,) = _LENGTH.unpack(_receive_exactly(sock, _LENGTH.size))
    return pickle.loads(_receive_exactly(sock, size))


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


GATHER = 0.0005  # s the writer waits, after a round's first message, for the other workers it asked


def run_writer(listener: socket.socket, writer: CatalogWriter) -> None:
    """Serve the workers until SIGTERM, in rounds: ask every worker for its events (a worker
    answers at once when it holds some, else as soon as it gets one), take what the asked workers
    send (waiting :data:`GATHER` after the first for the others), write it all in one group,
    answer each worker, and ask them again.

    The writer asks rather than the workers pushing: a worker's events wait in the worker until
    the writer is free, so that one group takes the events of every worker. (Pushed as soon as a
    worker's last group came back, they waited at the writer behind the other workers' groups,
    and two workers made groups half the size of one's.)"""
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when the writer stops
    workers: list[socket.socket] = []
    asked: set[socket.socket] = set()  # asked, and not yet sent its events

    def drop(worker: socket.socket) -> None:
        workers.remove(worker)
        asked.discard(worker)
        worker.close()

    def ask(worker: socket.socket) -> None:
        try:
            worker.sendall(_frame(None))
            asked.add(worker)
        except OSError:
            drop(worker)

    def gather() -> list[tuple[socket.socket, Sequence[IncomingEvent]]] | None:
        """The next round's messages, or None once stopping and nothing more comes."""
        round_: list[tuple[socket.socket, Sequence[IncomingEvent]]] = []
        until = 0.0
        while True:
            if round_:
                if not asked:
                    return round_
                timeout = until - time.monotonic()
                if timeout <= 0:
                    return round_
            else:
                timeout = 0 if stopping.is_set() else 0.5
            ready: list[Any] = wait([listener, *workers], timeout=timeout)
            if not ready:
                if round_:
                    return round_
                if stopping.is_set():
                    return None
                continue
            for item in ready:
                if item is listener:
                    with contextlib.suppress(OSError):
                        accepted, _ = listener.accept()
                        accepted.setblocking(True)
                        workers.append(accepted)
                        ask(accepted)
                    continue
                try:
                    events = receive_frame(item)
                except (EOFError, OSError):  # the worker is gone
                    drop(item)
                    continue
                asked.discard(item)
                if not round_:
                    until = time.monotonic() + GATHER
                round_.append((item, events))

    try:
        while (round_ := gather()) is not None:
            results = [_portable(r) for r in writer.write([e for _, events in round_ for e in events])]
            start = 0
            for worker, events in round_:
                try:
                    worker.sendall(_frame(results[start : start + len(events)]))
                except OSError:
                    drop(worker)
                start += len(events)
            for worker, _ in round_:
                if worker in workers:
                    ask(worker)
    finally:
        for worker in workers:
            worker.close()
        writer.close()


Job = tuple[Sequence[IncomingEvent], "asyncio.Future[Results]"]


class RemoteWriter:
    """A worker's way to the writer process, on the worker's event loop: each request hands its
    events over and awaits their results. They wait here until the writer asks for them, then go
    as one message with every other request's; one message is in flight at a time (:meth:`start`
    on the loop first, :meth:`close` on it last)."""

    def __init__(self, address: str, *, max_group: int = 2000, max_queued: int = 1024, timeout: float = 30.0) -> None:
        self.address = address
        self.max_group = max_group
        self.max_queued = max_queued  # requests waiting; past it a request is answered busy (retry)
        self.timeout = timeout
        self._jobs: collections.deque[Job] = collections.deque()
        self._in_flight: list[Job] = []
        self._asked = False
        self._send_due = False
        self._stream: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._started = False
        self._stopping = False
        self._drained: asyncio.Event | None = None

    @property
    def alive(self) -> bool:
        return self._started and not self._stopping

    def start(self) -> None:
        """Connect to the writer (from a task of the running loop), which then asks for events."""
        self._started = True
        self._drained = asyncio.Event()
        self._drained.set()  # nothing waits yet
        self._connect()

    def _connect(self) -> None:
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.get_running_loop().create_task(self._open(), name="olbridge-writer-link")

    async def _open(self) -> None:
        try:
            reader, stream = await asyncio.open_unix_connection(self.address)
        except OSError as exc:
            self._fail_all(f"the catalog's writer is not reachable: {exc}")
            return
        self._stream = stream
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read(reader, stream), name="olbridge-writer-answers")

    async def _read(self, reader: asyncio.StreamReader, stream: asyncio.StreamWriter) -> None:
        why = "it went away"
        try:
            while True:
                frame = await read_frame(reader)
                if frame is None:  # the writer asks for events
                    self._asked = True
                    self._send()
                    continue
                jobs, self._in_flight = self._in_flight, []
                start = 0
                for events, done in jobs:  # each its share, in order
                    if not done.done():  # not timed out
                        done.set_result(frame[start : start + len(events)])
                    start += len(events)
                self._settled()
        except (OSError, EOFError) as exc:  # asyncio.IncompleteReadError is an EOFError
            why = str(exc) or why
        finally:
            stream.close()
            if self._stream is stream:
                self._stream = None
                self._asked = False
                jobs, self._in_flight = self._in_flight, []
                self._fail(jobs, f"the catalog's writer is not reachable: {why}")
                if self._jobs:
                    if self._stopping:
                        self._fail_all(f"the catalog's writer is not reachable: {why}")
                    else:
                        self._connect()  # the next writer (the supervisor starts one)

    def _send(self) -> None:
        """Send what waits, if the writer asked and nothing is in flight."""
        self._send_due = False
        if not (self._asked and self._jobs and not self._in_flight and self._stream is not None):
            return
        jobs = [self._jobs.popleft()]
        count = len(jobs[0][0])
        while self._jobs and count + len(self._jobs[0][0]) <= self.max_group:  # and the jobs queued behind it
            jobs.append(self._jobs.popleft())
            count += len(jobs[-1][0])
        try:
            frame = _frame([e for events, _ in jobs for e in events])
        except Exception as exc:  # an event that cannot go (a fault of olbridge's): these fail, the next go on
            _log.exception("the writer could not hand a group on")
            self._fail(jobs, f"the catalog's writer failed: {exc}")
            self._send()
            return
        self._asked = False
        self._in_flight = jobs
        self._stream.write(frame)

    def _fail(self, jobs: list[Job], message: str) -> None:
        for _, done in jobs:
            if not done.done():
                done.set_exception(Unavailable(message))
        self._settled()

    def _fail_all(self, message: str) -> None:
        jobs = list(self._jobs)
        self._jobs.clear()
        self._fail(jobs, message)

    def _settled(self) -> None:
        if self._drained is not None and not self._jobs and not self._in_flight:
            self._drained.set()

    async def submit(self, events: Sequence[IncomingEvent]) -> Results:
        """One result per event once they are committed (or have failed); :class:`Unavailable`
        when the writer cannot take them now."""
        if not events:
            return []
        if not self.alive:
            raise Unavailable("the receiver is stopping")
        if len(self._jobs) >= self.max_queued:
            raise Unavailable("the catalog is busy: too many requests waiting to be written")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Results] = loop.create_future()

        def too_late() -> None:
            if not done.done():
                done.set_exception(Unavailable(f"the catalog did not commit within {self.timeout:g} s"))

        timer = loop.call_later(self.timeout, too_late)
        self._jobs.append((events, done))
        assert self._drained is not None
        self._drained.clear()
        if self._stream is None:
            self._connect()
        elif not self._send_due:  # after the loop's other ready work, which may add to the message
            self._send_due = True
            loop.call_soon(self._send)
        try:
            return await done
        finally:
            timer.cancel()

    async def close(self) -> None:
        """Hand on what waits (within the timeout), then let go of the writer."""
        if self._stopping:
            return
        self._stopping = True
        if self._drained is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), self.timeout)
        for task in (self._connecting, self._reader):
            if task is not None and not task.done():
                task.cancel()
        if self._stream is not None:
            self._stream.close()
            self._stream = None
