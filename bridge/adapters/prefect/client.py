"""A small client for the Prefect 3 server API: the events API and task runs.

Events are read with ``POST /api/events/filter`` (the first page, oldest first) and then
``GET /api/events/filter/next?page-token=...`` until the server gives no ``next_page``. The server
builds ``next_page`` from its own base URL; only its page token is used here, against the API URL
the client was given, so a server behind a proxy still pages right.
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import attrs
import requests
import urllib3

from bridge.errors import SourceError, ValidationError
from bridge.model import format_time, parse_time
from bridge.model.urls import url_problem

ASSET_EVENT_PREFIXES = ("prefect.asset.materialization.", "prefect.asset.referenced")
PAGE_SIZE = 50  # the most the server gives a page (INTERACTIVE_PAGE_SIZE)
# a page bound beyond the server's own count, in case a server keeps handing out tokens
_PAGE_SLACK = 10
_CHUNK = 64 * 1024


@attrs.frozen
class TaskRunInfo:
    """What the task runs API says of a task run: its name, dynamic key and times."""

    name: str
    dynamic_key: str | None
    start_time: datetime | None
    end_time: datetime | None


class PrefectClient:
    """The Prefect API at ``api_url`` (such as ``http://127.0.0.1:4200/api``)."""

    def __init__(
        self,
        api_url: str,
        *,
        timeout: float = 10.0,
        session: requests.Session | None = None,
        authorization: str | None = None,
    ) -> None:
        """``authorization``: the Authorization header every request carries (Prefect Cloud's
        ``Bearer <API key>``, a self-hosted server's ``Basic ...``); requests leaves it out of a
        redirect to another host."""
        problem = url_problem(api_url)
        if problem is not None:
            raise SourceError(f"the Prefect API URL must be an http:// or https:// URL, not {api_url!r}: {problem}")
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        if authorization is not None:  # as auth, not a header: a ~/.netrc entry would replace a header
            self.session.auth = _Authorization(authorization)

    # --- transport -----------------------------------------------------------------------

    def _call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """The server's answer, read whole within :attr:`timeout` seconds of asking, looked at
        between reads (requests' own timeout bounds each wait for a byte: a server that sends its
        answer a byte at a time would take as long as it likes); a read that waits, waits at most
        that long again, so a request takes at most twice the timeout."""
        url = f"{self.api_url}{path}"
        late = SourceError(
            f"the Prefect server at {self.api_url} did not answer {method} {path} within {self.timeout:g} s"
        )
        deadline = time.monotonic() + self.timeout
        try:
            response = self.session.request(method, url, timeout=self.timeout, stream=True, **kwargs)
            with contextlib.closing(response):
                body = bytearray()
                for chunk in _chunks(response):
                    body += chunk
                    if time.monotonic() > deadline:
                        raise late
                response._content = bytes(body)  # what requests keeps of a body read whole
        except requests.ConnectionError as exc:
            raise SourceError(f"cannot reach the Prefect server at {self.api_url}: {_reason(exc)}") from None
        except (requests.Timeout, urllib3.exceptions.TimeoutError):
            raise late from None
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            raise SourceError(f"{method} {url} failed: {exc}") from None
        return response

    def _json(self, response: requests.Response, what: str) -> Any:
        if not 200 <= response.status_code < 300:
            body = response.text.strip().replace("\n", " ")
            hint = ""
            if response.status_code == 404 and "/api" not in urllib.parse.urlsplit(self.api_url).path:
                hint = " (a Prefect API URL ends in /api: is it the server's address alone?)"
            raise SourceError(
                f"the Prefect server at {self.api_url} answered HTTP {response.status_code} to {what}{hint}"
                + (f": {body[:300]}" if body else "")
            )
        try:
            return response.json()
        except ValueError:  # requests' JSONDecodeError is a ValueError
            raise SourceError(
                f"the Prefect server's answer to {what} is not JSON (is {self.api_url} a Prefect API URL, "
                f"ending in /api?): {response.text[:120]!r}"
            ) from None

    # --- events --------------------------------------------------------------------------

    def _page(self, body: Any, what: str) -> tuple[list[Any], int | None, str | None]:
        if not isinstance(body, dict) or not isinstance(body.get("events"), list):
            raise SourceError(f"the Prefect server's answer to {what} has no 'events' list: {str(body)[:120]}")
        total = body.get("total")
        next_page = body.get("next_page")
        if next_page is not None and not isinstance(next_page, str):
            raise SourceError(f"the Prefect server's answer to {what} has a next_page that is not a URL")
        token = None
        if next_page:
            tokens = parse_qs(urlsplit(next_page).query).get("page-token")
            if not tokens:
                raise SourceError(f"the Prefect server's next_page has no page-token: {next_page[:200]}")
            token = tokens[0]
        return body["events"], total if isinstance(total, int) else None, token

    def iter_events(
        self,
        since: datetime,
        until: datetime,
        *,
        prefixes: Sequence[str] = ASSET_EVENT_PREFIXES,
        page_size: int = PAGE_SIZE,
        on_page: Callable[[int, int | None], None] | None = None,
    ) -> Iterator[Any]:
        """The events that occurred from ``since`` to ``until`` (both inclusive), oldest first, one
        page at a time. ``on_page(count, total)`` is told each page's size and the server's count."""
        query = {
            "filter": {
                "occurred": {"since": format_time(since), "until": format_time(until)},
                "event": {"prefix": list(prefixes)},
                "order": "ASC",
            },
            "limit": page_size,
        }
        what = "POST /events/filter"
        events, total, token = self._page(self._json(self._call("POST", "/events/filter", json=query), what), what)
        pages = 1
        bound = (total // max(page_size, 1) if total is not None else 0) + _PAGE_SLACK
        tokens: set[str] = set()
        while True:
            if on_page is not None:
                on_page(len(events), total)
            yield from events
            if token is None or not events:
                return
            if pages >= bound:
                raise SourceError(
                    f"the Prefect server at {self.api_url} gave more pages than its count of {total} events allows"
                )
            if token in tokens:  # the same page again, and again: it would never end
                raise SourceError(f"the Prefect server at {self.api_url} gave a page token it gave before")
            tokens.add(token)
            what = "GET /events/filter/next"
            response = self._call("GET", "/events/filter/next", params={"page-token": token})
            events, _total, token = self._page(self._json(response, what), what)
            pages += 1

    def newest_events(
        self, since: datetime, until: datetime, *, prefixes: Sequence[str] = ASSET_EVENT_PREFIXES
    ) -> tuple[int, datetime | None]:
        """How many events occurred from ``since`` to ``until`` (both inclusive), and when the
        newest of them did, in one request (the server's count and its newest event)."""
        query = {
            "filter": {
                "occurred": {"since": format_time(since), "until": format_time(until)},
                "event": {"prefix": list(prefixes)},
                "order": "DESC",
            },
            "limit": 1,
        }
        what = "POST /events/filter"
        events, total, _token = self._page(self._json(self._call("POST", "/events/filter", json=query), what), what)
        newest = None
        if events and isinstance(events[0], dict):
            try:
                newest = parse_time(events[0].get("occurred"), "occurred")
            except ValidationError:
                pass  # the import that reads it reports it
        return (total if total is not None else len(events)), newest

    # --- task runs -----------------------------------------------------------------------

    def task_run(self, task_run_id: str) -> TaskRunInfo | None:
        """A task run's name and times, or None when the server no longer has it."""
        what = f"GET /task_runs/{task_run_id}"
        response = self._call("GET", f"/task_runs/{quote(task_run_id, safe='')}")
        if response.status_code == 404:
            return None
        body = self._json(response, what)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise SourceError(f"the Prefect server's answer to {what} is not a task run")
        try:
            return TaskRunInfo(
                name=body["name"],
                dynamic_key=str(body["dynamic_key"]) if body.get("dynamic_key") is not None else None,
                start_time=parse_time(body["start_time"], "start_time") if body.get("start_time") else None,
                end_time=parse_time(body["end_time"], "end_time") if body.get("end_time") else None,
            )
        except ValidationError as exc:
            raise SourceError(f"the Prefect server's answer to {what} has a bad time: {exc}") from None


class _Authorization(requests.auth.AuthBase):
    """The Authorization header the server asks for, set on every request as requests' auth (so
    that a ~/.netrc entry for the host does not replace it; requests drops it on a redirect to
    another host)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = self.value
        return request


def _chunks(response: requests.Response) -> Iterator[bytes]:
    """The body as it comes, each piece what one read of the socket gave (urllib3's ``read1``),
    so that the deadline is looked at between them; with an older urllib3, requests' pieces."""
    read = getattr(response.raw, "read1", None)
    if read is None:
        yield from response.iter_content(_CHUNK)
        return
    while chunk := read(_CHUNK, decode_content=True):
        yield chunk


def _reason(exc: requests.ConnectionError) -> str:
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "No route to host", "timed out"):
        if marker in text:
            return marker.lower()
    return text[:200]
