"""What the receiver takes: the OpenLineage 2-0-2 rules and Marquez's, read the way Marquez reads
them unless the receiver is strict.

By default the receiver takes what Marquez takes, so producers written for Marquez keep working,
and keeps a warning with the event for each spec rule it let pass:

- a missing ``schemaURL`` (the kind then comes from the event's shape);
- an ``eventTime`` without an offset (read as UTC, as Marquez does in its Docker image);
- a ``runId`` that is not a UUID, an ``eventType`` outside the spec's list, a ``producer`` or
  ``schemaURL`` that is not a URI;
- problems inside facets that Marquez does not read into typed fields (ownership, tags, custom
  facets and the like).

``strict`` refuses everything the spec refuses. Marquez's own refusals (namespace characters and
length, facet and field key length, NUL characters, required facet fields) are refused in both
modes. Facets whose ``_schemaURL`` points at another schema version, and unknown custom facets, are
kept as they are in both modes.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from bridge.openlineage.validate import Problem, event_kind, marquez_problems, spec_problems

# Facets Marquez deserializes into typed classes (reference/marquez.md, section 2): a problem in one
# of them is a 422 there, so it is refused here too.
MARQUEZ_TYPED_FACETS = {
    "run": {"nominalTime", "parent", "parentRun"},
    "job": {"documentation", "sourceCodeLocation", "sql", "jobType"},
    "dataset": {"documentation", "schema", "dataSource", "lifecycleStateChange", "columnLineage", "symlinks"},
}
_FACET_POINTER = re.compile(r"/(run|job|inputs/\d+|outputs/\d+|dataset)/(facets|inputFacets|outputFacets)/([^/]+)")
_NAIVE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?")


@attrs.frozen
class Verdict:
    kind: str  # RunEvent, DatasetEvent or JobEvent
    refusals: tuple[Problem, ...]
    warnings: tuple[Problem, ...]

    @property
    def accepted(self) -> bool:
        return not self.refusals


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def _tolerated(problem: Problem, event: dict[str, Any]) -> bool:
    """Whether Marquez would take the event despite this spec problem."""
    pointer, message = problem.pointer, problem.message
    if problem.rule == "marquez":
        # "Marquez reads this as a RunEvent unless schemaURL ends in /Kind": only when the URL is
        # missing and the kind came from the shape, which this receiver reads as the spec means.
        return pointer == "/schemaURL" and "schemaURL" not in event
    if pointer == "" and message == "'schemaURL' is required":
        return True
    if pointer == "/eventTime":
        value = event.get("eventTime")
        return isinstance(value, str) and bool(_NAIVE_TIME.fullmatch(value))
    if pointer == "/eventType" or pointer == "/run/runId":
        return isinstance(_at(event, pointer), str)
    if pointer in ("/producer", "/schemaURL"):
        value = _at(event, pointer)
        return isinstance(value, str) and bool(value.strip())
    match = _FACET_POINTER.match(pointer)
    if match:
        holder = "dataset" if match.group(1) not in ("run", "job") else match.group(1)
        return _unescape(match.group(3)) not in MARQUEZ_TYPED_FACETS[holder]
    return False


def _at(event: dict[str, Any], pointer: str) -> Any:
    value: Any = event
    for part in pointer.split("/")[1:]:
        if isinstance(value, dict):
            value = value.get(_unescape(part))
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def judge(event: Any, *, strict: bool = False, text: str | None = None) -> Verdict:
    """The receiver's verdict on one parsed event (``text``: its JSON, if at hand)."""
    problems = spec_problems(event) + marquez_problems(event, text=text)
    if not isinstance(event, dict):
        return Verdict("RunEvent", tuple(problems), ())
    kind = event_kind(event)
    if strict:
        return Verdict(kind, tuple(problems), ())
    refusals: list[Problem] = []
    warnings: list[Problem] = []
    for problem in problems:
        (warnings if _tolerated(problem, event) else refusals).append(problem)
    return Verdict(kind, tuple(refusals), tuple(warnings))
