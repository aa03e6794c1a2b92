"""Where ``prefect import`` stopped reading a Prefect server, kept in the catalog beside what it
recorded, in the same transaction: an import that fails records nothing and moves nothing."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

import attrs

from bridge.catalog import sql, writes
from bridge.catalog.store import Catalog
from bridge.catalog.writes import RecordResult
from bridge.errors import CatalogError
from bridge.model import TaskRun, format_time, parse_time


@attrs.frozen
class PrefectCursor:
    """The newest event time read from one server, with the ids of the events read at that time
    (the events API's time filter is inclusive, so those are skipped next time)."""

    last_occurred: datetime
    last_event_ids: tuple[str, ...]
    events_read: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "lastOccurred": format_time(self.last_occurred),
            "lastEventIds": list(self.last_event_ids),
            "eventsRead": self.events_read,
        }


@attrs.frozen
class LateRun:
    """A task run already recorded as ended that new events speak of again (they are not applied)."""

    task_run_id: str
    reason: str


def read_cursor(catalog: Catalog, api_url: str) -> PrefectCursor | None:
    """Where the last import from ``api_url`` stopped, or None before the first."""
    row = catalog.read_one(sql.GET_PREFECT_STATE, (api_url,))  # a plain read: no write lock
    if row is None:
        return None
    occurred, ids, count, _updated = row
    return PrefectCursor(parse_time(occurred, "prefect_import_state"), tuple(json.loads(ids)), int(count))


def _write_run(cur: sqlite3.Cursor, run: TaskRun) -> RecordResult | LateRun:
    """Record a task run; one that already ended with other content is kept as it is (a savepoint
    undoes whatever the attempt wrote)."""
    cur.execute("SAVEPOINT prefect_run")
    try:
        result = writes.write_task_run(cur, run)
    except CatalogError as exc:
        cur.execute("ROLLBACK TO prefect_run")
        cur.execute("RELEASE prefect_run")
        return LateRun(run.key.task_run_id, str(exc))
    cur.execute("RELEASE prefect_run")
    return result


def record_import(
    catalog: Catalog, runs: Sequence[TaskRun], api_url: str, cursor: PrefectCursor | None, *, now: datetime
) -> tuple[list[RecordResult], list[LateRun]]:
    """Record the task runs and move the cursor, in one transaction."""
    results: list[RecordResult] = []
    late: list[LateRun] = []
    with catalog.transaction() as cur:
        for run in runs:
            outcome = _write_run(cur, run)
            if isinstance(outcome, LateRun):
                late.append(outcome)
            else:
                results.append(outcome)
        if cursor is not None:
            cur.execute(
                sql.UPSERT_PREFECT_STATE,
                (
                    api_url,
                    format_time(cursor.last_occurred),
                    json.dumps(list(cursor.last_event_ids)),
                    cursor.events_read,
                    format_time(now),
                ),
            )
    return results, late
