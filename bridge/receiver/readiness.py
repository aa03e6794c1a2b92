"""Whether ``olbridge serve`` can take events, as its writer sees it, in shared memory: the writer
process says so after each group it writes and each probe it makes while idle, the supervisor
when the writer exits, and any HTTP worker answers ``/readyz`` from it without a connection of
its own to the catalog (which, with few connections left on the server, would say not ready
while the writer writes, and ready while the writer cannot)."""

from __future__ import annotations

import multiprocessing
from typing import Any

SIZE = 1024  # bytes of the reason kept (longer ones are cut)


class Readiness:
    """Ready, or why not (create before forking the processes that share it)."""

    def __init__(self, why: str | None = "the writer is starting") -> None:
        self._text: Any = multiprocessing.get_context("fork").Array("c", SIZE)
        self._down: Any = multiprocessing.get_context("fork").RawValue("b", 0)
        self.set(why, writer_down=True)

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
        """None when ready, else why not."""
        with self._text.get_lock():
            data = bytes(self._text.value)
        return data.decode("utf-8", "replace") or None


__all__ = ["Readiness"]
