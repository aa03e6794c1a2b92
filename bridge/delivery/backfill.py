"""Backfill: the catalog's history replayed to a backend, resumable.

Task runs come from :meth:`Catalog.iter_task_runs` (paged, so memory stays flat) in start order,
merged by time with the asset changes made outside any run. They go out a window at a time:
first every item's first event (the STARTs and the DatasetEvents) side by side, then the ends of
the runs whose START was delivered, so a run's end never goes before its START. Flows' declared
jobs go first, as JobEvents (as ``olbridge export`` sends them).

An event is settled when the backend took it (2xx) or refused it for good (400, 422, other 4xx,
Marquez's 500 with ``"code":400``); a refused START settles its run's end too, unsent. Refused
events are kept in the catalog under the checkpoint (``olbridge status`` counts them) until a
backfill with ``retry_refused`` delivers them. Connection errors, timeouts, 408, 429 and 5xx are
never refusals: they are retried (reported through a :class:`~bridge.delivery.report.
FailureReport`), and an event whose ``max_attempts`` run out is undelivered: the backfill stops
after its window with :attr:`BackfillSummary.error` set.

After each window the checkpoint (in the catalog) moves to the last item of the window's settled
prefix, as (time, 0 for an asset change or 1 for a run, seq or pk; a declared job is ("", -1, its
pk)): never past an event that was not delivered or refused. The items past it that the window
settled in whole or in part are kept with it (``ahead``), so the next run sends neither them nor a
run's START again. The checkpoint also keeps the highest key of the declared jobs it settled: a
job declared after it passed the jobs goes first when it resumes (its position before the
checkpoint's, which stays where it was). A stop request lets the window in flight finish (a retry in progress ends it
early, undelivered). Events are the converter's, deterministic: replaying sends the same bytes.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import attrs

from bridge.catalog import Catalog
from bridge.catalog.availability import Availability
from bridge.catalog.engine import masked
from bridge.catalog.outbox import DeliveryError
from bridge.catalog.positions import Checkpoint, ItemPosition, RefusedItem
from bridge.catalog.query import HistoryFilter
from bridge.catalog.retention import holder_id, lease_holder, release_lease, take_lease
from bridge.delivery.dispatch import Dispatcher, Pass, deliver
from bridge.delivery.history import AssetLookup
from bridge.delivery.report import FailureReport, describe, describe_event, retry_note
from bridge.delivery.retry import RetryPolicy
from bridge.delivery.senders import Outcome
from bridge.errors import Busy, CatalogError, ConfigError, NotFoundError, Unavailable
from bridge.jsonkeys import camel_keys
from bridge.model import AssetChange, StoredDeclaredJob, StoredTaskRun, epoch_text, format_time
from bridge.openlineage.convert import Converter
from bridge.openlineage.serialize import dumps
from bridge.openlineage.validate import validate_event

PROBLEMS_KEPT = 20
LEASE_TTL = 120.0  # seconds a backfill holds its checkpoint unless it renews its hold
RENEW_EVERY = 10.0  # seconds between renewals, at least (at each window, and while one waits)
STOPPED = Outcome(ok=False, retry=True, detail="the backfill was stopped before it was delivered", error="stopped")


@attrs.define
class BackfillSummary:
    checkpoint: str | None
    dry_run: bool
    resumed_from: ItemPosition | None = None
    runs: int = 0  # task runs whose events were all settled by this backfill
    changes: int = 0
    jobs: int = 0  # declared jobs (JobEvents)
    events: int = 0  # delivered (or, in a dry run, counted)
    invalid: int = 0  # dry run: events that fail validation
    refused: int = 0  # refused for good by the backend: kept with the checkpoint
    undelivered: int = 0  # not delivered (retries ran out, or a stop): the checkpoint stays before them
    skipped: int = 0  # run ends not sent because the START was refused (kept with it)
    # runs still running when their START went: the checkpoint passes them, so a later backfill of
    # it does not send their ends (the stream does; or --no-resume)
    running: int = 0
    resent: int = 0  # events refused before, delivered now (retry_refused)
    attempts: int = 0
    retries: int = 0
    seconds: float = 0.0
    complete: bool = False  # False when stopped before the end
    stopped_before: str | None = None  # the first event not delivered
    error: str | None = None  # why the backfill stopped short: it failed
    problems: list[dict[str, Any]] = attrs.Factory(list)

    def as_json(self) -> dict[str, Any]:
        out = camel_keys(attrs.asdict(self))
        out["eventsPerSecond"] = round(self.events / self.seconds, 1) if self.seconds > 0 else None
        out["seconds"] = round(self.seconds, 3)
        return out


Item = StoredTaskRun | AssetChange | StoredDeclaredJob


@attrs.define
class _Slot:
    """One item of a window: its events, and how many of them (from the first) are settled."""

    position: ItemPosition
    item: Item
    lines: list[str]
    settled: int = 0
    initial: int = 0  # settled before this backfill (a window of an earlier one got that far)
    delivered: int = 0
    refused: RefusedItem | None = None
    last: Outcome | None = None  # what left it unsettled

    @property
    def done(self) -> bool:
        return self.settled >= len(self.lines)

    def event_name(self, index: int) -> str:
        if isinstance(self.item, StoredTaskRun):
            return "start" if index == 0 else "end"
        return "event"


# a checkpoint's write that the catalog cannot take now (a database restarting) is tried again
# every SAVE_POLL seconds for at most SAVE_WAIT_AT_MOST (whatever a stop asks: what went is kept)
SAVE_POLL, SAVE_WAIT_AT_MOST = 1.0, 300.0


class Backfill:
    def __init__(
        self,
        catalog: Catalog,
        converter: Converter,
        dispatcher: Dispatcher | None,
        *,
        filters: HistoryFilter = HistoryFilter(),
        checkpoint: str | None = None,
        resume: bool = True,
        retry_refused: bool = False,
        policy: RetryPolicy = RetryPolicy(),
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], object] | None = None,
        stop: threading.Event | None = None,
        window: int = 1000,
        progress: Callable[[int], object] | None = None,
        report: FailureReport | None = None,
        say: Callable[[str], object] | None = None,
    ) -> None:
        """``dispatcher`` None is a dry run: events are counted and validated, nothing is sent
        and the checkpoint is left alone. ``retry_refused`` first sends again the events the
        backend refused in earlier runs of this checkpoint."""
        self.catalog = catalog
        self.converter = converter
        self.dispatcher = dispatcher
        self.filters = filters
        self.checkpoint = checkpoint
        self.resume = resume
        self.retry_refused = retry_refused
        self.policy = policy
        self.clock = clock
        self.stop = stop or threading.Event()
        self.sleep = sleep or self.stop.wait
        self.window = window
        self.progress = progress
        self.report = report
        self.summary = BackfillSummary(checkpoint=checkpoint, dry_run=dispatcher is None)
        self._position: ItemPosition | None = None
        self._jobs_through: int | None = 0  # the highest declared job's key settled (None: not known)
        self._ahead: dict[ItemPosition, int] = {}
        self._totals = [0, 0]  # task runs and events, since the checkpoint began
        self._clear_refused = False
        self._failure: tuple[Outcome, float] | None = None  # the latest, from the sending thread
        self._failure_kept: tuple[Outcome, float] | None = None
        # the catalog's availability to the checkpoint's writes, said once as it goes and comes
        self._availability = Availability(say or (lambda message: None))
        self._holder, self._held_at = holder_id(), 0.0  # the checkpoint's lease: who, when last renewed
        self._main = threading.get_ident()  # the thread that touches the catalog

    @property
    def target(self) -> str:
        return self.dispatcher.sender.target if self.dispatcher is not None else "(dry run)"

    def start_position(self) -> Checkpoint | None:
        """The checkpoint this backfill resumes from (None: from the beginning)."""
        if self.checkpoint is None or not self.resume:
            return None
        found = self.catalog.backfills.checkpoint(self.checkpoint)
        if found is not None and found.filters != self.filters.as_json():
            raise ConfigError(
                f"checkpoint {self._name!r} belongs to a backfill with other filters "
                f"({json.dumps(found.filters, sort_keys=True)}); use --no-resume to start it again, "
                "or another --checkpoint"
            )
        return found

    def run(self) -> BackfillSummary:
        """Replay until the end, a stop request, or an event that cannot be delivered. Window
        N+1 is read and converted while window N is on the wire (one sending thread; the catalog
        is only touched from this one). A checkpoint is sent by one backfill at a time, across
        the catalog's processes (:meth:`_hold`): a second of the same refuses to start."""
        if self.checkpoint is None or self.dispatcher is None:  # nothing kept: nothing to hold
            return self._run()
        self._hold()
        try:
            return self._run()
        finally:
            try:
                release_lease(self.catalog.db, self._holder, kind=self._lease_kind)
            except Exception as exc:  # the catalog away: the lease lapses on its own
                if not self._away(exc):
                    raise

    @property
    def _lease_kind(self) -> str:
        return f"backfill-lease:{self._name}"

    @property
    def _name(self) -> str:
        """The checkpoint's name as messages show it and its lease is named: a password in it (a
        checkpoint kept before under a URL with its password) masked."""
        return masked(self.checkpoint or "")

    def _away(self, exc: BaseException) -> bool:
        """Whether an error says the catalog cannot be written now (locked, busy, restarting)."""
        return isinstance(exc, Unavailable | Busy) or self.catalog.unavailable(exc)

    def _hold(self) -> None:
        """Take the checkpoint's lease (a row of positions beside it, as retention's and the
        health watch's), or refuse, naming its holder: two backfills of one checkpoint each sent
        every event, both from where it stood."""
        self._held_at = time.time()
        if not take_lease(self.catalog.db, self._holder, self._held_at, LEASE_TTL, kind=self._lease_kind):
            held = lease_holder(self.catalog.db.conn, time.time(), kind=self._lease_kind)
            who = f" ({held.describe()})" if held is not None else ""
            raise CatalogError(
                f"another backfill is sending checkpoint {self._name!r}{who}; one at a time (both would send "
                "every event from where it stands): wait for it to end, or give this one another --checkpoint"
            )

    def _renew(self) -> None:
        """Renew the checkpoint's lease, every :data:`RENEW_EVERY` seconds at most; another
        backfill that took it over (this one stalled past :data:`LEASE_TTL`) stops this one."""
        now = time.time()
        if self.checkpoint is None or self.dispatcher is None or now - self._held_at < RENEW_EVERY:
            return
        try:
            held = take_lease(self.catalog.db, self._holder, now, LEASE_TTL, kind=self._lease_kind)
        except Exception as exc:
            if self._away(exc):
                return  # renewed once it is back (the checkpoint waits for it too)
            raise
        if not held:
            raise CatalogError(
                f"another backfill took checkpoint {self._name!r} over while this one stalled; this one stops"
            )
        self._held_at = now

    def _run(self) -> BackfillSummary:
        began = self.clock()
        saved = self.start_position()
        if saved is not None:
            self._position, self._ahead = saved.position, dict(saved.ahead)
            self._jobs_through = saved.jobs_through
            self._totals = [saved.runs, saved.events]
        self.summary.resumed_from = self._position
        self._clear_refused = self.checkpoint is not None and not self.resume
        lookup = AssetLookup(self.catalog)
        if self.retry_refused and self.dispatcher is not None and self.checkpoint is not None and saved is not None:
            self._resend_refused(lookup)
        if self.summary.error is None:
            self._replay(lookup)
        self.summary.seconds = self.clock() - began
        return self.summary

    def _replay(self, lookup: AssetLookup) -> None:
        items = self._items(self._position)
        in_flight: tuple[Future[None], list[_Slot]] | None = None
        with ThreadPoolExecutor(1, thread_name_prefix="olbridge-backfill") as wire:
            while not self.stop.is_set():
                self._renew()
                slots = [self._slot(position, item, lookup) for position, item in itertools.islice(items, self.window)]
                if self.dispatcher is None:  # a dry run
                    self._dry_run(slots)
                if in_flight is not None:
                    self._finish(*in_flight)
                    in_flight = None
                    if self.summary.stopped_before is not None:
                        return
                if not slots:
                    self.summary.complete = True
                    return
                if self.dispatcher is not None and not self.stop.is_set():
                    in_flight = (wire.submit(self._send_window, slots), slots)
            if in_flight is not None:
                self._finish(*in_flight)

    def _finish(self, future: Future[None], slots: list[_Slot]) -> None:
        """Wait for the window on the wire (keeping the latest failure for ``olbridge status``
        meanwhile), then move the checkpoint to the end of its settled prefix."""
        while True:
            try:
                future.result(timeout=1.0)
                break
            except concurrent.futures.TimeoutError:
                self._keep_failure()
                self._renew()
        prefix = next((i for i, slot in enumerate(slots) if not slot.done), len(slots))
        for slot in slots[:prefix]:
            if isinstance(slot.item, StoredDeclaredJob):
                self._jobs_through = max(self._jobs_through or 0, slot.item.pk)
        if prefix and (self._position is None or slots[prefix - 1].position > self._position):
            self._position = slots[prefix - 1].position  # not back to a job declared after it passed them
        ahead = {p: n for p, n in self._ahead.items() if p > slots[-1].position}
        ahead.update((slot.position, slot.settled) for slot in slots[prefix:] if slot.settled > 0)
        self._ahead = ahead
        finished = [slot for slot in slots if slot.done and slot.initial < len(slot.lines)]
        self.summary.running += sum(
            1 for slot in finished if isinstance(slot.item, StoredTaskRun) and not slot.item.state.is_terminal
        )
        runs = self._count([slot.item for slot in finished])
        delivered = sum(slot.delivered for slot in slots)
        self._totals[0] += runs
        self._totals[1] += delivered
        self._save([slot.refused for slot in slots if slot.refused is not None])
        self._keep_failure()
        if self.progress is not None:
            self.progress(delivered)
        if prefix < len(slots):
            self._stopped_short(slots[prefix:])

    def _stopped_short(self, unsettled: list[_Slot]) -> None:
        first = unsettled[0]
        self.summary.undelivered += sum(len(slot.lines) - slot.settled for slot in unsettled if not slot.done)
        self.summary.stopped_before = describe_event(first.lines[first.settled])
        if self.stop.is_set() and first.last is STOPPED:
            return  # a stop request: resumed by the next run, not a failure
        last = first.last or STOPPED
        if last is STOPPED and self._failure is not None:  # left unsent behind one out of attempts
            last = self._failure[0]
        where = f"the checkpoint {self._name!r} stays before it" if self.checkpoint else "no checkpoint kept"
        self.summary.error = (
            f"backfill stopped: {self.summary.undelivered} event(s) could not be delivered to {self.target} "
            f"after {self.policy.max_attempts} attempt(s) each (last: {describe(last)}); it stopped before "
            f"{self.summary.stopped_before} and {where}; run it again to resume from there"
        )

    def _save(self, refused: list[RefusedItem], resolved: Sequence[RefusedItem] = ()) -> None:
        if self.checkpoint is None:
            return
        checkpoint = Checkpoint(
            self.checkpoint,
            self.filters.as_json(),
            self._position,
            self._totals[0],
            self._totals[1],
            epoch_text(self.clock()),
            tuple(sorted(self._ahead.items())),
            self._jobs_through,
        )
        waited_since = self.clock()
        while True:
            try:
                self.catalog.backfills.save(
                    checkpoint, refused=refused, resolved=resolved, clear_refused=self._clear_refused
                )
                break
            except Exception as exc:
                # the window went: a catalog away (a database restarting) is waited for, so that
                # the next backfill does not send it again; within a bound, past which it fails
                if not self.catalog.unavailable(exc) or self.clock() - waited_since >= SAVE_WAIT_AT_MOST:
                    raise
                self._availability.down(self.catalog.unavailable_reason(exc))
                (time.sleep if self.stop.is_set() else self.sleep)(SAVE_POLL)  # a stop's wait ends at once
        self._availability.up()
        self._clear_refused = False

    def _keep_failure(self) -> None:
        """Keep the latest delivery failure in the catalog (``olbridge status`` shows it)."""
        failure = self._failure
        if failure is None or failure is self._failure_kept or self.checkpoint is None:
            return
        outcome, at = failure
        source = f"backfill:{self.checkpoint}"
        self.catalog.outbox.record_error(
            DeliveryError(source, self.target, outcome.failure, outcome.status, outcome.detail, epoch_text(at))
        )
        self._failure_kept = failure

    # --- refused events sent again --------------------------------------------------------

    def _resend_refused(self, lookup: AssetLookup) -> None:
        """Send the checkpoint's refused events again, in order: a run's START, then its end."""
        assert self.checkpoint is not None
        entries = self.catalog.backfills.refused(self.checkpoint)
        gone: list[RefusedItem] = []
        for start in range(0, len(entries), self.window):
            self._renew()
            slots: list[_Slot] = []
            chunk = entries[start : start + self.window]
            for entry in chunk:
                item = self._find(entry.position)
                lines = self._lines(item, lookup) if item is not None else []
                settled = 1 if entry.event == "end" else 0
                if item is None or settled >= len(lines):
                    gone.append(entry)  # its record is gone (a purged change), or its end
                    continue
                slots.append(_Slot(entry.position, item, lines, settled=settled, initial=settled))
            self._send_window(slots)
            resolved = [*gone, *(_entry(slot) for slot in slots if slot.done and slot.refused is None)]
            pending = [_pending(slot, self.clock()) for slot in slots if not slot.done and slot.settled > slot.initial]
            refused = [slot.refused for slot in slots if slot.refused is not None]
            delivered = sum(slot.delivered for slot in slots)
            self.summary.resent += delivered
            self._totals[1] += delivered
            self._save([*refused, *pending], resolved)
            self._keep_failure()
            gone = []
            if self.progress is not None:
                self.progress(delivered)
            unsettled = [slot for slot in slots if not slot.done]
            if unsettled:
                self._stopped_short(unsettled)
                return

    def _find(self, position: ItemPosition) -> Item | None:
        _, order, ref = position
        if order == 1:
            return self.catalog.task_runs_by_pk([ref]).get(ref)
        if order == 0:
            return self.catalog.get_change(ref)
        try:
            return self.catalog.declared_job(ref)
        except NotFoundError:
            return None

    # --- reading ---------------------------------------------------------------------------

    def _items(self, after: ItemPosition | None) -> Iterator[tuple[ItemPosition, Item]]:
        f = self.filters
        if after is None or after[1] == -1:
            for job in self.catalog.iter_declared_jobs(f, after=after[2] if after else None):
                yield ("", -1, job.pk), job
        elif self._jobs_through is not None:  # past the jobs: those declared since, first
            for job in self.catalog.iter_declared_jobs(f, after=self._jobs_through):
                yield ("", -1, job.pk), job
        runs_after: tuple[str, int] | None = None
        changes_after: tuple[str, int] | None = None
        if after is not None:
            moment, order, ref = after
            # a run at time t sorts after every change at t, a change before every run at t
            runs_after = (moment, ref) if order == 1 else (moment, -1)
            changes_after = (moment, ref) if order == 0 else (moment, 2**62)
        runs: Iterator[tuple[ItemPosition, Item]] = (
            ((format_time(run.started_at), 1, run.pk), run) for run in self.catalog.iter_task_runs(f, after=runs_after)
        )
        changes: Iterator[tuple[ItemPosition, Item]] = (  # none with a flow filter: they belong to no flow
            ((format_time(change.changed_at), 0, change.seq), change)
            for change in self.catalog.iter_changes(f, after=changes_after)
        )
        yield from heapq.merge(runs, changes, key=lambda pair: pair[0])

    def _slot(self, position: ItemPosition, item: Item, lookup: AssetLookup) -> _Slot:
        lines = self._lines(item, lookup)
        settled = min(self._ahead.get(position, 0), len(lines))
        return _Slot(position, item, lines, settled=settled, initial=settled)

    def _lines(self, item: Item, lookup: AssetLookup) -> list[str]:
        if isinstance(item, StoredTaskRun):
            return self.converter.task_run_lines(item, lookup.of_run(item))
        if isinstance(item, StoredDeclaredJob):
            return [dumps(self.converter.job_event(item, lookup.of_declared(item)))]
        return [dumps(self.converter.asset_change_event(item))]

    def _count(self, items: Sequence[Item]) -> int:
        """Count items done in the summary; returns their task runs."""
        runs = sum(1 for item in items if isinstance(item, StoredTaskRun))
        jobs = sum(1 for item in items if isinstance(item, StoredDeclaredJob))
        self.summary.runs += runs
        self.summary.jobs += jobs
        self.summary.changes += len(items) - runs - jobs
        return runs

    # --- sending (on the sending thread) ---------------------------------------------------

    def _send_window(self, slots: Sequence[_Slot]) -> None:
        """Deliver a window's events: each item's first, then the run ends whose START went
        (in this window or an earlier one). Refused events settle their item (a refused START
        its run's end too); undelivered ones leave it unsettled."""
        for index in (0, 1):
            todo = [s for s in slots if not s.done and s.settled == index and s.last is None]
            if not todo:
                continue
            outcomes = self._deliver([slot.lines[index] for slot in todo])
            for slot, outcome in zip(todo, outcomes, strict=True):
                if outcome.ok:
                    slot.settled += 1
                    slot.delivered += 1
                elif outcome.refused:
                    at = epoch_text(self.clock())
                    name = slot.event_name(index)
                    slot.refused = RefusedItem(slot.position, name, outcome.status, outcome.detail, at)
                    self.summary.skipped += len(slot.lines) - index - 1
                    slot.settled = len(slot.lines)
                    self._problem(slot.lines[index], outcome)
                else:
                    slot.last = outcome
        self.summary.events += sum(slot.delivered for slot in slots)

    def _deliver(self, lines: Sequence[str]) -> list[Outcome]:
        """Send events of different runs until each is delivered, refused for good, or out of
        attempts (then its last outcome, to be retried); a stop request ends the retries."""
        assert self.dispatcher is not None
        final = deliver(
            self.dispatcher, lines, self.policy, clock=self.clock, sleep=self.sleep, stop=self.stop, observe=self._pass
        )
        return [o if o is not None else STOPPED for o in final]

    def _pass(self, done: Pass) -> None:
        """Count a pass of :func:`deliver`, keep its latest failure and report its failures (and,
        on the thread that touches the catalog, the refused events sent again, renew the lease:
        their retries may take longer than it lasts)."""
        if threading.get_ident() == self._main:
            self._renew()
        self.summary.attempts += len(done.outcomes)
        failed = [o for o in done.outcomes if not o.ok]
        if failed:
            self._failure = (failed[-1], done.at)
        if self.report is not None:
            self.report.failed(done.retried, retry_note(done.at + done.wait, done.at))
            self.report.failed(done.out_of_attempts, "out of attempts: the backfill stops after this window")
            self.report.failed(done.refused, "refused for good: kept with the checkpoint (--retry-refused)")
        self.summary.retries += sum(done.again)

    def _dry_run(self, slots: Sequence[_Slot]) -> None:
        """Count and check what the window would send: past what an earlier window of its
        checkpoint settled, as a real run would."""
        todo = [slot for slot in slots if slot.initial < len(slot.lines)]
        self._count([slot.item for slot in todo])
        checked = self._check([line for slot in todo for line in slot.lines[slot.initial :]])
        if self.progress is not None and checked:
            self.progress(checked)

    def _check(self, lines: Sequence[str]) -> int:
        for line in lines:
            problems = validate_event(json.loads(line))
            if problems:
                self.summary.invalid += 1
                if len(self.summary.problems) < PROBLEMS_KEPT:
                    self.summary.problems.append(
                        {"event": describe_event(line), "problems": [str(p) for p in problems]}
                    )
        self.summary.events += len(lines)
        return len(lines)

    def _problem(self, line: str, outcome: Outcome) -> None:
        self.summary.refused += 1
        if len(self.summary.problems) < PROBLEMS_KEPT:
            self.summary.problems.append(
                {"event": describe_event(line), "status": outcome.status, "detail": outcome.detail}
            )


def _entry(slot: _Slot) -> RefusedItem:
    return RefusedItem(slot.position, "", None, "", "")


def _pending(slot: _Slot, now: float) -> RefusedItem:
    """A refused run whose START went through on a retry while its end could not be delivered:
    kept, its end next."""
    last = slot.last or STOPPED
    return RefusedItem(slot.position, slot.event_name(slot.settled), last.status, last.detail, epoch_text(now))
