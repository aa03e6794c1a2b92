"""The receiver as an ASGI application, for the HTTP workers of ``olbridge serve`` (uvicorn on
an event loop): the same answers as the WSGI form (:class:`~bridge.receiver.app.ReceiverApp`
drives both), with the body read and the events' write awaited rather than waited for on a
thread, so that a worker's one thread serves all its connections. A body that has not come in
full within ``body_timeout`` seconds of the request's head is answered 408 (and its connection
closed): a stalled or trickling client holds a connection no longer than that. A body whose
client went away before its end is no request: nothing of it is kept (499, in the counts and the
log); nor is one the HTTP protocol refused as it read it (framed otherwise than HTTP/1.1 frames a
body: 400, which the protocol answers at once)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from bridge.receiver.app import ReceiverApp, Request
from bridge.receiver.intake import BODY_REFUSED, BodyCut, BodyRefused, BodyTimedOut, run_steps_async
from bridge.receiver.writer_process import RemoteWriter

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_HEADERS = {
    b"content-type": "content_type",
    b"content-length": "content_length",
    b"content-encoding": "content_encoding",
    b"authorization": "authorization",
}


class AsgiReceiver:
    """``AsgiReceiver(app, writer)``: an ASGI callable that answers with ``app`` and writes through
    ``writer``, which it starts and closes with the server (the lifespan protocol); a request's
    body must come within ``body_timeout`` seconds."""

    def __init__(self, app: ReceiverApp, writer: RemoteWriter, *, body_timeout: float = 60.0) -> None:
        self.app = app
        self.writer = writer
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        fields: dict[str, str] = {}
        repeated = ""  # the first header the receiver reads that came twice: which of them is meant?
        for name, value in scope["headers"]:
            field = _HEADERS.get(name)
            if field is None:
                continue
            if field in fields:
                repeated = repeated or "-".join(word.capitalize() for word in name.decode("latin-1").split("-"))
                continue
            fields[field] = value.decode("latin-1")
        # routed by the path as sent: decoded, /api/v1/lineage%2Fbatch would be the batch endpoint's
        raw = scope.get("raw_path")
        path = raw.decode("latin-1") if raw else scope["path"]
        request = Request(method=scope["method"], path=path or "/", repeated=repeated, **fields)

        deadline = asyncio.get_running_loop().time() + self.body_timeout  # the whole body's, from its head
        came = 0
        ended = False

        async def read(limit: int) -> bytes:
            """The body's next piece, as uvicorn gives it (it holds at most about 64 KiB unread,
            the socket's reading paused past that); b"" once it has all come; :class:`BodyCut`
            when the client went away before."""
            nonlocal came, ended
            try:
                async with asyncio.timeout_at(deadline):
                    while not ended:
                        message = await receive()
                        if message["type"] != "http.request":  # the body is not whole
                            refused = scope.get(BODY_REFUSED)
                            if refused is not None:  # the server refused its framing (and answered so)
                                raise BodyRefused(refused)
                            raise BodyCut(f"the client went away after {came} bytes of the body")
                        ended = not message.get("more_body", False)
                        piece: bytes = message.get("body", b"")
                        if piece:
                            came += len(piece)
                            return piece
            except TimeoutError:
                raise BodyTimedOut(
                    f"the body did not come within {self.body_timeout:g} s ({came} bytes came)"
                ) from None
            return b""

        try:
            reply = await run_steps_async(self.app.exchange(request), write=self.writer.submit, read=read)
        except Exception:  # a fault outside the answer's steps (the exchange answers its own): the same 500
            reply = self.app.internal_error()
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in reply.headers]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.writer.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.writer.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
