"""Task runs as JSON records, with the field names of Kestra's ``AssetLineage``.

One record::

    {"namespace": "company.data", "flowId": "reports", "taskId": "export", "executionId": "e1",
     "taskRunId": "t1", "state": "SUCCESS", "startDate": "2025-01-01T10:00:00Z",
     "endDate": "2025-01-01T10:01:00Z",
     "inputs": [{"id": "dbt.main.orders"}],
     "outputs": [{"id": "reports.orders", "type": "File", "namespace": "company.data",
                  "metadata": {"path": "orders.csv"}}]}

``tenantId`` and ``flowRevision`` are kept with the run's job (:class:`JobInfo`); ``timestamp``
(when Kestra made the record) is accepted and not kept. An asset may carry what Kestra serializes
with it: ``tenantId``, ``created``, ``updated``, ``deleted`` and ``assetActions`` are accepted and not
kept (the catalog keeps its own times), and a typed asset's properties (a Table's ``system``,
``database``, ``schema``, ``name``; a File's ``system``, ``path``; a Dataset's ``system``,
``location``, ``format``; a VM's ``provider``, ``region``, ``state``) are its metadata, as in Kestra.
A null optional field is the same as a missing one; a run in an ended state without ``endDate``
ended at its ``startDate``.

``failureBehavior`` (WARN, FAIL, IGNORE) is an olbridge extension, and so are ``statistics``
(``rowCount``, ``size``, ``fileCount``) on an output, ``columns`` (names, or ``{name, type,
description}``) on an asset and ``columnLineage`` on an output (see
:mod:`bridge.model.column_lineage`). Unknown keys are refused.

Records come as JSON lines or as one JSON array (read by :mod:`bridge.files`); either way every
bad record is reported with its line number and nothing is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec, TypeVar

import attrs

from bridge.errors import InputFileError, ValidationError, ValidationProblems
from bridge.files import json_lines, json_values
from bridge.model import (
    KESTRA_TYPED_PROPERTIES,
    AssetDeclaration,
    FailureBehavior,
    JobInfo,
    Statistics,
    TaskRun,
    TaskRunKey,
    TaskState,
    check_fields,
    normalize_type,
    parse_column_lineage,
    parse_columns,
    parse_time,
    task_run_problems,
)

_RECORD_KEYS = {
    "tenantId",
    "namespace",
    "flowId",
    "flowRevision",
    "executionId",
    "taskId",
    "taskRunId",
    "state",
    "startDate",
    "endDate",
    "inputs",
    "outputs",
    "timestamp",
    "failureBehavior",
}
_ASSET_KEYS = {
    "id",
    "type",
    "namespace",
    "displayName",
    "description",
    "metadata",
    "statistics",
    "columns",
    "columnLineage",
}
_ASSET_IGNORED_KEYS = {"tenantId", "created", "updated", "deleted", "assetActions"}
_TYPED_KEYS = {key for keys in KESTRA_TYPED_PROPERTIES.values() for key in keys}
_ASSET_ALLOWED_KEYS = _ASSET_KEYS | _ASSET_IGNORED_KEYS | _TYPED_KEYS
_TENANT_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")
_STAT_KEYS = {"rowCount": "row_count", "size": "size", "fileCount": "file_count"}
T = TypeVar("T")
P = ParamSpec("P")


class _Problems:
    """The problems of one record, collected so that a bad record reports them all at once."""

    def __init__(self) -> None:
        self.found: list[ValidationError] = []

    def add(self, error: ValidationError) -> None:
        if isinstance(error, ValidationProblems):
            self.found.extend(error.problems)
        else:
            self.found.append(error)

    def check(self, check: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        """What ``check(*args, **kwargs)`` returns, or None with its ValidationError kept."""
        try:
            return check(*args, **kwargs)
        except ValidationError as exc:
            self.add(exc)
            return None

    def raise_any(self, where: str = "") -> None:
        if not self.found:
            return
        error = self.found[0] if len(self.found) == 1 else ValidationProblems(self.found)
        raise error.at(where) if where else error


def _unknown(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    check_fields(obj, allowed, "record.field", where)


def parse_statistics(value: Any, where: str) -> Statistics:
    if value is None:
        return Statistics()
    if not isinstance(value, dict):
        raise ValidationError("statistics must be an object", rule="record.statistics", where=where)
    problems = _Problems()
    problems.check(_unknown, value, set(_STAT_KEYS), where)
    out = {}
    for key, attr in _STAT_KEYS.items():
        if key in value:
            number = value[key]
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                problems.add(
                    ValidationError("must be a non-negative integer", rule="record.statistics", where=f"{where}.{key}")
                )
            else:
                out[attr] = number
    problems.raise_any()
    return Statistics(**out)


def _typed_metadata(value: Mapping[str, Any], asset_type: str | None) -> Any:
    """The asset's metadata with its typed properties folded in (they mirror metadata keys)."""
    given = [k for k in _TYPED_KEYS if value.get(k) is not None]
    if not given:
        return value.get("metadata")
    allowed = KESTRA_TYPED_PROPERTIES.get(asset_type or "", ())
    stray = sorted(k for k in given if k not in allowed)
    if stray:
        raise ValidationError(
            f"unknown field(s) {', '.join(stray)} for an asset of type {asset_type or '(none)'}"
            + (f"; its typed properties are {', '.join(allowed)}" if allowed else ""),
            rule="record.field",
        )
    metadata = value.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        return metadata  # the metadata check reports it
    merged = dict(metadata or {})
    for key in sorted(given):
        if key in merged and merged[key] != value[key]:
            raise ValidationError(
                f"'{key}' is {value[key]!r} but metadata.{key} is {merged[key]!r}",
                rule="record.typed",
                where=key,
            )
        merged[key] = value[key]
    return merged


