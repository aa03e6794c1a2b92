"""Imports of external events: from files (the OpenLineage client's file transport, JSON arrays,
single events) and from a Marquez instance (``GET /api/v1/events/lineage``, paged by time window
and resumable). Both go through the same :class:`~bridge.receiver.intake.Intake` as the HTTP
receiver."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import requests

from bridge.canonical import canonical
from bridge.catalog import Catalog, CatalogSource, IngestResult, Position, opened
from bridge.errors import CatalogError, InputFileError, SourceError, ValidationError
from bridge.files import read_json_items
from bridge.mapping.resolver import Resolver
from bridge.model import ImportSummary, IncomingEvent, format_time, parse_time
from bridge.model.urls import url_problem
from bridge.openlineage.validate import Problem
from bridge.receiver.intake import Intake
from bridge.receiver.outcome import Outcome
from bridge.version import __version__

BATCH = 500
FAR_FUTURE = "9999-12-31T00:00:00Z"
EPOCH_TEXT = "1970-01-01T00:00:00.000000Z"  # Marquez hides events after 2030 unless `before` is given
Progress = Callable[[int], None]


@attrs.define
class EventImportSummary(ImportSummary):
    """What an import of OpenLineage events did: besides what every import says, the events
    accepted, the duplicates, the new placeholders and the events accepted with warnings."""

    accepted: int = 0
    duplicates: int = 0
    placeholders: int = 0
    warned: int = 0
    stopped: bool = False  # a stop request ended it between two batches (or pages), before its end

    def add(self, where: str, outcome: Outcome) -> None:
        self.read += 1
        if outcome.status == "accepted":
            self.accepted += 1
        elif outcome.status == "duplicate":
            self.duplicates += 1
        else:
            self.refuse(where, outcome.message)
        self.placeholders += len(outcome.placeholders)
        self.warned += bool(outcome.warnings)

    def counts_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "newPlaceholders": self.placeholders,
            "acceptedWithWarnings": self.warned,
        }


class CatalogIntake(Intake):
    """An intake that writes straight to a catalog (one transaction a batch), opened at its first
    write when given as what opens it: events that are all refused leave no new catalog behind."""

    def __init__(self, catalog: CatalogSource, resolver: Resolver, *, strict: bool = False) -> None:
        super().__init__(lambda events: self.catalog.ingest(events, resolver), strict=strict)
        self._source = catalog
        self.resolver = resolver

    @property
    def catalog(self) -> Catalog:
        if not isinstance(self._source, Catalog):
            self._source = opened(self._source)
        return self._source

    def take_to(self, items: Sequence[Any], position: Position) -> list[Outcome]:
        """:meth:`take`, the accepted events committed in one transaction with the position of
        the import they come from (saved alone when none is accepted)."""
        written = False

        def write(events: Sequence[IncomingEvent]) -> list[IngestResult | Exception]:
            nonlocal written
            written = True
            return self.catalog.ingest(events, self.resolver, position=position)

        outcomes = self.take(items, write=write)
        if not written:
            self.catalog.save_position(position)
        return outcomes


def catalog_intake(catalog: CatalogSource, resolver: Resolver, *, strict: bool = False) -> CatalogIntake:
    """An intake that writes straight to a catalog (one transaction a batch; see
    :class:`CatalogIntake`)."""
    return CatalogIntake(catalog, resolver, strict=strict)


def _when(event: object) -> str:
    """Where a page's event was, for its refusal: at its time, else the page's (it has none)."""
    time = event.get("eventTime") if isinstance(event, dict) else None
    return f"at {time}" if isinstance(time, str) and time else "with no eventTime"


def _take(
    intake: Intake,
    batch: Sequence[tuple[str, Any]],
    summary: EventImportSummary,
    position: Position | None = None,
    *,
    lenient: bool = False,
) -> None:
    # of events read leniently (a Marquez page), one that holds a number JSON does not (NaN,
    # Infinity) is refused alone; written, it would be a null
    unread = [_not_a_number(item) if lenient else None for _, item in batch]
    items = [item for (_, item), problem in zip(batch, unread, strict=True) if problem is None]
    if position is not None:
        assert isinstance(intake, CatalogIntake), "a position is kept by a catalog's intake"
        taken = iter(intake.take_to(items, position))
    else:
        taken = iter(intake.take(items))
    outcomes = [next(taken) if problem is None else _refused(problem) for problem in unread]
    for (where, _), outcome in zip(batch, outcomes, strict=True):
        if outcome.status == "unavailable":
            raise CatalogError(f"{where}: the catalog could not take the event: {outcome.message}")
        summary.add(where, outcome)


def _refused(message: str) -> Outcome:
    return Outcome("refused", message=message, problems=(Problem("", message, "json"),))


def _not_a_number(value: Any) -> str | None:
    """What a value read leniently holds that JSON does not (NaN or an infinity), if it does."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            said = "NaN" if math.isnan(item) else "Infinity" if item > 0 else "-Infinity"
            return f"the event holds {said}, which is no JSON number"
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def import_files(
    paths: Iterable[Path], intake: Intake, *, progress: Progress | None = None, stop: threading.Event | None = None
) -> EventImportSummary:
    """Import every event of every file. A line that is not JSON, an event that is refused, or a
    file that cannot be read as text (not UTF-8) is reported with where it was, in its place
    among the others, and does not stop the rest. A ``stop`` request ends it after the batch in
    hand (:attr:`EventImportSummary.stopped`). A file that holds no event (empty, blank, ``[]``)
    is refused as a whole, as ``validate`` and ``record --file`` refuse it."""
    summary = EventImportSummary()
    paths = list(paths)
    for path in paths:  # a missing file stops everything before anything is written (a pipe is read)
        if not path.exists():
            raise InputFileError("file not found", str(path))
        if path.is_dir():
            raise InputFileError("a folder, not a file", str(path))
    batch: list[tuple[str, Any]] = []

    def take() -> None:
        if batch:
            _take(intake, batch, summary)
            if progress:
                progress(len(batch))
            batch.clear()

    def refuse(where: str, message: str) -> None:
        take()  # the events before it first: its refusal in its place
        summary.read += 1
        summary.refuse(where, message)
        if progress:
            progress(1)

    for number, path in enumerate(paths, start=1):
        try:
            found = False  # anything in the file: an event, or a line refused
            for where, item in read_json_items(path):
                found = True
                if isinstance(item, InputFileError):
                    refuse(where, item.message)
                    continue
                batch.append((where, item))
                if len(batch) >= BATCH:
                    take()
                    if stop is not None and stop.is_set():
                        summary.stopped = True
                        return summary
            if not found:  # empty, blank or [] (a file not written yet, the wrong one): no event read
                take()
                summary.refuse(str(path), "it holds no event to import")
        except InputFileError as exc:  # the file as a whole: refused as one input, the rest go on
            refuse(exc.where or str(path), exc.message)
        take()
        if stop is not None and stop.is_set():
            summary.stopped = number < len(paths)
            return summary
    return summary


