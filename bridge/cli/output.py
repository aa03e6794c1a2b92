"""Output helpers: JSON data on stdout, messages on stderr, and the signal stop that announces itself there."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

from bridge.catalog import RecordResult
from bridge.model import TaskRunKey
from bridge.shown import json_safe as json_safe  # JSON text's, beside it
from bridge.shown import safe as safe  # the one escape of text shown, for the commands

WARNINGS_SHOWN = 100  # warnings a summary lists; past them it says how many more


def echo_lines(lines: Iterable[str]) -> None:
    """Lines of text on stdout, each made :func:`safe`."""
    click.echo("\n".join(safe(line) for line in lines))


def print_rows(header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """A table on stdout: a header row, then one row a line, fields separated by tabs, each
    field made :func:`safe` (a tab or a newline in a field cannot forge a column or a row)."""
    click.echo("\t".join(header))
    for row in rows:
        click.echo("\t".join(safe(field) for field in row))


def print_json(value: Any) -> None:
    click.echo(json_safe(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)))


def say(message: str) -> None:
    click.echo(message, err=True)


def run_name(key: TaskRunKey) -> str:
    """A task run as warnings name it: ``namespace/flow/execution/taskRun``."""
    return f"{key.flow_namespace}/{key.flow_id}/{key.execution_id}/{key.task_run_id}"


def run_warnings(results: Sequence[RecordResult], names: Sequence[str] | None = None) -> list[str]:
    """Every warning of the recorded runs, each after the name of its run when ``names`` (one a
    result, such as ``runs.jsonl:12: ns/flow/exec/run``) are given."""
    if names is None:
        return [w for r in results for w in r.warnings]
    return [f"{name}: {w}" for name, r in zip(names, results, strict=True) for w in r.warnings]


def record_summary(results: Sequence[RecordResult], names: Sequence[str] | None = None) -> dict[str, object]:
    """What recording task runs did, as ``record`` and ``kestra import`` print it: the first
    :data:`WARNINGS_SHOWN` warnings, and how many there are in all."""
    warnings = run_warnings(results, names)
    return {
        "taskRuns": len(results),
        "created": sum(r.status == "created" for r in results),
        "updated": sum(r.status == "updated" for r in results),
        "unchanged": sum(r.status == "unchanged" for r in results),
        "placeholders": len({p for r in results for p in r.placeholders}),
        "warnings": warnings[:WARNINGS_SHOWN],
        "warningCount": len(warnings),
    }


def say_warnings(warnings: Sequence[str], limit: int = WARNINGS_SHOWN) -> None:
    """The first ``limit`` warnings on stderr, then how many more there are."""
    for warning in warnings[:limit]:
        say(f"warning: {safe(warning)}")
    if len(warnings) > limit:
        say(f"... and {len(warnings) - limit} more warnings")


@contextmanager
def stop_on_signals(message: str) -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (Ctrl-C), which ``message`` announces on stderr (its
    ``{signal}`` is the signal's name): the command finishes the work in flight, then stops (a
    service, ``stream``, exits 0; a job stopped before its end, ``backfill``, exits 1). Work in
    flight that has not ended :data:`STOP_WITHIN` seconds after the signal, or when a second
    signal comes, is left: the process says so and exits 1 at once. The previous handlers are back
    afterwards."""
    stop = threading.Event()
    deadline: list[threading.Timer] = []  # set by the first signal (the command sets ``stop`` too)
    first: list[float] = []  # when the first came (monotonic)

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if first:
            if time.monotonic() - first[0] < AGAIN_WITHIN:
                return  # the same stop, given twice at once (a wrapper that passes it on to its group too)
            _stop_now(f"{name} again: stopping at once, without the work in flight")
        first.append(time.monotonic())  # first: a second signal may come while this one is said
        say(message.format(signal=name))
        stop.set()
        late = f"still not stopped {STOP_WITHIN:g} s after {name}: what it waits on (the catalog, a request)"
        timer = threading.Timer(STOP_WITHIN, _stop_now, (f"{late} does not answer; stopping without it",))
        timer.daemon = True
        timer.start()
        deadline.append(timer)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for timer in deadline:
            timer.cancel()
        for sig, old in previous.items():
            signal.signal(sig, old)


# seconds a command told to stop has to finish the work in flight; past them (what it waits on
# does not answer: a catalog's server hung with its connections up, say) it stops without it
STOP_WITHIN = 60.0
# a second signal this soon after the first is the same stop given twice (``timeout`` passes its
# signal on to the command and to its process group: the command gets it twice at once), not a
# second request to stop at once
AGAIN_WITHIN = 0.2


def _stop_now(why: str) -> None:
    """Stop the process now, without the work in flight (its outcome unrecorded: done again by
    the next run, as after a kill), saying why; exit status 1."""
    say(f"Error: {why} (the work in flight is done again by the next run)")
    sys.stderr.flush()
    os._exit(1)