# stand-ins that pass every check, to check one field of a constructor at a time (the rules stay in
# the model, in one place)
_KEY_FIELDS = ("namespace", "flowId", "taskId", "executionId", "taskRunId")
_GOOD_KEY = dict(zip(_KEY_FIELDS, ("olbridge", "flow", "task", "execution", "task-run"), strict=True))
_ASSET_FIELDS = {"namespace": "namespace", "displayName": "display_name", "description": "description"}


def _each_problem(
    build: Callable[..., object], good: Mapping[str, object], given: Mapping[str, object]
) -> list[ValidationError]:
    """The problem of each given field of ``build(**good)``, checked one at a time."""
    found = []
    for name, value in given.items():
        try:
            build(**{**good, name: value})
        except ValidationError as exc:
            found.append(exc)
    return found


def _checked(
    problems: _Problems, build: Callable[..., T], good: Mapping[str, object], given: Mapping[str, object]
) -> T | None:
    """``build(**given)``; when it fails, the problem of each field is kept (not only the first)."""
    try:
        return build(**given)
    except ValidationError as exc:
        each = _each_problem(build, good, given)
        for error in each or [exc]:
            problems.add(error)
        return None


def parse_asset(value: Any, where: str) -> AssetDeclaration:
    """An asset of a record; a ValidationError (every problem of the asset) says where."""
    if not isinstance(value, dict):
        raise ValidationError("an asset must be an object with at least an 'id'", rule="record.asset", where=where)
    problems = _Problems()
    problems.check(_unknown, value, _ASSET_ALLOWED_KEYS, "")
    if "id" not in value:
        problems.add(ValidationError("an asset needs an 'id'", rule="id.required"))
    asset_type = problems.check(normalize_type, value["type"]) if value.get("type") is not None else None
    if value.get("type") is None or asset_type is not None:
        metadata = problems.check(_typed_metadata, value, asset_type)
    else:  # which typed properties an asset may have depends on its type: check the metadata alone
        metadata = value.get("metadata")
    statistics = problems.check(parse_statistics, value.get("statistics"), "statistics")
    given: dict[str, object] = {"id": value["id"]} if "id" in value else {}
    given.update((attr, value[key]) for key, attr in _ASSET_FIELDS.items() if value.get(key) is not None)
    if metadata is not None:
        given["metadata"] = metadata
    if asset_type is not None:
        given["type"] = asset_type
    if statistics is not None:
        given["statistics"] = statistics
    columns = problems.check(parse_columns, value.get("columns"))
    if columns is not None:
        given["columns"] = columns
    if value.get("columnLineage") is not None:
        lineage = problems.check(parse_column_lineage, value["columnLineage"])
        if lineage is not None:
            given["column_lineage"] = lineage
    declaration = _checked(problems, AssetDeclaration.create, {"id": "asset"}, given) if "id" in given else None
    problems.raise_any(where)
    assert declaration is not None
    return declaration


