"""Senders: where the stream worker, the backfill and ``export --url`` deliver events, and what
each event's delivery came to.

:class:`HttpSender` is olbridge's own HTTP path: one keep-alive ``requests.Session`` per sending
thread, ``POST <url>/api/v1/lineage/batch`` with per-event results when the backend has it, one
``POST <url>/api/v1/lineage`` per event when it answers the batch with 404 / 405 / 501 (Marquez),
remembered for the rest of the run. :class:`TransportSender` hands events to one of
openlineage-python's transports (kafka, file, console, composite).

Every event gets an :class:`Outcome`: delivered on 2xx; retried on connection errors, timeouts,
408, 429 and 5xx (with the ``Retry-After`` the backend sent); refused for good on any other 4xx
and on a 500 whose body says ``"code":400`` (Marquez's answer to JSON it cannot read).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urljoin, urlsplit

import attrs

from bridge.catalog.engine import masked
from bridge.delivery.retry import parse_retry_after
from bridge.errors import ConfigError
from bridge.model.urls import url_problem

if TYPE_CHECKING:  # imported where a request is made: a command that sends nothing starts without it
    import requests

BODY_MAX = 2000
FALLBACK_STATUSES = (404, 405, 501)  # the backend has no batch endpoint


@attrs.frozen
class Outcome:
    """What became of one event: ``ok``, or ``retry`` (after ``retry_after`` seconds when the
    backend said), or refused (neither)."""

    ok: bool
    retry: bool = False
    retry_after: float | None = None
    status: int | None = None
    detail: str = ""  # the response body or the error, truncated
    error: str = ""  # with no answer: "connection refused", "connection error", "timeout", "transport error"

    @property
    def refused(self) -> bool:
        return not self.ok and not self.retry

    @property
    def failure(self) -> str:
        """The class of a failure, as reports and ``olbridge status`` name it: the error when
        there was no answer, else ``HTTP 429``, ``HTTP 408``, ``HTTP 5xx``, ``refused`` (for
        good), or ``retriable`` (a batch answer's per-event result)."""
        if self.ok:
            return ""
        if self.status is None:
            return self.error or "error"
        if not self.retry:
            return "refused"
        if self.status in (408, 429):
            return f"HTTP {self.status}"
        if self.status >= 500:
            return "HTTP 5xx"
        return "retriable"


DELIVERED = Outcome(ok=True)
_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")]+")
_TIMED_OUT = re.compile(r"(Read timed out|Connection to \S+ timed out)[^'\"]*")


def unanswered(exc: requests.RequestException) -> Outcome:
    """The outcome of a request that got no answer: retried, with its class and a short reason
    (``[Errno 111] Connection refused``, ``Read timed out. (read timeout=5)``)."""
    import requests

    text = str(exc)
    reason = _TIMED_OUT.search(text) or _ERRNO.search(text)
    detail = f"{type(exc).__name__}: {reason.group(0).strip() if reason else text}"[:BODY_MAX]
    if isinstance(exc, requests.Timeout):
        error = "timeout"
    elif "[Errno 111]" in text or "Connection refused" in text:
        error = "connection refused"
    else:
        error = "connection error"
    return Outcome(ok=False, retry=True, detail=detail, error=error)


REDIRECTS_FOLLOWED = 3  # 307 and 308 to the same host, in a row, at most


def _same_host(url: str, target: str) -> bool:
    """Whether ``target`` is on ``url``'s host: the same scheme, host and port, or the same host
    over https where ``url`` was http (a redirect to TLS)."""
    a, b = urlsplit(url), urlsplit(target)
    if (a.hostname or "").lower() != (b.hostname or "").lower() or b.scheme not in ("http", "https"):
        return False
    return (a.scheme, a.port) == (b.scheme, b.port) or (a.scheme, b.scheme) == ("http", "https")


def classify(status: int, body: str, headers: Mapping[str, str], now: float) -> Outcome:
    """The outcome an HTTP answer to one event means."""
    if 200 <= status < 300:
        return Outcome(ok=True, status=status)
    detail = body.strip()[:BODY_MAX]
    if 300 <= status < 400:  # not followed (HttpSender._post): say where it led
        where = headers.get("Location") or "(no Location)"
        detail = f"a redirect to {where}, which olbridge does not follow: give the URL it leads to"
    if status == 500 and _says_code_400(body):
        return Outcome(ok=False, status=status, detail=detail)
    if status in (408, 429) or status >= 500:
        after = parse_retry_after(headers.get("Retry-After"), now)
        return Outcome(ok=False, retry=True, retry_after=after, status=status, detail=detail)
    return Outcome(ok=False, status=status, detail=detail)


