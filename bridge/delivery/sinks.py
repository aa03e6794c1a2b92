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
import shutil
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
    :meth:`close` finds unfinished (an error, a stop) is never written to it (unless it cannot be
    replaced whole, see :class:`Replacement`: then it is written in place, and ``note`` says so)."""

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
    def to_file(cls, path: Path, note: Callable[[str], object] | None = None) -> NdjsonSink:
        """A sink writing ``path``, which its :meth:`close` closes; an ExportError naming the file
        when it cannot be opened. A regular file (or none yet) is written whole or not at all: the
        lines go to a new file beside it, put in its place by :meth:`finish` (a device, a pipe, a
        name of an open descriptor such as /dev/stdout is written as it is). A file that cannot be
        replaced whole (:class:`Replacement`) is written in place, as a device is, and ``note``
        is told so in a line."""
        say = note or (lambda line: None)
        try:
            try:
                replacing = Replacement.beside(path, say)
                in_place = None
            except NotReplaceable as why:
                replacing, in_place = None, why
            stream = replacing.stream if replacing is not None else path.open("w", encoding="utf-8")
        except OSError as exc:
            raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
        if in_place is not None:
            say(in_place.said(path))
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


class NotReplaceable(Exception):
    """Why a regular file cannot be replaced whole, so is written in place."""

    def said(self, path: Path) -> str:
        return f"{path} is written in place, not replaced whole ({self}): a stop while it is written leaves it partial"


# where a name is that of an open descriptor (/dev/stdout, /dev/fd/1 lead to /proc/self/fd/1): a pipe,
# a terminal or a file another process opened, written through it as it is
_DESCRIPTOR_FOLDERS = ("/proc", "/dev/fd")
_LINKS_FOLLOWED = 40  # as the kernel's limit: past it, a loop of links (its open says so)
# a rename over the file refused, where writing it in place is not: a mount point (a file of its own
# mounted, as ``docker run -v file:file``), another file system, a folder's rule (a sticky folder)
_RENAME_REFUSED = frozenset({errno.EBUSY, errno.EXDEV, errno.EPERM, errno.EACCES})


class Replacement:
    """A new file written beside ``target`` (in its folder, a hidden name of its own), then put in
    its place at once by :meth:`commit` (a rename: a reader sees the old file or the new one,
    whole), or removed by :meth:`discard`. It has the target's permissions, owner and group, or a
    new file's.

    A regular file that cannot be replaced so is written in place, as it was before there was a
    replacement (a stop while it is written leaves a part of it): :meth:`beside` raises
    :class:`NotReplaceable` for a file whose folder takes no new file (not writable, immutable),
    whose owner and group a new file cannot be given (a file of another user's), or that has other
    hard links (which see the file written, not a new one beside it); :meth:`commit` copies the new
    file's lines into the target where the rename is refused (a file mounted on its own)."""

    def __init__(
        self, path: Path, target: Path, temporary: Path, stream: IO[str], note: Callable[[str], object]
    ) -> None:
        self.path = path  # as named
        self.target = target  # the file it names, its links followed
        self.temporary = temporary
        self.stream = stream
        self.note = note  # told, a line, where commit writes the target in place
        self.done = False

    @classmethod
    def beside(cls, path: Path, note: Callable[[str], object] = lambda line: None) -> Replacement | None:
        """The new file for ``path`` (through its links, to the file they lead to); None where
        ``path`` is there and no regular file (a device, a pipe, a folder) or is the name of an open
        descriptor (``/dev/stdout``, a file or not): written as it is. NotReplaceable where it is a
        file that cannot be replaced whole (see the class)."""
        if _through_descriptor(path):
            return None
        target = Path(os.path.realpath(path))
        try:
            found: os.stat_result | None = target.stat()
        except FileNotFoundError:
            found = None
        except OSError:  # its open says what is wrong
            return None
        if found is not None and not stat.S_ISREG(found.st_mode):
            return None
        if found is not None and not os.access(target, os.W_OK):  # a file kept from writes: kept from this one too
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        if found is not None and found.st_nlink > 1:
            raise NotReplaceable(f"it has {found.st_nlink} hard links, which would keep the earlier content")
        for _ in range(100):
            temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # as a new file, by the umask
            except FileExistsError:
                continue
            except OSError as exc:
                raise NotReplaceable(f"no new file can be made in its folder: {exc.strerror or exc}") from None
            try:
                if found is not None:
                    _take_over(fd, found)
                stream = os.fdopen(fd, "w", encoding="utf-8")  # closed by commit or discard
            except BaseException:
                os.close(fd)
                temporary.unlink(missing_ok=True)
                raise
            return cls(path, target, temporary, stream, note)
        raise FileExistsError(f"no free name for a new file beside {target}")

    def commit(self) -> None:
        """The new file on disk, then in the target's place (or, where the rename is refused, its
        lines copied into the target)."""
        self.stream.flush()
        os.fsync(self.stream.fileno())
        self.stream.close()
        try:
            os.replace(self.temporary, self.target)
        except OSError as exc:
            if exc.errno not in _RENAME_REFUSED:
                raise
            self.note(NotReplaceable(f"a rename over it is refused: {exc.strerror or exc}").said(self.path))
            shutil.copyfile(self.temporary, self.target)  # the target truncated and written: its inode, owner, mode
            self.temporary.unlink()
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


def _take_over(fd: int, found: os.stat_result) -> None:
    """The new file (open as ``fd``) given the owner, group and permissions of the file it is to
    replace; NotReplaceable where the owner or group cannot be given (a file of another user's)."""
    made = os.fstat(fd)
    if (made.st_uid, made.st_gid) != (found.st_uid, found.st_gid):
        try:
            os.fchown(fd, found.st_uid, found.st_gid)
        except OSError as exc:
            raise NotReplaceable(f"a new file cannot be given its owner and group: {exc.strerror or exc}") from None
    os.fchmod(fd, stat.S_IMODE(found.st_mode))  # after the owner: a change of owner clears set-user-ID


def _through_descriptor(path: Path) -> bool:
    """Whether ``path``, its links followed one by one as the system follows them, goes through
    /proc or /dev/fd: the name of an open descriptor (``/dev/stdout`` is ``/proc/self/fd/1``),
    whose file is the descriptor's, whatever name the link shows (``pipe:[N]``, a file)."""
    absolute = path if path.is_absolute() else Path(os.getcwd(), path)
    parts = list(absolute.parts[1:])  # ".." kept: it is resolved after the links before it
    at = "/"
    followed = 0
    while parts:
        if _in_descriptor_folder(at):
            return True
        part = parts.pop(0)
        if part == "..":
            at = os.path.dirname(at)
            continue
        candidate = os.path.join(at, part)
        if not os.path.islink(candidate):
            at = candidate
            continue
        followed += 1
        if followed > _LINKS_FOLLOWED:
            return False
        link = os.readlink(candidate)
        if os.path.isabs(link):
            at = "/"
        parts[:0] = [p for p in link.split("/") if p not in ("", ".")]
    return _in_descriptor_folder(at)


def _in_descriptor_folder(at: str) -> bool:
    return any(at == folder or at.startswith(folder + "/") for folder in _DESCRIPTOR_FOLDERS)


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
