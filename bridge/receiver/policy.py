"""What the receiver takes: the verdict on one event (``docs/receiver.md`` has the decision table).

By default the receiver refuses only what Marquez refuses, or what the catalog could not keep
faithfully, and takes the rest, keeping a warning beside the event for each OpenLineage spec rule
it let pass:

- refused (400): what the catalog cannot key by (:func:`_key_problems`: a job's namespace and
  name past 1,200 bytes together, a dataset's past 2,000, a runId past 255), and what Marquez's model
  refuses (``bridge.openlineage.marquez_rules`` and the ``marquez`` rules of
  ``bridge.openlineage.validate``): a missing required field, a value its JSON
  binding cannot read (an ``eventTime`` or ``schemaURL`` it cannot parse, an object where it reads
  text), the required fields of the facets it reads into classes, whatever version their
  ``_schemaURL`` names, namespaces it cannot store, NUL characters, over-long keys; and the fields
  olbridge keys runs, jobs and datasets by (``runId``, namespaces, names) when they are not
  strings;
- taken with a warning: every other spec problem. At the top of the event: a missing
  ``schemaURL``; a ``schemaURL``, ``eventType``, ``inputs`` or ``outputs`` that is ``null``, which
  Marquez reads as missing; an ``eventTime`` without an offset (read as UTC, as Marquez does in its Docker
  image), a ``runId`` that is not a UUID, an ``eventType`` outside the spec's list, a ``producer``
  or ``schemaURL`` that is not an absolute URI. Inside any facet, standard or custom: formats,
  enums, types and required fields of the JSON schemas that Marquez does not hold, which are
  stored as they came there too.

``strict`` refuses every spec problem as well.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from bridge.errors import ValidationError
from bridge.model.times import parse_time
from bridge.openlineage.marquez_rules import at, marquez_time
from bridge.openlineage.validate import Problem, event_kind, event_problems

# a JSON pointer at or inside a facet map: the map's own problems and its facets'
_FACETS = re.compile(r"/(?:run|job|(?:inputs|outputs)/\d+|dataset)/(?:facets|inputFacets|outputFacets)(?:/|$)")
_KIND_PROBLEMS = {
    "a DatasetEvent may not carry both 'job' and 'run'",
    "a DatasetEvent with a 'job' is also a JobEvent: the kind is ambiguous",
    "a JobEvent may not carry 'run'",
}
# top-level fields Marquez leaves unset when they are a JSON null, as when they are missing: its
# binding reads null into the field, OpenLineageDao null-checks eventType, inputs and outputs, and a
# null schemaURL is read as a RunEvent, as a missing one
_NULL_AS_MISSING = frozenset({"/schemaURL", "/eventType", "/inputs", "/outputs"})


@attrs.frozen
class Verdict:
    kind: str  # RunEvent, DatasetEvent or JobEvent
    refusals: tuple[Problem, ...]
    warnings: tuple[Problem, ...]

    @property
    def accepted(self) -> bool:
        return not self.refusals


def _tolerated(problem: Problem, event: dict[str, Any]) -> bool:
    """Whether Marquez takes the event despite this problem (and the catalog can keep it)."""
    pointer, message = problem.pointer, problem.message
    if problem.rule == "catalog":
        return False
    if problem.rule == "marquez":
        # "Marquez reads this as a RunEvent unless schemaURL ends in /Kind": only when the URL is
        # missing (or null) and the kind came from the shape, which this receiver reads as the spec means.
        return pointer == "/schemaURL" and event.get("schemaURL") is None and message.startswith("Marquez reads this")
    if pointer in _NULL_AS_MISSING and pointer[1:] in event and event[pointer[1:]] is None:
        # Marquez binds a JSON null as the field unset, and treats it as missing
        return True
    if _FACETS.match(pointer):
        # inside a facet: what Marquez refuses there is a marquez problem of its own
        return True
    if pointer == "":
        # the kind comes from schemaURL as Marquez reads it, which ignores the fields of other kinds
        return message == "'schemaURL' is required" or message in _KIND_PROBLEMS
    if pointer == "/eventTime":
        value = event.get("eventTime")
        return isinstance(value, str) and marquez_time(value)
    if pointer in ("/eventType", "/run/runId", "/producer", "/schemaURL"):
        # any string: Marquez derives a run's UUID from a runId that is not one, reads an unknown
        # eventType as RUNNING, keeps a producer as text; schemaURL's parse is a marquez problem
        return isinstance(at(event, pointer), str)
    return False


# Marquez's times begin with the year's four digits: only an offset from the first or the last
# year takes a time out of the years 1 to 9999 (and the check, two parses, is skipped for the others)
_EDGE_YEARS = ("0001", "9999")


def _time_problems(event: dict[str, Any], problems: list[Problem]) -> list[Problem]:
    """An ``eventTime`` the spec takes and Marquez's parser does not (more than nine digits of a
    second): refused, as the same text in a time of a facet is (where the spec refuses it too,
    that problem says it already)."""
    value = event.get("eventTime")
    if not isinstance(value, str) or marquez_time(value) or any(p.pointer == "/eventTime" for p in problems):
        return []
    return [Problem("/eventTime", f"Marquez cannot read eventTime as a time: {value!r}", "marquez")]


def _catalog_problems(event: dict[str, Any]) -> list[Problem]:
    """What Marquez takes and the catalog cannot keep: an ``eventTime`` its parser reads that is
    outside the years 1 to 9999 once in UTC (the catalog orders events by their UTC time)."""
    value = event.get("eventTime")
    if not isinstance(value, str) or value[:4] not in _EDGE_YEARS or not marquez_time(value):
        return []  # missing, a time Marquez refuses (a problem of its own), or one far from the edges
    try:
        parse_time(value, "/eventTime", assume_utc=True)
    except ValidationError as exc:
        return [Problem("/eventTime", exc.message, "catalog")]
    return []


# bytes (UTF-8) of what the catalog keys a job or a dataset by, its namespace and name together,
# and of a runId: so that every index entry that holds them (a received run's job and key, a
# dataset's, an edge's two ends and job) stays within what PostgreSQL's keep (about 2,700 bytes
# an entry), and both engines take the same events (SQLite keeps any length)
KEY_BYTES = 1_200  # a job's (its key a received job's row holds twice: as its job and in its source)
DATASET_BYTES = 2_000  # a dataset's (or a symlink identifier's: beside an asset id of at most 512)
RUN_ID_BYTES = 255


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (as the catalog's indexes hold it)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _key_problems(event: dict[str, Any]) -> list[Problem]:
    """The names the catalog could not key by: a job's whose namespace and name together are past
    :data:`KEY_BYTES`, a dataset's (a symlink's too) past :data:`DATASET_BYTES`, a runId past
    :data:`RUN_ID_BYTES`; each at its name's pointer."""
    found: list[Problem] = []

    def check(pointer: str, named: Any, what: str, most: int) -> None:
        if not isinstance(named, dict):
            return
        namespace, name = named.get("namespace"), named.get("name")
        # (a character is at most 4 bytes: most names are measured by their lengths alone)
        if isinstance(namespace, str) and isinstance(name, str) and len(namespace) + len(name) > most // 4:
            size = utf8_size(namespace) + utf8_size(name)
            if size > most:
                found.append(
                    Problem(
                        f"{pointer}/name",
                        f"the catalog keeps {what} whose namespace and name are at most {most:,} bytes "
                        f"together (UTF-8): these are {size:,}",
                        "catalog",
                    )
                )

    def dataset(pointer: str, value: Any) -> None:
        check(pointer, value, "a dataset", DATASET_BYTES)
        facets = value.get("facets") if isinstance(value, dict) else None
        symlinks = facets.get("symlinks") if isinstance(facets, dict) else None
        identifiers = symlinks.get("identifiers") if isinstance(symlinks, dict) else None
        for index, identifier in enumerate(identifiers if isinstance(identifiers, list) else ()):
            check(f"{pointer}/facets/symlinks/identifiers/{index}", identifier, "a dataset's other name", DATASET_BYTES)

    check("/job", event.get("job"), "a job", KEY_BYTES)
    run = event.get("run")
    run_id = run.get("runId") if isinstance(run, dict) else None
    if isinstance(run_id, str) and len(run_id) > RUN_ID_BYTES // 4 and utf8_size(run_id) > RUN_ID_BYTES:
        size = utf8_size(run_id)
        message = f"the catalog keeps a runId of at most {RUN_ID_BYTES} bytes (UTF-8): this one is {size:,}"
        found.append(Problem("/run/runId", message, "catalog"))
    for key in ("inputs", "outputs"):
        datasets = event.get(key)
        for index, value in enumerate(datasets if isinstance(datasets, list) else ()):
            dataset(f"/{key}/{index}", value)
    if "dataset" in event:
        dataset("/dataset", event["dataset"])
    return found


def judge(event: Any, *, strict: bool = False, text: str | None = None) -> Verdict:
    """The receiver's verdict on one parsed event (``text``: its JSON, if at hand)."""
    spec, marquez = event_problems(event, text=text)
    problems = spec + marquez
    if not isinstance(event, dict):
        return Verdict("RunEvent", tuple(problems), ())
    problems += _time_problems(event, problems) + _catalog_problems(event) + _key_problems(event)
    kind = event_kind(event)
    if strict:
        return Verdict(kind, tuple(problems), ())
    refusals: list[Problem] = []
    warnings: list[Problem] = []
    for problem in problems:
        (warnings if _tolerated(problem, event) else refusals).append(problem)
    return Verdict(kind, tuple(refusals), tuple(warnings))
