"""uvicorn's HTTP protocol (httptools) with deadlines for what uvicorn waits for without one.

uvicorn closes a connection left idle after a response (its keep-alive timeout), but waits without
end for a new connection's first request and for a request's head once its first bytes came: a
client that opens connections and sends nothing, or a few bytes of headers now and then, holds a
connection and its memory for as long as it likes, and enough of them hold every file descriptor
the worker has. Here a connection that sends nothing is closed after the keep-alive timeout, and so
is one that, after a response, sends nothing that begins a request (uvicorn's own timer stops at
the first byte that comes); a request's head must be complete within ``head_timeout`` seconds of
its first byte, else the connection is closed. (The body's deadline is the
application's: :class:`bridge.receiver.asgi.AsgiReceiver` answers 408.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class GuardedProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with a deadline for a new connection's first byte and for a
    request's head (:func:`guarded` makes one with its deadline)."""

    head_timeout: float = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.timeout_keep_alive)  # idle until the first request, as after a response

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(self.head_timeout)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        waiting = bool(self.pipeline)  # a pipelined request, which uvicorn starts now: not idle
        super().on_response_complete()
        if not waiting and not self.transport.is_closing():
            # uvicorn's keep-alive timer goes at the first byte that comes after a response, and
            # comes back only with the next response: bytes that begin no request (the rest of a
            # body answered before it was read, blank lines) would hold the connection for good
            self._arm(self.timeout_keep_alive)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def guarded(head_timeout: float) -> type[GuardedProtocol]:
    """The protocol class for uvicorn's ``http`` setting, with ``head_timeout`` seconds for a
    request's head."""
    return type("GuardedProtocol", (GuardedProtocol,), {"head_timeout": head_timeout})
