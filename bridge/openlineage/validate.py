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
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

import attrs
import orjson

from bridge.memo import Memo
from bridge.openlineage.spec_rules import STANDARD_FACETS, Shape

EVENT_KINDS = ("RunEvent", "DatasetEvent", "JobEvent")
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_FACET_URL = re.compile(r".*/facets/(\d+-\d+-\d+)/([A-Za-z0-9]+)\.json#/\$defs/([A-Za-z0-9]+)")
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


def event_kind(event: Mapping[str, Any]) -> str:
    """RunEvent, DatasetEvent or JobEvent: from the last segment of ``schemaURL`` as Marquez reads
    it, else from the event's shape."""
    url = event.get("schemaURL")
    if isinstance(url, str):
        tail = url.rsplit("/", 1)[-1]
        if tail in EVENT_KINDS:
            return tail
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
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36 and all(value[i] == "-" for i in (8, 13, 18, 23))


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
        yield Problem(pointer, f"must be {_TYPE_NAMES[shape.kind]}, not {_json_type(value)}")
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


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


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
        yield Problem(pointer, f"a facet must be an object, not {_json_type(facet)}")
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
        yield Problem(pointer, f"facets must be an object, not {_json_type(facets)}")
        return
    for key, facet in facets.items():
        yield from check_facet(facet, base, _ptr(pointer, key))


# --- the core model -----------------------------------------------------------------------------


def _required_string(obj: Mapping[str, Any], key: str, pointer: str, fmt: str | None = None) -> Iterator[Problem]:
    if key not in obj:
        yield Problem(pointer, f"'{key}' is required")
        return
    value = obj[key]
    if not isinstance(value, str):
        yield Problem(_ptr(pointer, key), f"must be a string, not {_json_type(value)}")
    elif fmt:
        check, label = _FORMATS[fmt]
        if not check(value):
            yield Problem(_ptr(pointer, key), f"must be {label}, not {value!r}")


_DATASET_PROBLEMS: Memo[tuple[tuple[str, str, str], ...]] = Memo()


