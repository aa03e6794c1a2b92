"""From parsed JSON to committed events: limits, the verdict, and the write, the same for HTTP
requests, files and a Marquez instance. Each item gets an :class:`~bridge.receiver.outcome.Outcome`."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, TypeVar, cast

import attrs

from bridge.canonical import canonical
from bridge.catalog import IngestResult
from bridge.errors import BridgeError, Unavailable
from bridge.jsontext import DEPTH, nested_past, value_count, values_past
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
    max_column_edges: int = 50_000  # input fields of one event's column lineage (each a column edge)
    max_values: int = 1_000_000  # JSON values in one event: objects, arrays, strings, numbers, ...
    max_depth: int = DEPTH  # nesting of objects and arrays in one event (at most MAX_DEPTH)
    max_request_line: int = 8 * 1024  # bytes of a request's target
    max_header: int = 8 * 1024  # bytes of one header, name and value
    max_headers: int = 32 * 1024  # bytes of a request's head: its line and headers together
    max_in_flight: int = 128 * 1024 * 1024  # bytes of bodies (gunzipped) a worker holds at once
    max_connections: int = 1_000  # connections a worker holds open


def depth_problem(text: str | None, limit: int) -> Problem | None:
    """A problem if the value of JSON ``text`` nests objects and arrays deeper than ``limit``
    (read in the text, at C's speed; None: a value too deep to write, deeper than any limit)."""
    if text is not None and not nested_past(text, limit):
        return None
    return Problem("", f"the event nests objects and arrays deeper than {limit} levels", "limit")


def _lineage_lists(output: Any) -> list[Any]:
    """The input-field lists of an output's ``columnLineage`` facet: its columns' ``inputFields``
    and its ``dataset`` list (each item an edge), as they came (any shape: read before the verdict)."""
    facets = output.get("facets") if isinstance(output, dict) else None
    lineage = facets.get("columnLineage") if isinstance(facets, dict) else None
    if not isinstance(lineage, dict):
        return []
    fields = lineage.get("fields")
    lists = [f.get("inputFields") for f in fields.values() if isinstance(f, dict)] if isinstance(fields, dict) else []
    lists.append(lineage.get("dataset"))
    return lists


def _column_edges_problem(event: dict[str, Any], limit: int) -> Problem | None:
    """A problem if the column lineage of the event's outputs lists more than ``limit`` input
    fields (each a column edge for the writer), pointing at the ``columnLineage`` facet where the
    count passes the limit. Counted by the lists' lengths, not item by item."""
    outputs = event.get("outputs")
    count, where = 0, ""
    for at, output in enumerate(outputs if isinstance(outputs, list) else ()):
        count += sum(len(found) for found in _lineage_lists(output) if isinstance(found, list))
        if count > limit and not where:
            where = f"/outputs/{at}/facets/columnLineage"
    if count <= limit:
        return None
    message = f"the event's column lineage has {count} input fields (column edges); this receiver takes at most {limit}"
    return Problem(where, message, "limit")


def _dataset_count(event: dict[str, Any]) -> int:
    """The datasets an event names: its inputs and outputs, and those its outputs' column lineage
    reads that it names nowhere else (each a placeholder, as an input's is). Read before the
    verdict: any shape may come."""
    inputs, outputs = event.get("inputs"), event.get("outputs")
    inputs = inputs if isinstance(inputs, list) else []
    outputs = outputs if isinstance(outputs, list) else []
    more: set[tuple[Any, ...]] = set()
    for output in outputs:
        for found in _lineage_lists(output):
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
        text: str | None = None,
    ) -> IncomingEvent | Outcome:
        """The event to write, or the outcome that refuses it (``forward``: its text as it came,
        to forward once it is taken; ``token``: the name of the token that brought it, which
        ``may_write`` the namespaces it says: the facets of inputs in others are not applied,
        with a warning; ``text``: its canonical text, when the caller has it). Pure."""
        if text is None:
            text = canonical_text(item)
        past = self._past_limits(item, text)
        if past is not None:
            return Outcome("refused", message=past.message, problems=(past,))
        assert text is not None  # an item without one is past the limits
        verdict = judge(item, strict=self.strict, text=text)
        if not verdict.accepted:
            first = verdict.refusals[0]
            more = len(verdict.refusals) - 1
            message = str(first) + (f" (and {more} more)" if more else "")
            return Outcome("refused", kind=verdict.kind, message=message, problems=verdict.refusals)
        if forward is not None and value_count(forward) != value_count(text):
            # the text as it came holds values the parsed event has not: a key repeated in an
            # object, of which the event judged (and kept) the last value, and the text forwarded
            # holds both, for a backend that may read the first
            message = "a key is repeated in an object of the event: which of its values is meant is not guessed"
            return Outcome("refused", kind=verdict.kind, message=message, problems=(Problem("", message, "json"),))
        warnings = tuple(str(w) for w in verdict.warnings)
        read_only = read_only_inputs(item, may_write) if may_write is not None else []
        warnings += tuple(
            f"/inputs/{index}: token {token!r} may not write namespace {namespace!r}: the facets the event "
            f"carries for this input were not applied{' (nor forwarded)' if forward is not None else ''}"
            for index, namespace in read_only
        )
        if forward is not None and read_only:
            forward = _without_facets(item, {index for index, _ in read_only})
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

    def _past_limits(self, item: Any, text: str | None) -> Problem | None:
        """The limit the item is past, if any. Each is read at C's speed or by the lengths of
        lists, never walking the event item by item: the values and the nesting in its text, the
        column edges by their lists' lengths; then the datasets, once those bound them."""
        limits = self.limits
        if text is None:
            return depth_problem(text, limits.max_depth)
        values = values_past(text, limits.max_values)
        if values is not None:
            message = f"the event has {values} JSON values; this receiver takes at most {limits.max_values}"
            return Problem("", message, "limit")
        past = depth_problem(text, limits.max_depth)
        if past is not None or not isinstance(item, dict):
            return past
        past = _column_edges_problem(item, limits.max_column_edges)
        if past is not None:
            return past
        count = _dataset_count(item)
        if count > limits.max_datasets:
            message = f"the event has {count} datasets; this receiver takes at most {limits.max_datasets}"
            return Problem("", message, "limit")
        return None

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
        for at, (item, forward) in enumerate(zip(items, texts, strict=True)):
            if at and at % PAUSE_EVERY == 0:
                yield PAUSE
            text = canonical_text(item)
            prepare = functools.partial(
                self.prepare, item, forward=forward, token=token, may_write=may_write, writes=writes, text=text
            )
            # a large event is judged and read on a thread: the loop answers others meanwhile
            prepared.append((yield Blocking(prepare)) if text is not None and len(text) > OFF_LOOP else prepare())
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