def _job_info(value: Mapping[str, Any], integration: str, problems: _Problems) -> JobInfo:
    tenant = value.get("tenantId")
    if tenant is not None and (not isinstance(tenant, str) or not _TENANT_RE.fullmatch(tenant)):
        problems.add(
            ValidationError(
                "a tenant id matches [a-z0-9][a-z0-9_-]*", rule="record.tenant", value=tenant, where="tenantId"
            )
        )
    revision = value.get("flowRevision")
    if revision is not None and (not isinstance(revision, int) or isinstance(revision, bool) or revision < 1):
        problems.add(
            ValidationError(
                "a flow revision is a positive integer", rule="record.revision", value=revision, where="flowRevision"
            )
        )
    return JobInfo(integration=integration, tenant_id=tenant, flow_revision=revision)


def parse_task_run(value: Any, where: str = "", *, integration: str = "OLBRIDGE") -> TaskRun:
    """A task run from one record. A bad record raises a ValidationError that says where, and
    with several problems a :class:`ValidationProblems` that holds every one of them.
    ``integration`` names what recorded it, for the job's ``jobType`` facet."""
    if not isinstance(value, dict):
        error = ValidationError("a task run record must be a JSON object", rule="record.type")
        raise error.at(where) if where else error
    problems = _Problems()
    problems.check(_unknown, value, _RECORD_KEYS, "")
    missing = [
        k for k in ("namespace", "flowId", "taskId", "executionId", "taskRunId", "state", "startDate") if k not in value
    ]
    if missing:
        problems.add(ValidationError(f"missing required field(s) {', '.join(missing)}", rule="record.required"))
    good_key = _GOOD_KEY
    given_key = {field: value[field] for field in _KEY_FIELDS if field in value}
    key = None
    if len(given_key) == len(_KEY_FIELDS):
        key = _checked(problems, _task_run_key, good_key, given_key)
    else:  # the missing ones are reported: check the others
        for error in _each_problem(_task_run_key, good_key, given_key):
            problems.add(error)
    state = problems.check(TaskState.parse, value["state"]) if "state" in value else None
    started = problems.check(parse_time, value["startDate"], "startDate") if "startDate" in value else None
    ended = problems.check(parse_time, value["endDate"], "endDate") if value.get("endDate") is not None else None
    if ended is None and state is not None and state.is_terminal:  # as `record --start` without --end
        ended = started
    lists: dict[str, list[AssetDeclaration]] = {"inputs": [], "outputs": []}
    before_assets = len(problems.found)
    for field, parsed in lists.items():
        items = value.get(field)
        if items is None:
            items = []
        if not isinstance(items, list):
            problems.add(ValidationError(f"'{field}' must be a list of assets", rule="record.assets", where=field))
            continue
        for i, item in enumerate(items):
            asset = problems.check(parse_asset, item, f"{field}[{i}]")
            if asset is not None:
                parsed.append(asset)
    behavior = problems.check(FailureBehavior.parse, value.get("failureBehavior") or "WARN")
    if value.get("timestamp") is not None:
        problems.check(parse_time, value["timestamp"], "timestamp")
    assets_read = len(problems.found) == before_assets
    job = _job_info(value, integration, problems)
    if state is None or started is None or behavior is None:
        problems.raise_any(where)  # no run to check further: these are all
        raise AssertionError("a field missing without a problem")
    run = TaskRun(
        key=key or _STAND_IN,  # a key missing or bad is said: the run's own rules are checked too
        state=state,
        started_at=started,
        ended_at=ended,
        inputs=tuple(lists["inputs"]),
        outputs=tuple(lists["outputs"]),
        failure_behavior=behavior,
        job=job,
    )
    # the run's own rules too, so that a record's problems are all said at once; its column
    # lineage only when all its assets could be read (an unreadable input is no missing one)
    for error in task_run_problems(run, column_lineage=assets_read):
        problems.add(error)
    problems.raise_any(where)
    if key is None:
        raise AssertionError("a bad key without a problem")
    return run


# the key of a record whose own is missing or bad, to check the rest of it by (never recorded)
_STAND_IN = TaskRunKey.create("stand-in", "stand-in", "stand-in", "stand-in", "stand-in")


def _task_run_key(
    namespace: object, flowId: object, taskId: object, executionId: object, taskRunId: object
) -> TaskRunKey:
    return TaskRunKey.create(namespace, flowId, taskId, executionId, taskRunId)


