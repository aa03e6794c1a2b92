"""The one wire form of an event: compact JSON with sorted keys, UTF-8, one line."""

from __future__ import annotations

import json
from typing import Any


def dumps(event: Any) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
