"""Whether the catalog takes writes, as a process that writes it sees it: one line when it stops
(since when, and why) and one when it is back (after how long), never one a failed write.

``olbridge serve``'s writer and ``olbridge stream``'s worker each keep one; the receiver's
``/readyz`` answers from the writer's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime


class Availability:
    """The catalog's availability to one writer: :meth:`down` after a write (or a probe) the
    catalog could not take, :meth:`up` after one it took. Each change is said once, through
    ``say``; the same state again says nothing."""

    def __init__(
        self,
        say: Callable[[str], object],
        *,
        what: str = "the catalog",
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.say = say
        self.what = what
        self.clock = clock
        self.wall = wall
        self.since: float | None = None  # the clock's time it went down; None while it is up
        self.reason = ""

    @property
    def available(self) -> bool:
        return self.since is None

    def down(self, reason: str) -> None:
        """A write or a probe failed for ``reason`` (a few words, no driver's internals)."""
        self.reason = reason
        if self.since is not None:
            return
        self.since = self.clock()
        at = datetime.fromtimestamp(self.wall(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.say(f"{self.what} is unavailable since {at}: {reason}; waiting for it")

    def up(self) -> None:
        """A write or a probe succeeded."""
        if self.since is None:
            return
        away = self.clock() - self.since
        self.since = None
        self.reason = ""
        self.say(f"{self.what} is back after {away:.1f} s")


__all__ = ["Availability"]
