"""Helper processes a command runs beside its own work (``serve``'s health watch and retention
schedule): spawned, told to stop through a pipe, started again should one die.

A helper is told to stop by a byte on a pipe it holds the reading end of (:class:`StopLine`), or
by that pipe's end when every writer of it is gone (its parent too). A ``multiprocessing.Event``
did this before: setting it waits for every process waiting on it to wake, and a helper killed
while it waited (SIGKILL, the out-of-memory killer) left its parent waiting for it for ever, so
that ``serve`` never stopped. A pipe's write waits for no reader.

Whoever waits for the parent's children (``serve``'s supervisor reaps every child it has) tells
:class:`Helper` of a helper's exit (:meth:`Helper.exited`); it starts another, said on stderr,
unless the helper keeps dying as soon as it starts.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from typing import Any

# a helper that exits within so many seconds of its start, so many times in a row, is not started again
SOON = 10.0
TIMES = 5
JOIN = 10.0  # seconds a helper told to stop is given before it is killed


class StopLine:
    """A helper's side of its stop pipe: set once a byte came, or the pipe's every writer is gone."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._set = False

    def is_set(self) -> bool:
        return self.wait(0)

    def wait(self, timeout: float) -> bool:
        """Whether told to stop, waiting up to ``timeout`` seconds for it."""
        if not self._set:
            try:
                self._set = bool(self._reader.poll(timeout))
            except (OSError, EOFError):
                self._set = True
        return self._set


class Helper:
    """One helper process, started (and started again) by ``target(*args, StopLine's pipe end,
    parent pid)`` in a spawned process named ``name``."""

    def __init__(
        self, name: str, target: Callable[..., None], args: tuple[Any, ...], say: Callable[[str], None]
    ) -> None:
        self.name, self.target, self.args, self.say = name, target, args, say
        self.quick_exits = 0
        self._start()

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        reader, self.writer = context.Pipe(duplex=False)
        self.process = context.Process(
            target=self.target, args=(*self.args, reader, os.getpid()), name=f"olbridge-{self.name}", daemon=True
        )
        self.process.start()
        reader.close()  # the helper's now: its end stays open in it alone
        self.began = time.monotonic()
        self.reaped = False

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def exited(self, code: int, *, again: bool = True) -> None:
        """The helper exited with ``code`` (reaped by the caller): with ``again``, another is
        started, and said, unless it died within :data:`SOON` seconds of its start :data:`TIMES`
        times in a row."""
        self.reaped = True
        # multiprocessing asks the system for the exit of its children, which the caller reaped:
        # told here, it no longer counts the process among its children (whose pid, reused by
        # another process by then, it would send SIGTERM as this one exits)
        popen = getattr(self.process, "_popen", None)
        if popen is not None:
            popen.returncode = code
        self._tell()
        if not again:
            return
        self.quick_exits = self.quick_exits + 1 if time.monotonic() - self.began < SOON else 0
        if self.quick_exits >= TIMES:
            self.say(
                f"Warning: the {self.name} exited ({code}) {TIMES} times in a row as it started; "
                "not started again (restart this command to start it)"
            )
            return
        self.say(f"Warning: the {self.name} exited ({code}); starting another")
        self._start()

    def check(self, *, again: bool = True) -> None:
        """:meth:`exited` where the helper is gone though the caller reaped nothing of it:
        multiprocessing reaps its dead children as it starts another (another helper started
        again), so that the caller's wait never sees this one's exit."""
        if not self.reaped and self.process.exitcode is not None:
            self.exited(self.process.exitcode, again=again)

    def stop(self) -> None:
        """Tell it to stop and wait for it, :data:`JOIN` seconds at most, then kill it."""
        self._tell()
        if self.reaped:
            return
        self.process.join(timeout=JOIN)
        if self.process.is_alive():  # it takes no SIGTERM: killed, and given a moment to go
            self.process.kill()
            self.process.join(timeout=JOIN)

    def _tell(self) -> None:
        try:
            self.writer.send_bytes(b"stop")
        except OSError:  # the helper gone already
            pass
        self.writer.close()


__all__ = ["Helper", "StopLine"]