def _says_code_400(body: str) -> bool:
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("code") == 400


class Sender(Protocol):
    """Delivers events (serialized, one JSON text each) and says what became of each."""

    target: str
    max_concurrency: int  # how many threads may call send at once

    def send(self, lines: Sequence[str]) -> list[Outcome]: ...

    def close(self) -> None: ...


class HttpSender:
    """An OpenLineage HTTP backend (Marquez or any other)."""

    def __init__(
        self,
        url: str,
        *,
        endpoint: str = "api/v1/lineage",
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
        timeout: float = 5.0,
        verify: bool | str = True,
        batch: bool = True,
        clock: Callable[[], float] = time.time,
        session_factory: Callable[[], requests.Session] | None = None,  # default: requests.Session
    ) -> None:
        problem = url_problem(url)
        if problem is not None:
            raise ConfigError(
                f"the OpenLineage URL must be an http:// or https:// URL with a host, not {url!r}: {problem}"
            )
        # an empty endpoint: the URL itself (an alert's webhook)
        self.url = f"{url.rstrip('/')}/{endpoint.strip('/')}" if endpoint else url
        self.batch_url = f"{self.url}/batch"
        # what messages, delivery errors and the worker's registration name it by: the URL with its
        # password (user:password@, password=) masked; the requests go to the URL as given
        self.target = masked(url)
        self.max_concurrency = 64
        self.timeout = timeout
        self.verify = verify
        self.clock = clock
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.batch = batch  # False once the backend said it has no batch endpoint
        # the most events a batch request holds, once the backend refused a larger one as too
        # large (413) and took its halves (None: the caller's batch size)
        self.batch_limit: int | None = None
        if session_factory is None:
            import requests

            session_factory = requests.Session
        self._session_factory = session_factory
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()
        self.requests = 0

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._session_factory()
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def _post(self, url: str, body: str) -> requests.Response:
        """The answer to a POST of ``body``. A redirect is followed only where it keeps the POST
        and its body (307, 308) and stays on the same host (its token goes nowhere else), a few
        times at most; any other is the answer (classify): followed, a 301, 302 or 303 turns the
        POST into a GET without its body, and a login page's 200 would read as delivered."""
        data = body.encode("utf-8")
        for _ in range(REDIRECTS_FOLLOWED + 1):
            with self._lock:
                self.requests += 1
            response = self._session().post(
                url, data=data, headers=self.headers, timeout=self.timeout, verify=self.verify, allow_redirects=False
            )
            target = urljoin(url, response.headers.get("Location", "")) if response.status_code in (307, 308) else None
            if target is None or not _same_host(url, target):
                return response
            response.close()
            url = target
        return response

    def send(self, lines: Sequence[str]) -> list[Outcome]:
        outcomes = self.try_batch(lines)
        return outcomes if outcomes is not None else [self.send_one(line) for line in lines]

    def try_batch(self, lines: Sequence[str]) -> list[Outcome] | None:
        """The outcomes of the events as one batch request, or None when they must go one by one
        (a caller that checks between requests sends them so)."""
        return self._send_batch(lines) if self.batch and len(lines) > 1 else None

    def send_one(self, line: str) -> Outcome:
        import requests

        try:
            response = self._post(self.url, line)
        except requests.RequestException as exc:
            return unanswered(exc)
        return classify(response.status_code, response.text, response.headers, self.clock())

    def _send_batch(self, lines: Sequence[str]) -> list[Outcome] | None:
        """The outcomes of one batch request, or None when the events must go one by one (no
        batch endpoint, or a refusal that does not say which event)."""
        found = self._batch(lines)
        return None if found is None else found[0]

    def _batch(self, lines: Sequence[str]) -> tuple[list[Outcome], bool] | None:
        """:meth:`_send_batch`'s outcomes, and whether the backend took the batch's size (it did
        not answer 413: too large)."""
        import requests

        try:
            response = self._post(self.batch_url, f"[{','.join(lines)}]")
        except requests.RequestException as exc:
            return [unanswered(exc)] * len(lines), True
        status = response.status_code
        if status in FALLBACK_STATUSES:
            self.batch = False
            return None
        if status == 413 and len(lines) > 1:
            return self._halves(lines), False
        if 200 <= status < 300:  # 207 (Multi-Status) too: its failed_events name the events refused
            return _batch_results(response.text, len(lines), status), True
        whole = classify(status, response.text, response.headers, self.clock())
        if whole.retry:
            return [whole] * len(lines), True
        return None  # refused as a whole: find the event(s) by sending them one by one

    def _halves(self, lines: Sequence[str]) -> list[Outcome]:
        """The outcomes of a batch the backend refused as too large (413, a proxy's body limit):
        sent again as two halves, each a batch (split again where refused so) or an event alone.
        Where both halves are taken, the batch's size was the cause: later batches hold no more
        than the larger half (down to one event a request). Where one is not, an event too large
        alone is (refused, a dead letter), and the size of later batches stays as it was."""
        half = len(lines) - len(lines) // 2
        outcomes: list[Outcome] = []
        fitted = True
        for part in (lines[:half], lines[half:]):
            found = self._batch(part) if len(part) > 1 else None
            if found is None:
                got = [self.send_one(line) for line in part]
                outcomes += got
                fitted = fitted and all(o.status != 413 for o in got)
            else:
                outcomes += found[0]
                fitted = fitted and found[1]
        if fitted:
            with self._lock:
                self.batch_limit = half if self.batch_limit is None else min(self.batch_limit, half)
                if self.batch_limit <= 1:
                    self.batch = False
        return outcomes

    def close(self) -> None:
        with self._lock:
            for session in self._sessions:
                session.close()
            self._sessions.clear()


