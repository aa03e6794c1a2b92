"""Received OpenLineage events as the catalog keeps them: the event (its digest, canonical body,
times and the run or job it is about), the datasets it names and the column edges of its outputs'
``columnLineage`` facets. The receiver reads them from the JSON it is given
(:mod:`bridge.receiver.events`, :mod:`bridge.receiver.column_lineage`); the catalog stores them.
They pickle as tuples, as the receiver's workers hand them to its writer process."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from bridge.model.assets import Assertion
from bridge.model.columns import Column
from bridge.model.pickling import pickles_as_tuple
from bridge.model.times import format_time

TERMINAL = ("COMPLETE", "FAIL", "ABORT")  # the eventTypes that end a run
DatasetName = tuple[str, str]  # (namespace, name)

# a run's source whose run id is a UUIDv7 (RFC 9562: version 7, the RFC variant), its first 48
# bits (Unix milliseconds) in two groups
_UUID7_RUN = re.compile(r"run:([0-9A-Fa-f]{8})-([0-9A-Fa-f]{4})-7[0-9A-Fa-f]{3}-[89ABab][0-9A-Fa-f]{3}-[0-9A-Fa-f]{12}")
NO_DAY = ""  # the run day of a job, and of a run whose id tells no day
RUN_DAYS = ("2000-01-01", "2100-01-01")  # the days a run id may tell (from, to): others tell none
_RUN_MILLIS = tuple(int(datetime.fromisoformat(f"{day}T00:00:00+00:00").timestamp() * 1000) for day in RUN_DAYS)


def run_day(source: str) -> str:
    """The day (UTC, ``YYYY-MM-DD``) a received run's id was made, where the id is a UUIDv7 (the
    OpenLineage clients' ids: the first 48 bits are its Unix time in milliseconds), else
    :data:`NO_DAY`: a job's source, a run whose id is another kind of UUID, or one whose time is
    outside :data:`RUN_DAYS`. Of the source alone, never of a clock: every event of a run finds
    the run's row by the same source and day (the key of ``external_sources``, whose day
    partitions it on PostgreSQL)."""
    found = _UUID7_RUN.fullmatch(source)
    if found is None:
        return NO_DAY
    millis = int(found.group(1) + found.group(2), 16)
    if not _RUN_MILLIS[0] <= millis < _RUN_MILLIS[1]:
        return NO_DAY
    return datetime.fromtimestamp(millis // 1000, UTC).date().isoformat()


@pickles_as_tuple
@attrs.frozen
class ReceivedColumnEdge:
    """One edge of a received ``columnLineage`` facet: an output's column (or the whole output)
    from a field of an input dataset, with the producer's transformations."""

    output: DatasetName
    column: str  # '' for the whole output (the facet's `dataset` list)
    input: DatasetName
    field: str
    transformations: str  # the JSON list, canonical


@pickles_as_tuple
@attrs.frozen
class SeenDataset:
    """A dataset as one event names and describes it."""

    direction: str | None  # "input", "output", or None for a DatasetEvent's dataset
    namespace: str
    name: str
    description: str | None = None
    owners: tuple[str, ...] = ()
    dataset_type: str | None = None
    symlinks: tuple[tuple[str, str, str | None], ...] = ()  # (namespace, name, type) of each identifier
    columns: tuple[Column, ...] = ()
    described: bool = False  # whether the event said anything of it beyond its name
    facets_digest: str | None = None  # of what it said, to see whether it says something new
    facets: tuple[tuple[str, str], ...] = ()  # (key, canonical JSON) of each of its facets
    facets_text_digest: str | None = None  # of all of them, to see whether they say something new
    assertions: tuple[Assertion, ...] = ()  # of its dataQualityAssertions facet (see dataset_assertions)


def dataset_assertions(dataset: Mapping[str, Any]) -> tuple[Assertion, ...]:
    """The assertions of a dataset's ``dataQualityAssertions`` facet, as an event gives it (an
    input facet, else a dataset facet): those with an ``assertion`` name and a boolean
    ``success``; the others are left out."""
    for key in ("inputFacets", "facets"):
        facets = dataset.get(key)
        facet = facets.get("dataQualityAssertions") if isinstance(facets, dict) else None
        items = facet.get("assertions") if isinstance(facet, dict) else None
        if isinstance(items, list):
            return tuple(
                Assertion(
                    assertion=a["assertion"],
                    success=a["success"],
                    name=a.get("name") if isinstance(a.get("name"), str) and a.get("name") else None,
                    column=a.get("column") if isinstance(a.get("column"), str) else None,
                    severity=a.get("severity") if isinstance(a.get("severity"), str) else None,
                )
                for a in items
                if isinstance(a, dict) and isinstance(a.get("assertion"), str) and isinstance(a.get("success"), bool)
            )
    return ()


