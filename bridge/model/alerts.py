"""Alerts: which changes of an asset's health (or which updates of it) an ``[[alerts]]`` table is
for, and the message sent to its webhook.

Pure: the health watch (:mod:`bridge.catalog.health_state`) gives each change it records, and this
module says which events it is (:func:`events_of`), which alert rules want it
(:meth:`AlertRule.wants`) and what they send (:func:`message`).

The events:

- ``FAIL``: the asset became FAIL; ``WARN``: it became WARN (from any other health);
- ``RECOVERED``: it was FAIL or WARN and is now PASS or UNKNOWN;
- ``UPDATED``: the asset was written (its ``updated_at`` moved; or, judged for the first time,
  a write marked it: new, or back from a delete, while a watch was live), whatever its health; a
  rule may ask for it only when the asset's metadata holds some values (``updated_metadata``).

An asset judged for the first time counts as having been UNKNOWN before.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import attrs

from bridge.errors import ValidationError
from bridge.model.health import Health, Match
from bridge.model.urls import url_problem

FAIL, WARN, RECOVERED, UPDATED = "FAIL", "WARN", "RECOVERED", "UPDATED"
EVENTS = (FAIL, WARN, RECOVERED, UPDATED)
NAME_MAX = 64


@attrs.frozen
class AlertRule:
    """One ``[[alerts]]`` table."""

    name: str
    match: Match
    on: frozenset[str]
    webhook: str
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=False)  # may hold a secret
    updated_metadata: Mapping[str, str] = attrs.field(factory=dict)  # UPDATED only when these hold

    def wants(self, event: str, asset_id: str, type: str, namespace: str | None, metadata: Mapping[str, Any]) -> bool:
        """True when this rule is for ``event`` on this asset."""
        if event not in self.on or not self.match.matches(asset_id, type, namespace, metadata):
            return False
        if event == UPDATED and self.updated_metadata:
            return Match(metadata=self.updated_metadata).matches(asset_id, type, namespace, metadata)
        return True


def check_webhook(url: object, where: str) -> str:
    """An http:// or https:// URL with a host (:func:`~bridge.model.urls.url_problem`)."""
    problem = url_problem(url)
    if problem is not None:
        raise ValidationError(
            f"'webhook' must be an http:// or https:// URL with a host, not {url!r}: {problem}",
            rule="alerts",
            where=where,
        )
    assert isinstance(url, str)
    return url


def events_of(old: Health | None, new: Health, *, updated: bool) -> list[str]:
    """The events a judgement is: the change from ``old`` (None: never judged) to ``new``, and
    ``UPDATED`` when the asset was written since it was last judged."""
    before = old or Health.UNKNOWN
    found: list[str] = []
    if new != before:
        if new is Health.FAIL:
            found.append(FAIL)
        elif new is Health.WARN:
            found.append(WARN)
        elif before in (Health.FAIL, Health.WARN):
            found.append(RECOVERED)
    if updated:
        found.append(UPDATED)
    return found


def asset_link(web_url: str | None, asset_id: str) -> str | None:
    """The asset's page in the web view (``olbridge ui``) served at ``web_url``."""
    return f"{web_url.rstrip('/')}/assets/{quote(asset_id, safe='')}" if web_url else None


@attrs.frozen
class Change:
    """One judgement to tell: the asset, its health before and now, the reasons, how many assets
    downstream of it are at risk, and when."""

    asset_id: str
    type: str
    namespace: str | None
    old: Health | None
    new: Health
    reasons: tuple[str, ...]
    at_risk_downstream: int
    at: str


# the namespace of alerts' ids (a UUID of its own, so that no other name-based UUID is one of them)
ALERT_IDS = uuid.UUID("5b0f4c1e-9a53-4f38-8c55-2d1a7e0b6c41")


def alert_id(rule_name: str, event: str, change: Change) -> str:
    """One change's alert, named: the same on every try, so a webhook can drop a repeat."""
    return str(uuid.uuid5(ALERT_IDS, "\x00".join((rule_name, event, change.asset_id, change.at))))


def message(rule_name: str, event: str, change: Change, web_url: str | None) -> dict[str, Any]:
    """The JSON an alert sends (docs/health.md, "Alerts"), with a ``text`` for Slack."""
    link = asset_link(web_url, change.asset_id)
    old = change.old.value if change.old is not None else None
    if event == UPDATED:
        head = f"{change.asset_id} was updated; it is {change.new.value}"
    else:
        head = f"{change.asset_id} is {change.new.value} (was {old or 'not judged'})"
    parts = [f"[{event}] {head}"]
    if change.reasons:
        parts.append(": " + "; ".join(change.reasons))
    if change.at_risk_downstream:
        parts.append(f". {change.at_risk_downstream} downstream asset(s) at risk")
    if link:
        parts.append(f". {link}")
    return {
        "id": alert_id(rule_name, event, change),
        "alert": rule_name,
        "event": event,
        "asset": {"id": change.asset_id, "type": change.type, "namespace": change.namespace},
        "oldHealth": old,
        "health": change.new.value,
        "reasons": list(change.reasons),
        "atRiskDownstream": change.at_risk_downstream,
        "link": link,
        "at": change.at,
        "text": "".join(parts),
    }


def rules_for(
    rules: Sequence[AlertRule],
    event: str,
    asset_id: str,
    type: str,
    namespace: str | None,
    metadata: Mapping[str, Any],
) -> list[AlertRule]:
    return [r for r in rules if r.wants(event, asset_id, type, namespace, metadata)]


__all__ = [
    "EVENTS",
    "AlertRule",
    "Change",
    "asset_link",
    "check_webhook",
    "events_of",
    "message",
    "rules_for",
]
