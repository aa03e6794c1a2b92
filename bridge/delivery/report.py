"""Delivery failures said as they happen, without flooding: one line per class of failure
(connection refused, timeout, HTTP 5xx, HTTP 429, refused, ...) at most every ``interval``
seconds, naming the target, the class and status, the backend's answer or the error, and what
happens next (the next retry's time); the failures of a class not shown are counted and said
with its next line, or by :meth:`FailureReport.flush` at the end.

The clock and the output are the caller's (the CLI writes to stderr). :func:`describe` says a
failure in short, :func:`describe_event` which event it was.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import attrs

from bridge.delivery.senders import Outcome
from bridge.shown import safe

DETAIL_SHOWN = 160  # characters of a backend's answer or an error in a line


@attrs.define
class _Class:
    shown_at: float | None = None  # when its last line went out
    hidden: int = 0  # failures since then that no line showed
    hidden_since: float | None = None


def clock_text(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def retry_note(at: float, now: float) -> str:
    """What a retry line says happens next."""
    return f"next retry at {clock_text(at)} (in {max(at - now, 0.0):.1f}s)"


class FailureReport:
    def __init__(
        self,
        target: str,
        emit: Callable[[str], object],
        *,
        clock: Callable[[], float] = time.time,
        interval: float = 5.0,
    ) -> None:
        self.target = target
        self.emit = emit
        self.clock = clock
        self.interval = interval
        self._classes: dict[str, _Class] = {}
        self._lock = threading.Lock()

    def failed(self, outcomes: Sequence[Outcome], then: str) -> None:
        """Report failed deliveries (the ``ok`` ones in ``outcomes`` are ignored); ``then`` says
        what happens to them (``next retry at ...``, ``kept as dead letters ...``)."""
        failures = [o for o in outcomes if not o.ok]
        if not failures:
            return
        now = self.clock()
        by_class: dict[str, list[Outcome]] = {}
        for outcome in failures:
            by_class.setdefault(outcome.failure, []).append(outcome)
        with self._lock:
            for name, group in by_class.items():
                state = self._classes.setdefault(name, _Class())
                if state.shown_at is not None and now - state.shown_at < self.interval:
                    if state.hidden == 0:
                        state.hidden_since = now
                    state.hidden += len(group)
                    continue
                line = f"delivery to {self.target}: {len(group)} event(s) failed, {describe(group[-1])}; {then}"
                if state.hidden:
                    line += f" ({state.hidden} more such failure(s) since {clock_text(state.hidden_since or now)})"
                state.shown_at, state.hidden, state.hidden_since = now, 0, None
                self.emit(line)

    def flush(self) -> None:
        """Say the failures no line has shown yet."""
        with self._lock:
            for name, state in self._classes.items():
                if state.hidden:
                    since = clock_text(state.hidden_since or self.clock())
                    self.emit(f"delivery to {self.target}: {state.hidden} more {name} failure(s) since {since}")
                    state.hidden, state.hidden_since = 0, None


def describe(outcome: Outcome) -> str:
    """A failure's class, status and answer (or error), short: ``HTTP 503 busy``, ``refused (HTTP
    422 {...})``, ``connection refused (ConnectionError: [Errno 111] Connection refused)``."""
    detail = safe(" ".join(outcome.detail.split()))  # a backend's answer: no control character to the terminal
    if len(detail) > DETAIL_SHOWN:
        detail = detail[: DETAIL_SHOWN - 3] + "..."
    if outcome.status is None:
        return f"{outcome.failure} ({detail})" if detail else outcome.failure
    answer = f"HTTP {outcome.status} {detail}".strip()
    return answer if outcome.failure.startswith("HTTP") else f"{outcome.failure} ({answer})"


def describe_event(line: str) -> str:
    """Which event a serialized one is, short: ``START ns/job run <id>``, ``JobEvent ns/job``,
    ``DatasetEvent ns/name at <time>``."""
    event = json.loads(line)
    if "run" in event:
        job = event.get("job", {})
        return f"{event.get('eventType')} {job.get('namespace')}/{job.get('name')} run {event['run'].get('runId')}"
    if "dataset" not in event:
        job = event.get("job", {})
        return f"JobEvent {job.get('namespace')}/{job.get('name')}"
    dataset = event.get("dataset", {})
    return f"DatasetEvent {dataset.get('namespace')}/{dataset.get('name')} at {event.get('eventTime')}"
