"""Backfill: the catalog's history replayed to a backend, resumable.

Task runs come from :meth:`Catalog.iter_task_runs` (paged, so memory stays flat) in start order,
merged by time with the asset changes made outside any run. They go out a window at a time:
first every item's first event (the STARTs and the DatasetEvents) side by side, then the ends of
the runs whose START was delivered, so a run's end never goes before its START. Retries follow
the stream worker's rules; an event the backend refuses is counted and reported, and a run
whose START was refused is not ended.

Flows' declared jobs go first, as JobEvents (as ``olbridge export`` sends them). After each
window the checkpoint (in the catalog) moves to its last item, as (time, 0 for an asset change or
1 for a run, seq or pk; a declared job is ("", -1, its pk)); a stop request lets the window in flight finish, so a
stopped backfill resumes with nothing sent twice. Events are the converter's, deterministic:
replaying twice sends the same bytes.
"""

from __future__ import annotations

import heapq
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog import Catalog
from bridge.catalog.store import Checkpoint
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.retry import RetryPolicy
from bridge.delivery.senders import Outcome
from bridge.delivery.worker import epoch_text
from bridge.errors import ConfigError
from bridge.export import AssetLookup, ExportFilter
from bridge.jsonkeys import camel_keys
from bridge.model import AssetChange, StoredDeclaredJob, StoredTaskRun, format_time
from bridge.openlineage.convert import Converter
from bridge.openlineage.serialize import dumps
from bridge.openlineage.validate import validate_event

Position = tuple[str, int, int]  # (time, 0 change | 1 run, seq | pk), ("", -1, pk) a declared job
PROBLEMS_KEPT = 20


@attrs.frozen
class BackfillFilter(ExportFilter):
    """The export's filters, and ``asset``: only the runs that read or wrote it, and its changes."""

    asset: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {k: format_time(v) if isinstance(v, datetime) else v for k, v in attrs.asdict(self).items()}


@attrs.define
class BackfillSummary:
    checkpoint: str | None
    dry_run: bool
    resumed_from: Position | None = None
    runs: int = 0
    changes: int = 0
    jobs: int = 0  # declared jobs (JobEvents)
    events: int = 0  # delivered (or, in a dry run, counted)
    invalid: int = 0  # dry run: events that fail validation
    rejected: int = 0  # refused by the backend
    skipped: int = 0  # run ends not sent because the START was refused
    attempts: int = 0
    retries: int = 0
    seconds: float = 0.0
    complete: bool = False  # False when stopped before the end
    problems: list[dict[str, Any]] = attrs.Factory(list)

    def as_json(self) -> dict[str, Any]:
        out = camel_keys(attrs.asdict(self))
        out["eventsPerSecond"] = round(self.events / self.seconds, 1) if self.seconds > 0 else None
        out["seconds"] = round(self.seconds, 3)
        return out


class _Stopped(Exception):
    pass


Item = StoredTaskRun | AssetChange | StoredDeclaredJob


