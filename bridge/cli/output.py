"""Output helpers: JSON data on stdout, messages on stderr, and the signal stop that announces itself there."""

from __future__ import annotations

import json
import signal
import threading
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
    service, ``stream``, exits 0; a job stopped before its end, ``backfill``, exits 1). The
    previous handlers are back afterwards."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        say(message.format(signal=signal.Signals(signum).name))
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
