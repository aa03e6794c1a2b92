"""The receiver's counters, in shared memory so that the workers of ``olbridge serve --workers N``
count together and any of them answers ``/metrics`` for all."""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from typing import Any

from bridge.receiver.outcome import Outcome

RESULTS = ("accepted", "duplicate", "refused", "unavailable")
SCALARS = ("placeholders", "warned", "commits")
ROUTES = ("/api/v1/lineage", "/api/v1/lineage/batch", "/healthz", "/readyz", "/metrics", "other")
STATUSES = (200, 201, 400, 401, 404, 405, 411, 413, 415, 429, 500, 503, 0)  # 0: any other


class Metrics:
    """Thread- and process-safe counts (create before forking the workers)."""

    def __init__(self) -> None:
        size = len(RESULTS) + len(SCALARS) + len(ROUTES) * len(STATUSES)
        self._counts: Any = multiprocessing.get_context("fork").Array("q", size)

    def _add(self, pairs: Sequence[tuple[int, int]]) -> None:
        with self._counts.get_lock():
            for index, amount in pairs:
                self._counts[index] += amount

    def count(self, outcomes: Sequence[Outcome]) -> None:
        pairs = []
        for outcome in outcomes:
            pairs.append((RESULTS.index(outcome.status), 1))
            if outcome.placeholders:
                pairs.append((len(RESULTS), len(outcome.placeholders)))
            if outcome.warnings:
                pairs.append((len(RESULTS) + 1, 1))
        self._add(pairs)

    def commit(self) -> None:
        self._add([(len(RESULTS) + 2, 1)])

    def request(self, route: str, status: int) -> None:
        row = ROUTES.index(route) if route in ROUTES else len(ROUTES) - 1
        column = STATUSES.index(status) if status in STATUSES else len(STATUSES) - 1
        self._add([(len(RESULTS) + len(SCALARS) + row * len(STATUSES) + column, 1)])

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
        return {
            "events": dict(zip(RESULTS, counts[: len(RESULTS)], strict=True)),
            "placeholders": counts[len(RESULTS)],
            "eventsWithWarnings": counts[len(RESULTS) + 1],
            "commits": counts[len(RESULTS) + 2],
            "requests": requests,
        }
