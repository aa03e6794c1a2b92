"""What became of one event the receiver was given (an HTTP request's, a file's, a Marquez
instance's): :class:`~bridge.receiver.intake.Intake` decides it, the metrics count it, the HTTP
answer and the import summary say it."""

from __future__ import annotations

import attrs

from bridge.openlineage.validate import Problem


@attrs.frozen
class Outcome:
    status: str  # "accepted" | "duplicate" | "refused" | "unavailable"
    kind: str | None = None
    message: str = ""
    problems: tuple[Problem, ...] = ()
    warnings: tuple[str, ...] = ()
    placeholders: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in ("accepted", "duplicate")

    @property
    def retriable(self) -> bool:
        return self.status == "unavailable"
