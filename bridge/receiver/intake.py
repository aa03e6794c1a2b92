"""From parsed JSON to committed events: limits, the verdict, and the write, the same for HTTP
requests, files and a Marquez instance. Each item gets an :class:`~bridge.receiver.outcome.Outcome`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, TypeVar, cast

import attrs

from bridge.canonical import canonical
from bridge.catalog import IngestResult
from bridge.errors import BridgeError, Unavailable
from bridge.jsontext import DEPTH, nesting
from bridge.model.received import IncomingEvent
from bridge.openlineage.validate import Problem
from bridge.receiver.events import read_event
from bridge.receiver.metrics import Metrics
from bridge.receiver.outcome import Outcome
from bridge.receiver.policy import judge
from bridge.receiver.scopes import MayWrite, read_only_inputs
from bridge.receiver.writer import unavailable

Results = list[IngestResult | Exception]
Writer = Callable[[Sequence[IncomingEvent]], Results]
T = TypeVar("T")


@attrs.frozen
class Limits:
    """What the receiver takes of a client: each a ``serve`` option and a ``[serve]`` key
    (docs/receiver.md lists them with what a client gets past them)."""

    max_body: int = 16 * 1024 * 1024  # bytes on the wire
    max_decompressed: int = 64 * 1024 * 1024  # bytes after gunzip, every member together
    max_batch: int = 10_000  # events in one batch request
    max_datasets: int = 1_000  # inputs + outputs of one event, and the other datasets its column lineage reads
    max_depth: int = DEPTH  # nesting of objects and arrays in one event (at most MAX_DEPTH)
    max_request_line: int = 8 * 1024  # bytes of a request's target
    max_header: int = 8 * 1024  # bytes of one header, name and value
    max_headers: int = 32 * 1024  # bytes of a request's head: its line and headers together
    max_in_flight: int = 128 * 1024 * 1024  # bytes of bodies (gunzipped) a worker holds at once


def depth_problem(value: Any, limit: int) -> Problem | None:
    """A problem if ``value`` nests objects and arrays deeper than ``limit`` (checked without recursion)."""
    if nesting(value, limit) is None:
        return None
    return Problem("", f"the event nests objects and arrays deeper than {limit} levels", "limit")


def _dataset_count(event: dict[str, Any]) -> int:
    """The datasets an event names: its inputs and outputs, and those its outputs' column lineage
    reads that it names nowhere else (each a placeholder, as an input's is). Read before the
    verdict: any shape may come."""
    inputs, outputs = event.get("inputs"), event.get("outputs")
    inputs = inputs if isinstance(inputs, list) else []
    outputs = outputs if isinstance(outputs, list) else []
    more: set[tuple[Any, ...]] = set()
    for output in outputs:
        facets = output.get("facets") if isinstance(output, dict) else None
        lineage = facets.get("columnLineage") if isinstance(facets, dict) else None
        if not isinstance(lineage, dict):
            continue
        fields = lineage.get("fields")
        sources = (
            [f.get("inputFields") for f in fields.values() if isinstance(f, dict)] if isinstance(fields, dict) else []
        )
        sources.append(lineage.get("dataset"))
        for found in sources:
            if isinstance(found, list):
                more.update(_named(item) for item in found)
    if more:  # the usual event has no column lineage: nothing more to read
        more.difference_update(_named(item) for item in (*inputs, *outputs))
    return len(inputs) + len(outputs) + len(more)


def _named(dataset: Any) -> tuple[Any, ...]:
    """A dataset's (namespace, name); one that has no such strings (the verdict refuses it, after
    this count) is a dataset of its own."""
    if isinstance(dataset, dict):
        namespace, name = dataset.get("namespace"), dataset.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            return (namespace, name)
    return ("", id(dataset))


class Intake:
    """Judges, reads and writes external events: with ``write`` (or the one given to
    :meth:`take`), or step by step (:meth:`taking`) for a caller that writes them its own way."""

    def __init__(
        self, write: Writer | None, *, strict: bool = False, limits: Limits = Limits(), metrics: Metrics | None = None
    ) -> None:
        self.write = write
        self.strict = strict
        self.limits = limits
        self.metrics = metrics if metrics is not None else Metrics()

    def prepare(
        self,
        item: Any,
        *,
        forward: str | None = None,
        token: str | None = None,
        may_write: MayWrite | None = None,
        writes: tuple[str, ...] | None = None,
    ) -> IncomingEvent | Outcome:
        """The event to write, or the outcome that refuses it (``forward``: its text as it came,
        to forward once it is taken; ``token``: the name of the token that brought it, which
        ``may_write`` the namespaces it says: the facets of inputs in others are not applied,
        with a warning). Pure."""
        try:
            text: str | None = canonical(item)
        except RecursionError:  # nested far deeper than any limit (max_depth is at most MAX_DEPTH)
            text = None
        # an event can nest no deeper than it has brackets: walk it only when it has enough
        deep = text is None or text.count("{") + text.count("[") > self.limits.max_depth
        problem = depth_problem(item, self.limits.max_depth) if deep else None
        if problem is not None or text is None:
            problem = problem or Problem("", "the event nests objects and arrays too deeply", "limit")
            return Outcome("refused", message=problem.message, problems=(problem,))
        if isinstance(item, dict) and _dataset_count(item) > self.limits.max_datasets:
            count, limit = _dataset_count(item), self.limits.max_datasets
            message = f"the event has {count} datasets; this receiver takes at most {limit}"
            return Outcome("refused", message=message, problems=(Problem("", message, "limit"),))
        verdict = judge(item, strict=self.strict, text=text)
        if not verdict.accepted:
            first = verdict.refusals[0]
            more = len(verdict.refusals) - 1
            message = str(first) + (f" (and {more} more)" if more else "")
            return Outcome("refused", kind=verdict.kind, message=message, problems=verdict.refusals)
        warnings = tuple(str(w) for w in verdict.warnings)
        read_only = read_only_inputs(item, may_write) if may_write is not None else []
        warnings += tuple(
            f"/inputs/{index}: token {token!r} may not write namespace {namespace!r}: the facets the event "
            "carries for this input were not applied"
            for index, namespace in read_only
        )
        try:
            return read_event(
                item,
                verdict.kind,
                warnings,
                text,
                forward=forward,
                token=token,
                writes=writes,
                bare_inputs=frozenset(index for index, _ in read_only),
            )
        except UnicodeEncodeError:  # read by a lenient reader (a Marquez import's page): no UTF-8 text holds it
            message = "the event holds a lone surrogate (a \\ud800-\\udfff escape without its pair)"
            return Outcome("refused", kind=verdict.kind, message=message, problems=(Problem("", message, "json"),))

    def taking(
        self,
        items: Sequence[Any],
        *,
        forwards: Sequence[str] | None = None,
        token: str | None = None,
        may_write: MayWrite | None = None,
        writes: tuple[str, ...] | None = None,
    ) -> Steps[list[Outcome]]:
        """Outcomes of items, in order, as steps: yields the accepted events once (when there are
        any) and takes their results back from whoever writes them (:func:`run_steps`, or the
        HTTP worker's event loop), each with the outbox row that forwards it when ``forwards``
        gives the items' texts as they came, and with the name of the ``token`` that brought
        them."""
        texts: list[str | None] = list(forwards) if forwards is not None else [None] * len(items)
        prepared: list[IncomingEvent | Outcome] = []
        for at, (item, text) in enumerate(zip(items, texts, strict=True)):
            if at and at % PAUSE_EVERY == 0:
                yield PAUSE
            prepared.append(self.prepare(item, forward=text, token=token, may_write=may_write, writes=writes))
        events = [p for p in prepared if isinstance(p, IncomingEvent)]
        results: Results = (yield Write(events)) if events else []
        written = iter(results)
        outcomes = []
        for item in prepared:
            if isinstance(item, Outcome):
                outcomes.append(item)
                continue
            result = next(written)
            outcomes.append(_outcome(item, result))
        self.metrics.count(outcomes, token)
        return outcomes

    def take(
        self,
        items: Sequence[Any],
        *,
        write: Writer | None = None,
        forwards: Sequence[str] | None = None,
        token: str | None = None,
    ) -> list[Outcome]:
        """Outcomes of items, in order. The accepted ones are committed before this returns (by
        ``write`` when given, else by the intake's writer); see :meth:`taking`."""
        chosen = write or self.write
        if chosen is None:
            raise ValueError("this intake has no writer: give one")
        return run_steps(self.taking(items, forwards=forwards, token=token), write=chosen)


@attrs.frozen
class Write:
    """A step: these events are to be written; what comes back is one result each."""

    events: list[IncomingEvent]


@attrs.frozen
class Read:
    """A step: at most this many bytes of the request body are to be read; what comes back is them
    (or :class:`BodyTimedOut`, raised where the step was taken, when they did not come in time)."""

    limit: int


class BodyTimedOut(Exception):
    """The request's body did not come within the server's deadline (a stalled or trickling client)."""


@attrs.frozen
class Pause:
    """A step: a server with other work waiting may do it now (an event loop: its other
    connections, and the writer's answers); nothing comes back."""


PAUSE = Pause()


@attrs.frozen
class Blocking:
    """A step: a call that may wait on I/O (a connection to the catalog), made where it blocks
    nothing else (an event loop runs it on a thread); what comes back is what it returns."""

    call: Callable[[], Any]


PAUSE_EVERY = 8  # events judged and read between pauses: a batch of 100 is about a millisecond of CPU

Steps = Generator[Write | Read | Pause | Blocking, Any, T]


def run_steps(steps: Steps[T], *, write: Writer, read: Callable[[int], bytes] = lambda limit: b"") -> T:
    """Run steps to their end in this thread: each :class:`Write` by ``write`` (an
    :class:`Unavailable` it raises becomes every event's result), each :class:`Read` by ``read``."""
    answer: Any = None
    try:
        while True:
            step = steps.send(answer)
            if isinstance(step, Pause):  # nothing else to do in this thread
                answer = None
                continue
            if isinstance(step, Blocking):
                answer = step.call()
                continue
            if isinstance(step, Read):
                answer = read(step.limit)
                continue
            try:
                answer = write(step.events)
            except Unavailable as exc:
                answer = [exc] * len(step.events)
    except StopIteration as stop:
        return cast(T, stop.value)


async def run_steps_async(
    steps: Steps[T],
    *,
    write: Callable[[Sequence[IncomingEvent]], Awaitable[Results]],
    read: Callable[[int], Awaitable[bytes]],
) -> T:
    """:func:`run_steps` on an event loop: each :class:`Write` and :class:`Read` awaited (a
    :class:`BodyTimedOut` that ``read`` raises is raised in the steps, where they read)."""
    answer: Any = None
    timed_out: BodyTimedOut | None = None
    try:
        while True:
            step = steps.send(answer) if timed_out is None else steps.throw(timed_out)
            timed_out = None
            if isinstance(step, Pause):
                await asyncio.sleep(0)
                answer = None
                continue
            if isinstance(step, Blocking):
                answer = await asyncio.to_thread(step.call)
                continue
            if isinstance(step, Read):
                try:
                    answer = await read(step.limit)
                except BodyTimedOut as exc:
                    answer, timed_out = None, exc
                continue
            try:
                answer = await write(step.events)
            except Unavailable as exc:
                answer = [exc] * len(step.events)
    except StopIteration as stop:
        return cast(T, stop.value)


def _outcome(event: IncomingEvent, result: IngestResult | Exception) -> Outcome:
    if isinstance(result, IngestResult) and result.status == "forbidden":  # refused by what the catalog holds
        where = "/run/runId" if event.kind == "RunEvent" else "/job"
        problem = Problem(where, result.message, "token")
        return Outcome("refused", event.kind, message=result.message, problems=(problem,))
    if isinstance(result, IngestResult):
        return Outcome(result.status, event.kind, warnings=result.warnings, placeholders=result.placeholders)
    if unavailable(result):
        return Outcome("unavailable", event.kind, message=str(result))
    if isinstance(result, BridgeError | ValueError):
        return Outcome("refused", event.kind, message=str(result), problems=(Problem("", str(result), "catalog"),))
    return Outcome("unavailable", event.kind, message=f"the catalog could not take the event: {result}")
