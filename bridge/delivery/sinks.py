"""Where ``olbridge export`` puts the history's events: an NDJSON file or stream
(:class:`NdjsonSink`), or an OpenLineage backend (:class:`BackendSink`), through the
:class:`~bridge.delivery.dispatch.Dispatcher` and the sender that ``stream`` and ``backfill``
use, with their batching and retries.

The backend sink sends the events in rounds, at most one event of a run (or of a dataset, or a
job) a round, so a run's end never goes before its START; within that, in the history's order.
Each round is sent again by the retry policy until every event of it is settled. An event the
backend refuses for good, or one whose attempts run out, stops the export after its round with
an :class:`~bridge.errors.ExportError` that says which event, what the backend answered, and
how many events were delivered.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, Protocol

from bridge.delivery.dispatch import Dispatcher, Pass, deliver
from bridge.delivery.report import FailureReport, describe, describe_event, retry_note
from bridge.delivery.retry import RetryPolicy
from bridge.errors import ExportError


class Sink(Protocol):
    count: int  # events written or delivered

    def emit(self, line: str) -> None:
        """Take one serialized event (a JSON text without newline)."""

    def finish(self) -> None:
        """Write or deliver the events still held; an ExportError when they cannot be."""

    def close(self) -> None:
        """Let go of the file or the connections (after :meth:`finish`, or on an error)."""


class NdjsonSink:
    """One event per line, UTF-8. A sink with a ``name`` (:meth:`to_file`, or the caller's
    stdout named so) turns an OSError of a write, flush or close into an ExportError naming it;
    a closed pipe on a stream it does not own (``olbridge export | head``) goes through as it is,
    for the caller to end quietly. A file of :meth:`to_file` is whole or left as it was: what
    :meth:`close` finds unfinished (an error, a stop) is never written to it."""

    CHUNK = 64 * 1024  # characters of lines held, then written at once (a write a line: a tenth of an export)

    def __init__(
        self,
        stream: IO[str],
        *,
        name: str | None = None,
        owned: bool = False,
        replacing: Replacement | None = None,
    ) -> None:
        self.stream = stream
        self.name = name
        self.owned = owned  # closed by close()
        self.replacing = replacing  # the new file that finish() puts in the place of the named one
        self.count = 0
        self._held: list[str] = []
        self._held_size = 0
        self._failed = False

    @classmethod
    def to_file(cls, path: Path) -> NdjsonSink:
        """A sink writing ``path``, which its :meth:`close` closes; an ExportError naming the file
        when it cannot be opened. A regular file (or none yet) is written whole or not at all: the
        lines go to a new file beside it, put in its place by :meth:`finish` (a device, a pipe is
        written as it is)."""
        try:
            replacing = Replacement.beside(path)
            stream = replacing.stream if replacing is not None else path.open("w", encoding="utf-8")
        except OSError as exc:
            raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
        return cls(stream, name=str(path), owned=True, replacing=replacing)

    def emit(self, line: str) -> None:
        self._held.append(line)
        self._held_size += len(line)
        self.count += 1
        if self._held_size >= self.CHUNK:
            self._write_held()

    def finish(self) -> None:
        self._write_held()
        with self._writing():
            if self.replacing is not None:
                self.replacing.commit()
            else:
                self.stream.flush()

    def _write_held(self) -> None:
        held, self._held, self._held_size = self._held, [], 0
        if held:
            with self._writing():
                self.stream.write("\n".join(held) + "\n")

    def close(self) -> None:
        """Flush (and close an owned file); after a failed write the file is closed without a
        second error about the same lost lines. A file put in place by :meth:`finish` only: one
        not finished is left as it was (the new one beside it removed)."""
        if self.replacing is not None:
            self.replacing.discard()
            return
        failed = self._failed
        try:
            try:
                if not failed:
                    self._write_held()
            finally:
                with self._writing():
                    if self.owned:
                        self.stream.close()
                    else:
                        self.stream.flush()
        except ExportError:
            if not failed:
                raise

    @contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            if self.name is None or (isinstance(exc, BrokenPipeError) and not self.owned):
                raise
            self._failed = True
            raise ExportError(f"cannot write {self.name}: {exc.strerror or exc}") from None


class Replacement:
    """A new file written beside ``target`` (in its folder, a hidden name of its own), then put in
    its place at once by :meth:`commit` (a rename: a reader sees the old file or the new one,
    whole), or removed by :meth:`discard`. It has the target's permissions, or a new file's."""

    def __init__(self, target: Path, temporary: Path, stream: IO[str]) -> None:
        self.target = target
        self.temporary = temporary
        self.stream = stream
        self.done = False

    @classmethod
    def beside(cls, path: Path) -> Replacement | None:
        """The new file for ``path`` (through its links, to the file they lead to); None where
        ``path`` is there and no regular file (a device, a pipe, a folder: written as it is)."""
        target = Path(os.path.realpath(path))
        try:
            mode: int | None = stat.S_IMODE(target.stat().st_mode) if target.is_file() else None
        except OSError:
            mode = None
        if target.exists() and mode is None:
            return None
        if mode is not None and not os.access(target, os.W_OK):  # a file kept from writes: kept from this one too
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        for _ in range(100):
            temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # as a new file, by the umask
            except FileExistsError:
                continue
            try:
                if mode is not None:
                    os.fchmod(fd, mode)
                stream = os.fdopen(fd, "w", encoding="utf-8")  # closed by commit or discard
            except BaseException:
                os.close(fd)
                temporary.unlink(missing_ok=True)
                raise
            return cls(target, temporary, stream)
        raise FileExistsError(f"no free name for a new file beside {target}")

    def commit(self) -> None:
        """The new file on disk, then in the target's place."""
        self.stream.flush()
        os.fsync(self.stream.fileno())
        self.stream.close()
        os.replace(self.temporary, self.target)
        self.done = True

    def discard(self) -> None:
        """The new file closed and removed, unless :meth:`commit` put it in place (never raises:
        what it held is given up)."""
        if self.done:
            return
        self.done = True
        with suppress(OSError):
            self.stream.close()
        with suppress(OSError):
            self.temporary.unlink()


