"""A loopback OpenLineage backend the tests (and the delivery benchmark) control.

A threaded ``http.server`` on 127.0.0.1 speaking HTTP/1.1 with keep-alive. ``POST
/api/v1/lineage`` takes one event; ``POST /api/v1/lineage/batch`` (only with ``batch=True``,
otherwise 404 as Marquez answers) takes a JSON array and answers 200 with per-event results.
``respond(event, attempt)`` decides each event's answer (201 by default); every event that got a
2xx is kept in ``accepted`` (with ``keep_bodies``; its key in ``taken`` always, and the bytes of
the request that brought it, when it came alone, in ``raw``), in arrival order, and the counts
say what a test needs: delivered, duplicated, lost, and whether each run's events came in order.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


@attrs.frozen
class Reply:
    status: int = 201
    body: str = ""
    headers: dict[str, str] = attrs.Factory(dict)
    delay: float = 0.0  # seconds before answering (after the event is taken, on a 2xx)


ACCEPT = Reply()
Respond = Callable[[dict[str, Any], int], Reply]


def event_key(event: dict[str, Any]) -> tuple[str, ...]:
    """What identifies an event: a RunEvent by run id and type, a DatasetEvent by dataset and time,
    a JobEvent by job and time."""
    if "run" in event:
        return ("run", event["run"]["runId"], event["eventType"])
    if "dataset" not in event:
        return ("job", event["job"]["namespace"], event["job"]["name"], event["eventTime"])
    dataset = event["dataset"]
    return ("dataset", dataset["namespace"], dataset["name"], event["eventTime"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Backend:
    def __init__(
        self,
        respond: Respond | None = None,
        *,
        batch: bool = False,
        port: int | None = None,
        keep_bodies: bool = True,
        track: bool = True,
        on_accept: Callable[[Backend], object] | None = None,
    ) -> None:
        self.respond: Respond = respond or (lambda event, attempt: ACCEPT)
        self.batch = batch
        self.port = port or free_port()
        self.keep_bodies = keep_bodies
        self.track = track  # False: count only (no keys, no attempts), for long benchmark runs
        self.on_accept = on_accept
        self.accepted: list[dict[str, Any]] = []
        self.raw: list[bytes] = []  # the bodies of the accepted events POSTed one a request
        self.taken: list[tuple[str, ...]] = []
        self.accepted_count = 0
        self.arrived = 0  # events that reached the backend, refused ones included
        self.requests = 0
        self.batch_requests = 0
        self.attempts: Counter[tuple[str, ...]] = Counter()
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> Backend:
        backend = self

        class Handler(_Handler):
            owner = backend

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            assert self._thread is not None
            self._thread.join(timeout=10)
            self._server = None

    def __enter__(self) -> Backend:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- answers -----------------------------------------------------------------------------

    def _answer(self, event: dict[str, Any], raw: bytes | None = None) -> Reply:
        key = event_key(event)
        with self.lock:
            self.arrived += 1
            if self.track:
                self.attempts[key] += 1
            attempt = self.attempts[key] if self.track else 1
        reply = self.respond(event, attempt)
        if 200 <= reply.status < 300:
            with self.lock:
                self.accepted_count += 1
                if self.track:
                    self.taken.append(key)
                if self.keep_bodies:
                    self.accepted.append(event)
                    if raw is not None:
                        self.raw.append(raw)
            if self.on_accept is not None:
                self.on_accept(self)
        return reply

    # --- what arrived ------------------------------------------------------------------------

    def counts(self, expected: Iterable[dict[str, Any] | tuple[str, ...]]) -> dict[str, int]:
        """sent (events that reached the backend), delivered (distinct expected events taken),
        duplicated (takes beyond the first), lost (expected, never taken); ``expected`` holds
        events or their keys."""
        wanted = {e if isinstance(e, tuple) else event_key(e) for e in expected}
        taken = Counter(self.taken)
        return {
            "sent": self.arrived,
            "delivered": len(wanted & set(taken)),
            "duplicated": sum(n - 1 for n in taken.values()),
            "lost": len(wanted - set(taken)),
            "unexpected": len(set(taken) - wanted),
        }

    def out_of_order_runs(self) -> list[str]:
        """Run ids whose end was taken before their START was."""
        started: set[str] = set()
        wrong = []
        for key in self.taken:
            if key[0] != "run":
                continue
            _, run_id, event_type = key
            if event_type == "START":
                started.add(run_id)
            elif run_id not in started:
                wrong.append(run_id)
        return wrong


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll a condition (bounded); True once it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class _Handler(BaseHTTPRequestHandler):
    owner: Backend
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        backend = self.owner
        if self.path != "/stats":
            self._reply(Reply(404, ""))
            return
        with backend.lock:
            stats = {"accepted": backend.accepted_count, "arrived": backend.arrived, "requests": backend.requests}
        self._reply(Reply(200, json.dumps(stats)))

    def do_POST(self) -> None:
        backend = self.owner
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        with backend.lock:
            backend.requests += 1
        if self.path.rstrip("/") == "/api/v1/lineage/batch":
            if not backend.batch:
                self._reply(Reply(404, '{"code":404,"message":"HTTP 404 Not Found"}'))
                return
            with backend.lock:
                backend.batch_requests += 1
            self._batch(json.loads(body))
            return
        if self.path.rstrip("/") != "/api/v1/lineage":
            self._reply(Reply(404, ""))
            return
        try:
            event = json.loads(body)
        except ValueError:
            self._reply(Reply(500, '{"code":400,"message":"Unexpected character"}'))
            return
        self._reply(backend._answer(event, body))

    def _batch(self, events: list[dict[str, Any]]) -> None:
        failed = []
        delay = 0.0
        for index, event in enumerate(events):
            reply = self.owner._answer(event)
            delay = max(delay, reply.delay)
            if not 200 <= reply.status < 300:
                retriable = reply.status >= 500 or reply.status == 429
                failed.append({"index": index, "reason": f"HTTP {reply.status} {reply.body}", "retriable": retriable})
        summary = {"received": len(events), "successful": len(events) - len(failed), "failed": len(failed)}
        status = "partial_success" if failed else "success"
        text = json.dumps({"status": status, "summary": summary, "failed_events": failed})
        self._reply(Reply(200, text, delay=delay))

    def _reply(self, reply: Reply) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        data = reply.body.encode()
        try:
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout); it will send again


def main() -> None:
    """Serve until killed: ``python -m tests.backend --port N [--batch] [--delay S]`` (the benchmark runs
    the backend in its own process, so it does not share the sender's interpreter)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--batch", action="store_true", help="offer POST /api/v1/lineage/batch")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args()
    reply = Reply(delay=args.delay)
    backend = Backend(
        lambda event, attempt: reply, batch=args.batch, port=args.port, keep_bodies=False, track=False
    ).start()
    print(f"serving on {backend.url}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
