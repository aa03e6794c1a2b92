"""The one wire form of an event: compact JSON with sorted keys, UTF-8, one line."""

from __future__ import annotations

from bridge.canonical import canonical

dumps = canonical  # the canonical text (bridge/canonical.py)
