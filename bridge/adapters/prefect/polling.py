"""When imports run: :func:`import_once`, the one-shot import, first waits out the ``settle``
window for recent events (so that a flow that just finished is read, not left for later);
:func:`follow` imports again and again until told to stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import attrs

from bridge.adapters.prefect.client import PrefectClient
from bridge.adapters.prefect.imports import DEFAULT_NAMESPACE, DEFAULT_SETTLE, PrefectImportSummary, import_events
from bridge.catalog import Catalog
from bridge.errors import SourceError, ValidationError
from bridge.mapping import Resolver
from bridge.model import utcnow

MAX_WAIT = 60.0  # a one-shot import waits out a settle window up to this long
# how far past the clock the events younger than the settle window are counted (a producer's clock
# may be ahead of this one)
_AHEAD = timedelta(days=1)
_TICK = timedelta(microseconds=1)  # the server's times are to the microsecond


@attrs.frozen
class Unsettled:
    """Events younger than the settle window: how many, and when the newest occurred."""

    count: int
    newest: datetime | None

    def wait(self, settle: float, now: datetime) -> float:
        """Seconds until the newest is older than the window (at most the window itself)."""
        if not self.count or self.newest is None:
            return 0.0
        return min(max((self.newest - now).total_seconds() + settle, 0.0), settle)


def unsettled(client: PrefectClient, after: datetime, now: datetime) -> Unsettled:
    """The asset events that occurred after ``after`` (to some way past ``now``)."""
    count, newest = client.newest_events(after + _TICK, now + _AHEAD)
    return Unsettled(count, newest)


def import_once(
    catalog: Catalog,
    client: PrefectClient,
    resolver: Resolver,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    since: datetime | None = None,
    settle: float = DEFAULT_SETTLE,
    skip_malformed: bool = False,
    wait: bool = True,
    max_wait: float = MAX_WAIT,
    clock: Callable[[], datetime] = utcnow,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[Unsettled, float], None] | None = None,
    on_page: Callable[[int, int | None], None] | None = None,
) -> PrefectImportSummary:
    """A one-shot :func:`import_events` that does not leave a flow that just finished for later:
    when asset events younger than ``settle`` seconds are there, it waits until the newest of them
    is older (``on_wait(unsettled, seconds)`` is told first), then reads. It does not wait when
    ``wait`` is off or the wait would be longer than ``max_wait``. The summary's ``left`` counts
    the events still too young, left for the next import."""
    if settle > 0 and wait and settle <= max_wait:
        now = clock()
        young = unsettled(client, now - timedelta(seconds=settle), now)
        seconds = young.wait(settle, now)
        if seconds > 0:
            if on_wait is not None:
                on_wait(young, seconds)
            sleep(seconds)
    summary = import_events(
        catalog,
        client,
        resolver,
        namespace=namespace,
        since=since,
        settle=settle,
        skip_malformed=skip_malformed,
        clock=clock,
        on_page=on_page,
    )
    if settle <= 0:
        return summary  # no window: nothing is left for being too young
    try:
        left = unsettled(client, summary.until, clock()).count
    except SourceError:
        left = None  # the import is done; only the count of what it left is unknown
    return attrs.evolve(summary, left=left)


def follow(
    poll: Callable[[], PrefectImportSummary],
    *,
    interval: float,
    stop: threading.Event,
    max_polls: int | None = None,
    on_poll: Callable[[PrefectImportSummary], None] | None = None,
    on_error: Callable[[SourceError], None] | None = None,
) -> int:
    """Poll until ``stop`` is set (a signal handler sets it) or ``max_polls`` polls are done,
    waiting ``interval`` seconds between polls; each summary goes to ``on_poll`` (none is kept).
    With ``on_error``, a server that cannot be read is reported to it and tried again at the next
    poll (a malformed event still ends the loop: it would be refused again). Returns the number of
    polls made."""
    if interval <= 0:
        raise ValidationError("the poll interval must be more than 0 seconds", rule="prefect.interval")
    polls = 0
    while not stop.is_set():
        polls += 1
        try:
            summary = poll()
        except SourceError as exc:
            if on_error is None:
                raise
            on_error(exc)
        else:
            if on_poll is not None:
                on_poll(summary)
        if max_polls is not None and polls >= max_polls:
            break
        stop.wait(interval)
    return polls
