"""The baseline for benchmarks/ingest.py: the same server stack (waitress, same threads) with an
app that only parses the JSON body and answers 201 (or 200 for a batch). Run by the benchmark."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from waitress import serve


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.loads(environ["wsgi.input"].read(length))
    if isinstance(body, list):
        payload = json.dumps({"status": "success", "summary": {"received": len(body)}}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return iter([payload])
    start_response("201 Created", [("Content-Length", "0")])
    return iter([b""])


if __name__ == "__main__":
    serve(app, host="127.0.0.1", port=int(sys.argv[1]), threads=int(sys.argv[2]), ident="bare")