def parse_task_run_lines(
    lines: Iterable[str], source: str, *, limit: int = 20, integration: str = "OLBRIDGE"
) -> list[TaskRun]:
    """Task runs from JSON lines. The whole input is checked first: with any bad line this raises
    a ValidationError that lists the bad lines (up to ``limit``) by number."""
    return list(read_task_run_lines(lines, source, limit=limit, integration=integration).runs)


def read_task_run_lines(
    lines: Iterable[str], source: str, *, limit: int = 20, integration: str = "OLBRIDGE"
) -> CheckedRecords:
    """The task runs of JSON lines with the line of each, as :func:`parse_task_run_lines` checks
    them (and raises)."""
    checked = check_task_run_records(json_lines(lines, source), source, limit=limit, integration=integration)
    return accept_task_runs(checked, source)


def check_task_run_text(text: str, source: str, *, limit: int = 20, integration: str = "OLBRIDGE") -> CheckedRecords:
    """The task runs of a file's text (one JSON array of records, or JSON lines) and its bad
    records, without raising for them. Text that starts a JSON array and is not one raises the
    :class:`~bridge.errors.InputFileError` of :func:`bridge.files.json_array`; text without any
    record is one problem."""
    checked = check_task_run_records(json_values(text, source), source, limit=limit, integration=integration)
    if not checked.runs and not checked.problems:
        return attrs.evolve(checked, problems=(f"{source}: no task runs in it",))
    return checked


@attrs.frozen
class CheckedRecords:
    """The task runs of some records, and ``source:line: message`` for each problem of a bad one."""

    runs: tuple[TaskRun, ...]
    problems: tuple[str, ...]
    not_json: bool = False  # some record was not JSON
    lines: tuple[int, ...] = ()  # the line each run starts on
    bad: int = 0  # bad records, those past the limit too


def check_task_run_records(
    records: Iterable[tuple[int, Any]], source: str, *, limit: int = 20, integration: str = "OLBRIDGE"
) -> CheckedRecords:
    """The task runs of (line number, decoded record) pairs (a record that is not JSON as its
    :class:`~bridge.errors.InputFileError`), with their line numbers, and the problems of the
    first ``limit`` bad records as ``source:line: message`` (every problem of a record, each on
    its own); the bad records past ``limit`` are counted, and said in one line."""
    runs: list[TaskRun] = []
    lines: list[int] = []
    problems: list[str] = []
    bad = 0
    not_json = False
    for number, record in records:
        if isinstance(record, InputFileError):
            said = [record.message]
            not_json = True
        else:
            try:
                runs.append(parse_task_run(record, integration=integration))
                lines.append(number)
                continue
            except ValidationProblems as exc:
                said = [str(p) for p in exc.problems]
            except ValidationError as exc:
                said = [str(exc)]
        bad += 1
        if bad <= limit:
            problems += [f"{source}:{number}: {message}" for message in said]
    if bad > limit:
        problems.append(f"... and {bad - limit} more bad line(s)")
    return CheckedRecords(tuple(runs), tuple(problems), not_json, tuple(lines), bad)


def parse_task_run_records(
    records: Iterable[tuple[int, Any]], source: str, *, limit: int = 20, integration: str = "OLBRIDGE"
) -> list[TaskRun]:
    """Task runs from (line number, decoded record) pairs. The whole input is checked first: with any
    bad record this raises a ValidationError that lists them (up to ``limit``) by line number."""
    return list(
        accept_task_runs(check_task_run_records(records, source, limit=limit, integration=integration), source).runs
    )


def accept_task_runs(checked: CheckedRecords, source: str) -> CheckedRecords:
    """``checked`` when it holds task runs and no bad record; else the ValidationError that lists
    the bad records, or says there is no task run."""
    if checked.problems:
        raise ValidationError(
            f"{checked.bad} bad line(s); nothing was recorded:\n  " + "\n  ".join(checked.problems),
            rule="record.lines",
        )
    if not checked.runs:
        raise ValidationError(f"{source}: no task runs in it", rule="record.empty")
    return checked


__all__ = [
    "CheckedRecords",
    "accept_task_runs",
    "check_task_run_records",
    "check_task_run_text",
    "parse_asset",
    "parse_statistics",
    "parse_task_run",
    "parse_task_run_lines",
    "parse_task_run_records",
    "read_task_run_lines",
]