def _without_facets(event: dict[str, Any], indexes: set[int]) -> str:
    """The text to forward of an event some of whose inputs' facets a token may not write (those
    of ``indexes``): the event's canonical text with those inputs' dataset and input facets left
    out, which the backend would otherwise apply to another namespace's dataset."""
    inputs = [
        {key: value for key, value in dataset.items() if key not in ("facets", "inputFacets")}
        if index in indexes
        else dataset
        for index, dataset in enumerate(event["inputs"])
    ]
    return canonical({**event, "inputs": inputs})


def canonical_text(item: Any) -> str | None:
    """An item's canonical text, or None when it nests far deeper than any limit (``max_depth`` is
    at most :data:`~bridge.jsontext.MAX_DEPTH`: too deep to write)."""
    try:
        return canonical(item)
    except RecursionError:
        return None


@attrs.frozen
class Write:
    """A step: these events are to be written; what comes back is one result each."""

    events: list[IncomingEvent]


@attrs.frozen
class Read:
    """A step: the request body's next piece is to be read, of at most this many bytes (a server
    that takes a body in pieces of its own may give a larger one: more than the steps wanted);
    what comes back is it, as soon as some of the body is here, and b"" once it has all come (or
    :class:`BodyTimedOut`, raised where the step was taken, when it did not come in time, and
    :class:`BodyCut` when the client went away before its end, :class:`BodyRefused` when the
    server refused its framing)."""

    limit: int


class BodyTimedOut(Exception):
    """The request's body did not come within the server's deadline (a stalled or trickling client)."""