def _batch_results(body: str, count: int, status: int = 200) -> list[Outcome]:
    """Per-event outcomes from a batch answer ``{status, summary, failed_events: [{index,
    reason, retriable}]}``; an answer without them means every event was taken."""
    outcomes = [Outcome(ok=True, status=status)] * count
    try:
        parsed = json.loads(body) if body.strip() else {}
    except (ValueError, RecursionError):  # not JSON, or nested past what Python reads: no per-event answer
        return outcomes
    failed = parsed.get("failed_events") if isinstance(parsed, dict) else None
    for entry in failed if isinstance(failed, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("index"), int):
            continue
        index = entry["index"]
        if 0 <= index < count:
            reason = str(entry.get("reason", ""))[:BODY_MAX]
            outcomes[index] = Outcome(ok=False, retry=bool(entry.get("retriable")), status=status, detail=reason)
    return outcomes


class TransportSender:
    """One of openlineage-python's transports (kafka, file, console, composite, ...): each event
    is emitted on its own, and an exception means try again later."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.target = f"{transport.kind} transport"
        self.max_concurrency = 1
        self._kafka_key = transport.kind == "kafka" and not getattr(transport, "message_key", None)

    @property
    def prints(self) -> bool:
        """Whether it writes the events on stdout: the console transport, alone or in a composite
        (at any depth)."""
        return _prints(self.transport)

    def send(self, lines: Sequence[str]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for line in lines:
            event = json.loads(line)
            try:
                if self._kafka_key:  # the key openlineage-python derives from an event object
                    self.transport.message_key = _kafka_message_key(event)
                self.transport.emit(event)
            except Exception as exc:  # any transport's failure: keep the event and retry
                detail = f"{type(exc).__name__}: {exc}"[:BODY_MAX]
                outcomes.append(Outcome(ok=False, retry=True, detail=detail, error="transport error"))
            else:
                outcomes.append(DELIVERED)
        return outcomes

    def close(self) -> None:
        self.transport.close()


def _prints(transport: Any) -> bool:
    """Whether ``transport`` is the console transport, or a composite that holds one."""
    inner = getattr(transport, "transports", None)
    if inner:
        return any(_prints(t) for t in inner)
    return getattr(transport, "kind", None) == "console"


def _kafka_message_key(event: dict[str, Any]) -> str:
    """``run:<root or parent job namespace>/<name>``, as openlineage-python keys run events
    (``dataset:<namespace>/<name>`` for a DatasetEvent)."""
    job = event.get("job")
    if not isinstance(job, dict):
        dataset = event.get("dataset") or {}
        return f"dataset:{dataset.get('namespace')}/{dataset.get('name')}"
    parent = ((event.get("run") or {}).get("facets") or {}).get("parent") or {}
    owner = (parent.get("root") or {}).get("job") or parent.get("job") or job
    return f"run:{owner.get('namespace')}/{owner.get('name')}"
