"""Alerts' delivery: each queued alert (an outbox row of kind ``alert``) POSTed to the webhook of
its ``[[alerts]]`` table, through olbridge's one HTTP sender (:class:`~bridge.delivery.senders.
HttpSender`: the same outcomes, so the same retries and dead letters as the stream's events).

The webhook and its headers are read from the config when the stream starts, never kept in the
catalog (a header may hold a secret); an alert whose table is no longer in the config is refused
(a dead letter naming it: ``olbridge outbox retry`` sends it once the table is back).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from bridge.delivery.senders import HttpSender, Outcome
from bridge.model.alerts import AlertRule


class AlertSenders:
    """One sender per ``[[alerts]]`` table, by its name."""

    def __init__(self, rules: Sequence[AlertRule], *, timeout: float = 5.0) -> None:
        self._senders = {
            rule.name: HttpSender(rule.webhook, endpoint="", headers=rule.headers, timeout=timeout, batch=False)
            for rule in rules
        }

    def send(self, messages: Sequence[str]) -> list[Outcome]:
        """Each message to its alert's webhook, one request each, in order."""
        return [self._one(text) for text in messages]

    def _one(self, text: str) -> Outcome:
        try:
            name = json.loads(text).get("alert")
        except (ValueError, AttributeError):
            name = None
        sender = self._senders.get(name) if isinstance(name, str) else None
        if sender is None:
            return Outcome(ok=False, detail=f"no [[alerts]] table named {name!r} in the config")
        return sender.send_one(text)

    def close(self) -> None:
        for sender in self._senders.values():
            sender.close()


__all__ = ["AlertSenders"]