# --- Marquez ----------------------------------------------------------------------------------


MARQUEZ_IMPORT = "marquez-import"  # the kind of a Marquez import's position, by the instance's URL


def _event_time(event: Any) -> datetime | None:
    if isinstance(event, dict):
        try:
            return parse_time(event.get("eventTime"), "eventTime", assume_utc=True)
        except ValidationError:
            return None
    return None


def _after_instant(at: str) -> str:
    """The first time after the instant ``at`` (times are kept to the microsecond)."""
    return format_time(parse_time(at, "after") + timedelta(microseconds=1))


class MarquezEvents:
    """Pages ``GET /api/v1/events/lineage`` in ascending time from ``after`` (inclusive) to
    ``before`` (exclusive). Events at the page boundary's instant are fetched again on the next
    page (Marquez does not order equal times stably) and skipped here by their digest; a page
    that is all one instant is followed by that instant's events whole, in one answer (stepping
    through them by offset, in an order that changes from one answer to the next, would skip some
    and read others twice), and the next page starts after it."""

    def __init__(
        self,
        url: str,
        *,
        session: requests.Session | None = None,
        page_size: int = 200,
        timeout: float = 30.0,
    ) -> None:
        problem = url_problem(url)
        if problem is not None:
            raise ValidationError(f"a Marquez URL is an http:// or https:// URL, not {url!r}: {problem}", rule="url")
        if page_size < 1:
            raise ValidationError("the page size is at least 1", rule="page_size", value=page_size)
        self.base = url.rstrip("/")
        self.session = session or requests.Session()
        self.session.headers.setdefault("User-Agent", f"olbridge/{__version__}")
        self.page_size = page_size
        self.timeout = timeout
        self.total: int | None = None

    def _page(self, after: str, before: str, limit: int) -> list[Any]:
        endpoint = f"{self.base}/api/v1/events/lineage"
        params: dict[str, str | int] = {
            "after": after,
            "before": before,
            "sortDirection": "asc",
            "limit": limit,
            "offset": 0,
        }
        try:
            response = self.session.get(endpoint, params=params, timeout=self.timeout)
        except requests.RequestException as exc:
            raise SourceError(f"cannot reach Marquez at {endpoint}: {_unreachable(exc, self.timeout)}") from None
        if response.status_code != 200:
            raise SourceError(
                f"Marquez answered {response.status_code} to GET {endpoint} (after={after}): {_answer(response)}"
            )
        try:
            body = response.json()
        except ValueError:
            raise SourceError(f"Marquez's answer to GET {endpoint} is not JSON: {_answer(response)}") from None
        if not isinstance(body, dict) or not isinstance(body.get("events"), list):
            raise SourceError(f"Marquez's answer to GET {endpoint} has no 'events' list")
        if self.total is None and isinstance(body.get("totalCount"), int):
            self.total = body["totalCount"]
        return list(body["events"])

    def _instant(self, at: str) -> list[Any]:
        """Every event of one instant, in one answer (asked again with a larger limit until it
        is not full)."""
        until = _after_instant(at)
        limit = self.page_size
        while True:
            limit *= 4
            events = self._page(at, until, limit)
            if len(events) < limit:
                return events

    def pages(self, after: str, before: str = FAR_FUTURE) -> Iterator[tuple[list[Any], str]]:
        """Pages of new events, each with the position (a time) to resume from after it."""
        boundary: set[str] = set()  # digests of the events already seen at the `after` instant
        while True:
            events = self._page(after, before, self.page_size)
            if not events:
                return
            times = [_event_time(e) for e in events]
            known = [t for t in times if t is not None]
            last = format_time(max(known)) if known else after
            whole = last == after and len(events) >= self.page_size
            if whole:  # a page all at one instant: that instant whole
                events = self._instant(after)
                times = [_event_time(e) for e in events]
            fresh = []
            for event, moment in zip(events, times, strict=True):
                if moment is not None and format_time(moment) == after:
                    digest = canonical(event)
                    if digest in boundary:
                        continue
                    boundary.add(digest)
                fresh.append(event)
            if whole:  # the next page after it: it was read whole
                after, boundary = _after_instant(after), set()
            elif last > after:
                after = last
                boundary = {canonical(e) for e, t in zip(events, times, strict=True) if t and format_time(t) == last}
            yield fresh, after
            if not whole and len(events) < self.page_size:
                return