class BackendSink:
    """Delivers events to an OpenLineage backend (see the module docstring). ``window`` events
    are held at most; a round sends the first held event of each run among them."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        policy: RetryPolicy = RetryPolicy(),
        report: FailureReport | None = None,
        window: int | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], object] = time.sleep,
        stop: threading.Event | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.stop = stop  # set: the retries of a round end (its events are not delivered)
        self.policy = policy
        self.report = report
        self.window = window or dispatcher.concurrency * dispatcher.batch_size
        self.clock = clock
        self.sleep = sleep
        self.count = 0
        self.rounds = 0
        self.retries = 0
        self._held: list[tuple[tuple[str, ...], str]] = []
        self._cut = 0  # events of rounds the stop cut short

    @property
    def target(self) -> str:
        return self.dispatcher.sender.target

    def emit(self, line: str) -> None:
        self._held.append((_subject(json.loads(line)), line))
        if len(self._held) >= self.window:
            self._round()

    @property
    def left(self) -> int:
        """The events taken and not settled: held, or of a round the stop cut short."""
        return len(self._held) + self._cut

    def finish(self) -> None:
        while self._held and not (self.stop is not None and self.stop.is_set()):
            self._round()

    def close(self) -> None:
        """Wait for the requests in flight, then say the failures no line has shown yet."""
        try:
            self.dispatcher.close()
        finally:
            if self.report is not None:
                self.report.flush()

    def _round(self) -> None:
        """Send the first held event of each subject, until each is settled."""
        chosen: list[str] = []
        kept: list[tuple[tuple[str, ...], str]] = []
        seen: set[tuple[str, ...]] = set()
        for subject, line in self._held:
            if subject in seen:
                kept.append((subject, line))
            else:
                seen.add(subject)
                chosen.append(line)
        self._held = kept
        self.rounds += 1
        final = deliver(
            self.dispatcher, chosen, self.policy, clock=self.clock, sleep=self.sleep, stop=self.stop, observe=self._pass
        )
        self.count += sum(1 for o in final if o is not None and o.ok)
        self._cut += sum(1 for o in final if o is None)
        failed = [(line, o) for line, o in zip(chosen, final, strict=True) if o is not None and not o.ok]
        if not failed:
            return
        refused = [(line, o) for line, o in failed if o.refused]
        stopped = (
            f"the export stopped there, {self.count} event(s) delivered; an export sends every event again, "
            "olbridge backfill resumes where it stopped"
        )
        if refused:
            line, outcome = refused[0]
            others = f" (and {len(failed) - 1} other event(s) of its round)" if len(failed) > 1 else ""
            raise ExportError(f"{self.target} refused {describe_event(line)}{others}: {describe(outcome)}; {stopped}")
        line, outcome = failed[0]
        raise ExportError(
            f"{len(failed)} event(s) could not be delivered to {self.target} after {self.policy.max_attempts} "
            f"attempt(s) each (first: {describe_event(line)}; last answer: {describe(outcome)}); {stopped}"
        )

    def _pass(self, done: Pass) -> None:
        self.retries += sum(done.again)
        if self.report is not None:
            self.report.failed(done.retried, retry_note(done.at + done.wait, done.at))
            self.report.failed(done.out_of_attempts, "out of attempts: the export stops after this round")
            self.report.failed(done.refused, "refused for good: the export stops after this round")


def _subject(event: dict[str, Any]) -> tuple[str, ...]:
    """What an event is about: its run, else its dataset, else its job. A round sends one event
    of each, so a subject's events arrive in their order."""
    run = event.get("run")
    if isinstance(run, dict):
        return ("run", str(run.get("runId")))
    dataset = event.get("dataset")
    if isinstance(dataset, dict):
        return ("dataset", str(dataset.get("namespace")), str(dataset.get("name")))
    job = event.get("job") or {}
    return ("job", str(job.get("namespace")), str(job.get("name")))