class Backfill:
    def __init__(
        self,
        catalog: Catalog,
        converter: Converter,
        dispatcher: Dispatcher | None,
        *,
        filters: BackfillFilter = BackfillFilter(),
        checkpoint: str | None = None,
        resume: bool = True,
        policy: RetryPolicy = RetryPolicy(),
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], object] | None = None,
        stop: threading.Event | None = None,
        window: int = 1000,
        progress: Callable[[int], object] | None = None,
    ) -> None:
        """``dispatcher`` None is a dry run: events are counted and validated, nothing is sent
        and the checkpoint is left alone."""
        self.catalog = catalog
        self.converter = converter
        self.dispatcher = dispatcher
        self.filters = filters
        self.checkpoint = checkpoint
        self.resume = resume
        self.policy = policy
        self.clock = clock
        self.stop = stop or threading.Event()
        self.sleep = sleep or self.stop.wait
        self.window = window
        self.progress = progress
        self.summary = BackfillSummary(checkpoint=checkpoint, dry_run=dispatcher is None)

    def start_position(self) -> Checkpoint | None:
        """The checkpoint this backfill resumes from (None: from the beginning)."""
        if self.checkpoint is None or not self.resume:
            return None
        found = self.catalog.get_checkpoint(self.checkpoint)
        if found is not None and found.filters != self.filters.as_json():
            raise ConfigError(
                f"checkpoint {self.checkpoint!r} belongs to a backfill with other filters "
                f"({json.dumps(found.filters, sort_keys=True)}); use --no-resume to start it again, "
                "or another --checkpoint"
            )
        return found

    def run(self) -> BackfillSummary:
        """Replay until the end or a stop request. Window N+1 is read and converted while window
        N is on the wire (one sending thread; the catalog is only touched from this one)."""
        began = self.clock()
        saved = self.start_position()
        self.summary.resumed_from = saved.position if saved else None
        totals = [saved.runs, saved.events] if saved else [0, 0]
        lookup = AssetLookup(self.catalog)
        items = self._items(self.summary.resumed_from)
        in_flight: tuple[Future[int], list[tuple[Position, Item]]] | None = None

        def finish() -> None:
            """Wait for the window on the wire, then move the checkpoint past it."""
            assert in_flight is not None
            future, window = in_flight
            delivered = future.result()
            totals[0] += self._count(window)
            totals[1] += delivered
            if self.checkpoint is not None:
                stamp = epoch_text(self.clock())
                filters = self.filters.as_json()
                self.catalog.save_checkpoint(
                    Checkpoint(self.checkpoint, filters, window[-1][0], totals[0], totals[1], stamp)
                )
            if self.progress is not None:
                self.progress(delivered)

        with ThreadPoolExecutor(1, thread_name_prefix="olbridge-backfill") as wire:
            try:
                while not self.stop.is_set():
                    window = list(itertools.islice(items, self.window))
                    lines = [self._lines(item, lookup) for _, item in window]
                    if self.dispatcher is None:  # a dry run
                        self._count(window)
                        checked = self._check([line for group in lines for line in group])
                        if self.progress is not None and checked:
                            self.progress(checked)
                    if in_flight is not None:
                        finish()
                        in_flight = None
                    if not window:
                        self.summary.complete = True
                        break
                    if self.dispatcher is not None and not self.stop.is_set():
                        in_flight = (wire.submit(self._send_window, lines), window)
                if in_flight is not None:
                    finish()
            except _Stopped:
                pass
        self.summary.seconds = self.clock() - began
        return self.summary

    def _items(self, after: Position | None) -> Iterator[tuple[Position, Item]]:
        f = self.filters
        if after is None or after[1] == -1:
            declared = self.catalog.iter_declared_jobs(
                since=f.since, until=f.until, namespace=f.namespace, flow=f.flow, after=after[2] if after else None
            )
            for job in declared:
                if f.asset is None or f.asset in {d.id for d in (*job.job.inputs, *job.job.outputs)}:
                    yield ("", -1, job.pk), job
        runs_after: tuple[str, int] | None = None
        changes_after: tuple[str, int] | None = None
        if after is not None:
            moment, order, ref = after
            # a run at time t sorts after every change at t, a change before every run at t
            runs_after = (moment, ref) if order == 1 else (moment, -1)
            changes_after = (moment, ref) if order == 0 else (moment, 2**62)
        runs: Iterator[tuple[Position, Item]] = (
            ((format_time(run.started_at), 1, run.pk), run)
            for run in self.catalog.iter_task_runs(
                since=f.since, until=f.until, namespace=f.namespace, flow=f.flow, asset=f.asset, after=runs_after
            )
        )
        if f.flow is not None:  # asset changes belong to no flow
            yield from runs
            return
        changes: Iterator[tuple[Position, Item]] = (
            ((format_time(change.changed_at), 0, change.seq), change)
            for change in self.catalog.iter_changes(
                since=f.since, until=f.until, namespace=f.namespace, asset=f.asset, after=changes_after
            )
        )
        yield from heapq.merge(runs, changes, key=lambda pair: pair[0])

    def _lines(self, item: Item, lookup: AssetLookup) -> list[str]:
        if isinstance(item, StoredTaskRun):
            return self.converter.task_run_lines(item, lookup.of_run(item))
        if isinstance(item, StoredDeclaredJob):
            return [dumps(self.converter.job_event(item, lookup.of_declared(item)))]
        return [dumps(self.converter.asset_change_event(item))]

    def _count(self, window: Sequence[tuple[Position, Item]]) -> int:
        """Count a window done in the summary; returns its task runs."""
        runs = sum(1 for _, item in window if isinstance(item, StoredTaskRun))
        jobs = sum(1 for _, item in window if isinstance(item, StoredDeclaredJob))
        self.summary.runs += runs
        self.summary.jobs += jobs
        self.summary.changes += len(window) - runs - jobs
        return runs

    def _send_window(self, lines: Sequence[list[str]]) -> int:
        """Deliver a window's events (each item's first, then the run ends whose START went);
        returns how many went."""
        firsts = self._deliver([group[0] for group in lines])
        ends = [i for i, group in enumerate(lines) if len(group) > 1 and firsts[i].ok]
        self.summary.skipped += sum(1 for i, group in enumerate(lines) if len(group) > 1 and not firsts[i].ok)
        lasts = self._deliver([lines[i][1] for i in ends])
        for outcomes, groups in ((firsts, [g[0] for g in lines]), (lasts, [lines[i][1] for i in ends])):
            for outcome, line in zip(outcomes, groups, strict=True):
                if not outcome.ok:
                    self._problem(line, outcome)
        delivered = sum(o.ok for o in firsts) + sum(o.ok for o in lasts)
        self.summary.events += delivered
        return delivered

    def _deliver(self, lines: Sequence[str]) -> list[Outcome]:
        """Send events of different runs until each is delivered or refused for good."""
        assert self.dispatcher is not None
        final: list[Outcome | None] = [None] * len(lines)
        attempts = [0] * len(lines)
        waiting = list(range(len(lines)))
        while waiting:
            outcomes = self.dispatcher.send([lines[i] for i in waiting])
            again: list[int] = []
            wait = 0.0
            for i, outcome in zip(waiting, outcomes, strict=True):
                attempts[i] += 1
                self.summary.attempts += 1
                if outcome.retry and not self.policy.gives_up(attempts[i]):
                    again.append(i)
                    wait = max(wait, self.policy.delay(attempts[i], outcome.retry_after))
                else:
                    final[i] = outcome
            waiting = again
            if waiting:
                self.summary.retries += len(waiting)
                if self.stop.is_set():
                    raise _Stopped
                self.sleep(wait)
        return [o for o in final if o is not None]

    def _check(self, lines: Sequence[str]) -> int:
        for line in lines:
            problems = validate_event(json.loads(line))
            if problems:
                self.summary.invalid += 1
                if len(self.summary.problems) < PROBLEMS_KEPT:
                    self.summary.problems.append({"event": _describe(line), "problems": [str(p) for p in problems]})
        self.summary.events += len(lines)
        return len(lines)

    def _problem(self, line: str, outcome: Outcome) -> None:
        self.summary.rejected += 1
        if len(self.summary.problems) < PROBLEMS_KEPT:
            self.summary.problems.append({"event": _describe(line), "status": outcome.status, "detail": outcome.detail})


def _describe(line: str) -> str:
    event = json.loads(line)
    if "run" in event:
        job = event.get("job", {})
        return f"{event.get('eventType')} {job.get('namespace')}/{job.get('name')} run {event['run'].get('runId')}"
    dataset = event.get("dataset", {})
    return f"DatasetEvent {dataset.get('namespace')}/{dataset.get('name')} at {event.get('eventTime')}"
