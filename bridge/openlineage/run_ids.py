"""Static run ids: the UUIDv7 that openlineage-python's ``generate_static_uuid(instant, data)``
gives (RFC 9562's layout: the instant's milliseconds, version 7, the RFC variant, and in place of
random bits the leading bits of SHA-1(the instant's ISO text in UTC + data)), as its text.

The same value, not a new scheme: tests/test_convert.py checks it against openlineage-python's
function. It is here because importing that function loads openlineage-python's client package
(its transports and every generated facet class): a third of a second of ``olbridge export``'s
start-up, for a dozen lines of arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime
from hashlib import sha1

_TIME_BITS = (1 << 48) - 1
_VERSION = 7 << 76
_VARIANT_MASK = ~(0xC000 << 48)
_VARIANT = 0x8000 << 48


def static_uuid(instant: datetime, data: bytes) -> str:
    """``str(generate_static_uuid(instant, data))``: the same instant and data give the same id,
    and ids of later instants sort after those of earlier ones."""
    utc = instant.astimezone(UTC)
    millis = int(utc.timestamp() * 1000)
    digest = sha1(utc.isoformat().encode() + data, usedforsecurity=False).digest()
    node = int.from_bytes(digest[:10]) >> 4  # the digest's leading 76 bits
    value = ((millis & _TIME_BITS) << 80 | _VERSION | node) & _VARIANT_MASK | _VARIANT
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
