"""The project's own validation of OpenLineage events: the 2-0-2 spec and Marquez's contract.

:func:`validate_event` returns the :class:`Problem` list of an event (empty when it is valid), each
with a JSON pointer into the event. Spec rules cover the core model and the standard facets: a
facet is checked against its standard shape when its ``_schemaURL`` names the version this release
knows; facets pointing at other versions, and custom facets, are checked only as facets. Marquez
rules are what Marquez 0.51 refuses or silently rewrites (``reference/marquez.md``, section 2).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

import attrs
import orjson

from bridge.jsontext import DEPTH, json_type, nesting
from bridge.memo import Memo
from bridge.openlineage.marquez_rules import java_uri, typed_facet_problems
from bridge.openlineage.spec_rules import STANDARD_FACETS, Shape

EVENT_KINDS = ("RunEvent", "DatasetEvent", "JobEvent")
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_FACET_URL = re.compile(r".*/facets/(\d+-\d+-\d+)/([A-Za-z0-9]+)\.json#/\$defs/([A-Za-z0-9]+)")
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_MARQUEZ_NAMESPACE = re.compile(r"[A-Za-z0-9_\-.:/@+]{1,1024}")
MARQUEZ_KEY_MAX = 255


@attrs.frozen
class Problem:
    pointer: str  # JSON pointer into the event ("" is the whole event)
    message: str
    rule: str = "spec"  # "spec" (OpenLineage 2-0-2) or "marquez" (Marquez's contract)

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.message}" + (" [marquez]" if self.rule == "marquez" else "")


def _ptr(base: str, key: str | int) -> str:
    text = str(key).replace("~", "~0").replace("/", "~1")
    return f"{base}/{text}"


def kind_said(event: Mapping[str, Any]) -> str | None:
    """The kind the event's ``schemaURL`` says, by its last segment as Marquez reads it (None:
    it says none, and the event is read by its shape)."""
    url = event.get("schemaURL")
    if isinstance(url, str):
        tail = url.rsplit("/", 1)[-1]
        if tail in EVENT_KINDS:
            return tail
    return None


def event_kind(event: Mapping[str, Any]) -> str:
    """RunEvent, DatasetEvent or JobEvent: as its ``schemaURL`` says (:func:`kind_said`), else
    from the event's shape."""
    said = kind_said(event)
    if said is not None:
        return said
    if "run" in event:
        return "RunEvent"
    if "dataset" in event:
        return "DatasetEvent"
    if "job" in event:
        return "JobEvent"
    return "RunEvent"


# --- formats ------------------------------------------------------------------------------------


def is_date_time(value: str) -> bool:
    if not _DATE_TIME.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=4096)  # producers and facet schema URLs recur in every event
def is_uri(value: str) -> bool:
    return bool(_URI.fullmatch(value)) and not _PERCENT.search(value)


def is_uuid(value: str) -> bool:
    """The text form of RFC 4122 (8-4-4-4-12 hexadecimal digits), which the spec's ``uuid``
    format is. (The uuid module's parser takes more: a sign, spaces and underscores in the
    digits, which int() takes.)"""
    return _UUID.fullmatch(value) is not None


