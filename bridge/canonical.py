"""The one canonical JSON text of a value: keys sorted, no spaces, characters past ASCII as they
are (UTF-8), one line. What the catalog stores (an asset's metadata and snapshots, facets, column
edges' transformations), what an event's digest is taken of, and the wire form of every event
olbridge writes: the same value has the same text wherever it is written.

orjson writes it (a few times faster than the standard library); the standard library writes
what orjson does not (an integer past 64 bits, a lone surrogate, a key that is not a string).
The two agree to the byte but for floats in exponent form (``1e16`` here; the standard library's
``1e+16``) and a float that is no number (``null`` here), which no JSON input holds.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# one encoder for every call: json.dumps with options builds a new encoder each time
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(value: Any) -> str:
    """A JSON value's canonical text (see the module's docstring)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError is one: what orjson does not write
        return _ENCODER.encode(value)


__all__ = ["canonical"]
