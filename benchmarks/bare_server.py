"""The baseline for benchmarks/ingest.py: the same server stack (uvicorn with httptools and
uvloop, one process) with an app that only parses the JSON body (as olbridge's workers do, with
orjson) and answers 201 (or 200 for a batch). Run by the benchmark."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
import uvicorn

from bridge.jsontext import parse_json

TAKEN = [0]  # events parsed

Message = MutableMapping[str, Any]


async def app(
    scope: MutableMapping[str, Any],
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":  # the count, as olbridge's metrics give it
        await answer(send, 200, f'olbridge_receiver_events_total{{result="accepted"}} {TAKEN[0]}\n'.encode())
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = parse_json(b"".join(chunks))
    TAKEN[0] += len(body) if isinstance(body, list) else 1
    if isinstance(body, list):
        await answer(send, 200, orjson.dumps({"status": "success", "summary": {"received": len(body)}}))
        return
    await answer(send, 201, b"")


async def answer(send: Callable[[Message], Awaitable[None]], status: int, payload: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        http="httptools",
        loop="uvloop",
        log_level="warning",
        access_log=False,
    )