class BodyCut(Exception):
    """The client went away before the request's body came whole."""


class BodyRefused(Exception):
    """The request's body came framed otherwise than HTTP/1.1 frames one (a chunk's size that is
    not hexadecimal, a chunk not ended by CRLF): the server refused it as it read it."""


# the key of an ASGI request's scope under which the server puts why it refused the body it was
# reading (the connection is then closed, and the application's read hears that it went away)
BODY_REFUSED = "olbridge.body_refused"


@attrs.frozen
class Pause:
    """A step: a server with other work waiting may do it now (an event loop: its other
    connections, and the writer's answers); nothing comes back."""


PAUSE = Pause()


@attrs.frozen
class Blocking:
    """A step: a call that may wait on I/O (a connection to the catalog) or take long (a large
    event's judging), made where it blocks nothing else (an event loop runs it on a thread); what
    comes back is what it returns (an exception it raises is raised where the step was taken)."""

    call: Callable[[], Any]


PAUSE_EVERY = 8  # events judged and read between pauses: a batch of 100 is about a millisecond of CPU
# characters of an event's canonical text past which it is judged and read on a thread (a few ms of
# CPU at this size; an event of a million values, the most it may have, takes a second or so)
OFF_LOOP = 64 * 1024

Steps = Generator[Write | Read | Pause | Blocking, Any, T]


def run_steps(steps: Steps[T], *, write: Writer, read: Callable[[int], bytes] = lambda limit: b"") -> T:
    """Run steps to their end in this thread: each :class:`Write` by ``write`` (an
    :class:`Unavailable` it raises becomes every event's result), each :class:`Read` by ``read``,
    each :class:`Blocking` call (what it raises is raised in the steps, where they called)."""
    answer: Any = None
    raised: Exception | None = None
    try:
        while True:
            step = steps.send(answer) if raised is None else steps.throw(raised)
            raised = None
            if isinstance(step, Pause):  # nothing else to do in this thread
                answer = None
                continue
            if isinstance(step, Blocking):
                try:
                    answer = step.call()
                except Exception as exc:
                    answer, raised = None, exc
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
    """:func:`run_steps` on an event loop: each :class:`Write` and :class:`Read` awaited, each
    :class:`Blocking` call made on a thread (a :class:`BodyTimedOut`, :class:`BodyCut` or
    :class:`BodyRefused` that ``read`` raises, and what a call raises, is raised in the steps,
    where they read or called)."""
    answer: Any = None
    raised: Exception | None = None
    try:
        while True:
            step = steps.send(answer) if raised is None else steps.throw(raised)
            raised = None
            if isinstance(step, Pause):
                await asyncio.sleep(0)
                answer = None
                continue
            if isinstance(step, Blocking):
                try:
                    answer = await asyncio.to_thread(step.call)
                except Exception as exc:
                    answer, raised = None, exc
                continue
            if isinstance(step, Read):
                try:
                    answer = await read(step.limit)
                except (BodyTimedOut, BodyCut, BodyRefused) as exc:
                    answer, raised = None, exc
                continue
            try:
                answer = await write(step.events)
            except Unavailable as exc:
                answer = [exc] * len(step.events)
    except StopIteration as stop:
        return cast(T, stop.value)


def _outcome(event: IncomingEvent, result: IngestResult | Exception) -> Outcome:
    if isinstance(result, IngestResult) and result.status == "forbidden":  # refused by what the catalog holds
        where = result.pointer or ("/run/runId" if event.kind == "RunEvent" else "/job")
        problem = Problem(where, result.message, "token")
        return Outcome("refused", event.kind, message=result.message, problems=(problem,))
    if isinstance(result, IngestResult):
        return Outcome(result.status, event.kind, warnings=result.warnings, placeholders=result.placeholders)
    if unavailable(result):
        return Outcome("unavailable", event.kind, message=str(result))
    if isinstance(result, BridgeError | ValueError):
        return Outcome("refused", event.kind, message=str(result), problems=(Problem("", str(result), "catalog"),))
    return Outcome("unavailable", event.kind, message=f"the catalog could not take the event: {result}")