_FORMATS: dict[str, tuple[Callable[[str], bool], str]] = {
    "uri": (is_uri, "a URI with a scheme"),
    "date-time": (is_date_time, "an RFC 3339 date-time with offset"),
    "uuid": (is_uuid, "a UUID"),
}
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
}


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def check_shape(value: Any, shape: Shape, pointer: str) -> Iterator[Problem]:
    """Problems of ``value`` against a shape."""
    if shape.kind == "any":
        return
    if shape.kind == "enum":
        if value not in shape.choices:
            yield Problem(pointer, f"must be one of {', '.join(shape.choices)}, not {value!r}")
        return
    if not _type_ok(value, shape.kind):
        yield Problem(pointer, f"must be {_TYPE_NAMES[shape.kind]}, not {json_type(value)}")
        return
    if shape.fmt:
        check, label = _FORMATS[shape.fmt]
        if not check(value):
            yield Problem(pointer, f"must be {label}, not {value!r}")
    if shape.kind == "array" and shape.item is not None:
        for index, item in enumerate(value):
            yield from check_shape(item, shape.item, _ptr(pointer, index))
    if shape.kind == "object":
        for key, sub in shape.required:
            if key not in value:
                yield Problem(pointer, f"'{key}' is required")
            else:
                yield from check_shape(value[key], sub, _ptr(pointer, key))
        for key, sub in shape.optional:
            if key in value:
                yield from check_shape(value[key], sub, _ptr(pointer, key))
        if shape.values is not None:
            known = {k for k, _ in shape.required} | {k for k, _ in shape.optional}
            for key, item in value.items():
                if key not in known:
                    yield from check_shape(item, shape.values, _ptr(pointer, key))


def _shown(value: Any) -> str:
    """A value in a message: JSON's null for None, else as Python writes it."""
    return "null" if value is None else repr(value)


# --- facets -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def standard_facet(schema_url: str) -> str | None:
    """The standard facet a ``_schemaURL`` names at the version this release knows, or None."""
    match = _FACET_URL.fullmatch(schema_url)
    if not match:
        return None
    version, _file, name = match.groups()
    known = STANDARD_FACETS.get(name)
    if known is None or known.version != version or known.file != _file:
        return None
    return name


def check_facet(facet: Any, base: str, pointer: str) -> Iterator[Problem]:
    """Problems of one facet in a facet map whose entries are ``base`` facets."""
    if not isinstance(facet, dict):
        yield Problem(pointer, f"a facet must be an object, not {json_type(facet)}")
        return
    for key in ("_producer", "_schemaURL"):
        if key not in facet:
            yield Problem(pointer, f"'{key}' is required on every facet")
        elif not isinstance(facet[key], str) or not is_uri(facet[key]):
            yield Problem(_ptr(pointer, key), f"must be a URI with a scheme, not {facet[key]!r}")
    if "_deleted" in facet and base in ("DatasetFacet", "JobFacet"):
        if not isinstance(facet["_deleted"], bool):
            yield Problem(_ptr(pointer, "_deleted"), "must be a boolean")
        if facet["_deleted"] is True:
            return
    url = facet.get("_schemaURL")
    name = standard_facet(url) if isinstance(url, str) else None
    if name is not None:
        yield from check_shape(facet, STANDARD_FACETS[name].shape, pointer)


def check_facets(facets: Any, base: str, pointer: str) -> Iterator[Problem]:
    if not isinstance(facets, dict):
        yield Problem(pointer, f"facets must be an object, not {json_type(facets)}")
        return
    for key, facet in facets.items():
        yield from check_facet(facet, base, _ptr(pointer, key))


# --- the core model -----------------------------------------------------------------------------


def _required_string(obj: Mapping[str, Any], key: str, pointer: str, fmt: str | None = None) -> tuple[Problem, ...]:
    """The problem of a required string field, if any (a tuple, not a generator: it is called a
    few times an event, and nearly always finds nothing)."""
    if key not in obj:
        return (Problem(pointer, f"'{key}' is required"),)
    value = obj[key]
    if not isinstance(value, str):
        return (Problem(_ptr(pointer, key), f"must be a string, not {json_type(value)}"),)
    if fmt:
        check, label = _FORMATS[fmt]
        if not check(value):
            return (Problem(_ptr(pointer, key), f"must be {label}, not {value!r}"),)
    return ()


_DATASET_PROBLEMS: Memo[tuple[tuple[str, str, str], ...]] = Memo()


