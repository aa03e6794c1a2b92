"""One import from a Prefect server: the ``prefect.asset.*`` events recorded since the last import
(its position is kept in the catalog, see :mod:`bridge.adapters.prefect.cursor`), grouped by task
run, and one task run recorded for each (see :mod:`bridge.adapters.prefect.events` for the
mapping). Every import is one transaction: with a malformed event or group nothing is recorded and
the position stays where it was; :class:`PrefectImportSummary` says what it did."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from bridge.adapters.prefect.client import ASSET_EVENT_PREFIXES, PrefectClient
from bridge.adapters.prefect.cursor import LateRun, PrefectCursor, read_cursor, record_import
from bridge.adapters.prefect.events import (
    Problem,
    group_by_task_run,
    parse_events,
    task_run_from_group,
)
from bridge.catalog import Catalog, RecordResult
from bridge.errors import ValidationError
from bridge.mapping import Resolver
from bridge.model import EXTERNAL, ImportSummary, Refusal, TaskRun, format_time, parse_time, utcnow

DEFAULT_NAMESPACE = "prefect"
DEFAULT_SETTLE = 5.0
# how far back of the newest event read an import reads again, for the events that reached the
# server after a later one was read (each read once: their ids are kept, :class:`PrefectCursor`)
LOOKBACK = timedelta(minutes=2)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PROBLEMS_SHOWN = 20


@attrs.define(kw_only=True)
class PrefectImportSummary(ImportSummary):
    """What one import from a Prefect server did: besides what every import says (the events
    read, the malformed ones left out with ``skip_malformed``, the position), the task runs it
    recorded and what became of them."""

    api_url: str
    since: datetime
    until: datetime
    results: tuple[RecordResult, ...] = ()
    pending: tuple[str, ...] = ()  # task runs with references but no materialization (nothing recorded)
    late: tuple[LateRun, ...] = ()
    cursor: PrefectCursor | None = None
    left: int | None = None  # events younger than the settle window, left for the next import (None: not counted)

    def counts_json(self) -> dict[str, Any]:
        return {
            "apiUrl": self.api_url,
            "since": format_time(self.since),
            "until": format_time(self.until),
            "taskRuns": len(self.results),
            "created": sum(r.status == "created" for r in self.results),
            "updated": sum(r.status == "updated" for r in self.results),
            "unchanged": sum(r.status == "unchanged" for r in self.results),
            "failed": sum(r.state.run_event_type == "FAIL" for r in self.results),
            "assetsWritten": sorted({a for r in self.results for a in r.written}),
            "placeholders": sorted({p for r in self.results for p in r.placeholders}),
            "warnings": [w for r in self.results for w in r.warnings][:100],
            "referencesOnly": list(self.pending),
            "late": [{"taskRunId": x.task_run_id, "reason": x.reason} for x in self.late],
            "cursor": self.cursor.to_json() if self.cursor else None,
            "leftForNextImport": self.left,
        }


def _position(cursor: PrefectCursor | None) -> str | None:
    """Where the next import from the server starts: the newest event time read."""
    return format_time(cursor.last_occurred) if cursor is not None else None


def output_types(catalog: Catalog, resolver: Resolver) -> Callable[[str], str | None]:
    """The type a Prefect output gets: what the naming rules say an asset with that address is
    (``s3://`` and ``file://`` keys are ``File``), else ``Dataset``; None (keep the stored type)
    when the catalog has the asset with another type, which another front end gave it."""

    def type_for(asset_id: str) -> str | None:
        dataset = resolver.dataset_for(asset_id, "Dataset", {})
        found = resolver.asset_for(dataset.namespace, dataset.name)
        kind = found.type if found.id == asset_id and found.type != EXTERNAL else "Dataset"
        stored = catalog.get_asset(asset_id)
        return None if stored is not None and stored.type not in (EXTERNAL, kind) else kind

    return type_for


def _refuse(problems: list[Problem]) -> ValidationError:
    shown = [str(p) for p in problems[:_PROBLEMS_SHOWN]]
    if len(problems) > _PROBLEMS_SHOWN:
        shown.append(f"(and {len(problems) - _PROBLEMS_SHOWN} more)")
    return ValidationError(
        f"{len(problems)} malformed Prefect asset event(s) or task run(s); nothing was recorded "
        "(--skip-malformed records the rest):\n  " + "\n  ".join(shown),
        rule="prefect.malformed",
    )


def _new_cursor(previous: PrefectCursor | None, raws: list[Any]) -> PrefectCursor | None:
    """The position after the events read (malformed ones too, when they are skipped): the newest
    time among them and the ids read at it, and those read within :data:`LOOKBACK` of it. An
    event without a readable time does not move it."""
    ids_by_time: dict[datetime, set[str]] = {}
    for raw in raws:
        if isinstance(raw, dict) and isinstance(raw.get("id"), str):
            try:
                moment = parse_time(raw.get("occurred"), "occurred")
            except ValidationError:
                continue
            ids_by_time.setdefault(moment, set()).add(raw["id"])
    if not ids_by_time:
        return previous
    read = (previous.events_read if previous else 0) + len(raws)
    recent: dict[str, datetime] = {}
    floor = None
    if previous is not None and previous.recent is None:  # a position a version before kept
        recent = dict.fromkeys(previous.last_event_ids, previous.last_occurred)
        floor = previous.last_occurred  # what it read before is not read again
    elif previous is not None:
        recent, floor = dict(previous.recent or ()), previous.floor
    recent.update((event_id, at) for at, ids in ids_by_time.items() for event_id in ids)
    newest = max(ids_by_time)
    if previous is not None and previous.last_occurred >= newest:  # only events read again (--since)
        newest = previous.last_occurred
        ids = set(previous.last_event_ids) | ids_by_time.get(newest, set())
    else:
        ids = ids_by_time[newest]
    kept = tuple(sorted((i, at) for i, at in recent.items() if at >= newest - LOOKBACK))
    if floor is not None and floor <= newest - LOOKBACK:  # the lookback has passed it
        floor = None
    return PrefectCursor(newest, tuple(sorted(ids)), read, kept, floor)


def _already_read(raw: Any, start: datetime, seen: set[str]) -> bool:
    """Whether an event is one an import read before: one of those read at the cursor's time, or
    (should a server not filter by time) an older one."""
    if not isinstance(raw, dict):
        return False
    if raw.get("id") in seen:
        return True
    try:
        return parse_time(raw.get("occurred"), "occurred") < start
    except ValidationError:
        return False  # reported as malformed


def import_events(
    catalog: Catalog,
    client: PrefectClient,
    resolver: Resolver,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    since: datetime | None = None,
    settle: float = DEFAULT_SETTLE,
    skip_malformed: bool = False,
    clock: Callable[[], datetime] = utcnow,
    on_page: Callable[[int, int | None], None] | None = None,
) -> PrefectImportSummary:
    """Read the asset events recorded since the last import (or since ``since``) up to ``settle``
    seconds ago, and record their task runs. Events newer than that are left for the next import,
    so that a task run's events, which Prefect sends together, are read together."""
    cursor = read_cursor(catalog, client.api_url)
    start = since or (cursor.last_occurred if cursor else EPOCH)
    seen = set(cursor.last_event_ids) if cursor is not None and since is None else set()
    if since is None and cursor is not None and cursor.recent is not None:
        # read again from LOOKBACK back, what reached the server late; what was read, skipped
        start = max(cursor.last_occurred - LOOKBACK, cursor.floor or EPOCH)
        seen.update(event_id for event_id, _at in cursor.recent)
    until = clock() - timedelta(seconds=settle)
    if until < start:
        return PrefectImportSummary(
            api_url=client.api_url, since=start, until=until, cursor=cursor, position=_position(cursor)
        )
    raws = [
        raw
        for raw in client.iter_events(start, until, prefixes=ASSET_EVENT_PREFIXES, on_page=on_page)
        if not _already_read(raw, start, seen)
    ]
    events, problems = parse_events(raws)
    if problems and not skip_malformed:  # refused before asking the server about any task run
        raise _refuse(problems)
    type_for = output_types(catalog, resolver)
    runs: list[TaskRun] = []
    pending: list[str] = []
    for group in group_by_task_run(events):
        if not any(e.is_materialization for e in group.events):  # references only: nothing to record yet
            pending.append(group.task_run_id)
            continue
        try:
            run = task_run_from_group(
                group, client.task_run(group.task_run_id), namespace=namespace, output_type=type_for
            )
        except ValidationError as exc:
            problems.append(Problem(f"task run {group.task_run_id}", str(exc)))
            continue
        if run is not None:
            runs.append(run)
    if problems and not skip_malformed:
        raise _refuse(problems)
    new_cursor = _new_cursor(cursor, raws)
    results, late = record_import(catalog, runs, client.api_url, new_cursor, now=clock())
    return PrefectImportSummary(
        api_url=client.api_url,
        since=start,
        until=until,
        read=len(raws),
        refused=[Refusal(p.where, p.message) for p in problems],
        position=_position(new_cursor),
        results=tuple(results),
        pending=tuple(pending),
        late=tuple(late),
        cursor=new_cursor,
    )
