"""The baseline for benchmarks/ingest.py: the same server stack (waitress, same threads) with an
app that only parses the JSON body (as olbridge's workers do, with orjson) and answers 201 (or 200
for a batch). Run by the benchmark."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from waitress import serve

from bridge.receiver.events import parse_json

TAKEN = [0]  # events parsed
COUNTING = threading.Lock()


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    if environ["REQUEST_METHOD"] == "GET":  # the count, as olbridge's metrics give it
        text = f'olbridge_receiver_events_total{{result="accepted"}} {TAKEN[0]}\n'.encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(text)))])
        return iter([text])
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = parse_json(environ["wsgi.input"].read(length))
    with COUNTING:
        TAKEN[0] += len(body) if isinstance(body, list) else 1
    if isinstance(body, list):
        payload = orjson.dumps({"status": "success", "summary": {"received": len(body)}})
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return iter([payload])
    start_response("201 Created", [("Content-Length", "0")])
    return iter([b""])


if __name__ == "__main__":
    serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=int(sys.argv[2]), ident="bare")
