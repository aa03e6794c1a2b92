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
        self.set(why)

    def set(self, why: str | None) -> None:
        """Ready (None), or not ready and why."""
        data = (why or "").encode("utf-8", "replace")[: SIZE - 1]
        with self._text.get_lock():
            self._text.value = data

    def why(self) -> str | None:
        """None when ready, else why not."""
        with self._text.get_lock():
            data = bytes(self._text.value)
        return data.decode("utf-8", "replace") or None


__all__ = ["Readiness"]
