"""When to try again: exponential backoff with jitter, ``Retry-After``, and a rate limit."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from email.utils import parsedate_to_datetime

import attrs

RETRY_AFTER_AT_MOST = 3600.0  # seconds a Retry-After is honoured for, at most (a header of a year: an hour)


@attrs.frozen
class RetryPolicy:
    """Backoff ``base * 2**(attempt-1)`` seconds, at most ``cap``, times a jitter factor drawn
    from [0.5, 1); a ``Retry-After`` the backend sent wins (up to an hour, or ``cap`` if longer). ``max_attempts`` 0
    means retry for as long as it takes."""

    base: float = 0.5
    cap: float = 60.0
    max_attempts: int = 0
    jitter: Callable[[], float] = attrs.field(default=random.random, eq=False)

    def delay(self, attempts: int, retry_after: float | None = None) -> float:
        """Seconds before the next attempt: the backend's ``Retry-After`` as it asks (at most
        :data:`RETRY_AFTER_AT_MOST`, or ``cap`` where that is longer: a backend that asks for an
        hour is not asked again every minute), else the exponential backoff with jitter, up to
        ``cap``."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), max(self.cap, RETRY_AFTER_AT_MOST))
        backoff = min(self.cap, self.base * 2.0 ** min(max(attempts - 1, 0), 60))
        return backoff * (0.5 + self.jitter() / 2)

    def gives_up(self, attempts: int) -> bool:
        return self.max_attempts > 0 and attempts >= self.max_attempts


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP date."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - now, 0.0)


class RateLimiter:
    """At most ``rate`` events a second, shared by the sending threads."""

    def __init__(self, rate: float, clock: Callable[[], float], sleep: Callable[[float], object]) -> None:
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self._next = 0.0
        self._lock = threading.Lock()

    def acquire(self, events: int) -> None:
        with self._lock:
            now = self.clock()
            start = max(now, self._next)
            self._next = start + events / self.rate
        if start > now:
            self.sleep(start - now)

    def refund(self, events: int) -> None:
        """Give back the share of ``events`` taken and not sent (a batch that went as one event):
        the next request waits only for what was sent."""
        with self._lock:
            self._next -= events / self.rate