# Hadoop's clients of S3 (s3a://, and the older s3n://) name the objects OpenLineage names s3://
_S3_ALIASES = ("s3a://", "s3n://")


def store_namespace(namespace: str) -> str:
    """A received dataset's namespace as olbridge reads it: S3 by Hadoop's schemes (``s3a://``,
    ``s3n://``, in any case) read as ``s3://``, the bucket as given, as the built-in rules read
    such ids (OpenLineage names S3 ``s3://{bucket}``; Spark's column lineage, and jobs that reach
    S3 through Hadoop, name the same objects ``s3a://{bucket}``); any other as it is."""
    if namespace[:6].lower() in _S3_ALIASES:
        return f"s3://{namespace[6:]}"
    return namespace


_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def run_source(run_id: str) -> str:
    """The key an external run is kept under, ``run:<runId>``: a UUID in lower case, whatever case
    it came in (Marquez reads a runId as a UUID, which ignores case: one run to it, so one here,
    whose owner a token cannot get past by writing its id in capitals). Another spelling Java's
    parser reads as a UUID (:func:`java_uuid`) is kept under its text, as it always was (runs
    received so keep their key); :func:`marquez_source` names the run Marquez reads it as."""
    return f"run:{run_id.lower() if _UUID.fullmatch(run_id) else run_id}"


def run_sources(run_id: str) -> tuple[str, ...]:
    """The keys a run of ``run_id`` may be kept under, the first that holds it being its: the id
    as given (a run split in two by its id's case before schema 34 keeps the half received in
    capitals under it, as ``runs list`` shows it), then :func:`run_source`'s."""
    return tuple(dict.fromkeys((f"run:{run_id}", run_source(run_id))))


def marquez_source(run_id: str) -> str | None:
    """The key of the run Marquez reads ``run_id`` as, where that is not the run it is kept under
    here: a spelling of a UUID other than its canonical one that ``UUID.fromString`` reads (a
    group short of its leading zeros, or with a ``+``); else None. A token that may not write
    that run may not write this one either: forwarded, its events would end or fail it."""
    if _UUID.fullmatch(run_id):
        return None
    found = java_uuid(run_id)
    return f"run:{found}" if found is not None else None


def java_uuid(text: str) -> str | None:
    """The UUID ``java.util.UUID.fromString`` reads ``text`` as (Marquez reads a runId so), in
    canonical form, or None where it reads none. Besides the canonical form it takes five groups
    of hexadecimal digits between four dashes, 36 characters at most, each group a number as
    ``Long.parseLong`` reads it in base 16 (a ``+`` before it, any length, any Unicode decimal
    digit or full-width letter), keeping its low 32, 16, 16, 16 and 48 bits:
    ``f33551b1-9845-46de-a878-e416e092c9e`` is ``f33551b1-9845-46de-a878-0e416e092c9e``."""
    if len(text) > 36 or text.count("-") != 4:
        return None
    groups = []
    for part in text.split("-"):
        value = _java_long16(part)
        if value is None:
            return None
        groups.append(value)
    high = (groups[0] & 0xFFFFFFFF) << 32 | (groups[1] & 0xFFFF) << 16 | groups[2] & 0xFFFF
    low = (groups[3] & 0xFFFF) << 48 | groups[4] & 0xFFFFFFFFFFFF
    number = f"{high << 64 | low:032x}"
    return f"{number[:8]}-{number[8:12]}-{number[12:16]}-{number[16:20]}-{number[20:]}"


_LONG_MAX = (1 << 63) - 1


def _java_long16(text: str) -> int | None:
    """``Long.parseLong(text, 16)``, or None where it throws (no digit, a character not a digit
    of base 16 to ``Character.digit``, past ``Long.MAX_VALUE``; a ``-`` never reaches here)."""
    digits = text[1:] if text.startswith("+") else text
    if not digits:
        return None
    value = 0
    for char in digits:
        digit = _java_digit16(char)
        if digit is None:
            return None
        value = value * 16 + digit
        if value > _LONG_MAX:
            return None
    return value


