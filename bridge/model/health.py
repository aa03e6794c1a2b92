"""Asset health: freshness rules, the checks a run reported, and the one verdict they give.

Pure: every answer is as of a time the caller gives (an injected clock), from facts the caller
read (:class:`Facts`). The verdict of an asset is the worst of three parts, each of which may have
nothing to say:

- **freshness**, against its rule (:class:`FreshnessRule`): a *window* (``max``, and ``warn``, the
  warning time before the window closes: with ``max = 6h`` and ``warn = 2h`` data written at 08:00
  is PASS until 12:00, WARN from then, FAIL after 14:00), or a *cron deadline* (``cron``, ``lag``,
  ``timezone``: at each tick of the cron, in its time zone, the asset must have been written since
  the tick less the lag; FAIL from a missed tick until the next write);
- **checks**: the data-quality assertions of the latest run that reported any (a failed one FAILs
  the asset, a failed one of severity ``warn``, in any case, WARNs it, until a later run passes it);
- **the last run** that was to write it: a FAILED one FAILs the asset (so does one KILLED,
  CANCELLED or RETRIED: :data:`FAILED_RUN`).

An asset none of them speaks for is UNKNOWN (a rule on an asset never written says UNKNOWN only
when its checks and runs say nothing either: a dbt source, never written by a run, is judged by
``dbt source freshness``'s checks). *At risk* is separate: an asset downstream of a
FAIL or WARN asset, with the path to the nearest one (:func:`paths_at_risk`).
"""

from __future__ import annotations

import enum
import functools
import re
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs
from cronsim import CronSim, CronSimError

from bridge.errors import ValidationError
from bridge.model.asset_types import normalize_type
from bridge.model.assets import Assertion
from bridge.model.ids import check_namespace
from bridge.model.times import format_time


class Health(enum.StrEnum):
    PASS = "PASS"
    UNKNOWN = "UNKNOWN"
    WARN = "WARN"
    FAIL = "FAIL"

    @property
    def rank(self) -> int:
        """Worse is higher: PASS < UNKNOWN < WARN < FAIL."""
        return _RANK[self]

    @classmethod
    def parse(cls, value: str, where: str) -> Health:
        try:
            return cls(value.strip().upper())
        except ValueError:
            known = ", ".join(h.value for h in cls)
            raise ValidationError(f"unknown health {value!r}; known: {known}", rule="health", where=where) from None

    @classmethod
    def parse_list(cls, text: str, where: str) -> tuple[Health, ...]:
        """The healths of a comma-separated list (``FAIL,WARN``), in any case; a list naming none
        (empty, blank, commas alone) is an error, never a filter that shows nothing."""
        parts = [part for part in text.split(",") if part.strip()]
        if not parts:
            known = ", ".join(h.value for h in cls)
            raise ValidationError(
                f"{text!r} names no health; give one or more of {known}, comma-separated", rule="health", where=where
            )
        return tuple(cls.parse(part, where) for part in parts)


_RANK = {Health.PASS: 0, Health.UNKNOWN: 1, Health.WARN: 2, Health.FAIL: 3}