def _check_dataset(dataset: Any, pointer: str, extra: str | None) -> Iterator[Problem]:
    """Problems of one dataset. Producers send the same datasets with the same facets run after
    run, so the problems (as pointers below the dataset's) are kept by the dataset's JSON."""
    if not isinstance(dataset, dict):
        yield from _dataset_problems(dataset, pointer, extra)
        return
    try:
        text = orjson.dumps(dataset, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer past 64 bits
        yield from _dataset_problems(dataset, pointer, extra)
        return
    key = (extra, text)
    known = _DATASET_PROBLEMS.get(key)
    if known is None:
        found = tuple((p.pointer, p.message, p.rule) for p in _dataset_problems(dataset, "", extra))
        known = _DATASET_PROBLEMS.put(key, len(text), found)
    for below, message, rule in known:
        yield Problem(pointer + below, message, rule)


def _dataset_problems(dataset: Any, pointer: str, extra: str | None) -> Iterator[Problem]:
    if not isinstance(dataset, dict):
        yield Problem(pointer, f"a dataset must be an object, not {_json_type(dataset)}")
        return
    yield from _required_string(dataset, "namespace", pointer)
    yield from _required_string(dataset, "name", pointer)
    if "facets" in dataset:
        yield from check_facets(dataset["facets"], "DatasetFacet", _ptr(pointer, "facets"))
    if extra == "inputFacets" and "inputFacets" in dataset:
        yield from check_facets(dataset["inputFacets"], "InputDatasetFacet", _ptr(pointer, "inputFacets"))
    if extra == "outputFacets" and "outputFacets" in dataset:
        yield from check_facets(dataset["outputFacets"], "OutputDatasetFacet", _ptr(pointer, "outputFacets"))


def _check_job(job: Any, pointer: str) -> Iterator[Problem]:
    if not isinstance(job, dict):
        yield Problem(pointer, f"'job' must be an object, not {_json_type(job)}")
        return
    yield from _required_string(job, "namespace", pointer)
    yield from _required_string(job, "name", pointer)
    if "facets" in job:
        yield from check_facets(job["facets"], "JobFacet", _ptr(pointer, "facets"))


def _check_datasets(event: Mapping[str, Any], key: str, extra: str) -> Iterator[Problem]:
    if key not in event:
        return
    items = event[key]
    if not isinstance(items, list):
        yield Problem(f"/{key}", f"must be an array, not {_json_type(items)}")
        return
    for index, dataset in enumerate(items):
        yield from _check_dataset(dataset, f"/{key}/{index}", extra)


def spec_problems(event: Any) -> list[Problem]:
    """What the OpenLineage 2-0-2 schemas refuse in an event."""
    if not isinstance(event, dict):
        return [Problem("", f"an event must be a JSON object, not {_json_type(event)}")]
    problems = list(_required_string(event, "eventTime", "", "date-time"))
    problems += _required_string(event, "producer", "", "uri")
    problems += _required_string(event, "schemaURL", "", "uri")
    kind = event_kind(event)
    if kind == "RunEvent":
        if "eventType" in event and event["eventType"] not in EVENT_TYPES:
            problems.append(
                Problem("/eventType", f"must be one of {', '.join(EVENT_TYPES)}, not {event['eventType']!r}")
            )
        run = event.get("run")
        if run is None:
            problems.append(Problem("", "'run' is required"))
        elif not isinstance(run, dict):
            problems.append(Problem("/run", f"must be an object, not {_json_type(run)}"))
        else:
            problems += _required_string(run, "runId", "/run", "uuid")
            if "facets" in run:
                problems += check_facets(run["facets"], "RunFacet", "/run/facets")
        if "job" not in event:
            problems.append(Problem("", "'job' is required"))
        else:
            problems += _check_job(event["job"], "/job")
        problems += _check_datasets(event, "inputs", "inputFacets")
        problems += _check_datasets(event, "outputs", "outputFacets")
    elif kind == "DatasetEvent":
        if "dataset" not in event:
            problems.append(Problem("", "'dataset' is required"))
        else:
            problems += _check_dataset(event["dataset"], "/dataset", None)
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
        problems += _check_datasets(event, "inputs", "inputFacets")
        problems += _check_datasets(event, "outputs", "outputFacets")
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


def _facet_maps(event: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    run, job = event.get("run"), event.get("job")
    if isinstance(run, dict):
        yield "/run/facets", run.get("facets")
    if isinstance(job, dict):
        yield "/job/facets", job.get("facets")
    for key in ("inputs", "outputs"):
        items = event.get(key)
        if isinstance(items, list):
            for index, dataset in enumerate(items):
                if isinstance(dataset, dict):
                    for sub in ("facets", "inputFacets", "outputFacets"):
                        yield f"/{key}/{index}/{sub}", dataset.get(sub)
    dataset = event.get("dataset")
    if isinstance(dataset, dict):
        yield "/dataset/facets", dataset.get("facets")


def marquez_problems(event: Any, *, text: str | None = None) -> list[Problem]:
    """What Marquez 0.51 refuses in an event, or rewrites so that it lands on another node.
    ``text``, the event's JSON, lets the NUL check skip its walk when the text has no NUL."""
    if not isinstance(event, dict):
        return []
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
    namespaces: list[tuple[Any, str]] = []
    job = event.get("job")
    if isinstance(job, dict):
        namespaces.append((job.get("namespace"), "/job/namespace"))
        if isinstance(job.get("name"), str) and not job["name"].strip():
            problems.append(Problem("/job/name", "Marquez refuses a blank job name", "marquez"))
    datasets: list[tuple[Any, str]] = []
    for key in ("inputs", "outputs"):
        items = event.get(key)
        if isinstance(items, list):
            datasets += [(d, f"/{key}/{i}") for i, d in enumerate(items)]
    if "dataset" in event:
        datasets.append((event["dataset"], "/dataset"))
    for dataset, pointer in datasets:
        if not isinstance(dataset, dict):
            continue
        namespaces.append((dataset.get("namespace"), pointer + "/namespace"))
        if isinstance(dataset.get("name"), str) and not dataset["name"].strip():
            problems.append(Problem(pointer + "/name", "Marquez refuses a blank dataset name", "marquez"))
    for pointer, facets in _facet_maps(event):
        if not isinstance(facets, dict):
            continue
        for key, facet in facets.items():
            where = _ptr(pointer, key)
            if len(key) > MARQUEZ_KEY_MAX:
                problems.append(
                    Problem(where, f"Marquez stores facet keys of at most {MARQUEZ_KEY_MAX} characters", "marquez")
                )
            if not isinstance(facet, dict):
                continue
            problems += _marquez_facet(key, facet, where, namespaces)
    for value, pointer in namespaces:
        problem = _namespace_problem(value, pointer)
        if problem:
            problems.append(problem)
    return problems


# Fields Marquez's typed facet classes hold @NotNull, whatever version the facet's _schemaURL names
# (reference/marquez.md, section 2): a missing one is a 422 there.
_MARQUEZ_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    "nominalTime": (("nominalStartTime",),),
    "parent": (("run", "runId"), ("job", "namespace"), ("job", "name")),
    "parentRun": (("run", "runId"), ("job", "namespace"), ("job", "name")),
    "documentation": (("description",),),
    "sql": (("query",),),
    "jobType": (("processingType",), ("integration",), ("jobType",)),
}
_MARQUEZ_TYPED = {*_MARQUEZ_REQUIRED, "sourceCodeLocation", "schema", "dataSource", "lifecycleStateChange"}
_MARQUEZ_TYPED |= {"columnLineage", "symlinks"}


def _marquez_required(key: str, facet: Mapping[str, Any], where: str) -> list[Problem]:
    problems = []
    if key in _MARQUEZ_TYPED:
        for field in ("_producer", "_schemaURL"):
            if not isinstance(facet.get(field), str):
                problems.append(Problem(where, f"Marquez requires {field} on the {key} facet", "marquez"))
    for path in _MARQUEZ_REQUIRED.get(key, ()):
        value: Any = facet
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            pointer = where + "".join(f"/{p}" for p in path[:-1])
            problems.append(Problem(pointer, f"Marquez requires {key}.{'.'.join(path)}", "marquez"))
    return problems


def _marquez_facet(key: str, facet: Mapping[str, Any], where: str, namespaces: list[tuple[Any, str]]) -> list[Problem]:
    problems = _marquez_required(key, facet, where)
    if key == "symlinks":
        identifiers = facet.get("identifiers")
        if not identifiers:
            problems.append(Problem(where, "Marquez fails on a symlinks facet without identifiers", "marquez"))
        elif isinstance(identifiers, list):
            for index, ident in enumerate(identifiers):
                if isinstance(ident, dict):
                    namespaces.append((ident.get("namespace"), f"{where}/identifiers/{index}/namespace"))
    elif key == "dataSource" and not facet.get("name"):
        problems.append(Problem(where, "Marquez needs dataSource.name", "marquez"))
    elif key == "schema" and isinstance(facet.get("fields"), list):
        for index, field in enumerate(facet["fields"]):
            name = field.get("name") if isinstance(field, dict) else None
            if not isinstance(name, str):
                problems.append(Problem(f"{where}/fields/{index}", "Marquez requires a name on every field", "marquez"))
            if isinstance(name, str) and len(name) > MARQUEZ_KEY_MAX:
                problems.append(
                    Problem(
                        f"{where}/fields/{index}/name",
                        f"Marquez stores field names of at most {MARQUEZ_KEY_MAX} characters",
                        "marquez",
                    )
                )
    elif key == "columnLineage" and isinstance(facet.get("fields"), dict):
        for column, spec in facet["fields"].items():
            if not isinstance(spec, dict) or not isinstance(spec.get("inputFields"), list):
                problems.append(
                    Problem(_ptr(f"{where}/fields", column), "Marquez needs inputFields on every column", "marquez")
                )
    elif key == "parent":
        parent_job = facet.get("job")
        if isinstance(parent_job, dict):
            namespaces.append((parent_job.get("namespace"), f"{where}/job/namespace"))
    return problems


def validate_event(event: Any, *, marquez: bool = True) -> list[Problem]:
    """Every problem of an event: the spec's, and Marquez's unless ``marquez`` is False."""
    problems = spec_problems(event)
    if marquez:
        problems += marquez_problems(event)
    return problems
