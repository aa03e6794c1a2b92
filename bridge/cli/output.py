"""Output helpers: JSON data on stdout, messages on stderr."""

from __future__ import annotations

import json
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
