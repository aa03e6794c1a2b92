"""Output helpers: JSON data on stdout, messages on stderr, and the signal stop that announces itself there."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

from bridge.catalog import RecordResult


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False))


def say(message: str) -> None:
    click.echo(message, err=True)


def record_summary(results: list[RecordResult]) -> dict[str, object]:
    """What recording task runs did, as ``record`` and ``kestra import`` print it."""
    return {
        "taskRuns": len(results),
        "created": sum(r.status == "created" for r in results),
        "updated": sum(r.status == "updated" for r in results),
        "unchanged": sum(r.status == "unchanged" for r in results),
        "placeholders": len({p for r in results for p in r.placeholders}),
        "warnings": [w for r in results for w in r.warnings][:100],
    }


@contextmanager
def stop_on_signals(message: str) -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (Ctrl-C), which ``message`` announces on stderr (its
    ``{signal}`` is the signal's name): the command finishes the work in flight, then stops and
    exits 0. The previous handlers are back afterwards."""
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
