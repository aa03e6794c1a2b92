"""The receiver as a WSGI application: the OpenLineage HTTP transport's endpoints, health,
readiness and metrics.

Every 4xx and 5xx answer has one JSON shape::

    {"error": {"status": 400, "code": "invalid_event", "message": "...", "retriable": false,
               "problems": [{"pointer": "/run/runId", "message": "...", "rule": "spec"}]}}

``POST /api/v1/lineage`` answers 201 as Marquez does, once the event is committed (a re-sent event
is a 201 too: it changes nothing), with the warnings kept beside the event. ``POST
/api/v1/lineage/batch`` answers 200 with the batch API's per-event results (``success`` /
``partial_success``) and ``warnedEvents`` (the index and warnings of each event taken with
warnings), or 503 when nothing could be written.

With named tokens (``serve --tokens``), each token may write the job namespaces its patterns
match: an event for another namespace is refused with 403 and changes nothing (in a batch, that
event fails and the others are taken; a batch of nothing else is a 403). With ``forward``, each
event is handed to the catalog with its text as it came (the body, or its element of a batch),
which the catalog queues in its outbox with the event.
"""

from __future__ import annotations

import hmac
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs
import orjson

from bridge.config import NamedToken, bearer
from bridge.jsontext import parse_json, split_array, values_past
from bridge.openlineage.validate import Problem
from bridge.receiver.access_log import AccessLog, Seen
from bridge.receiver.intake import (
    PAUSE,
    Blocking,
    BodyCut,
    BodyRefused,
    BodyTimedOut,
    Intake,
    Read,
    Steps,
    run_steps,
)
from bridge.receiver.outcome import Outcome
from bridge.receiver.scopes import forbidden

StartResponse = Callable[..., Any]
Environ = dict[str, Any]

LINEAGE = "/api/v1/lineage"
BATCH = "/api/v1/lineage/batch"
RETRY_AFTER = "1"
# gzip members a body may be made of: OpenLineage's clients send one, ``(gzip -c a; gzip -c b)`` a
# few; more is no client's doing (a body of thousands of empty members, each an inflater's start)
GZIP_MEMBERS = 64
# the JSON values a body may hold, in events' worth (--max-values each): a body is parsed whole
# before any event's limits are read, some 70 bytes of memory a value, so its values are counted
# in its text first. Real JSON holds a value for every 30 to 40 bytes: the 64 MiB a gzip body may
# decompress to is some 2 million; 30 million zeros (58 KB gzipped) are not read.
BODY_VALUES = 4
# what one step of gunzip inflates at most, the event loop's other work between two: bytes of the
# body, and bytes they decompress to
GUNZIP_STEP, GUNZIP_OUT = 64 * 1024, 1024 * 1024
WSGI_PIECE = 64 * 1024  # bytes of a body read at a time from a WSGI server's input


@attrs.frozen
class Request:
    """What the receiver reads of an HTTP request before its body, whichever server took it."""

    method: str
    path: str
    content_type: str = ""
    content_length: str = ""  # the header's text ("" without one)
    content_encoding: str = ""
    authorization: str = ""
    repeated: str = ""  # the name of one of these headers the request has more than once ("": none)


@attrs.frozen
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def status_line(self) -> str:
        return f"{self.status} {reason(self.status)}"


class HttpError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        problems: Iterable[Problem] = (),
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.problems = tuple(problems)
        self.headers = list(headers)


_REASONS = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    414: "URI Too Long",
    415: "Unsupported Media Type",
    417: "Expectation Failed",
    431: "Request Header Fields Too Large",
    499: "Client Closed Request",  # nginx's: no answer reaches the client, the status is the log's
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


def reason(status: int) -> str:
    """The reason phrase of an HTTP status."""
    return _REASONS.get(status, "Unknown")


def _problem_json(problem: Problem) -> dict[str, str]:
    return {"pointer": problem.pointer, "message": problem.message, "rule": problem.rule}


def error_body(status: int, code: str, message: str, problems: Iterable[Problem] = ()) -> dict[str, Any]:
    return {
        "error": {
            "status": status,
            "code": code,
            "message": message,
            "retriable": status in (408, 429, 503),
            "problems": [_problem_json(p) for p in problems],
        }
    }