def _check_dataset(dataset: Any, pointer: str, extra: str | None, marquez: list[Problem] | None) -> Iterator[Problem]:
    """The spec's problems of one dataset; Marquez's go to ``marquez`` when it is given. Producers
    send the same datasets with the same facets run after run, so both (as pointers below the
    dataset's) are kept by the dataset's JSON."""
    if not isinstance(dataset, dict):
        yield from _dataset_problems(dataset, pointer, extra)
        return
    try:
        text = orjson.dumps(dataset, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer past 64 bits
        found = tuple((p.pointer, p.message, p.rule) for p in _all_dataset_problems(dataset, pointer, extra))
        pointer = ""
    else:
        key = (extra, text)
        known = _DATASET_PROBLEMS.get(key)
        if known is None:
            known = tuple((p.pointer, p.message, p.rule) for p in _all_dataset_problems(dataset, "", extra))
            _DATASET_PROBLEMS.put(key, len(text), known)
        found = known
    for below, message, rule in found:
        if rule == "spec":
            yield Problem(pointer + below, message, rule)
        elif marquez is not None:
            marquez.append(Problem(pointer + below, message, rule))


def _all_dataset_problems(dataset: dict[str, Any], pointer: str, extra: str | None) -> Iterator[Problem]:
    yield from _dataset_problems(dataset, pointer, extra)
    yield from _marquez_dataset(dataset, pointer)


def _named_problems(value: Any, pointer: str, what: str, facet_kind: str) -> Iterator[Problem]:
    """What the spec refuses in a dataset or a job: not an object, or its namespace, name or
    facets (of ``facet_kind``)."""
    if not isinstance(value, dict):
        yield Problem(pointer, f"{what} must be an object, not {json_type(value)}")
        return
    yield from _required_string(value, "namespace", pointer)
    yield from _required_string(value, "name", pointer)
    if "facets" in value:
        yield from check_facets(value["facets"], facet_kind, _ptr(pointer, "facets"))


def _dataset_problems(dataset: Any, pointer: str, extra: str | None) -> Iterator[Problem]:
    yield from _named_problems(dataset, pointer, "a dataset", "DatasetFacet")
    if not isinstance(dataset, dict):
        return
    if extra == "inputFacets" and "inputFacets" in dataset:
        yield from check_facets(dataset["inputFacets"], "InputDatasetFacet", _ptr(pointer, "inputFacets"))
    if extra == "outputFacets" and "outputFacets" in dataset:
        yield from check_facets(dataset["outputFacets"], "OutputDatasetFacet", _ptr(pointer, "outputFacets"))


def _check_job(job: Any, pointer: str) -> Iterator[Problem]:
    return _named_problems(job, pointer, "'job'", "JobFacet")


def _check_datasets(event: Mapping[str, Any], key: str, extra: str, marquez: list[Problem] | None) -> Iterator[Problem]:
    if key not in event:
        return
    items = event[key]
    if not isinstance(items, list):
        yield Problem(f"/{key}", f"must be an array, not {json_type(items)}")
        return
    for index, dataset in enumerate(items):
        yield from _check_dataset(dataset, f"/{key}/{index}", extra, marquez)


def spec_problems(event: Any) -> list[Problem]:
    """What the OpenLineage 2-0-2 schemas refuse in an event."""
    return _spec_problems(event, None)


def _spec_problems(event: Any, marquez: list[Problem] | None) -> list[Problem]:
    """The spec's problems; the Marquez problems of the event's datasets go to ``marquez``."""
    if not isinstance(event, dict):
        return [Problem("", f"an event must be a JSON object, not {json_type(event)}")]
    problems = list(_required_string(event, "eventTime", "", "date-time"))
    problems += _required_string(event, "producer", "", "uri")
    problems += _required_string(event, "schemaURL", "", "uri")
    kind = event_kind(event)
    if kind == "RunEvent":
        if "eventType" in event and event["eventType"] not in EVENT_TYPES:
            problems.append(
                Problem("/eventType", f"must be one of {', '.join(EVENT_TYPES)}, not {_shown(event['eventType'])}")
            )
        run = event.get("run")
        if run is None:
            problems.append(Problem("", "'run' is required"))
        elif not isinstance(run, dict):
            problems.append(Problem("/run", f"must be an object, not {json_type(run)}"))
        else:
            problems += _required_string(run, "runId", "/run", "uuid")
            if "facets" in run:
                problems += check_facets(run["facets"], "RunFacet", "/run/facets")
        if "job" not in event:
            problems.append(Problem("", "'job' is required"))
        else:
            problems += _check_job(event["job"], "/job")
        problems += _check_datasets(event, "inputs", "inputFacets", marquez)
        problems += _check_datasets(event, "outputs", "outputFacets", marquez)
    elif kind == "DatasetEvent":
        if "dataset" not in event:
            problems.append(Problem("", "'dataset' is required"))
        else:
            problems += _check_dataset(event["dataset"], "/dataset", None, marquez)
        if "job" in event and "run" in event:
            problems.append(Problem("", "a DatasetEvent may not carry both 'job' and 'run'"))
        if "job" in event and "run" not in event:
            problems.append(Problem("", "a DatasetEvent with a 'job' is also a JobEvent: the kind is ambiguous"))
    else:
        if "job" not in event:
            problems.append(Problem("", "'job' is required"))
        else:
            problems += _check_job(event["job"], "/job")
        if "run" in event:
            problems.append(Problem("", "a JobEvent may not carry 'run'"))
        problems += _check_datasets(event, "inputs", "inputFacets", marquez)
        problems += _check_datasets(event, "outputs", "outputFacets", marquez)
    return problems


# --- Marquez ------------------------------------------------------------------------------------


def _strings(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield pointer, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield _ptr(pointer, key), key
            yield from _strings(item, _ptr(pointer, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, _ptr(pointer, index))


@functools.lru_cache(maxsize=4096)  # namespaces recur in every event
def _marquez_namespace(value: str) -> bool:
    return _MARQUEZ_NAMESPACE.fullmatch(value) is not None


def marquez_dataset(namespace: str, name: str) -> bool:
    """Whether Marquez takes a dataset of this namespace (R8) and name (R9: not blank)."""
    return _marquez_namespace(namespace) and bool(name.strip())


def _namespace_problem(value: Any, pointer: str) -> Problem | None:
    if not isinstance(value, str):
        return None
    if not _marquez_namespace(value):
        return Problem(
            pointer,
            f"Marquez takes namespaces of 1 to 1024 characters from [A-Za-z0-9_-.:/@+], not {value!r}",
            "marquez",
        )
    return None


def event_problems(event: Any, *, text: str | None = None) -> tuple[list[Problem], list[Problem]]:
    """The spec's problems and Marquez's problems of an event, in one walk of its datasets."""
    datasets: list[Problem] = []
    spec = _spec_problems(event, datasets)
    if not isinstance(event, dict):
        return spec, []
    problems: list[Problem] = []
    if text is None or "\\u0000" in text:
        for pointer, value in _strings(event, ""):
            if "\x00" in value:
                problems.append(Problem(pointer, "Marquez cannot store a NUL character", "marquez"))
    kind = event_kind(event)
    url = event.get("schemaURL")
    if kind != "RunEvent" and not (isinstance(url, str) and url.endswith("/" + kind)):
        problems.append(
            Problem("/schemaURL", f"Marquez reads this as a RunEvent unless schemaURL ends in /{kind}", "marquez")
        )
    if isinstance(url, str) and not java_uri(url):
        problems.append(Problem("/schemaURL", f"Marquez cannot read schemaURL as a URI: {url!r}", "marquez"))
    job = event.get("job")
    if isinstance(job, dict) and kind != "DatasetEvent":  # a DatasetEvent's job is not read
        problem = _namespace_problem(job.get("namespace"), "/job/namespace")
        if problem:
            problems.append(problem)
        if isinstance(job.get("name"), str) and not job["name"].strip():
            problems.append(Problem("/job/name", "Marquez refuses a blank job name", "marquez"))
        problems += _marquez_facets(job.get("facets"), "job", "/job/facets")
    run = event.get("run")
    if isinstance(run, dict) and kind == "RunEvent":
        problems += _marquez_facets(run.get("facets"), "run", "/run/facets")
    # (a 'dataset' in a RunEvent or JobEvent is an unknown field there: Marquez keeps it unread)
    return spec, problems + datasets


def _marquez_dataset(dataset: dict[str, Any], pointer: str) -> Iterator[Problem]:
    """Marquez's problems of one dataset (an object)."""
    problem = _namespace_problem(dataset.get("namespace"), pointer + "/namespace")
    if problem:
        yield problem
    if isinstance(dataset.get("name"), str) and not dataset["name"].strip():
        yield Problem(pointer + "/name", "Marquez refuses a blank dataset name", "marquez")
    yield from _marquez_facets(dataset.get("facets"), "dataset", pointer + "/facets")
    for sub in ("inputFacets", "outputFacets"):
        yield from _marquez_facets(dataset.get(sub), None, f"{pointer}/{sub}")


def _marquez_facets(facets: Any, holder: str | None, pointer: str) -> Iterator[Problem]:
    """Marquez's problems of a facet map that it reads into the class of ``holder`` (None: a
    plain map)."""
    if facets is None:
        return
    if not isinstance(facets, dict):
        yield Problem(pointer, f"Marquez reads facets as an object, not {json_type(facets)}", "marquez")
        return
    for key, facet in facets.items():
        where = _ptr(pointer, key)
        if len(key) > MARQUEZ_KEY_MAX:
            yield Problem(where, f"Marquez stores facet keys of at most {MARQUEZ_KEY_MAX} characters", "marquez")
        if holder is None:
            continue
        for at, message in typed_facet_problems(holder, key, facet, where):
            yield Problem(at, message, "marquez")
        if not isinstance(facet, dict):
            continue
        if key == "symlinks" and isinstance(facet.get("identifiers"), list):
            for index, ident in enumerate(facet["identifiers"]):
                if isinstance(ident, dict):
                    found = _namespace_problem(ident.get("namespace"), f"{where}/identifiers/{index}/namespace")
                    if found:
                        yield found
        elif key == "dataSource" and isinstance(facet.get("name"), str) and not facet["name"].strip():
            yield Problem(
                f"{where}/name", "Marquez cannot read a dataset back when its dataSource.name is blank", "marquez"
            )
        elif key == "schema" and isinstance(facet.get("fields"), list):
            for index, field in enumerate(facet["fields"]):
                name = field.get("name") if isinstance(field, dict) else None
                if isinstance(name, str) and len(name) > MARQUEZ_KEY_MAX:
                    yield Problem(
                        f"{where}/fields/{index}/name",
                        f"Marquez stores field names of at most {MARQUEZ_KEY_MAX} characters",
                        "marquez",
                    )
        elif key in ("parent", "parentRun") and holder == "run":
            parent_job = facet.get("job")
            if isinstance(parent_job, dict):
                found = _namespace_problem(parent_job.get("namespace"), f"{where}/job/namespace")
                if found:
                    yield found


def validate_event(event: Any, *, marquez: bool = True, max_depth: int = DEPTH) -> list[Problem]:
    """Every problem of an event: the spec's, and Marquez's unless ``marquez`` is False; only
    that it nests too deeply when it nests objects and arrays deeper than ``max_depth``."""
    if nesting(event, max_depth) is not None:
        return [Problem("", f"the event nests objects and arrays deeper than {max_depth} levels", "limit")]
    if not marquez:
        return spec_problems(event)
    spec, found = event_problems(event)
    return spec + found
