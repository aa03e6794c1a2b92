"""What several commands share on the command line, declared once: option factories (the history
filters, ``--json``, how a command delivers)."""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs
import click
from click.core import ParameterSource

from bridge.catalog.query import HistoryFilter
from bridge.catalog.runs import STATES
from bridge.catalog.sql import INTEGER_MOST
from bridge.cli.context import NAMED, refuse_undecodable
from bridge.delivery.config import SECONDS_MOST, sender_for
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.retry import RateLimiter, RetryPolicy
from bridge.errors import BadValueError, ValidationError
from bridge.model import TaskState, check_namespace, parse_time, parse_window

F = TypeVar("F", bound=Callable[..., Any])
# the most a count or an id given to a command may be: what a database's integer holds (SQLite's
# and PostgreSQL's bigint: 2**63 - 1), so that a larger one is a bad value, not a traceback
MOST = INTEGER_MOST


class _Count(click.IntRange):
    """A count or an id: from a least to :data:`MOST`, which the help leaves unsaid (``x>=1``)."""

    def _describe_range(self) -> str:
        return f"x>={self.min}" if self.max == MOST else f"{self.min}<=x<={self.max}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        digits = value.strip().lstrip("+") if isinstance(value, str) else ""
        # (a number past the digits int() reads is past any count: not read)
        if digits.isascii() and digits.isdigit() and (len(digits) > len(str(MOST)) or int(digits) > MOST):
            said = value if len(digits) <= 40 else f"a number of {len(digits):,} digits"
            self.fail(f"{said} is more than any count or id ({MOST:,} at most)", param, ctx)
        return super().convert(value, param, ctx)


# the most seconds an option may say: more overflows a clock's arithmetic (as a transport's timeout)
A_YEAR = SECONDS_MOST


class _Seconds(click.FloatRange):
    """Seconds: a finite number in a range (``nan`` passes every comparison, ``inf`` and ``1e308``
    overflow the clocks they are added to: tracebacks, or a server that refused every request)."""

    def _describe_range(self) -> str:
        return f"x>={self.min:g}" if self.max == A_YEAR else f"{self.min:g}<=x<={self.max:g}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:  # past a year, or not finite: said so before the range is (whose words leave out its top)
            number = float(value)
        except (TypeError, ValueError):
            number = 0.0  # not a number: the range's own words
        if not math.isfinite(number) or number > A_YEAR:
            self.fail(f"{value} is not a number of seconds (finite, up to {A_YEAR:,.0f}: a year)", param, ctx)
        return super().convert(value, param, ctx)


def seconds(least: float, most: float = A_YEAR) -> click.FloatRange:
    """Seconds an option takes: a finite number from ``least`` to ``most`` (a year at most)."""
    return _Seconds(least, min(most, A_YEAR))


def count(least: int, most: int = MOST) -> click.IntRange:
    """A count or an id an option or argument takes: from ``least`` to ``most`` (:data:`MOST`)."""
    return _Count(least, most)


BATCH_MOST = 100_000  # events a request at most (what a window of requests in flight reads at once)


def history_filters(fn: F) -> F:
    """``--since``, ``--until``, ``--namespace`` and ``--flow``: the part of the catalog's history
    that a command reads (``export``, ``backfill``). The command gets them as one
    :class:`~bridge.catalog.query.HistoryFilter`, its ``filters`` argument, the times read with
    :func:`bridge.model.parse_window` and the namespace checked by
    :func:`bridge.model.check_namespace`."""
    options = [
        click.option("--since", help="Only history from this time (ISO 8601; a date or a time without offset is UTC)."),
        click.option("--until", help="Only history before this time."),
        click.option("--namespace", help="Only this flow namespace (and asset changes in this namespace)."),
        click.option(
            "--flow", type=NAMED, help="Only this flow id (asset changes belong to no flow and are left out)."
        ),
    ]

    @functools.wraps(fn)
    def command(
        *args: Any, since: str | None, until: str | None, namespace: str | None, flow: str | None, **kwargs: Any
    ) -> Any:
        refuse_undecodable(click.get_current_context())  # before the values are read (pass_app's check, after)
        start, end = window(since, until)
        filters = HistoryFilter(since=start, until=end, namespace=check_namespace(namespace, "--namespace"), flow=flow)
        return fn(*args, filters=filters, **kwargs)

    for option in reversed(options):
        command = option(command)
    return cast(F, command)


def moment(value: str | None, name: str) -> datetime | None:
    """An option's time (ISO 8601; a date or a time without offset is UTC), None when not given;
    a value that is no time is a bad value (exit status 2)."""
    if value is None:
        return None
    try:
        return parse_time(value, name, assume_utc=True)
    except ValidationError as exc:
        raise BadValueError(str(exc)) from None


def window(
    since: str | None, until: str | None, names: tuple[str, str] = ("--since", "--until")
) -> tuple[datetime | None, datetime | None]:
    """``--since`` and ``--until`` read as :func:`bridge.model.parse_window` reads them; a time
    that is no time, or a window whose start is not before its end, is a bad value (exit status 2)."""
    start, end = moment(since, names[0]), moment(until, names[1])
    try:
        return parse_window(since, until, names=names) if start and end else (start, end)
    except ValidationError as exc:
        raise BadValueError(str(exc)) from None


