"""One round of delivery: events of different runs, split into requests sent side by side
(:class:`Dispatcher`), and sent again by a retry policy until each is settled (:func:`deliver`)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import attrs

from bridge.delivery.retry import RateLimiter, RetryPolicy
from bridge.delivery.senders import Outcome, Sender

# the outcome of an event a round did not send (``proceed`` said no, or the backend stopped
# answering): not an attempt; the caller sends it again, untouched
NOT_SENT = Outcome(ok=False, retry=True, detail="not sent in this round", error="not sent")
# the events a round gives each connection, sent one a request (no batch endpoint): the round
# records their outcomes at its end, so a worker killed mid-round sends again at most so many a
# connection; the more, the fewer rounds' writes to the catalog an event
ONE_BY_ONE = 8


class Dispatcher:
    """Sends rounds of events with at most ``concurrency`` requests in flight, up to
    ``batch_size`` events a request. The events of one round belong to different runs (the
    callers see to that), so their order within the round does not matter. Once ``stop`` is set
    no request is made (those in flight are answered): the events of the others are
    :data:`NOT_SENT`, a rate limit's wait that the stop ended among them."""

    def __init__(
        self,
        sender: Sender,
        *,
        concurrency: int = 4,
        batch_size: int = 200,
        limiter: RateLimiter | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.sender = sender
        self.concurrency = max(1, min(concurrency, sender.max_concurrency))
        self.batch_size = max(1, batch_size)
        self.limiter = limiter
        self.stop = stop
        self._pool = (
            ThreadPoolExecutor(self.concurrency, thread_name_prefix="olbridge-send") if self.concurrency > 1 else None
        )

    @property
    def per_connection(self) -> int:
        """The events a round gives each connection: a batch, or, once the sender sends one event
        a request, :data:`ONE_BY_ONE` of them."""
        return self.batch_limit if getattr(self.sender, "batch", True) else min(self.batch_size, ONE_BY_ONE)

    @property
    def batch_limit(self) -> int:
        """The events a batch request holds at most: ``batch_size``, or fewer where the backend
        refused a batch as too large (the sender's ``batch_limit``)."""
        limit: int | None = getattr(self.sender, "batch_limit", None)
        return self.batch_size if limit is None else max(1, min(self.batch_size, limit))

    def send(self, lines: Sequence[str], *, proceed: Callable[[], bool] | None = None) -> list[Outcome]:
        """The outcome of each event, in order. With ``proceed``, asked before each request: once
        it says no the requests not yet made are not made, and their events are
        :data:`NOT_SENT`; so are the rest of a connection's share (a chunk) of a sender of one
        event a request past :data:`ONE_BY_ONE` of them, and, sent one by one, those after one
        that went unanswered (the backend is away: no use waiting out a timeout an event)."""
        if not lines:
            return []
        size = min(self.batch_limit, math.ceil(len(lines) / self.concurrency))
        chunks = [lines[i : i + size] for i in range(0, len(lines), size)]
        one = self._one if proceed is None else self._checked(proceed)
        if self._pool is None or len(chunks) == 1:
            results = [one(chunk) for chunk in chunks]
        else:
            results = list(self._pool.map(one, chunks))
        return [outcome for chunk in results for outcome in chunk]

    def _checked(self, proceed: Callable[[], bool]) -> Callable[[Sequence[str]], list[Outcome]]:
        def one(chunk: Sequence[str]) -> list[Outcome]:
            if not proceed() or self._stopped():
                return [NOT_SENT] * len(chunk)
            paid = False  # the rate limit's share of the chunk taken
            if getattr(self.sender, "batch", True):
                tried = getattr(self.sender, "try_batch", None)
                if tried is None:  # a sender of its own ways
                    return self._one(chunk)
                if self.limiter is not None:
                    self.limiter.acquire(len(chunk))
                    paid = True
                    if self._stopped():  # (the stop ended the wait)
                        return [NOT_SENT] * len(chunk)
                outcomes: list[Outcome] | None = tried(chunk)
                if outcomes is not None:
                    return outcomes
            # one by one: a batch refused whole, naming no event (to find the one refused), or no
            # batch endpoint (Marquez), whose rounds give a connection ONE_BY_ONE events: of a
            # larger chunk (the first round, which found the endpoint missing) the rest stays
            # untouched for the next rounds (a round records its outcomes at its end: a worker
            # killed mid-round sends again what it sent in the round, so a round stays small)
            going = chunk if getattr(self.sender, "batch", True) else chunk[:ONE_BY_ONE]
            if paid and self.limiter is not None and len(going) < len(chunk):
                self.limiter.refund(len(chunk) - len(going))  # the batch's share taken, fewer sent
            out: list[Outcome] = []
            for line in going:
                if out and (not proceed() or self._stopped() or (out[-1].retry and out[-1].status is None)):
                    break
                out += self.sender.send([line]) if paid else self._one([line])
            return out + [NOT_SENT] * (len(chunk) - len(out))

        return one

    def _one(self, chunk: Sequence[str]) -> list[Outcome]:
        if self._stopped():
            return [NOT_SENT] * len(chunk)
        if self.limiter is not None:
            self.limiter.acquire(len(chunk))
            if self._stopped():  # the stop ended the wait: nothing new goes
                return [NOT_SENT] * len(chunk)
        return self.sender.send(chunk)

    def _stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def close(self) -> None:
        """Wait for requests in flight, then let the sender go."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.sender.close()


@attrs.frozen
class Pass:
    """One pass of :func:`deliver`: the outcomes of the events it sent (in their order), which of
    them go again, the seconds until they do, and the clock when the answers were in."""

    outcomes: list[Outcome]
    again: list[bool]
    wait: float
    at: float

    @property
    def retried(self) -> list[Outcome]:
        return [o for o, again in zip(self.outcomes, self.again, strict=True) if again]

    @property
    def out_of_attempts(self) -> list[Outcome]:
        """The events answered with a failure worth a retry, which the policy gives up on."""
        return [o for o, again in zip(self.outcomes, self.again, strict=True) if o.retry and not again]

    @property
    def refused(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.refused]


def deliver(
    dispatcher: Dispatcher,
    lines: Sequence[str],
    policy: RetryPolicy,
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], object],
    stop: threading.Event | None = None,
    observe: Callable[[Pass], object] | None = None,
) -> list[Outcome | None]:
    """Send events of different runs until each is delivered, refused for good, or out of
    attempts (then its last outcome, to be retried later). Between passes it sleeps the longest
    delay the policy gives the events that go again; ``observe`` sees every pass before that
    sleep. A ``stop`` request ends the retries (and the sleep, where ``sleep`` is its wait): the
    events still to go again get ``None``, and nothing is sent after it, one event a request too
    (the dispatcher is asked before each request); so do those a stopped dispatcher did not send
    (:data:`NOT_SENT`: no attempt, and no part of the pass). Sent one a request, the events after
    one that got no answer wait for the next pass (no timeout waited out an event); and once an
    event is out of attempts, the rest get ``None`` (the caller stops there: the backend does
    not take them, and an event that waits behind an unanswered one is never tried alone)."""
    final: list[Outcome | None] = [None] * len(lines)
    attempts = [0] * len(lines)
    waiting = list(range(len(lines)))

    def proceed() -> bool:
        return stop is None or not stop.is_set()

    while waiting:
        outcomes = dispatcher.send([lines[i] for i in waiting], proceed=proceed)
        again: list[int] = []
        sent: list[Outcome] = []
        flags: list[bool] = []
        wait = 0.0
        spent = False  # an event is out of attempts
        for i, outcome in zip(waiting, outcomes, strict=True):
            if outcome is NOT_SENT:  # no attempt: sent again, untouched
                again.append(i)
                continue
            attempts[i] += 1
            sent.append(outcome)
            if outcome.retry and not policy.gives_up(attempts[i]):
                again.append(i)
                flags.append(True)
                wait = max(wait, policy.delay(attempts[i], outcome.retry_after))
            else:
                final[i] = outcome
                flags.append(False)
                spent = spent or outcome.retry
        if observe is not None:
            observe(Pass(sent, flags, wait, clock()))
        waiting = again
        if waiting:
            # nothing sent: the dispatcher stopped; what it did not send is left for later
            if not sent or spent or not proceed():
                break
            sleep(wait)
            if stop is not None and stop.is_set():  # the stop ended the wait: nothing goes again
                break
    return final
