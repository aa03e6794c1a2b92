"""The receiver's counters, in shared memory so that the workers of ``olbridge serve --workers N``
count together and any of them answers ``/metrics`` for all. With named tokens (``serve
--tokens``), the events each token brought are counted by its name as well; the requests each
worker answered are counted by its number (1 to N), which shows that every worker serves."""

from __future__ import annotations

import collections
import multiprocessing
from collections.abc import Sequence
from typing import Any

from bridge.receiver.outcome import Outcome

RESULTS = ("accepted", "duplicate", "refused", "unavailable")
SCALARS = ("placeholders", "warned", "commits", "internal_errors")
ROUTES = ("/api/v1/lineage", "/api/v1/lineage/batch", "/healthz", "/readyz", "/metrics", "other")
# 499: the client went away before its request's body came whole (nginx's status; no answer sent); 0: any other
STATUSES = (200, 201, 400, 401, 403, 404, 405, 408, 411, 413, 414, 415, 429, 431, 499, 500, 503, 0)
TOKEN_RESULTS = (*RESULTS, "forbidden")  # what became of the events a named token brought


HEALTHS = ("FAIL", "WARN", "PASS", "UNKNOWN")


class HealthCounts:
    """The assets by kept health, in shared memory: the health watch's process (``serve`` with
    ``[[alerts]]`` or ``[health]``) sets them from the catalog's ``asset_health`` now and then,
    and any worker answers ``/metrics`` from them. Create before the processes start."""

    def __init__(self) -> None:
        self._counts: Any = multiprocessing.get_context("spawn").Array("q", len(HEALTHS) + 1)

    def set(self, counts: dict[str, int]) -> None:
        with self._counts.get_lock():
            for i, health in enumerate(HEALTHS):
                self._counts[i] = counts.get(health, 0)
            self._counts[len(HEALTHS)] = 1  # known

    def snapshot(self) -> dict[str, int] | None:
        """The counts, or None before the watch first set them."""
        with self._counts.get_lock():
            values = list(self._counts)
        return dict(zip(HEALTHS, values, strict=False)) if values[-1] else None


class Metrics:
    """Thread- and process-safe counts (create before forking the workers); ``tokens``: the
    names of the tokens to count by; ``workers``: how many workers count their requests, each
    setting ``worker`` (0 to ``workers`` - 1) once forked; ``health``: the assets by health, when
    the health watch runs."""

    def __init__(self, tokens: Sequence[str] = (), workers: int = 1, health: HealthCounts | None = None) -> None:
        self.health = health
        self.tokens = tuple(tokens)
        self.workers = max(workers, 1)
        self.worker = 0  # this process's worker
        self._token_base = len(RESULTS) + len(SCALARS) + len(ROUTES) * len(STATUSES)
        self._worker_base = self._token_base + len(self.tokens) * len(TOKEN_RESULTS)
        size = self._worker_base + self.workers
        self._counts: Any = multiprocessing.get_context("fork").Array("q", size)

    def _add(self, pairs: Sequence[tuple[int, int]]) -> None:
        with self._counts.get_lock():
            counts = self._counts.get_obj()  # the array itself: its lock is held (each item would take it again)
            for index, amount in pairs:
                counts[index] += amount

    def _token_index(self, token: str, result: str) -> int:
        return self._token_base + self.tokens.index(token) * len(TOKEN_RESULTS) + TOKEN_RESULTS.index(result)

    def count(self, outcomes: Sequence[Outcome], token: str | None = None) -> None:
        """A request's outcomes, added at once (a batch's hundred events are a few additions)."""
        statuses = collections.Counter(outcome.status for outcome in outcomes)
        pairs = [(RESULTS.index(status), n) for status, n in statuses.items()]
        placeholders = sum(len(outcome.placeholders) for outcome in outcomes)
        if placeholders:
            pairs.append((len(RESULTS), placeholders))
        warned = sum(1 for outcome in outcomes if outcome.warnings)
        if warned:
            pairs.append((len(RESULTS) + 1, warned))
        if token is not None and token in self.tokens:
            # a refusal for a run or job another token holds is the token's "forbidden", as a
            # namespace it may not write is (Metrics.forbidden)
            theirs = collections.Counter(_token_result(outcome) for outcome in outcomes)
            pairs += [(self._token_index(token, result), n) for result, n in theirs.items()]
        self._add(pairs)

    def forbidden(self, token: str, events: int) -> None:
        """Events a token brought for namespaces it may not write (refused with 403)."""
        if token in self.tokens:
            self._add([(self._token_index(token, "forbidden"), events)])

    def commit(self) -> None:
        self._add([(len(RESULTS) + 2, 1)])

    def internal_error(self) -> None:
        """A request the receiver failed on (answered 500)."""
        self._add([(len(RESULTS) + 3, 1)])

    def request(self, route: str, status: int) -> None:
        row = ROUTES.index(route) if route in ROUTES else len(ROUTES) - 1
        column = STATUSES.index(status) if status in STATUSES else len(STATUSES) - 1
        self._add(
            [(len(RESULTS) + len(SCALARS) + row * len(STATUSES) + column, 1), (self._worker_base + self.worker, 1)]
        )

    def snapshot(self) -> dict[str, Any]:
        with self._counts.get_lock():
            counts = list(self._counts)
        base = len(RESULTS) + len(SCALARS)
        requests = []
        for row, route in enumerate(ROUTES):
            for column, status in enumerate(STATUSES):
                value = counts[base + row * len(STATUSES) + column]
                if value:
                    requests.append({"route": route, "status": status or "other", "count": value})
        width = len(TOKEN_RESULTS)
        by_token = {}
        for i, name in enumerate(self.tokens):
            start = self._token_base + i * width
            by_token[name] = dict(zip(TOKEN_RESULTS, counts[start : start + width], strict=True))
        return {
            "events": dict(zip(RESULTS, counts[: len(RESULTS)], strict=True)),
            "eventsByToken": by_token,
            "placeholders": counts[len(RESULTS)],
            "eventsWithWarnings": counts[len(RESULTS) + 1],
            "commits": counts[len(RESULTS) + 2],
            "internalErrors": counts[len(RESULTS) + 3],
            "requests": requests,
            "requestsByWorker": counts[self._worker_base : self._worker_base + self.workers],
        }


def _token_result(outcome: Outcome) -> str:
    if outcome.status == "refused" and outcome.problems and outcome.problems[0].rule == "token":
        return "forbidden"
    return outcome.status
