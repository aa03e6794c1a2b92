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
_VARIANT = "89ab"  # a hex digit with its top two bits set to 10 (RFC 9562's variant), by its low two bits


def static_uuid(instant: datetime, data: bytes) -> str:
    """``str(generate_static_uuid(instant, data))``: the same instant and data give the same id,
    and ids of later instants sort after those of earlier ones."""
    utc = instant if instant.tzinfo is UTC else instant.astimezone(UTC)
    millis = f"{int(utc.timestamp() * 1000) & _TIME_BITS:012x}"  # the first 48 bits
    digest = sha1(utc.isoformat().encode() + data, usedforsecurity=False).hexdigest()
    # then the version (7) and the digest's leading 76 bits, 19 hex digits, with the variant's two
    # bits in place of the top two of its fourth
    return f"{millis[:8]}-{millis[8:]}-7{digest[:3]}-{_VARIANT[int(digest[3], 16) & 3]}{digest[4:7]}-{digest[7:19]}"