@attrs.define
class _Held:
    """The bytes of its body a request holds, counted among the worker's bodies in flight."""

    bytes: int = 0


def _bearer(authorization: str) -> bytes | None:
    """The bearer token of an ``Authorization`` header (:func:`bridge.config.bearer`), as bytes to
    compare in constant time; None for another scheme or none."""
    token = bearer(authorization)
    return None if token is None else token.encode("latin-1", "replace")


def _route(path: str) -> str:
    """The route a request's path is counted under (``other``: none of the receiver's)."""
    return path if path in (LINEAGE, BATCH, "/healthz", "/readyz", "/metrics") else "other"


def _charset(parameters: str) -> str | None:
    """The ``charset`` of a Content-Type's parameters (what follows its first ``;``), unquoted;
    None: none said."""
    for parameter in parameters.split(";"):
        name, equals, value = parameter.partition("=")
        if equals and name.strip().lower() == "charset":
            return value.strip().strip('"')
    return None


class ReceiverApp:
    """``ReceiverApp(intake, token=..., ready=...)`` answers requests as steps (:meth:`exchange`,
    which the HTTP workers run on their event loops) and is a WSGI callable; ``tokens`` are named
    tokens, each allowed its namespaces (instead of the one ``token``); ``forward`` hands each
    event's text as it came to the catalog, to forward; ``access_log`` writes a line for each
    request answered."""

    def __init__(
        self,
        intake: Intake,
        *,
        token: str | None = None,
        tokens: Sequence[NamedToken] = (),
        forward: bool = False,
        ready: Callable[[], str | None] = lambda: None,
        access_log: AccessLog | None = None,
    ) -> None:
        if token and tokens:
            raise ValueError("give one token or named tokens, not both")
        self.intake = intake
        self.limits = intake.limits
        self._token = token.encode() if token else None
        self._tokens = [(t.token.encode(), t) for t in tokens]
        self.forward = forward
        self._ready = ready  # None when ready, else why not
        self.access_log = access_log
        self._in_flight = 0  # bytes of the bodies of the requests being answered

    # --- WSGI (in-process: the tests, an embedding program) ---------------------------------

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterator[bytes]:
        if self.intake.write is None:
            raise ValueError("a WSGI receiver needs an intake with a writer")
        request = Request(
            method=environ.get("REQUEST_METHOD", "GET"),
            path=environ.get("PATH_INFO", "") or "/",
            content_type=environ.get("CONTENT_TYPE", ""),
            content_length=environ.get("CONTENT_LENGTH") or "",
            content_encoding=environ.get("HTTP_CONTENT_ENCODING", ""),
            authorization=environ.get("HTTP_AUTHORIZATION", ""),
        )
        reply = run_steps(
            self.exchange(request),
            write=self.intake.write,
            read=lambda limit: environ["wsgi.input"].read(min(limit, WSGI_PIECE)),
        )
        start_response(reply.status_line, reply.headers)
        return iter([reply.body])

    # --- any server ---------------------------------------------------------------------------

    def exchange(self, request: Request) -> Steps[Reply]:
        """The answer to a request, as steps: the server reads the body when asked
        (:class:`~bridge.receiver.intake.Read`) and has the events written
        (:class:`~bridge.receiver.intake.Write`), each its own way."""
        started, seen = time.perf_counter(), Seen()
        route = _route(request.path)
        held = _Held()
        try:
            status, body, headers = yield from self._dispatch(request, seen, held)
        except HttpError as exc:
            status, headers = exc.status, exc.headers
            body = error_body(exc.status, exc.code, exc.message, exc.problems)
            if exc.status == 503:
                headers.append(("Retry-After", RETRY_AFTER))
        except Exception:  # a fault of the receiver's: said on stderr, counted, and a 500 in the one shape
            status, headers, body = 500, [], self._fault()
        finally:
            self._in_flight -= held.bytes
        self.intake.metrics.request(route, status)
        if isinstance(body, bytes):
            payload = body
        else:
            payload = orjson.dumps(body)
            headers = [("Content-Type", "application/json"), *headers]
        headers.append(("Content-Length", str(len(payload))))
        if self.access_log is not None:
            self.access_log.log(request.method, request.path, status, seen, time.perf_counter() - started)
        return Reply(status, headers, payload)

    def refused_unread(self, method: str, path: str, status: int) -> None:
        """A request the HTTP layer refused before it reached here (text that is not HTTP, a
        target or a head past its bytes: 400, 414, 431): counted and logged as any other."""
        self.intake.metrics.request(_route(path), status)
        if self.access_log is not None:
            self.access_log.log(method, path, status, Seen(), 0.0)

    def _fault(self) -> dict[str, Any]:
        """The answer's body for a fault of the receiver's (the exception in hand): its traceback
        on stderr, and counted."""
        traceback.print_exc()
        self.intake.metrics.internal_error()
        return error_body(500, "internal_error", "the receiver failed on this request; its log says why")

    def internal_error(self) -> Reply:
        """The 500 for a fault of the receiver's outside :meth:`exchange` (the exception in hand)."""
        payload = orjson.dumps(self._fault())
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        return Reply(500, headers, payload)

    def _dispatch(self, request: Request, seen: Seen, held: _Held) -> Steps[tuple[int, Any, list[tuple[str, str]]]]:
        method, path = request.method, request.path
        if request.repeated:  # the first would win here, another maybe in a proxy before: no guess
            message = f"the request has more than one {request.repeated} header: send it once"
            raise HttpError(400, "bad_request", message)
        if path in (LINEAGE, BATCH):
            if method != "POST":
                raise HttpError(405, "method_not_allowed", f"{path} takes POST", headers=[("Allow", "POST")])
            named = self._authorize(request)
            seen.token = named.name if named else None
            body = yield from self._read_body(request, held)
            payload = self._parse(body)
            seen.events = len(payload) if isinstance(payload, list) else 1
            if path == BATCH:
                return (yield from self._batch(payload, body, named))
            return (yield from self._single(payload, body, named))
        if path in ("/healthz", "/readyz", "/metrics"):
            if method not in ("GET", "HEAD"):
                raise HttpError(405, "method_not_allowed", f"{path} takes GET", headers=[("Allow", "GET, HEAD")])
            if path == "/healthz":
                return 200, {"status": "ok"}, []
            if path == "/readyz":
                why = yield Blocking(self._ready)  # it may connect to the catalog's server
                if why is not None:
                    raise HttpError(503, "not_ready", why)
                return 200, {"status": "ready"}, []
            named = self._authorize(request)  # the counts, and the names of the tokens, are for those who hold one
            seen.token = named.name if named else None  # the access log's
            return 200, self.metrics_text().encode(), [("Content-Type", "text/plain; version=0.0.4")]
        raise HttpError(404, "not_found", f"no endpoint {path}; events go to POST {LINEAGE} or {BATCH}")

    # --- requests ----------------------------------------------------------------------------

    def _authorize(self, request: Request) -> NamedToken | None:
        """The named token the request bears (None without named tokens); a 401 when it bears
        none of the tokens this receiver takes."""
        if self._token is None and not self._tokens:
            return None
        given = _bearer(request.authorization)
        found = None
        if given is not None:
            if self._token is not None and hmac.compare_digest(given, self._token):
                return None
            for expected, named in self._tokens:  # every one compared: the time says nothing of which
                if hmac.compare_digest(given, expected):
                    found = named
        if found is not None:
            return found
        raise HttpError(
            401,
            "unauthorized",
            "missing or wrong bearer token (Authorization: Bearer <token>)",
            headers=[("WWW-Authenticate", 'Bearer realm="olbridge"')],
        )

    def _forbidden(self, events: Sequence[Any], named: NamedToken | None) -> list[Outcome | None]:
        """For each event, the outcome that refuses it when its namespace is not the token's to
        write, else None."""
        if named is None:
            return [None] * len(events)
        out: list[Outcome | None] = []
        for event in events:
            found = forbidden(event, named.may_write, forwarded=self.forward)
            if found is None:
                out.append(None)
                continue
            where, namespace = found
            message = f"token {named.name!r} may not write namespace {namespace!r}"
            out.append(Outcome("refused", message=message, problems=(Problem(where, message, "token"),)))
        refused = [o for o in out if o is not None]
        if refused:
            self.intake.metrics.count(refused)
            self.intake.metrics.forbidden(named.name, len(refused))
        return out

    def _hold(self, held: _Held, size: int) -> None:
        """Count ``size`` more bytes of this request's body among those in flight, as they come;
        a 503 (retriable) when the worker's other requests hold so many that these would pass
        the limit (a body alone always has its turn)."""
        limit = self.limits.max_in_flight
        if self._in_flight + size > limit and self._in_flight > held.bytes:
            raise HttpError(
                503, "busy", f"this worker holds {self._in_flight} bytes of bodies, of at most {limit}: retry"
            )
        self._in_flight += size
        held.bytes += size

    def _read_body(self, request: Request, held: _Held) -> Steps[bytes]:
        """The body, read a piece at a time as it comes, each piece counted among the bytes in
        flight once it is here (not as the client's Content-Length claims, nor left uncounted
        when the client sends it chunked); gunzipped when it says gzip."""
        content_type, _, parameters = request.content_type.partition(";")
        content_type = content_type.strip().lower()
        if content_type != "application/json":
            raise HttpError(415, "unsupported_media_type", f"send Content-Type: application/json, not {content_type!r}")
        charset = _charset(parameters)
        if charset is not None and charset.lower() not in ("utf-8", "utf8", "us-ascii", "ascii"):  # ASCII is UTF-8
            raise HttpError(
                415,
                "unsupported_media_type",
                f"JSON is read as UTF-8: send charset=utf-8 or none, not charset={charset!r}",
            )
        limit = self.limits.max_body
        length_text = request.content_length
        expected = limit + 1  # chunked: until it ends, or is past the limit
        if length_text:
            try:
                expected = int(length_text)
            except ValueError:
                raise HttpError(400, "bad_request", f"Content-Length {length_text!r} is not a number") from None
            if expected > limit:
                raise HttpError(413, "body_too_large", f"the body has {expected} bytes; this receiver takes {limit}")
        pieces: list[bytes] = []
        size = 0
        while size < expected:
            piece = yield from self._read(expected - size)
            if not piece:
                break
            size += len(piece)
            if size > limit:
                raise HttpError(413, "body_too_large", f"the body has more than {limit} bytes")
            self._hold(held, len(piece))
            pieces.append(piece)
        if length_text and size < expected:  # a WSGI server's input ended short: the client went away
            raise HttpError(499, "client_closed", f"the client went away after {size} of the body's {expected} bytes")
        body = b"".join(pieces)
        encoding = (request.content_encoding or "identity").strip().lower()
        if encoding == "gzip":
            return (yield from self._gunzip(body, held))
        if encoding not in ("identity", ""):
            raise HttpError(415, "unsupported_encoding", f"Content-Encoding {encoding!r}: send gzip or none")
        return body

    def _read(self, limit: int) -> Steps[bytes]:
        """The body's next piece (b"" once it has all come)."""
        try:
            piece: bytes = yield Read(limit)
        except BodyTimedOut as exc:  # the connection closes: what is still coming would be read as a request
            raise HttpError(408, "request_timeout", str(exc), headers=[("Connection", "close")]) from None
        except BodyCut as exc:  # a body not whole is no request: nothing of it is kept
            raise HttpError(499, "client_closed", str(exc)) from None
        except BodyRefused as exc:  # the server closes the connection, with this answer
            raise HttpError(400, "bad_request", str(exc), headers=[("Connection", "close")]) from None
        return piece

    def _gunzip(self, body: bytes, held: _Held) -> Steps[bytes]:
        """The body's bytes once every gzip member of it is decompressed, one after the other
        (as gzip -d does), within ``max_decompressed`` in all and :data:`GZIP_MEMBERS` members;
        else an HttpError, and none of it. A step inflates at most :data:`GUNZIP_STEP` bytes of
        the body into at most :data:`GUNZIP_OUT`, counted among the bytes in flight, and lets the
        server do other work before the next: what a member's end leaves over (zlib's copy) is
        the rest of a step, not of the body, so the time is linear in the body."""
        limit = self.limits.max_decompressed
        view = memoryview(body)
        out: list[bytes] = []
        size = at = members = 0
        inflater = None
        pending = False  # the inflater may hold output it had no room for
        while at < len(view) or pending:
            if inflater is None:
                members += 1
                if members > GZIP_MEMBERS:
                    most = GZIP_MEMBERS
                    message = f"the gzip body has more than {most} members; this receiver reads at most {most}"
                    raise HttpError(400, "bad_gzip", message)
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            given = view[at : at + GUNZIP_STEP]
            room = min(limit - size + 1, GUNZIP_OUT)
            try:
                piece = inflater.decompress(given, room)
            except zlib.error as exc:
                raise HttpError(400, "bad_gzip", f"the gzip body cannot be decompressed: {exc}") from None
            size += len(piece)
            if size > limit:
                raise HttpError(413, "body_too_large", f"the body decompresses to more than {limit} bytes")
            self._hold(held, len(piece))
            out.append(piece)
            if inflater.eof:  # what it did not take is the next member's
                at += len(given) - len(inflater.unused_data)
                inflater, pending = None, False
            else:  # what it did not take, it had no room to inflate
                at += len(given) - len(inflater.unconsumed_tail)
                pending = len(piece) == room
            yield PAUSE
        if inflater is not None or not members:
            raise HttpError(400, "bad_gzip", "the gzip body is truncated")
        return b"".join(out)

    def _parse(self, body: bytes) -> Any:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            message = f"the body is not UTF-8: byte {exc.start} ({body[exc.start]:#04x})"
            raise HttpError(400, "bad_utf8", message) from None
        most = BODY_VALUES * self.limits.max_values
        if values_past(text, most) is not None:
            message = f"the body holds more than {most} JSON values; this receiver reads at most {most}"
            raise HttpError(413, "body_too_large", message)
        try:
            return parse_json(body)
        except ValueError as exc:  # orjson.JSONDecodeError: the one parser's rules
            if "depth limit" in str(exc):
                raise HttpError(400, "too_deep", "the body nests too deeply to read") from None
            raise HttpError(400, "bad_json", f"the body is not JSON: {exc}") from None

    def _single(
        self, payload: Any, body: bytes, named: NamedToken | None
    ) -> Steps[tuple[int, Any, list[tuple[str, str]]]]:
        if isinstance(payload, list):
            raise HttpError(400, "batch_on_single", f"{LINEAGE} takes one event; send arrays to {BATCH}")
        (forbidden,) = self._forbidden([payload], named)
        if forbidden is not None:
            raise HttpError(403, "forbidden", forbidden.message, forbidden.problems)
        forwards = [body.decode()] if self.forward else None
        (outcome,) = yield from self.intake.taking(
            [payload],
            forwards=forwards,
            token=named.name if named else None,
            may_write=named.may_write if named else None,
            writes=named.namespaces if named else None,
        )
        if outcome.status == "refused" and outcome.problems and outcome.problems[0].rule == "token":
            raise HttpError(403, "forbidden", outcome.message, outcome.problems)
        if outcome.status == "refused":
            raise HttpError(400, "invalid_event", outcome.message, outcome.problems)
        if outcome.status == "unavailable":
            raise HttpError(503, "unavailable", outcome.message)
        return 201, _accepted(outcome), []

    def _batch(
        self, payload: Any, body: bytes, named: NamedToken | None
    ) -> Steps[tuple[int, Any, list[tuple[str, str]]]]:
        if not isinstance(payload, list):
            raise HttpError(400, "batch_not_array", f"{BATCH} takes a JSON array of events")
        if len(payload) > self.limits.max_batch:
            raise HttpError(
                413,
                "batch_too_large",
                f"the batch has {len(payload)} events; this receiver takes at most {self.limits.max_batch}",
            )
        outcomes = yield from self._take_batch(payload, body, named)
        failed = [(i, o) for i, o in enumerate(outcomes) if not o.ok]
        retriable = sum(o.retriable for _, o in failed)
        answer = {
            "status": "partial_success" if failed else "success",
            "summary": {
                "received": len(outcomes),
                "successful": len(outcomes) - len(failed),
                "failed": len(failed),
                "retriable": retriable,
                "non_retriable": len(failed) - retriable,
            },
            "failed_events": [
                {
                    "index": i,
                    "reason": o.message,
                    "retriable": o.retriable,
                    "problems": [_problem_json(p) for p in o.problems],
                }
                for i, o in failed
            ],
            "warnedEvents": [
                {"index": i, "warnings": list(o.warnings)} for i, o in enumerate(outcomes) if o.ok and o.warnings
            ],
        }
        if outcomes and retriable == len(outcomes):
            return 503, answer, [("Retry-After", RETRY_AFTER)]
        return 200, answer, []

    def _take_batch(self, events: list[Any], body: bytes, named: NamedToken | None) -> Steps[list[Outcome]]:
        forbidden = self._forbidden(events, named)
        if named is not None and events and all(o is not None for o in forbidden):
            first = forbidden[0]
            assert first is not None
            raise HttpError(403, "forbidden", f"{first.message} (nor those of the batch's other events)")
        # split_array gives one piece for each element of UTF-8 JSON text that parsed as an array
        texts = [piece.decode() for piece in split_array(body)] if self.forward else None
        keep = [i for i, o in enumerate(forbidden) if o is None]
        taken = iter(
            (
                yield from self.intake.taking(
                    [events[i] for i in keep],
                    forwards=[texts[i] for i in keep] if texts is not None else None,
                    token=named.name if named else None,
                    may_write=named.may_write if named else None,
                    writes=named.namespaces if named else None,
                )
            )
        )
        return [o if o is not None else next(taken) for o in forbidden]

    # --- metrics -----------------------------------------------------------------------------

    def metrics_text(self) -> str:
        """Prometheus text exposition of the receiver's counts."""
        snap = self.intake.metrics.snapshot()
        lines = [
            "# HELP olbridge_receiver_events_total Events the receiver took, by result.",
            "# TYPE olbridge_receiver_events_total counter",
        ]
        lines += [f'olbridge_receiver_events_total{{result="{k}"}} {v}' for k, v in snap["events"].items()]
        lines += [
            "# HELP olbridge_receiver_placeholders_total External placeholder assets created.",
            "# TYPE olbridge_receiver_placeholders_total counter",
            f"olbridge_receiver_placeholders_total {snap['placeholders']}",
            "# HELP olbridge_receiver_warned_events_total Accepted events kept with a warning.",
            "# TYPE olbridge_receiver_warned_events_total counter",
            f"olbridge_receiver_warned_events_total {snap['eventsWithWarnings']}",
            "# HELP olbridge_receiver_commits_total Group transactions committed.",
            "# TYPE olbridge_receiver_commits_total counter",
            f"olbridge_receiver_commits_total {snap['commits']}",
            "# HELP olbridge_receiver_internal_errors_total Requests the receiver failed on (500, logged).",
            "# TYPE olbridge_receiver_internal_errors_total counter",
            f"olbridge_receiver_internal_errors_total {snap['internalErrors']}",
            "# HELP olbridge_receiver_requests_total HTTP requests, by route and status.",
            "# TYPE olbridge_receiver_requests_total counter",
        ]
        lines += [
            f'olbridge_receiver_requests_total{{route="{r["route"]}",status="{r["status"]}"}} {r["count"]}'
            for r in snap["requests"]
        ]
        lines += [
            "# HELP olbridge_receiver_worker_requests_total HTTP requests each worker answered (serve --workers).",
            "# TYPE olbridge_receiver_worker_requests_total counter",
        ]
        lines += [
            f'olbridge_receiver_worker_requests_total{{worker="{n}"}} {count}'
            for n, count in enumerate(snap["requestsByWorker"], start=1)
        ]
        health = self.intake.metrics.health.snapshot() if self.intake.metrics.health is not None else None
        if health is not None:
            lines += [
                "# HELP olbridge_assets_by_health Assets by their last known health (the health watch's).",
                "# TYPE olbridge_assets_by_health gauge",
            ]
            lines += [f'olbridge_assets_by_health{{health="{name}"}} {count}' for name, count in health.items()]
        if snap["eventsByToken"]:
            lines += [
                "# HELP olbridge_receiver_token_events_total Events each named token brought, by result.",
                "# TYPE olbridge_receiver_token_events_total counter",
            ]
            lines += [
                f'olbridge_receiver_token_events_total{{token="{name}",result="{result}"}} {count}'
                for name, counts in snap["eventsByToken"].items()
                for result, count in counts.items()
            ]
        return "\n".join(lines) + "\n"


def _accepted(outcome: Outcome) -> dict[str, Any]:
    return {"status": outcome.status, "warnings": list(outcome.warnings), "placeholders": list(outcome.placeholders)}
