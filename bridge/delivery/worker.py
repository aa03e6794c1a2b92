"""The stream worker: drains the catalog's outbox to a backend.

Each round takes the pending rows that are due and first of their run key (so at most one event
per run, and a run's end only once its START is delivered), renders them, sends them through a
:class:`~bridge.delivery.dispatch.Dispatcher`, and records the outcomes in one transaction:
delivered rows are deleted, the others wait for their retry or become dead letters. A row is
marked delivered only after the backend's 2xx, so a worker killed at any point loses nothing;
the next one sends the events in flight again, and the deterministic run ids make that harmless.

The clock and the sleep are the caller's (tests drive them); ``stop`` ends the loop after the
round in flight. Failures are said as they happen through a :class:`~bridge.delivery.report.
FailureReport` (rate-limited), and each round's last failure (to the backend, and to an alert's
webhook, each its source's) is kept in the catalog with its outcomes (``olbridge status``). With
``give_up_after`` the worker stops once that many seconds have passed without a delivery while
deliveries fail (a retry due later is not waited for), leaving the events pending;
:attr:`StreamWorker.gave_up` says so. With a :class:`~bridge.delivery.lease.OutboxLease`
(SQLite), the worker sends nothing before it holds the outbox's lease, and stops if it loses it.
With :class:`~bridge.delivery.claims.OutboxClaims` (PostgreSQL), it shares the outbox with other
workers: each round it claims the rows it sends, sends only those it still holds, and settles
only those. Either stops when its heartbeat failed (:class:`~bridge.delivery.heartbeat.OutboxHold`).

Without a dispatcher (``olbridge stream --alerts-only``: no OpenLineage backend) the worker takes
the alerts alone, each of its own run key, so that taking them past the events changes no order;
the events stay pending for a worker with a backend.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from bridge.catalog import Catalog
from bridge.catalog.availability import Availability
from bridge.catalog.outbox import (
    ALERT,
    ALERTS_ONLY_TARGET,
    ALERTS_SOURCE,
    Dead,
    Delivered,
    DeliveryError,
    OutboxItem,
    Result,
    RetryLater,
    alert_of,
)
from bridge.delivery.alerts import AlertSenders
from bridge.delivery.dispatch import NOT_SENT, Dispatcher
from bridge.delivery.heartbeat import hold_clock
from bridge.delivery.outbox_events import render
from bridge.delivery.report import FailureReport, retry_note
from bridge.delivery.retry import RetryPolicy
from bridge.delivery.senders import Outcome
from bridge.errors import BridgeError
from bridge.jsonkeys import camel_keys
from bridge.model import epoch_text
from bridge.openlineage.convert import Converter

# seconds a worker waits before it claims again when the retry due now is held by another worker
HELD_RETRY_WAIT = 0.05
ALERTS_ROUND = 50  # the alerts a round of a worker without a dispatcher takes (sent one at a time)

if TYPE_CHECKING:
    from bridge.delivery.heartbeat import OutboxHold


@attrs.define
class StreamStats:
    rounds: int = 0
    attempts: int = 0  # events sent, retries included
    delivered: int = 0
    retried: int = 0  # attempts that will be tried again
    dead: int = 0  # events refused for good (dead letters)
    gone: int = 0  # rows whose record no longer exists, removed unsent

    def as_json(self) -> dict[str, int]:
        return camel_keys(attrs.asdict(self))


def settle_outcome(seq: int, attempts: int, outcome: Outcome, policy: RetryPolicy, now: float) -> Result:
    """The outbox result of one attempt (``attempts`` counts this one). An attempt that got no
    answer (connection refused, timeout) says nothing against the event: it stays pending however
    many attempts it took (``--give-up-after`` bounds a ``--once`` run instead); an answer to retry
    (408, 429, 5xx) makes it a dead letter once the policy gives up."""
    if outcome.ok:
        return Delivered(seq)
    if outcome.retry and (outcome.status is None or not policy.gives_up(attempts)):
        at = now + policy.delay(attempts, outcome.retry_after)
        return RetryLater(seq, attempts, at, outcome.status, outcome.detail)
    return Dead(seq, attempts, outcome.status, outcome.detail)


@attrs.frozen
class GaveUp:
    """Why a worker with a retry budget stopped: ``seconds`` without a delivery while
    deliveries failed, the last failure, and when the next retry was due (None: the budget
    was spent)."""

    seconds: float
    last: Outcome | None
    next_retry: float | None = None
    last_was_alert: bool = False  # the last failure was an alert's, to its webhook (--once)


def stream_error(outcome: Outcome, target: str, now: float, source: str = "stream") -> DeliveryError:
    return DeliveryError(source, target, outcome.failure, outcome.status, outcome.detail, epoch_text(now))


def alert_error(item: OutboxItem, outcome: Outcome, now: float) -> DeliveryError:
    """An alert's failure, as its source's last one: its target the alert's name (the webhook,
    which may hold a secret, is never kept)."""
    name = (alert_of(item.run_key) or ("?", ""))[0]
    return stream_error(outcome, name, now, ALERTS_SOURCE)


class StreamWorker:
    def __init__(
        self,
        catalog: Catalog,
        converter: Converter,
        dispatcher: Dispatcher | None,
        *,
        policy: RetryPolicy = RetryPolicy(),
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], object] | None = None,
        stop: threading.Event | None = None,
        poll: float = 1.0,
        round_size: int | None = None,
        on_round: Callable[[StreamStats], object] | None = None,
        report: FailureReport | None = None,
        give_up_after: float = 0.0,
        lease: OutboxHold | None = None,
        notify: Callable[[str], object] | None = None,
        alerts: AlertSenders | None = None,
    ) -> None:
        self.catalog = catalog
        self.alerts = alerts  # the [[alerts]] webhooks (rows of kind alert go there, not to the backend)
        self.converter = converter
        self.dispatcher = dispatcher
        self.policy = policy
        self.clock = clock
        self.stop = stop or threading.Event()
        self.sleep = sleep or self.stop.wait
        self.poll = poll
        self.alerts_only = dispatcher is None  # no backend: the alerts alone (module docstring)
        self.target = ALERTS_ONLY_TARGET if dispatcher is None else dispatcher.sender.target
        self._round_size = round_size
        self.on_round = on_round
        self.report = report
        self.give_up_after = give_up_after
        self.lease = lease
        self.notify = notify
        self.stats = StreamStats()
        self.alert_report = FailureReport("the alerts' webhooks", report.emit) if report is not None else None
        self.gave_up: GaveUp | None = None
        self._failing_since: float | None = None  # the first failure since the last delivery
        self._once = False  # run(once=True): the budget counts the webhooks' failures too
        self._last_failure: Outcome | None = None
        self._last_was_alert = False
        self._pause: float | None = None  # after a round the backend stopped answering: until when to wait
        # the catalog going away and coming back, said once each (through notify)
        self.availability = Availability(notify or (lambda message: None))

    def run(self, *, once: bool = False) -> StreamStats:
        """Deliver until stopped; with ``once``, until nothing is left that can be sent (rows
        held back behind a dead letter stay). With a lease, wait for it first (``once``: an
        ExportError naming the holder instead)."""
        lease = self.lease
        if lease is not None and not lease.acquire(wait=not once, stop=self.stop, sleep=self.sleep, notify=self.notify):
            return self.stats  # stopped while waiting
        self._once = once
        try:
            self._loop(once)
        finally:
            if self.report is not None:
                self.report.flush()
            if self.alert_report is not None:
                self.alert_report.flush()
            if self.lease is not None:
                self.lease.release()
        return self.stats

    def _loop(self, once: bool) -> None:
        outbox = self.catalog.outbox
        while not self.stop.is_set():
            if self.lease is not None:
                self.lease.check()
            try:
                took = self.step()
                due = None if took else outbox.next_retry_at(alerts_only=self.alerts_only)
            except Exception as exc:  # before anything was sent: settling waits in _settle
                if not self.catalog.unavailable(exc):
                    raise
                self._away(exc)
                self.sleep(self.poll)  # the catalog is busy or out of reach: try again
                continue
            self.availability.up()
            if took:
                pause, self._pause = self._pause, None
                if self._out_of_budget(pause):
                    return
                if pause is not None:  # the backend is away: wait for the first retry due
                    self.sleep(max(0.0, pause - self.clock()))
                continue
            if due is None:
                if once:
                    return
                self.sleep(self.poll)
                continue
            if self._out_of_budget(due):
                return
            # a retry due now that this round did not take is another worker's (it holds the row):
            # wait a moment for it rather than claim again at once
            wait = max(due - self.clock(), min(HELD_RETRY_WAIT, self.poll))
            self.sleep(wait if once else min(wait, self.poll))

    def _out_of_budget(self, due: float | None) -> bool:
        """True (and :attr:`gave_up` set) once deliveries have failed for ``give_up_after``
        seconds with none delivered, or when the next retry is due only after that."""
        if self.give_up_after <= 0 or self._failing_since is None:
            return False
        deadline = self._failing_since + self.give_up_after
        now = self.clock()
        if now < deadline and (due is None or due <= deadline):
            return False
        self.gave_up = GaveUp(
            now - self._failing_since, self._last_failure, due if now < deadline else None, self._last_was_alert
        )
        return True

    @property
    def round_size(self) -> int:
        """The events a round takes (its outcomes are recorded at its end, so a worker killed or
        stalled mid-round sends them again from the next round): ``concurrency`` requests of a
        batch each, or, sent one event a request (no batch endpoint, Marquez's), ``concurrency``
        x :data:`~bridge.delivery.dispatch.ONE_BY_ONE` events."""
        if self._round_size is not None:
            return self._round_size
        return ALERTS_ROUND if self.dispatcher is None else self.dispatcher.concurrency * self.dispatcher.per_connection

    def step(self) -> bool:
        """One round; False when no row was due."""
        outbox = self.catalog.outbox
        began = self.clock()
        lease = self.lease
        size, alerts_only = self.round_size, self.alerts_only
        taken_at = hold_clock()
        items = (
            lease.take(began, size, alerts_only=alerts_only)
            if lease is not None
            else outbox.heads(began, size, alerts_only=alerts_only)
        )
        if not items:
            return False
        rendered, failed = self._render(items)
        gone = [item.seq for item in items if item.seq not in failed and rendered.get(item.seq) is None]
        sending = [item for item in items if rendered.get(item.seq) is not None]
        confirmed = taken_at
        if lease is not None and not lease.fresh(taken_at):
            # only what this worker still holds (another took over a stalled one's)
            held = lease.confirm([item.seq for item in sending])
            sending = [item for item in sending if item.seq in held]
            confirmed = hold_clock()
        hold = lease.ttl / 2 if lease is not None else None

        def proceed() -> bool:
            """Whether the round may make another request: not once stopped, nor once half its
            hold's time has gone since it claimed or confirmed what it holds (stalled past its
            claims or lease, another worker may send those rows now: a new round claims or
            confirms them again)."""
            return not self.stop.is_set() and (hold is None or hold_clock() - confirmed < hold)

        outcomes = self._send(sending, rendered, proceed)
        unsent = {item.seq for item, o in zip(sending, outcomes, strict=True) if o is NOT_SENT}
        if unsent:  # untouched: sent again by a later round (anyone's), no attempt counted
            kept = [(item, o) for item, o in zip(sending, outcomes, strict=True) if item.seq not in unsent]
            sending, outcomes = [item for item, _ in kept], [o for _, o in kept]
        now = self.clock()
        results: list[Result] = [Dead(seq, 0, None, why) for seq, why in failed.items()]
        retrying: list[tuple[Outcome, float]] = []
        dead: list[Outcome] = []
        alert_retrying: list[tuple[Outcome, float]] = []
        alert_dead: list[Outcome] = []
        for item, outcome in zip(sending, outcomes, strict=True):
            result = settle_outcome(item.seq, item.attempts + 1, outcome, self.policy, now)
            if isinstance(result, Delivered) and item.kind == ALERT:
                result = Delivered(item.seq, alert=True)
            results.append(result)
            self.stats.attempts += 1
            if isinstance(result, Delivered):
                self.stats.delivered += 1
            elif isinstance(result, RetryLater):
                self.stats.retried += 1
                (alert_retrying if item.kind == ALERT else retrying).append((outcome, result.at))
            else:
                self.stats.dead += 1
                (alert_dead if item.kind == ALERT else dead).append(outcome)
        self.stats.dead += len(failed)
        # the backend stopped answering (nothing it was sent got an answer): the next round waits
        # for the first retry of those it tried, not probing the other rows a round at a time,
        # each a timeout (whether this round left rows unsent or, a round of what is in flight,
        # tried them all)
        away = outcomes and all(not o.ok and o.retry and o.status is None for o in outcomes)
        self._pause = min((at for _, at in retrying), default=None) if away else None
        self._report_alerts(alert_retrying, alert_dead, now)
        failures = [o for item, o in zip(sending, outcomes, strict=True) if not o.ok and item.kind != ALERT]
        errors = self._errors(sending, outcomes, now)
        owner = lease.owner if lease is not None else None
        if not self._settle(
            lambda: outbox.settle(results, success_at=epoch_text(now), failures=errors, claimed_by=owner)
        ):
            return True
        if gone:
            self._settle(lambda: outbox.drop(gone))
            self.stats.gone += len(gone)
        if unsent and lease is not None:
            # their claims given back once the others' outcomes are recorded (the catalog away as
            # it gives them back, those are not lost: a later round would send them again); not
            # given back (stopped while it is away), they lapse
            self._settle(lambda: lease.put_back(sorted(unsent)))
        # the backend's outcomes only: a webhook that answers says nothing of the backend (and one
        # that does not, alerts being a side channel, never makes a stream that runs on give up;
        # a --once run, which must end, spends its budget on them too, and so does a worker of
        # alerts alone, whose only outcomes they are)
        webhooks_count = self._once or self.alerts_only
        if any(o.ok for item, o in zip(sending, outcomes, strict=True) if item.kind != ALERT or webhooks_count):
            self._failing_since = None
        elif (retrying or (webhooks_count and alert_retrying)) and self._failing_since is None:
            self._failing_since = began
        if failures or alert_retrying or alert_dead:
            self._last_failure = failures[-1] if failures else (alert_dead or [o for o, _ in alert_retrying])[-1]
            self._last_was_alert = not failures
        if self.report is not None:
            if retrying:
                self.report.failed([o for o, _ in retrying], retry_note(min(at for _, at in retrying), now))
            if dead:
                self.report.failed(dead, "kept as dead letter(s): olbridge outbox list --dead")
        self.stats.rounds += 1
        if self.on_round is not None:
            self.on_round(self.stats)
        return True

    def _send(
        self, items: list[OutboxItem], rendered: dict[int, str | None], proceed: Callable[[], bool]
    ) -> list[Outcome]:
        """The outcome of each item: alerts through their webhooks, the others through the
        dispatcher (each request only while ``proceed`` says so), in the items' order."""
        lines = [rendered[item.seq] or "" for item in items]
        alerts = [i for i, item in enumerate(items) if item.kind == ALERT]
        others = [i for i, item in enumerate(items) if item.kind != ALERT]
        if others and self.dispatcher is None:  # never taken (heads of alerts alone): a bug if so
            raise AssertionError("a stream worker without a backend took OpenLineage events")
        if not alerts and self.dispatcher is not None:
            return self.dispatcher.send(lines, proceed=proceed)
        out: dict[int, Outcome] = {}
        if self.dispatcher is not None and others:
            out.update(zip(others, self.dispatcher.send([lines[i] for i in others], proceed=proceed), strict=True))
        if self.alerts is None:
            sent = [Outcome(ok=False, detail="no [[alerts]] tables in the config")] * len(alerts)
        elif not proceed():  # stopped, or its hold may have lapsed: a later round sends them
            sent = [NOT_SENT] * len(alerts)
        else:
            sent = self.alerts.send([lines[i] for i in alerts])
        out.update(zip(alerts, sent, strict=True))
        return [out[i] for i in range(len(items))]

    def _errors(self, items: list[OutboxItem], outcomes: list[Outcome], now: float) -> list[DeliveryError]:
        """The round's last failure to the backend and its last failure to an alert's webhook,
        each kept as its source's last one (``olbridge status``)."""
        failed = [(item, o) for item, o in zip(items, outcomes, strict=True) if not o.ok]
        backend = [o for item, o in failed if item.kind != ALERT]
        alerts = [(item, o) for item, o in failed if item.kind == ALERT]
        errors = [stream_error(backend[-1], self.target, now)] if backend else []
        return errors + ([alert_error(*alerts[-1], now)] if alerts else [])

    def _report_alerts(self, retrying: list[tuple[Outcome, float]], dead: list[Outcome], now: float) -> None:
        if self.alert_report is None:
            return
        if retrying:
            self.alert_report.failed([o for o, _ in retrying], retry_note(min(at for _, at in retrying), now))
        if dead:
            self.alert_report.failed(dead, "kept as dead letter(s): olbridge outbox list --dead")

    def _settle(self, write: Callable[[], object]) -> bool:
        """Record outcomes, waiting while the catalog cannot take them (another process holds
        SQLite's write lock, a long ``record`` say; the PostgreSQL server is away). Stopped before
        it could, the events stay queued and go again."""
        while True:
            try:
                write()
                return True
            except Exception as exc:
                if not self.catalog.unavailable(exc):
                    raise
                self._away(exc)
                if self.stop.is_set():
                    return False
                self.sleep(self.poll)

    def _away(self, exc: BaseException) -> None:
        """The catalog could not take a round: said once, until it takes one again."""
        self.availability.down(self.catalog.unavailable_reason(exc))

    def _render(self, items: list[OutboxItem]) -> tuple[dict[int, str | None], dict[int, str]]:
        """The events of the rows, and the rows that cannot be rendered with why (a naming rule
        that fails on a record, say): those become dead letters, the others go."""
        try:
            return render(self.catalog, self.converter, items), {}
        except BridgeError:
            pass
        rendered: dict[int, str | None] = {}
        failed: dict[int, str] = {}
        for item in items:
            try:
                rendered.update(render(self.catalog, self.converter, [item]))
            except BridgeError as exc:
                failed[item.seq] = f"cannot render the event: {exc}"
        return rendered, failed
