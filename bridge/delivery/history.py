"""The catalog's history as OpenLineage events, in time order: what ``olbridge export`` writes to
a sink (:mod:`.sinks`), and the asset lookup that every way out converts with.

Flows' declared lineage comes first, as JobEvents. Then task runs come from the catalog a page at a
time and their events are merged with the asset changes by event time, so memory stays flat however
long the history is.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from bridge.catalog import Catalog
from bridge.catalog.query import HistoryFilter
from bridge.model import Asset, StoredDeclaredJob, StoredTaskRun
from bridge.openlineage.convert import Converter
from bridge.openlineage.serialize import dumps

# (event time, run order, step in the run, event): times compared as datetimes (aware, UTC), which
# order as their text does, without formatting each a second time
Item = tuple[datetime, int, int, Any]


def iter_events(
    catalog: Catalog, converter: Converter, filters: HistoryFilter = HistoryFilter()
) -> Iterator[dict[str, Any]]:
    """Every event of the catalog that the filters select: the declared jobs' JobEvents first (in
    the order they were declared), then the rest ordered by event time (each run's events in
    order; ties keep catalog order). A flow filter leaves out the asset changes, which belong to
    no flow."""
    return _iter(catalog, converter, filters, serialized=False)


def iter_lines(catalog: Catalog, converter: Converter, filters: HistoryFilter = HistoryFilter()) -> Iterator[str]:
    """The events of :func:`iter_events`, serialized (one NDJSON line each, without newline)."""
    return _iter(catalog, converter, filters, serialized=True)


class AssetLookup:
    """The catalog's asset records by id, as a conversion needs them, with a bounded memory of
    the ones already read (so use a new one to see later changes)."""

    def __init__(self, catalog: Catalog, limit: int = 10_000) -> None:
        self.catalog = catalog
        self.limit = limit
        self._cache: dict[str, Asset | None] = {}

    def get(self, asset_id: str) -> Asset | None:
        if asset_id not in self._cache:
            if len(self._cache) > self.limit:
                self._cache.clear()
            self._cache[asset_id] = self.catalog.get_asset(asset_id)
        return self._cache[asset_id]

    def read_ahead(self, asset_ids: Iterable[str]) -> None:
        """Read the records of those of ``asset_ids`` not read yet, in a few statements (not one
        an asset: rendering a round of a stream's events names hundreds)."""
        wanted = {asset_id for asset_id in asset_ids if asset_id not in self._cache}
        if not wanted:
            return
        if len(self._cache) + len(wanted) > self.limit:
            self._cache.clear()
        found = self.catalog.get_assets(wanted)
        self._cache.update((asset_id, found.get(asset_id)) for asset_id in wanted)

    def of_run(self, run: StoredTaskRun) -> dict[str, Asset]:
        """The assets a task run's usages refer to, and the outputs it was to write and did not
        (purged ones left out)."""
        ids = [*(u.asset_id for u in run.usages), *run.unwritten]
        return {asset_id: a for asset_id in ids if (a := self.get(asset_id)) is not None}

    def of_declared(self, declared: StoredDeclaredJob) -> dict[str, Asset]:
        """The catalog's records of the assets a declared job names."""
        names = (*declared.job.inputs, *declared.job.outputs)
        return {d.id: a for d in names if (a := self.get(d.id)) is not None}


def _iter(catalog: Catalog, converter: Converter, filters: HistoryFilter, *, serialized: bool) -> Iterator[Any]:
    lookup = AssetLookup(catalog)

    def run_events() -> Iterator[Item]:
        for order, run in enumerate(catalog.iter_task_runs(filters)):
            assets = lookup.of_run(run)
            payloads: list[Any] = (
                converter.task_run_lines(run, assets) if serialized else converter.task_run_events(run, assets)
            )
            yield run.started_at, order, 0, payloads[0]
            if len(payloads) > 1:
                assert run.ended_at is not None  # an end event is of an ended run
                yield run.ended_at, order, 1, payloads[1]

    def change_events() -> Iterator[Item]:
        for change in catalog.iter_changes(filters):  # none with a flow filter
            event = converter.asset_change_event(change)
            yield change.changed_at, -1, change.seq, dumps(event) if serialized else event

    for job in catalog.iter_declared_jobs(filters):
        event = converter.job_event(job, lookup.of_declared(job))
        yield dumps(event) if serialized else event

    runs, changes = _in_time_order(run_events()), change_events()
    first_change = next(changes, None)
    if first_change is None:  # no asset change to merge: the runs' events as they come
        for item in runs:
            yield item[3]
        return
    # (time, order, step) is unique per event (a change's order is -1), so the tuples compare
    # without reaching the events
    for item in heapq.merge(runs, itertools.chain((first_change,), changes)):
        yield item[3]


def _in_time_order(items: Iterator[Item]) -> Iterator[Item]:
    """Events that come in run start order, in event-time order: an end event is held until no
    START before it can follow. (time, order, step) is unique per event, so the heap never
    compares events themselves."""
    held: list[Item] = []
    for item in items:
        if item[2] == 0:
            while held and held[0] < item:  # (time, order, step) unique: never equal
                yield heapq.heappop(held)
            yield item
        else:
            heapq.heappush(held, item)
    while held:
        yield heapq.heappop(held)