# the OpenLineage run states, and the task states that end in each (a task run not ended: RUNNING)
_RUN_STATE_OF = {state.value: state.run_event_type if state.is_terminal else "RUNNING" for state in TaskState}
# the task state each OpenLineage run state stands for, when a task run is recorded
_TASK_STATE_OF = {"START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "SUCCESS", "FAIL": "FAILED", "ABORT": "KILLED"}
STATE_HELP = (
    "case-insensitive, a task state (SUCCESS, WARNING, FAILED, KILLED, RUNNING, ...) or an OpenLineage run "
    "state (START, RUNNING, COMPLETE, FAIL, ABORT)"
)


if TYPE_CHECKING:  # generic from click 8.2 on; the dependency allows 8.1
    _StrParam = click.ParamType[str]
else:
    _StrParam = click.ParamType


class _Host(_StrParam):
    """An address to listen on: not empty (an empty one is every address, 0.0.0.0, which must be
    said as such)."""

    name = "host"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not str(value).strip():
            self.fail("it is empty; give an address (127.0.0.1, or 0.0.0.0 for every one)", param, ctx)
        return str(value).strip()


HOST = _Host()


class StateParam(_StrParam):
    """``--state`` of ``record`` and ``runs list``, spelled the same in both: a task state or an
    OpenLineage run state, in any case. ``record`` gets the task state (an OpenLineage state as the
    task state that ends in it: COMPLETE is SUCCESS, FAIL is FAILED, ABORT is KILLED, START is
    RUNNING); ``runs list`` gets the run state (a task state as the run state it ends in)."""

    name = "state"

    def __init__(self, *, run_state: bool) -> None:
        self.run_state = run_state

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip().upper()
        if self.run_state:
            found = text if text in STATES else _RUN_STATE_OF.get(text)
        else:
            found = text if text in _RUN_STATE_OF else _TASK_STATE_OF.get(text)
        if found is None:
            self.fail(f"{value!r} is not a state: {STATE_HELP}", param, ctx)
        return found


def json_flag(help: str) -> Callable[[F], F]:
    """``--json``, given to the command as ``as_json``: print the command's result as JSON on stdout."""
    return click.option("--json", "as_json", is_flag=True, help=help)


@attrs.frozen
class Delivery:
    """How a command delivers to a backend (``stream``, ``backfill``, ``export --url``): the
    options of :func:`delivery_options`, and the names of those given (on the command line or by
    the environment)."""

    timeout: float | None
    concurrency: int
    batch_size: int
    no_batch: bool
    backoff: float
    max_backoff: float
    max_attempts: int
    given: frozenset[str] = attrs.field(default=frozenset(), eq=False)

    def policy(self) -> RetryPolicy:
        return RetryPolicy(base=self.backoff, cap=self.max_backoff, max_attempts=self.max_attempts)

    def dispatcher(
        self,
        url: str | None,
        api_key: str | None,
        *,
        rate: float | None = None,
        stop: threading.Event | None = None,
    ) -> Dispatcher:
        """A dispatcher to ``url`` (else to the OpenLineage configuration's backend), at most
        ``rate`` events a second; a ``stop`` request ends the rate limit's waits, and after it no
        request is made (those in flight are answered)."""
        sender = sender_for(url, api_key=api_key, timeout=self.timeout, batch=not self.no_batch)
        limiter = None
        if rate is not None:
            wait = stop.wait if stop is not None else time.sleep
            limiter = RateLimiter(rate, time.monotonic, wait)
        return Dispatcher(sender, concurrency=self.concurrency, batch_size=self.batch_size, limiter=limiter, stop=stop)


def delivery_options(*, max_attempts: int, max_attempts_help: str) -> Callable[[F], F]:
    """``--timeout``, ``--concurrency``, ``--batch-size``, ``--no-batch``, ``--backoff``,
    ``--max-backoff`` and ``--max-attempts`` (its default and help the command's): how a command
    sends to a backend. The command gets them as one :class:`Delivery`, its ``delivery``
    argument."""
    options = [
        click.option("--timeout", type=seconds(0.001), help="Seconds per HTTP request [default: 5]."),
        click.option("--concurrency", type=count(1), default=4, show_default=True, help="Requests in flight."),
        click.option(
            "--batch-size", type=count(1, BATCH_MOST), default=200, show_default=True, help="Events per request."
        ),
        click.option("--no-batch", is_flag=True, help="Never try POST /api/v1/lineage/batch; one event a request."),
        click.option("--backoff", type=seconds(0), default=0.5, show_default=True, help="First retry delay (s)."),
        click.option("--max-backoff", type=seconds(0), default=60.0, show_default=True, help="Longest delay (s)."),
        click.option(
            "--max-attempts",
            type=count(0),
            default=max_attempts,
            show_default=True,
            help=max_attempts_help,
        ),
    ]
    names = [f.name for f in attrs.fields(Delivery) if f.name != "given"]

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            values = {name: kwargs.pop(name) for name in names}
            given = frozenset(n for n in names if ctx.get_parameter_source(n) is not ParameterSource.DEFAULT)
            return fn(*args, delivery=Delivery(**values, given=given), **kwargs)

        for option in reversed(options):
            command = option(command)
        return cast(F, command)

    return decorate
