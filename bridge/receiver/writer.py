"""Group commit: one thread owns the catalog's write connection and commits the events of many
requests in one transaction, so a commit's sync is paid once per group, not once per event.

A request thread hands its events over and waits; it learns the outcome of each only after the
transaction that holds them has committed (or failed). Events keep their own savepoints, so one
bad event never takes its group down with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from bridge.catalog import Catalog, IngestResult
from bridge.errors import BridgeError
from bridge.mapping.resolver import Resolver
from bridge.receiver.events import IncomingEvent


class Unavailable(BridgeError):
    """The catalog cannot take events right now (busy, locked, stopping, disk trouble): retry."""


@attrs.define
class _Job:
    events: Sequence[IncomingEvent]
    done: threading.Event = attrs.field(factory=threading.Event)
    results: list[IngestResult | Exception] = attrs.field(factory=list)


class GroupWriter:
    """Takes event lists from any thread and writes them in group transactions."""

    def __init__(
        self,
        catalog_path: str | Path,
        resolver: Resolver,
        *,
        durability: str = "full",
        max_group: int = 2000,
        max_queued: int = 256,
        timeout: float = 30.0,
        on_commit: Callable[[], None] = lambda: None,
        lock_file: Path | None = None,
    ) -> None:
        if durability not in ("full", "normal"):
            raise ValueError(f"durability is 'full' or 'normal', not {durability!r}")
        self.catalog = Catalog(catalog_path)
        self.catalog.pragma(f"synchronous = {durability.upper()}")
        # checkpoints (WAL pages copied into the database) run beside the commits, on a connection
        # of their own, rather than inside whichever commit crosses the WAL's size
        self.catalog.pragma("wal_autocheckpoint = 0")
        self._checkpoints = threading.Event()
        self.resolver = resolver
        self.max_group = max_group
        self.timeout = timeout
        self.on_commit = on_commit
        # workers of one server take turns at the catalog through this lock: a waiting worker
        # wakes as soon as the other commits, instead of polling SQLite's busy handler
        self._lock_file = open(lock_file, "a+b") if lock_file is not None else None  # noqa: SIM115
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=max_queued)
        self._thread = threading.Thread(target=self._run, name="olbridge-writer", daemon=True)
        self._stopping = False
        self._thread.start()
        self._checkpointer = threading.Thread(
            target=self._checkpoint, args=(str(catalog_path),), name="olbridge-checkpoint", daemon=True
        )
        self._checkpointer.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stopping

    def submit(self, events: Sequence[IncomingEvent]) -> list[IngestResult | Exception]:
        """Write events; returns one result per event once they are committed (or have failed)."""
        if not events:
            return []
        if not self.alive:
            raise Unavailable("the receiver is stopping")
        job = _Job(events)
        try:
            self._queue.put(job, timeout=self.timeout)
        except queue.Full:
            raise Unavailable("the catalog is busy: too many requests waiting to be written") from None
        if not job.done.wait(self.timeout):
            raise Unavailable(f"the catalog did not commit within {self.timeout:g} s")
        return job.results

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            jobs, count = [job], len(job.events)
            while count < self.max_group:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put_nowait(None)  # stop after this group
                    break
                jobs.append(more)
                count += len(more.events)
            self._write(jobs)

    def _write(self, jobs: list[_Job]) -> None:
        events = [e for job in jobs for e in job.events]
        try:
            if self._lock_file is not None:
                fcntl.flock(self._lock_file, fcntl.LOCK_EX)
            try:
                results = self.catalog.ingest(events, self.resolver)
            finally:
                if self._lock_file is not None:
                    fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self.on_commit()
        except Exception as exc:  # the commit itself failed: nothing of the group landed
            failure = Unavailable(f"the catalog could not commit: {exc}")
            results = [failure] * len(events)
        start = 0
        for job in jobs:
            job.results = results[start : start + len(job.events)]
            start += len(job.events)
            job.done.set()

    def _checkpoint(self, path: str, every: float = 1.0) -> None:
        with contextlib.closing(sqlite3.connect(path, timeout=1, isolation_level=None)) as conn:
            while not self._checkpoints.wait(every):
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        """Write what is queued, then stop the thread and close the catalog."""
        if self._stopping:
            return
        self._stopping = True
        self._queue.put(None)
        self._thread.join()
        self._checkpoints.set()
        self._checkpointer.join()
        self.catalog.close()
        if self._lock_file is not None:
            self._lock_file.close()
