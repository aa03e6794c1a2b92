"""dbt sources' freshness: their ``freshness`` (``warn_after``, ``error_after``) as the freshness
rules of their assets, and ``dbt source freshness``'s results (``sources.json``) as checks.

A rule is a window: ``error_after`` its length, ``warn_after`` where WARN begins (so ``warn`` is
their difference, the warning time before the window closes). A source with ``warn_after`` alone
has no rule here (a window that never FAILs): its results in sources.json still count. A result
becomes an assertion named ``source_freshness`` on the source: passed, or failed with severity
``warn`` (dbt's ``warn``) or ``error`` (``error`` and ``runtime error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from bridge.errors import ArtifactError, ValidationError
from bridge.model import Assertion
from bridge.model.health import LONGEST, FreshnessRule, format_duration

DBT_RULE = "dbt"  # the source of the rules dbt import sets, which a later import may change
_PERIOD = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}


def _after(value: Any, where: str) -> timedelta | None:
    if not isinstance(value, dict) or value.get("count") is None or value.get("period") is None:
        return None
    count, period = value["count"], value["period"]
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0 or period not in _PERIOD:
        raise ArtifactError(f"{where}: a count of minutes, hours or days, not {value!r}")
    unit = _PERIOD[period]
    if count > LONGEST // unit:  # (before a timedelta is made of it: a huge count overflows one)
        raise ArtifactError(
            f"{where}: {count} {period}s is longer than {format_duration(LONGEST)} (a hundred years), "
            "the longest duration taken"
        )
    return count * unit


def source_rules(manifest: Mapping[str, Any], where: str) -> dict[str, FreshnessRule]:
    """The rule of each source (by unique id) whose freshness has an ``error_after``."""
    out: dict[str, FreshnessRule] = {}
    for unique_id, node in manifest["sources"].items():
        freshness = node.get("freshness")
        if not isinstance(freshness, dict):
            continue
        at = f"{where}: {unique_id}: freshness"
        error = _after(freshness.get("error_after"), f"{at}.error_after")
        warn = _after(freshness.get("warn_after"), f"{at}.warn_after")
        if error is None:
            continue
        try:
            out[unique_id] = FreshnessRule.create(
                max=error, warn=error - warn if warn is not None and warn < error else None, source=DBT_RULE, where=at
            )
        except ValidationError as exc:
            raise ArtifactError(str(exc)) from None
    return out


def freshness_checks(sources_json: Mapping[str, Any], manifest: Mapping[str, Any]) -> dict[str, list[Assertion]]:
    """``dbt source freshness``'s verdict on each source it checked, as an assertion."""
    out: dict[str, list[Assertion]] = {}
    for result in sources_json.get("results") or ():
        if not isinstance(result, dict) or result.get("unique_id") not in manifest["sources"]:
            continue
        node = manifest["sources"][result["unique_id"]]
        status = result.get("status")
        name = f"source_freshness of {node.get('source_name')}.{node.get('name')}"
        out[result["unique_id"]] = [
            Assertion(
                assertion="source_freshness",
                success=status == "pass",
                name=name,
                severity="warn" if status == "warn" else "error",
            )
        ]
    return out
