"""Where ``prefect import`` stopped reading a Prefect server: its ``prefect-import`` position in the
catalog (by API URL), written in the same transaction as the task runs it read, so an import that
fails records nothing and moves nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog import Catalog, Position, RecordResult
from bridge.model import TaskRun, format_time, parse_time

PREFECT_IMPORT = "prefect-import"


@attrs.frozen
class PrefectCursor:
    """The newest event time read from one server, with the ids of the events read at that time
    (the events API's time filter is inclusive, so those are skipped next time); and the ids of
    those read that occurred within ``LOOKBACK`` of it, with their times (``recent``): the next
    import reads again from that far back, for the events that reached the server after a later
    one was read (a worker's clock behind, a client that buffered them), and skips these. None: a
    position kept before it was (read on from ``last_occurred`` alone, that once). ``floor``: how
    far back an import reads at most, the position a version before kept (the events before it
    were read, and their ids are not kept), until the lookback has passed it."""

    last_occurred: datetime
    last_event_ids: tuple[str, ...]
    events_read: int = 0
    recent: tuple[tuple[str, datetime], ...] | None = None
    floor: datetime | None = None

    def to_json(self) -> dict[str, object]:
        found: dict[str, object] = {
            "lastOccurred": format_time(self.last_occurred),
            "lastEventIds": list(self.last_event_ids),
            "eventsRead": self.events_read,
        }
        if self.recent is not None:
            found["recentEvents"] = {event_id: format_time(at) for event_id, at in self.recent}
        if self.floor is not None:
            found["lookbackFloor"] = format_time(self.floor)
        return found

    @classmethod
    def from_json(cls, value: Any) -> PrefectCursor:
        recent, floor = value.get("recentEvents"), value.get("lookbackFloor")
        return cls(
            parse_time(value["lastOccurred"], "lastOccurred"),
            tuple(str(i) for i in value["lastEventIds"]),
            int(value["eventsRead"]),
            None
            if recent is None
            else tuple((str(event_id), parse_time(at, "recentEvents")) for event_id, at in sorted(recent.items())),
            None if floor is None else parse_time(floor, "lookbackFloor"),
        )


@attrs.frozen
class LateRun:
    """A task run already recorded as ended that new events speak of again (they are not applied)."""

    task_run_id: str
    reason: str


def read_cursor(catalog: Catalog, api_url: str) -> PrefectCursor | None:
    """Where the last import from ``api_url`` stopped, or None before the first."""
    found = catalog.position(PREFECT_IMPORT, api_url)
    return PrefectCursor.from_json(found.value) if found is not None else None


def record_import(
    catalog: Catalog, runs: Sequence[TaskRun], api_url: str, cursor: PrefectCursor | None, *, now: datetime
) -> tuple[list[RecordResult], list[LateRun]]:
    """Record the task runs and move the cursor, in one transaction. A task run that already
    ended with other content is kept as it is (a :class:`LateRun`)."""
    position = Position(PREFECT_IMPORT, api_url, cursor.to_json(), format_time(now)) if cursor is not None else None
    results: list[RecordResult] = []
    late: list[LateRun] = []
    for run, outcome in zip(runs, catalog.record_each(runs, position=position), strict=True):
        if isinstance(outcome, RecordResult):
            results.append(outcome)
        else:
            late.append(LateRun(run.key.task_run_id, str(outcome)))
    return results, late
