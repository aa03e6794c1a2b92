"""The writer process of ``olbridge serve``: the one process that writes the catalog, fed by the
HTTP workers over a Unix socket.

The workers parse, judge and read events; the writer only writes them, in group transactions. It
runs in a process of its own so that its work under SQLite's write lock never waits for the
interpreter lock behind request threads, and so that one group can hold the events of every
worker. Each worker keeps one request in flight to the writer: while a group is being written the
next one gathers, so the groups grow with the load.

A worker whose writer goes away answers 503 (retriable) for the events in flight and connects
again for the next ones; the supervisor starts a new writer on the same socket.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any

from bridge.catalog import IngestResult
from bridge.errors import BridgeError
from bridge.model.received import IncomingEvent
from bridge.receiver.writer import CatalogWriter, QueuedWriter, Results, Unavailable, unavailable


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


def run_writer(listener: socket.socket, writer: CatalogWriter) -> None:
    """Serve the workers until SIGTERM: each round, read one message from every worker that has
    sent one, write them all in one group, answer each."""
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when the writer stops
    workers: list[Connection] = []
    try:
        while True:
            ready: list[Any] = wait([listener, *workers], timeout=0 if stopping.is_set() else 0.5)
            if stopping.is_set() and not ready:
                return
            round_: list[tuple[Connection, Sequence[IncomingEvent]]] = []
            for item in ready:
                if item is listener:
                    with contextlib.suppress(OSError):
                        accepted, _ = listener.accept()
                        workers.append(Connection(accepted.detach()))
                    continue
                try:
                    round_.append((item, item.recv()))
                except (EOFError, OSError):  # the worker is gone
                    workers.remove(item)
                    item.close()
            if not round_:
                continue
            results = [_portable(r) for r in writer.write([e for _, events in round_ for e in events])]
            start = 0
            for worker, events in round_:
                try:
                    worker.send(results[start : start + len(events)])
                except OSError:
                    workers.remove(worker)
                    worker.close()
                start += len(events)
    finally:
        for worker in workers:
            worker.close()
        writer.close()


class RemoteWriter(QueuedWriter):
    """A worker's way to the writer process: the worker's request threads hand their events over,
    and they go on to the writer in groups, one group in flight at a time."""

    def __init__(self, address: str, *, max_group: int = 2000, max_queued: int = 256, timeout: float = 30.0) -> None:
        self.address = address
        self._conn: Connection | None = None
        super().__init__(max_group=max_group, max_queued=max_queued, timeout=timeout)

    def _write(self, events: list[IncomingEvent]) -> Results:
        try:
            if self._conn is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(self.address)
                except OSError:
                    sock.close()
                    raise
                self._conn = Connection(sock.detach())
            self._conn.send(events)
            results: Results = self._conn.recv()
            return results
        except (OSError, EOFError) as exc:
            self._release()
            return [Unavailable(f"the catalog's writer is not reachable: {str(exc) or 'it went away'}")] * len(events)

    def _release(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
