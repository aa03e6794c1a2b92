"""Whether ``olbridge serve`` can take events, as its writer sees it, in shared memory: the writer
process says so after each group it writes and each probe it makes while idle, the supervisor
when the writer exits, and any HTTP worker answers ``/readyz`` from it without a connection of
its own to the catalog (which, with few connections left on the server, would say not ready
while the writer writes, and ready while the writer cannot)."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

SIZE = 1024  # bytes of the reason kept (longer ones are cut)
# seconds a write or probe of the writer may take before the receiver says it is not ready: the
# catalog answers nothing (a server hung, its connection up), while requests wait for their 30 s
STUCK_AFTER = 10.0


class Readiness:
    """Ready, or why not (create before forking the processes that share it)."""

    def __init__(self, why: str | None = "the writer is starting") -> None:
        self._text: Any = multiprocessing.get_context("fork").Array("c", SIZE)
        self._down: Any = multiprocessing.get_context("fork").RawValue("b", 0)
        # when the writer's write or probe in hand began (time.monotonic(), one clock for every
        # process of the machine); 0: none in hand
        self._busy: Any = multiprocessing.get_context("fork").RawValue("d", 0.0)
        self.stuck_after = STUCK_AFTER
        self.set(why, writer_down=True)

    def busy(self, since: float | None) -> None:
        """The writer began a write or probe at ``since`` (``time.monotonic()``), or (None) has
        none in hand."""
        self._busy.value = since or 0.0

    def set(self, why: str | None, *, writer_down: bool = False) -> None:
        """Ready (None), or not ready and why; ``writer_down``: no writer runs to take events (a
        request is answered 503 at once rather than wait for one)."""
        data = (why or "").encode("utf-8", "replace")[: SIZE - 1]
        with self._text.get_lock():
            self._text.value = data
            self._down.value = int(writer_down)

    def writer_down(self) -> str | None:
        """Why no writer runs to take events; None while one does."""
        with self._text.get_lock():
            if not self._down.value:
                return None
        return self.why()

    def why(self) -> str | None:
        """None when ready, else why not: what the writer last said, or that its write or probe
        in hand has waited on the catalog for more than :attr:`stuck_after` seconds."""
        with self._text.get_lock():
            data = bytes(self._text.value)
        said = data.decode("utf-8", "replace") or None
        since = self._busy.value
        if said is None and since and time.monotonic() - since > self.stuck_after:
            return f"the catalog has not answered the writer for {time.monotonic() - since:.0f} s"
        return said


__all__ = ["Readiness"]
