"""What an import did: the summary every import gives, whatever its source."""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs


class Refusal(NamedTuple):
    """An item an import left out (an event, a record), where it was and why."""

    where: str
    reason: str


@attrs.define
class ImportSummary:
    """What one import read from its source, what it left out and why, and where the next import
    from that source starts: the summary every import gives (``import`` of files and of a Marquez
    instance, ``prefect import``), with one JSON shape. A kind of import adds its own counts
    (:meth:`counts_json`); the JSON is ``read``, those counts, ``refused``, ``refusals`` (``where``
    and ``reason`` of each) and, for an import that resumes, ``position``."""

    read: int = 0  # items read from the source
    refused: list[Refusal] = attrs.field(factory=list)
    position: str | None = None  # where the next import starts (None: the import keeps none)

    def refuse(self, where: str, reason: str) -> None:
        self.refused.append(Refusal(where, reason))

    def counts_json(self) -> dict[str, Any]:
        """What this kind of import counts besides the items read and refused."""
        return {}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "read": self.read,
            **self.counts_json(),
            "refused": len(self.refused),
            "refusals": [{"where": where, "reason": reason} for where, reason in self.refused],
        }
        if self.position is not None:
            out["position"] = self.position
        return out
