"""The one wire form of an event: compact JSON with sorted keys, UTF-8, one line."""

from __future__ import annotations

import json

# One encoder for every call: json.dumps with options builds a new encoder each time.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)

dumps = _ENCODER.encode