def import_marquez(
    source: MarquezEvents,
    intake: CatalogIntake,
    catalog: Catalog,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    resume: bool = True,
    now: Callable[[], datetime],
    progress: Progress | None = None,
    stop: threading.Event | None = None,
) -> EventImportSummary:
    """Import a Marquez instance's RunEvents from where the last import stopped (or ``since``),
    saving the position with every page's events (one transaction), so an interrupted import
    resumes where it stopped."""
    stored = catalog.position(MARQUEZ_IMPORT, source.base) if resume else None
    after = format_time(since) if since is not None else stored.value["after"] if stored else EPOCH_TEXT
    before = format_time(until) if until is not None else FAR_FUTURE
    summary = EventImportSummary(position=after)
    for events, position in source.pages(after, before):
        batch = [(f"{source.base} event {_when(e)}", e) for e in events]
        saved = Position(MARQUEZ_IMPORT, source.base, {"after": position}, format_time(now()))
        _take(intake, batch, summary, saved, lenient=True)
        summary.position = position
        if progress:
            progress(len(events))
        if stop is not None and stop.is_set():  # between pages: the position saved with the last
            summary.stopped = True
            return summary
    return summary


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _unreachable(exc: requests.RequestException, timeout: float | None) -> str:
    """Why a request got no answer, in a few words (the system's reason, not the whole chain of
    urllib3's exceptions and their reprs)."""
    if isinstance(exc, requests.Timeout):
        return f"no answer within {timeout:g} s" if timeout is not None else "no answer in time"
    found = _ERRNO.search(str(exc))
    if found is not None:
        return found.group(1).strip().lower()
    if isinstance(exc, requests.exceptions.SSLError):
        return "the TLS handshake failed"
    return type(exc).__name__


def _answer(response: requests.Response) -> str:
    """A body as an error message shows it: an HTML page by its title (it is no API's answer: a
    web UI, a proxy's error page), anything else one line of its first 200 characters."""
    text = response.text
    kind = response.headers.get("Content-Type", "")
    if "html" in kind or text.lstrip()[:1] == "<":
        title = _TITLE.search(text)
        named = f" ({' '.join(title.group(1).split())[:100]})" if title else ""
        return f"an HTML page{named}, not Marquez's API: is the URL its API's (port 5000 by default), not its web UI's?"
    line = " ".join(text.split())
    return line[:200] + ("..." if len(line) > 200 else "")