# each unit at most once, the largest first, nothing else (no spaces): 1d12h, 90m
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_DURATION_FORM = (
    "write a number and a unit (d, h, m, s) for each part, each unit once, the largest first, no spaces: "
    "6h, 90m, 1d12h, 30s"
)
# the longest a window, a warning, a lag or a retention may be: times it reaches back or ahead
# stay within what a date holds (years 1 to 9999), however far apart the moments judged
LONGEST = timedelta(days=36500)
# the names of the tz database's files that stand for the host's own zone, not one of its zones
HOST_ZONES = frozenset(("localtime", "posixrules"))
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: object, where: str) -> timedelta:
    """A duration written as ``6h``, ``90m``, ``1d12h``, ``30s``: days, hours, minutes, seconds,
    each at most once, the largest first, with no spaces (``1h1h``, ``1m1d`` and `` 6h`` are none)."""
    found = _DURATION.fullmatch(text) if isinstance(text, str) and text else None
    if found is None:
        raise ValidationError(f"{text!r} is no duration; {_DURATION_FORM}", rule="duration", where=where)
    seconds = sum(int(n) * size for n, size in zip(found.groups(), _UNIT.values(), strict=True) if n is not None)
    if seconds > LONGEST.total_seconds():
        raise ValidationError(
            f"{text!r} is longer than {format_duration(LONGEST)} (a hundred years), the longest duration taken",
            rule="duration",
            where=where,
        )
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The shortest text :func:`parse_duration` reads back (``0s`` for nothing)."""
    seconds = int(value.total_seconds())
    out = ""
    for unit, size in _UNIT.items():
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    return out or "0s"


_SHIFT = timedelta(hours=3)  # more than any daylight-saving shift of a wall clock


@attrs.frozen
class FreshnessRule:
    """A window (``max``, ``warn``) or a cron deadline (``cron``, ``lag``, ``timezone``), and
    where it comes from (``asset`` for one set on the asset, ``[[freshness]] #N`` from the config)."""

    max: timedelta | None = None
    warn: timedelta | None = None
    cron: str | None = None
    lag: timedelta = timedelta(0)
    timezone: str = "UTC"
    source: str = "asset"

    @classmethod
    def create(
        cls,
        *,
        max: timedelta | None = None,
        warn: timedelta | None = None,
        cron: str | None = None,
        lag: timedelta | None = None,
        timezone: str | None = None,
        source: str = "asset",
        where: str = "freshness",
    ) -> FreshnessRule:
        """A checked rule: a window or a cron deadline, not both; ``warn`` shorter than ``max``;
        a cron of five fields; a time zone of the tz database, not one that names the host's own
        (:data:`HOST_ZONES`: each host would judge the rule in its own; a rule stored with one
        before they were refused is read back as it was, :meth:`from_json`)."""
        if timezone is not None and timezone.casefold() in HOST_ZONES:  # (Localtime too, where names fold)
            raise ValidationError(
                f"time zone {timezone!r} is this host's own, which another host (a watch, a laptop) reads as "
                "its own: name a zone of the tz database (UTC, Europe/Paris)",
                rule="freshness.timezone",
                where=where,
            )
        return cls._checked(max=max, warn=warn, cron=cron, lag=lag, timezone=timezone, source=source, where=where)

    @classmethod
    def _checked(
        cls,
        *,
        max: timedelta | None,
        warn: timedelta | None,
        cron: str | None,
        lag: timedelta | None,
        timezone: str | None,
        source: str,
        where: str,
    ) -> FreshnessRule:
        """:meth:`create`'s rule, a time zone of the host's own taken."""
        if (max is None) == (cron is None):
            raise ValidationError(
                "give a window (max) or a cron deadline (cron), one of them", rule="freshness", where=where
            )
        for name, value in (("max", max), ("warn", warn), ("lag", lag)):
            if value is not None and value > LONGEST:  # a rule read back must be one parse_duration takes
                raise ValidationError(
                    f"{name} {format_duration(value)} is longer than {format_duration(LONGEST)} (a hundred years), "
                    "the longest taken",
                    rule=f"freshness.{name}",
                    where=where,
                )
        if max is not None:
            if lag is not None or timezone is not None:
                raise ValidationError("lag and timezone go with a cron deadline", rule="freshness", where=where)
            if max <= timedelta(0):
                raise ValidationError("max must be longer than nothing", rule="freshness.max", where=where)
            if warn is not None and not timedelta(0) < warn < max:
                raise ValidationError(
                    "warn must be longer than nothing and shorter than max", rule="freshness.warn", where=where
                )
            return cls(max=max, warn=warn, source=source)
        if warn is not None:
            raise ValidationError("warn goes with a window (max)", rule="freshness", where=where)
        assert cron is not None
        if timezone is not None and not timezone.strip():
            raise ValidationError(
                "timezone is empty: name a zone (UTC, Europe/Paris)", rule="freshness.timezone", where=where
            )
        zone = timezone or "UTC"
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValidationError(f"unknown time zone {zone!r}", rule="freshness.timezone", where=where) from None
        if len(cron.split()) != 5:
            raise ValidationError(
                f"cron {cron!r}: five fields (minute hour day month weekday)", rule="freshness.cron", where=where
            )
        try:
            CronSim(cron, datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as exc:
            raise ValidationError(f"cron {cron!r}: {exc}", rule="freshness.cron", where=where) from None
        return cls(cron=cron, lag=lag or timedelta(0), timezone=zone, source=source)

    def describe(self) -> str:
        if self.max is not None:
            warn = f", warn {format_duration(self.warn)} before" if self.warn else ""
            return f"written within {format_duration(self.max)}{warn}"
        lag = f", data at most {format_duration(self.lag)} older" if self.lag else ""
        return f"written by each '{self.cron}' ({self.timezone}){lag}"

    def to_json(self) -> dict[str, Any]:
        if self.max is not None:
            out: dict[str, Any] = {"max": format_duration(self.max)}
            if self.warn is not None:
                out["warn"] = format_duration(self.warn)
        else:
            out = {"cron": self.cron, "lag": format_duration(self.lag), "timezone": self.timezone}
        return {**out, "source": self.source}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "asset") -> FreshnessRule:
        """A rule from :meth:`to_json`'s keys (``source`` given apart), checked."""
        where = f"freshness of {source}"

        def duration(key: str) -> timedelta | None:
            return parse_duration(data[key], f"{where}: {key}") if data.get(key) is not None else None

        return cls._checked(
            max=duration("max"),
            warn=duration("warn"),
            cron=data.get("cron"),
            lag=duration("lag"),
            timezone=data.get("timezone"),
            source=source,
            where=where,
        )

    def last_tick(self, as_of: datetime) -> datetime:
        """The latest tick of the cron at or before ``as_of``, in UTC (ticks are in the rule's
        time zone, so a daylight-saving change moves them in UTC)."""
        assert self.cron is not None
        return _tick(self.cron, self.timezone, as_of, forwards=False)

    def next_tick(self, as_of: datetime) -> datetime:
        """The first tick of the cron after ``as_of``, in UTC (as :meth:`last_tick`, forwards)."""
        assert self.cron is not None
        return _tick(self.cron, self.timezone, as_of, forwards=True)

    def evaluate(self, last_write: datetime | None, as_of: datetime) -> tuple[Health, str]:
        """This rule's verdict on an asset last written at ``last_write`` (None: never)."""
        if last_write is None:
            return Health.UNKNOWN, f"never written (freshness: {self.describe()})"
        if self.max is not None:
            age = as_of - last_write
            if age > self.max:
                return (
                    Health.FAIL,
                    f"stale: last written {format_time(last_write)}, older than {format_duration(self.max)}",
                )
            if self.warn is not None and age > self.max - self.warn:
                due = format_time(last_write + self.max)
                return Health.WARN, f"stale at {due}: last written {format_time(last_write)}"
            return Health.PASS, f"fresh: last written {format_time(last_write)}"
        tick = self.last_tick(as_of)
        if last_write >= tick - self.lag:
            return Health.PASS, f"fresh: last written {format_time(last_write)}, deadline {format_time(tick)} met"
        return Health.FAIL, f"missed the deadline {format_time(tick)}: last written {format_time(last_write)}"


@functools.lru_cache(maxsize=1024)
def _tick(cron: str, timezone: str, as_of: datetime, *, forwards: bool) -> datetime:
    """A cron's last tick at or before ``as_of``, or its first after it, in UTC; worked out once a
    cron, zone and moment (a pass judges every asset as of one moment, thousands under one rule).

    The cron reads wall-clock time, which a daylight-saving change repeats or skips: the ticks
    are walked from a time past any shift, and the first on the far side of ``as_of`` in UTC is
    it (in a repeated hour, a tick at its first occurrence)."""
    zone = ZoneInfo(timezone)
    if forwards:
        ticks = CronSim(cron, (as_of - _SHIFT).astimezone(zone))
        return next(tick for tick in (t.astimezone(UTC) for t in ticks if not _again(t)) if tick > as_of)
    ticks = CronSim(cron, (as_of + _SHIFT).astimezone(zone), reverse=True)
    return next(tick for tick in (t.astimezone(UTC) for t in ticks if not _again(t)) if tick <= as_of)


def _again(tick: datetime) -> bool:
    """Whether a wall-clock tick is the second occurrence of a time the clocks went back over
    (cronsim gives an hourly cron both 02:00s of such a night: a deadline ticks once)."""
    return tick.fold == 1 and tick.replace(fold=0).utcoffset() != tick.utcoffset()


_MATCH_KEYS = ("namespace", "type", "id_prefix", "metadata")


@attrs.frozen
class Match:
    """Which assets a ``[[freshness]]`` (or ``[[alerts]]``) table is for; every key optional."""

    namespace: str | None = None
    type: str | None = None
    id_prefix: str | None = None
    metadata: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def parse(cls, table: object, where: str) -> Match:
        if table is None:
            return cls()
        if not isinstance(table, dict):
            raise ValidationError("'match' must be a table ({ namespace = ..., ... })", rule="match", where=where)
        unknown = sorted(set(table) - set(_MATCH_KEYS))
        if unknown:
            raise ValidationError(
                f"unknown key(s) {', '.join(unknown)}; known: {', '.join(_MATCH_KEYS)}", rule="match", where=where
            )
        for key in ("namespace", "type", "id_prefix"):
            if key in table and (not isinstance(table[key], str) or not table[key]):
                raise ValidationError(f"'{key}' must be a non-empty string", rule="match", where=where)
        metadata = table.get("metadata", {})
        if not isinstance(metadata, dict) or not all(
            isinstance(v, str | int | float | bool) and not isinstance(v, dict) for v in metadata.values()
        ):
            raise ValidationError("'metadata' must be a table of scalar values", rule="match", where=where)
        try:  # as the command line reads them (a type by its short name), or refused as there
            namespace = check_namespace(table.get("namespace"), where="namespace")
            type = normalize_type(table["type"], where="type") if "type" in table else None
        except ValidationError as exc:
            raise ValidationError(f"'match': {exc.message}", rule="match", where=where) from None
        return cls(
            namespace=namespace,
            type=type,
            id_prefix=table.get("id_prefix"),
            metadata={str(k): _scalar_text(v) for k, v in metadata.items()},
        )

    def matches(self, asset_id: str, type: str, namespace: str | None, metadata: Mapping[str, Any]) -> bool:
        return (
            (self.namespace is None or namespace == self.namespace)
            and (self.type is None or type == self.type)
            and (self.id_prefix is None or asset_id.startswith(self.id_prefix))
            and all(k in metadata and _scalar_text(metadata[k]) == v for k, v in self.metadata.items())
        )

    @property
    def specificity(self) -> tuple[int, int]:
        """More keys is more specific; then a longer id prefix."""
        keys = sum(x is not None for x in (self.namespace, self.type, self.id_prefix)) + len(self.metadata)
        return keys, len(self.id_prefix or "")


def _scalar_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@attrs.frozen
class Selector:
    """A ``[[freshness]]`` table: its match and its rule."""

    match: Match
    rule: FreshnessRule


class RuleBook:
    """The selectors, ready to answer :meth:`rule_for` for many assets: kept most specific first
    (then in file order), and, for each namespace and type asked about, the selectors that could
    match an asset of them (those naming that namespace and type, or none), in that order, up to
    the first that takes every asset of them: an asset tries only those."""

    def __init__(self, selectors: Sequence[Selector]) -> None:
        ordered = sorted(enumerate(selectors), key=lambda item: (tuple(-x for x in item[1].match.specificity), item[0]))
        self._ordered = [s for _index, s in ordered]
        self._candidates: dict[tuple[str | None, str], tuple[Selector, ...]] = {}
        self._empty = not selectors

    def _for(self, namespace: str | None, type: str) -> tuple[Selector, ...]:
        found: list[Selector] = []
        for s in self._ordered:
            m = s.match
            if (m.namespace is None or m.namespace == namespace) and (m.type is None or m.type == type):
                found.append(s)
                if m.id_prefix is None and not m.metadata:  # takes every asset of them: none after counts
                    break
        self._candidates[namespace, type] = tuple(found)
        return self._candidates[namespace, type]

    def rule_for(
        self, asset_id: str, type: str, namespace: str | None, metadata: Mapping[str, Any], own: FreshnessRule | None
    ) -> FreshnessRule | None:
        """The rule an asset answers to: its own, else the most specific selector matching it
        (the first in the file among equals)."""
        if own is not None or self._empty:
            return own
        candidates = self._candidates.get((namespace, type))
        if candidates is None:
            candidates = self._for(namespace, type)
        for s in candidates:
            m = s.match
            if (m.id_prefix is None or asset_id.startswith(m.id_prefix)) and (
                not m.metadata or all(k in metadata and _scalar_text(metadata[k]) == v for k, v in m.metadata.items())
            ):
                return s.rule
        return None


def rule_for(
    asset_id: str,
    type: str,
    namespace: str | None,
    metadata: Mapping[str, Any],
    own: FreshnessRule | None,
    selectors: Sequence[Selector],
) -> FreshnessRule | None:
    """The rule an asset answers to (see :class:`RuleBook`, which answers many)."""
    return RuleBook(selectors).rule_for(asset_id, type, namespace, metadata, own)


@attrs.frozen
class Facts:
    """What the catalog knows of an asset as of a time."""

    asset_id: str
    last_write: datetime | None = None  # the end of the latest run that wrote it successfully
    last_run: tuple[str, str] | None = None  # (state, label) of the latest run that was to write it
    checks: tuple[Assertion, ...] = ()  # of the latest run that reported any
    checks_from: str | None = None  # that run


@attrs.frozen
class Verdict:
    """An asset's health and why; with its rule, the last write the rule was judged against
    (``written``, the catalog's text form; None: never written, or no rule), which
    :func:`next_change` reads."""

    asset_id: str
    health: Health
    reasons: tuple[str, ...]
    rule: FreshnessRule | None = None
    written: str | None = None


# the states of a last run that FAIL the asset it was to write, and how its reason says so: a
# failure, and a run that ended without writing (killed, cancelled, or failed and retried: what
# its OpenLineage FAIL or ABORT says, as a received FAIL or ABORT FAILs); a SKIPPED run says
# nothing of its outputs
FAILED_RUN = {
    "FAILED": "failed",
    "KILLED": "was killed",
    "CANCELLED": "was cancelled",
    "RETRIED": "failed (retried)",
}


def _warns(check: Assertion) -> bool:
    """Whether a failed check WARNs (severity ``warn``, in any case: producers spell it ``WARN``
    too; kept as they spelled it), not FAILs."""
    return check.severity is not None and check.severity.lower() == "warn"


def evaluate(facts: Facts, rule: FreshnessRule | None, as_of: datetime) -> Verdict:
    """The health of an asset as of ``as_of``: the worst of its freshness, checks and last run."""
    parts: list[tuple[Health, str]] = []
    unwritten: tuple[Health, str] | None = None  # a rule's UNKNOWN, which speaks only when nothing else does
    if rule is not None:
        if facts.last_write is None:
            unwritten = rule.evaluate(None, as_of)
        else:
            parts.append(rule.evaluate(facts.last_write, as_of))
    for check in facts.checks:
        name = check.name or check.assertion
        column = f" on {check.column}" if check.column else ""
        if check.success:
            continue
        health = Health.WARN if _warns(check) else Health.FAIL
        parts.append((health, f"check {name}{column} failed ({facts.checks_from or 'last run'})"))
    if facts.checks and all(c.success for c in facts.checks):
        parts.append((Health.PASS, f"{len(facts.checks)} check(s) passed"))
    if facts.last_run is not None:
        state, label = facts.last_run
        failed = FAILED_RUN.get(state)
        if failed is not None:
            parts.append((Health.FAIL, f"last run {label} {failed}"))
        elif state in ("SUCCESS", "WARNING"):
            parts.append((Health.PASS, f"last run {label} succeeded"))
    written = format_time(facts.last_write) if rule is not None and facts.last_write is not None else None
    if not parts:
        reason = unwritten[1] if unwritten else "nothing known: no freshness rule, check or run"
        return Verdict(facts.asset_id, Health.UNKNOWN, (reason,), rule, written)
    worst = max(h.rank for h, _ in parts)
    health = next(h for h, _ in parts if h.rank == worst)
    reasons = tuple(reason for h, reason in parts if h.rank == worst)
    return Verdict(facts.asset_id, health, reasons, rule, written)


_NOTHING = ("nothing known: no freshness rule, check or run",)


class Judge:
    """Judges many assets as of one time, as :func:`evaluate` does, from their facts as the
    catalog keeps them (times as text, in the catalog's one form: :func:`format_time`): each
    rule's thresholds are worked out once (the time a window warns and fails from, a cron's last
    tick less its lag), after which an asset's freshness is two comparisons of text. An asset
    with checks, or in any way off the common path, is judged by :func:`evaluate` itself."""

    def __init__(self, as_of: datetime) -> None:
        self.as_of = as_of
        self._limits: dict[int, tuple[FreshnessRule, str, str | None, str]] = {}

    def _limits_of(self, rule: FreshnessRule) -> tuple[str, str | None, str]:
        """(fails before, warns before, the window's length as text) for a window; (met from, the
        tick, "") for a cron deadline."""
        found = self._limits.get(id(rule))
        if found is None:
            if rule.max is not None:
                warns = format_time(self.as_of - (rule.max - rule.warn)) if rule.warn is not None else None
                found = (rule, format_time(self.as_of - rule.max), warns, format_duration(rule.max))
            else:
                tick = rule.last_tick(self.as_of)
                found = (rule, format_time(tick - rule.lag), format_time(tick), "")
            self._limits[id(rule)] = found  # the rule kept with them: its id stays its own
        return found[1], found[2], found[3]

    def verdict(
        self,
        asset_id: str,
        rule: FreshnessRule | None,
        last_write: str | None,
        last_run: tuple[str, str] | None,
        checks: tuple[Assertion, ...] = (),
        checks_from: str | None = None,
    ) -> Verdict:
        """:func:`evaluate`'s verdict on an asset last written at ``last_write`` (text)."""
        if rule is None and last_run is None and not checks:
            return Verdict(asset_id, Health.UNKNOWN, _NOTHING, None)
        if checks or (rule is not None and (last_write is None or len(last_write) != 27 or last_write[-1] != "Z")):
            written = datetime.fromisoformat(last_write) if last_write is not None and rule is not None else None
            return evaluate(Facts(asset_id, written, last_run, checks, checks_from), rule, self.as_of)
        fresh: tuple[Health, str] | None = None
        if rule is not None:
            assert last_write is not None
            first, second, length = self._limits_of(rule)
            if rule.max is None:
                fresh = (
                    (Health.PASS, f"fresh: last written {last_write}, deadline {second} met")
                    if last_write >= first
                    else (Health.FAIL, f"missed the deadline {second}: last written {last_write}")
                )
            elif last_write < first:
                fresh = (Health.FAIL, f"stale: last written {last_write}, older than {length}")
            elif second is not None and last_write < second:
                due = format_time(datetime.fromisoformat(last_write) + rule.max)
                fresh = (Health.WARN, f"stale at {due}: last written {last_write}")
            else:
                fresh = (Health.PASS, f"fresh: last written {last_write}")
        run: tuple[Health, str] | None = None
        if last_run is not None:
            state, label = last_run
            failed = FAILED_RUN.get(state)
            if failed is not None:
                run = (Health.FAIL, f"last run {label} {failed}")
            elif state in ("SUCCESS", "WARNING"):
                run = (Health.PASS, f"last run {label} succeeded")
        if fresh is None:
            if run is None:
                return Verdict(asset_id, Health.UNKNOWN, _NOTHING, rule)
            return Verdict(asset_id, run[0], (run[1],), rule)
        if run is None or run[0] is fresh[0]:
            return Verdict(asset_id, fresh[0], (fresh[1], run[1]) if run else (fresh[1],), rule, last_write)
        worst = fresh if fresh[0].rank > run[0].rank else run
        return Verdict(asset_id, worst[0], (worst[1],), rule, last_write)


# the reasons that name a job (:func:`evaluate`'s): a run's label, or the reporter of checks,
# each ``<job namespace>/<job> at <time>`` (a reporter may be a word: ``dbt import``)
_RUN_ENDS = "|".join(re.escape(said) for said in sorted({*FAILED_RUN.values(), "succeeded"}, key=len, reverse=True))
_NAMES_A_JOB = (
    # every way a last run's reason ends (FAILED_RUN's words: a killed run's job named too)
    re.compile(rf"(last run )(.+)( (?:{_RUN_ENDS}))", re.DOTALL),
    re.compile(r"(check .+ failed \()(.+)(\))", re.DOTALL),
)
ANOTHER_NAMESPACE = "a job of another namespace"


def masked(reason: str, allows: Callable[[str], bool]) -> str:
    """A reason as one who sees only the namespaces ``allows`` takes may read it: the job it
    names, where its namespace may be one they do not see, is :data:`ANOTHER_NAMESPACE`. A job
    is named ``namespace/name``, and either may hold a ``/``: it is shown only where every text
    before one of its ``/`` is a namespace they see (so whichever is its namespace)."""
    for pattern in _NAMES_A_JOB:
        found = pattern.fullmatch(reason)
        if found is None:
            continue
        job, at, moment = found.group(2).rpartition(" at ")
        if not at:
            job, moment = found.group(2), ""
        if all(allows(job[:i]) for i, c in enumerate(job) if c == "/"):
            return reason
        return f"{found.group(1)}{ANOTHER_NAMESPACE}{at}{moment}{found.group(3)}"
    return reason


_INSTANT = timedelta(microseconds=1)  # the catalog's times are to the microsecond


def next_change(verdict: Verdict, as_of: datetime) -> datetime | None:
    """The first moment after ``as_of`` at which the verdict given then (with the same facts)
    would be another, with time alone (None: never, until a fact changes): only freshness moves
    with time. A window's data is fresh until ``max - warn`` after the write, WARNs until
    ``max``, and FAILs from the microsecond after (then for good); a cron deadline's verdict
    names its latest tick, so it changes at the next one (FAIL or not). The verdict at that moment
    may be the same (another part, a failed run say, was the worst): the watch judges the asset
    then, and again at its next change."""
    rule, written = verdict.rule, verdict.written
    if rule is None or written is None:
        return None
    if rule.cron is not None:
        return rule.next_tick(as_of)
    assert rule.max is not None
    last = datetime.fromisoformat(written)
    for edge in (last + rule.max - rule.warn if rule.warn is not None else None, last + rule.max):
        if edge is not None and as_of <= edge:  # changes on the microsecond after the edge
            return edge + _INSTANT
    return None


def paths_at_risk(bad: Iterable[str], downstream: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """The assets downstream of the ``bad`` ones (FAIL or WARN), each with a shortest path from
    one of them (the cause first, the asset last; a bad asset is at risk too when another is
    upstream of it), worked out as the walk reaches it (a path is the path to the asset before
    it, and it), so in one pass, linear in the edges walked.

    The walk is breadth first from the bad assets in order; an asset takes its path when it is
    first queued, and none is queued twice.

    No asset is at risk from itself: a bad asset the walk reached only through a cycle back to it
    (``b -> c -> b``) is at risk where another bad asset reaches it through assets that are not
    bad, with the shortest such path (:func:`_from_another`), and else not at all."""
    bad = set(bad)
    get = downstream.get
    paths: dict[str, tuple[str, ...]] = {}
    reached: list[str] = []  # in the order of the walk; it grows as it is read
    for cause in sorted(bad):
        for child in get(cause, ()):
            if child not in paths:
                paths[child] = (cause, child)
                reached.append(child)
    for node in reached:
        children = get(node)
        if children is None:
            continue
        path = (node,) if node in bad else paths[node]
        for child in children:
            if child not in paths:
                paths[child] = (*path, child)
                reached.append(child)
    itself = [node for node in bad if node in paths and paths[node][0] == node]
    if itself:
        upstream: dict[str, list[str]] = {}
        for up, downs in downstream.items():
            for down in downs:
                upstream.setdefault(down, []).append(up)
        for node in sorted(itself):
            other = _from_another(node, bad, upstream)
            if other is None:
                del paths[node]
            else:
                paths[node] = other
    return paths


def _from_another(node: str, bad: Container[str], upstream: Mapping[str, Sequence[str]]) -> tuple[str, ...] | None:
    """The shortest path to the bad asset ``node`` from another bad asset, through assets that
    are not bad (the path :func:`paths_at_risk` gives, whose causes are the nearest bad assets),
    found walking up from it, each asset's upstream in sorted order; None: there is none."""
    after: dict[str, str] = {node: node}  # each asset walked, with the one after it towards node
    queue = deque([node])
    while queue:
        current = queue.popleft()
        for up in sorted(upstream.get(current, ())):
            if up in after:
                continue
            after[up] = current
            if up in bad:  # another bad asset (node itself is in after already)
                path = [up]
                while path[-1] != node:
                    path.append(after[path[-1]])
                return tuple(path)
            queue.append(up)
    return None


__all__ = [
    "ANOTHER_NAMESPACE",
    "HOST_ZONES",
    "LONGEST",
    "Facts",
    "FreshnessRule",
    "Health",
    "Judge",
    "Match",
    "RuleBook",
    "Selector",
    "Verdict",
    "evaluate",
    "format_duration",
    "masked",
    "next_change",
    "parse_duration",
    "paths_at_risk",
    "rule_for",
]
