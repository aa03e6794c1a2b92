"""Progress of a long step on stderr: the count, the rate and the time left.

On a terminal it is a click progress bar redrawn in place; anywhere else (a log, a CI job, a pipe)
a line every ``every`` seconds, so that a redirected run shows progress too. Both end with one line
that says how many and how long.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

import click

T = TypeVar("T")
Clock = Callable[[], float]


def duration(seconds: float) -> str:
    """``0:07``, ``12:05``, ``1:02:03``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


class Meter:
    """How far a step is: ``done`` of ``total`` (None when unknown) ``unit``, at what rate, and the
    time left at that rate, from ``clock`` (seconds). A step resumed with ``already`` done counts
    from there, its rate from what it does now."""

    def __init__(self, total: int | None, unit: str, clock: Clock = time.monotonic, *, already: int = 0) -> None:
        self.total = total
        self.unit = unit
        self.clock = clock
        self.began = clock()
        self.done = self.already = already

    def rate(self) -> float | None:
        elapsed = self.clock() - self.began
        done = self.done - self.already
        return done / elapsed if elapsed > 0 and done else None

    def describe(self) -> str:
        """``12,000/50,000 task runs, 4,000/s, 0:10 left``."""
        count = f"{self.done:,}/{self.total:,}" if self.total is not None else f"{self.done:,}"
        parts = [f"{count} {self.unit}"]
        rate = self.rate()
        if rate is not None:
            parts.append(f"{rate:,.0f}/s")
            if self.total is not None:
                parts.append(f"{duration(max(self.total - self.done, 0) / rate)} left")
        return ", ".join(parts)

    def finished(self) -> str:
        """``50,000 task runs in 0:12 (4,100/s)``."""
        elapsed = self.clock() - self.began
        rate = self.rate()
        return f"{self.done:,} {self.unit} in {duration(elapsed)}" + (f" ({rate:,.0f}/s)" if rate else "")


class Progress:
    """What :func:`progress` yields: ``advance(n)`` after each ``n`` items done."""

    def __init__(self, label: str, meter: Meter, file: TextIO, every: float, bar: Any) -> None:
        self.label = label
        self.meter = meter
        self.file = file
        self.every = every
        self.bar = bar
        self._said = meter.began

    def expect(self, total: int) -> None:
        """The step's total, learnt on the way (a server's first page says how many there are)."""
        self.meter.total = total
        if self.bar is not None:
            self.bar.length = total
            self.bar.show_percent = True
            self.bar.update_min_steps = _redraw_every(total)

    def advance(self, count: int = 1) -> None:
        self.meter.done += count
        if self.meter.total is not None and self.meter.done > self.meter.total:
            # past the total counted at the start (a backfill resumed after retention deleted some
            # of what it sent): no total is known; a bar ends where the count is
            self.meter.total = None
            if self.bar is not None:
                self.bar.length = self.meter.done
        if self.bar is not None:
            self.bar.update(count)
        elif self.meter.clock() - self._said >= self.every:
            self._said = self.meter.clock()
            click.echo(f"{self.label}: {self.meter.describe()}", file=self.file)

    def each(self, items: Iterable[T]) -> Iterator[T]:
        """The items, each counted once it has been taken."""
        for item in items:
            yield item
            self.advance()


def _redraw_every(total: int | None) -> int:
    """Items between two redraws of a bar: at most about 1,000 redraws in all."""
    return max(1, total // 1000) if total else 100


@contextmanager
def progress(
    label: str,
    total: int | None,
    unit: str,
    *,
    file: TextIO | None = None,
    clock: Clock = time.monotonic,
    every: float = 10.0,
    already: int = 0,
) -> Iterator[Progress]:
    """Show the progress of a step of ``total`` (None: unknown, or not yet: :meth:`Progress.expect`)
    ``unit`` on ``file`` (stderr), ``already`` of them done before (a step resumed); see the
    module's documentation. The closing line is said when the step ends well. A step resumed with
    more done than the total counted now (a backfill resumed after retention deleted some of the
    history) has no known total: "1,950/1,207" would be no count at all."""
    stream = file if file is not None else sys.stderr
    if total is not None and already > total:
        total = None
    meter = Meter(total, unit, clock, already=already)
    if stream.isatty():
        bar = click.progressbar(
            # an iterable without a length makes a bar of unknown length; it is never iterated
            iter(int, 1) if total is None else None,
            length=total,
            label=label,
            file=stream,
            show_eta=False,  # the meter says the time left, from its own clock
            show_percent=total is not None,
            item_show_func=lambda _: meter.describe(),
            update_min_steps=_redraw_every(total),
        )
        with bar:
            bar.update(already)
            yield Progress(label, meter, stream, every, bar)
    else:
        click.echo(f"{label}: {meter.describe()}", file=stream)
        yield Progress(label, meter, stream, every, None)
    click.echo(f"{label}: {meter.finished()}", file=stream)


__all__ = ["Meter", "Progress", "duration", "progress"]
