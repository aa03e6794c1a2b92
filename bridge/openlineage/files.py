"""Reading events from files: NDJSON (the OpenLineage client's file transport), a JSON array, or a
single event. Each event comes with where it was (``file:line`` or ``file[index]``); a part that
is not JSON comes as a :class:`BadInput` and does not stop the rest."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from bridge.errors import ValidationError


@attrs.frozen
class BadInput:
    message: str


def read_events(path: Path | str) -> Iterator[tuple[str, Any]]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError("file not found", rule="file", where=str(path)) from None
    except UnicodeDecodeError:
        raise ValidationError("not UTF-8 text", rule="file", where=str(path)) from None
    except OSError as exc:
        raise ValidationError(f"cannot read: {exc.strerror}", rule="file", where=str(path)) from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            yield f"{path}:{exc.lineno}", BadInput(f"not a valid JSON array: {exc.msg} (column {exc.colno})")
            return
        for index, item in enumerate(items):
            yield f"{path}[{index}]", item
        return
    lines = text.splitlines()
    if stripped.startswith("{") and len([ln for ln in lines if ln.strip()]) > 1:
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            pass  # NDJSON, one event a line
        else:
            yield str(path), whole
            return
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{number}", json.loads(line)
        except json.JSONDecodeError as exc:
            yield f"{path}:{number}", BadInput(f"not valid JSON: {exc.msg} (column {exc.colno})")