def _java_digit16(char: str) -> int | None:
    """``Character.digit(char, 16)``: a Unicode decimal digit, a Latin letter a-f in either case,
    or its full-width form; None for any other (a character past the BMP is two to Java, neither a digit)."""
    code = ord(char)
    if char in "abcdefABCDEF":
        return int(char, 16)
    if 0xFF21 <= code <= 0xFF26 or 0xFF41 <= code <= 0xFF46:  # full-width A-F, a-f
        return 10 + (code - 0xFF21 if code <= 0xFF26 else code - 0xFF41)
    if code > 0xFFFF:
        return None
    return unicodedata.decimal(char, None)


def writable(patterns: tuple[str, ...] | None, namespace: str) -> bool:
    """Whether a token of these namespace patterns (``*`` and ``?``; None: any) may write
    ``namespace``, as :meth:`bridge.config.NamedToken.may_write` says."""
    return patterns is None or any(namespace_matches(namespace, pattern) for pattern in patterns)


def writes_stored(patterns: tuple[str, ...] | None, namespace: str) -> bool:
    """Whether a token of these patterns may write a dataset olbridge keeps under ``namespace``
    (:func:`store_namespace`'s reading): under any spelling an event may give it (``s3://lake``
    is also ``s3a://lake`` and ``s3n://lake``), as the receiver lets an event through by the
    spelling it names."""
    if writable(patterns, namespace):
        return True
    return namespace.startswith("s3://") and any(writable(patterns, a + namespace[5:]) for a in _S3_ALIASES)


def namespace_matches(namespace: str, pattern: str) -> bool:
    """Whether ``namespace`` is one a token's pattern names: ``*`` any run of characters, ``?``
    any one, every other character itself, case and all (``[`` too: no character classes, so
    that the catalog's reads can ask the same of the database, :meth:`bridge.catalog.browse.Scope.clause`)."""
    return _pattern_of(pattern).fullmatch(namespace) is not None


@functools.lru_cache(maxsize=1024)
def _pattern_of(pattern: str) -> re.Pattern[str]:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)


@pickles_as_tuple
@attrs.frozen
class IncomingEvent:
    """An accepted OpenLineage event as the catalog keeps it."""

    digest: str
    body: str  # canonical JSON: sorted keys, compact
    kind: str
    event_time: datetime
    producer: str
    event_type: str | None = None
    job_namespace: str | None = None
    job_name: str | None = None
    run_id: str | None = None
    parent_run_id: str | None = None
    datasets: tuple[SeenDataset, ...] = ()
    warnings: tuple[str, ...] = ()
    column_edges: tuple[ReceivedColumnEdge, ...] = ()  # of its outputs' columnLineage facets
    run_facets: tuple[tuple[str, str], ...] = ()  # (key, canonical JSON) of each facet of its run
    job_facets: tuple[tuple[str, str], ...] = ()  # the same, of its job
    forward: str | None = None  # the event's text as it came, to forward (``serve --forward``)
    token: str | None = None  # the name of the token that brought it (``serve --tokens``)
    # the namespaces (patterns) that token may write (None: any): a run or job it names already
    # named under a job of another it may not join
    writes: tuple[str, ...] | None = None

    # worked out once, in the request's thread, rather than under the catalog's write lock
    time_text: str = attrs.field(init=False, eq=False, repr=False)
    source: str | None = attrs.field(init=False, eq=False, repr=False)
    rank: str = attrs.field(init=False, eq=False, repr=False)
    state_rank: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        setter = object.__setattr__
        setter(self, "time_text", format_time(self.event_time))
        # the external run or job the event is about: run:<runId> or job:<namespace>/<name>
        if self.kind == "RunEvent":
            setter(self, "source", run_source(str(self.run_id)))
        elif self.kind == "JobEvent":
            setter(self, "source", f"job:{self.job_namespace}/{self.job_name}")
        else:
            setter(self, "source", None)
        # orders events the same way whatever order they arrive in: by time, then digest
        setter(self, "rank", f"{self.time_text}|{self.digest}")
        # which event decides a run's state: an end beats RUNNING beats START, then the later
        kind = (self.event_type or "").upper()
        level = 3 if kind in TERMINAL else 1 if kind == "START" else 2
        setter(self, "state_rank", f"{level}|{self.rank}")
