"""Output helpers: JSON data on stdout, messages on stderr."""

from __future__ import annotations

import json
from typing import Any

import click


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False))


def say(message: str) -> None:
    click.echo(message, err=True)
