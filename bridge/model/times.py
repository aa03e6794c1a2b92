"""Times: aware UTC datetimes, their one text form, ISO 8601 parsing and time windows, and the
clock of the CLI and the ``task_run`` API (which conversion never calls)."""

from __future__ import annotations

from datetime import UTC, datetime

from bridge.errors import ValidationError


def format_time(moment: datetime) -> str:
    """The one text form of a time: UTC, microseconds, ``Z`` (``2025-01-31T12:00:00.000000Z``);
    it sorts as the time does."""
    utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    # its fields formatted: isoformat(timespec=...) costs twice as much (a call an event received)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031 (the faster form here)
        utc.year,
        utc.month,
        utc.day,
        utc.hour,
        utc.minute,
        utc.second,
        utc.microsecond,
    )


def epoch_text(seconds: float) -> str:
    """:func:`format_time` of a time given in seconds since the epoch (a clock's reading)."""
    return format_time(datetime.fromtimestamp(seconds, UTC))


def parse_time(value: object, where: str, *, assume_utc: bool = False) -> datetime:
    """An ISO 8601 time with an offset (``Z`` or ``+01:00``). With ``assume_utc``, a bare date or a
    time without offset is read as UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ValidationError(
                f"not an ISO 8601 time: {value!r} (expected e.g. 2025-01-31T12:00:00Z)",
                rule="time.format",
                value=value,
                where=where,
            ) from None
    else:
        raise ValidationError(
            f"a time must be an ISO 8601 string, not {value!r}", rule="time.type", value=value, where=where
        )
    if moment.tzinfo is None:
        if not assume_utc:
            raise ValidationError(
                f"time {value!r} has no UTC offset; add 'Z' or '+00:00'", rule="time.offset", value=value, where=where
            )
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-02:00, 0001-01-01T00:00:00+01:00
        raise ValidationError(
            f"time {value!r} is outside the years 1 to 9999 once in UTC", rule="time.range", value=value, where=where
        ) from None


def parse_window(
    since: str | None, until: str | None, *, names: tuple[str, str] = ("--since", "--until")
) -> tuple[datetime | None, datetime | None]:
    """A time window [since, until), each end optional and read as :func:`parse_time` with
    ``assume_utc``; a window whose start is not before its end is refused."""
    start = parse_time(since, names[0], assume_utc=True) if since else None
    end = parse_time(until, names[1], assume_utc=True) if until else None
    if start is not None and end is not None and start >= end:
        raise ValidationError(
            f"{names[0]} {since} is not before {names[1]} {until}: the window is empty",
            rule="time.window",
            value=(since, until),
        )
    return start, end


def utcnow() -> datetime:
    """The clock of the CLI and the recording API (never called by conversion)."""
    return datetime.now(UTC)
