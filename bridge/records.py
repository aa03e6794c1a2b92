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
A null optional field is the same as a missing one.

``failureBehavior`` (WARN, FAIL, IGNORE) is an olbridge extension, and so are ``statistics``
(``rowCount``, ``size``, ``fileCount``) on an output, ``columns`` (names, or ``{name, type,
description}``) on an asset and ``columnLineage`` on an output (see
:mod:`bridge.column_lineage`). Unknown keys are refused.

Records come as JSON lines or as one JSON array; either way every bad record is reported with its
line number and nothing is recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from bridge.column_lineage import parse_column_lineage, parse_columns
from bridge.errors import ValidationError
from bridge.model import (
    KESTRA_TYPED_PROPERTIES,
    AssetDeclaration,
    FailureBehavior,
    JobInfo,
    Statistics,
    TaskRun,
    TaskRunKey,
    TaskState,
    check_task_run,
    normalize_type,
    parse_time,
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


def _unknown(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise ValidationError(
            f"unknown field(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}",
            rule="record.field",
            where=where,
        )


def parse_statistics(value: Any, where: str) -> Statistics:
    if value is None:
        return Statistics()
    if not isinstance(value, dict):
        raise ValidationError("statistics must be an object", rule="record.statistics", where=where)
    _unknown(value, set(_STAT_KEYS), where)
    out = {}
    for key, attr in _STAT_KEYS.items():
        if key in value:
            number = value[key]
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise ValidationError(
                    "must be a non-negative integer", rule="record.statistics", where=f"{where}.{key}"
                )
            out[attr] = number
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


def parse_asset(value: Any, where: str) -> AssetDeclaration:
    if not isinstance(value, dict):
        raise ValidationError("an asset must be an object with at least an 'id'", rule="record.asset", where=where)
    _unknown(value, _ASSET_ALLOWED_KEYS, where)
    if "id" not in value:
        raise ValidationError("an asset needs an 'id'", rule="id.required", where=where)
    try:
        asset_type = normalize_type(value["type"]) if value.get("type") is not None else None
        return AssetDeclaration.create(
            id=value["id"],
            type=asset_type,
            namespace=value.get("namespace"),
            display_name=value.get("displayName"),
            description=value.get("description"),
            metadata=_typed_metadata(value, asset_type),
            statistics=parse_statistics(value.get("statistics"), "statistics"),
            columns=parse_columns(value.get("columns")),
            column_lineage=parse_column_lineage(value["columnLineage"])
            if value.get("columnLineage") is not None
            else None,
        )
    except ValidationError as exc:
        raise exc.at(where) from None


def _job_info(value: Mapping[str, Any], integration: str) -> JobInfo:
    tenant = value.get("tenantId")
    if tenant is not None and (not isinstance(tenant, str) or not _TENANT_RE.fullmatch(tenant)):
        raise ValidationError(
            "a tenant id matches [a-z0-9][a-z0-9_-]*", rule="record.tenant", value=tenant, where="tenantId"
        )
    revision = value.get("flowRevision")
    if revision is not None and (not isinstance(revision, int) or isinstance(revision, bool) or revision < 1):
        raise ValidationError(
            "a flow revision is a positive integer", rule="record.revision", value=revision, where="flowRevision"
        )
    return JobInfo(integration=integration, tenant_id=tenant, flow_revision=revision)


def parse_task_run(value: Any, where: str = "", *, integration: str = "OLBRIDGE") -> TaskRun:
    """A task run from one record; every problem is a ValidationError that says where.
    ``integration`` names what recorded it, for the job's ``jobType`` facet."""
    try:
        if not isinstance(value, dict):
            raise ValidationError("a task run record must be a JSON object", rule="record.type")
        _unknown(value, _RECORD_KEYS, "")
        missing = [
            k
            for k in ("namespace", "flowId", "taskId", "executionId", "taskRunId", "state", "startDate")
            if k not in value
        ]
        if missing:
            raise ValidationError(f"missing required field(s) {', '.join(missing)}", rule="record.required")
        key = TaskRunKey.create(
            value["namespace"], value["flowId"], value["taskId"], value["executionId"], value["taskRunId"]
        )
        state = TaskState.parse(value["state"])
        started = parse_time(value["startDate"], "startDate")
        ended = parse_time(value["endDate"], "endDate") if value.get("endDate") is not None else None
        lists = {}
        for field in ("inputs", "outputs"):
            items = value.get(field)
            if items is None:
                items = []
            if not isinstance(items, list):
                raise ValidationError(f"'{field}' must be a list of assets", rule="record.assets", where=field)
            lists[field] = tuple(parse_asset(item, f"{field}[{i}]") for i, item in enumerate(items))
        behavior = FailureBehavior.parse(value.get("failureBehavior") or "WARN")
        if value.get("timestamp") is not None:
            parse_time(value["timestamp"], "timestamp")
        run = TaskRun(
            key=key,
            state=state,
            started_at=started,
            ended_at=ended,
            inputs=lists["inputs"],
            outputs=lists["outputs"],
            failure_behavior=behavior,
            job=_job_info(value, integration),
        )
        check_task_run(run)
        return run
    except ValidationError as exc:
        raise exc.at(where) if where else exc from None


def _json_lines(lines: Iterable[str]) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, BadJson(f"not valid JSON: {exc.msg} (column {exc.colno})")


def parse_task_run_lines(
    lines: Iterable[str], source: str, *, limit: int = 20, integration: str = "OLBRIDGE"
) -> list[TaskRun]:
    """Task runs from JSON lines. The whole input is checked first: with any bad line this raises
    a ValidationError that lists the bad lines (up to ``limit``) by number."""
    return parse_task_run_records(_json_lines(lines), source, limit=limit, integration=integration)


def _text_records(text: str, source: str) -> Iterator[tuple[int, Any]]:
    return json_array_items(text, source) if text.lstrip().startswith("[") else _json_lines(text.splitlines())


def check_task_run_text(text: str, source: str, *, limit: int = 20, integration: str = "OLBRIDGE") -> CheckedRecords:
    """The task runs of a file's text (one JSON array of records, or JSON lines) and its bad
    records, without raising for them. Text that starts a JSON array and is not one raises the
    ValidationError of :func:`json_array_items`; text without any record is one problem."""
    checked = check_task_run_records(_text_records(text, source), source, limit=limit, integration=integration)
    if not checked.runs and not checked.problems:
        return attrs.evolve(checked, problems=(f"{source}: no task runs in it",))
    return checked


@attrs.frozen
class BadJson:
    """A record that is not JSON, in place of its value."""

    message: str


@attrs.frozen
class CheckedRecords:
    """The task runs of some records, and ``source:line: message`` for each bad one."""

    runs: tuple[TaskRun, ...]
    problems: tuple[str, ...]
    not_json: bool = False  # some record was not JSON


_JSON_SPACE = " \t\r\n"


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in _JSON_SPACE:
        position += 1
    return position


def json_array_items(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """The items of a JSON array, each with the line it starts on, parsed in one pass. Text that
    is not one JSON array raises a ValidationError with the line and column (when the items
    before the fault have been yielded)."""
    decoder = json.JSONDecoder()
    position = _skip_space(text, 0)
    line, counted = 1, 0
    try:
        if not text.startswith("[", position):
            raise json.JSONDecodeError("Expecting '['", text, position)
        position = _skip_space(text, position + 1)
        if not text.startswith("]", position):
            while True:
                item, end = decoder.raw_decode(text, position)
                line, counted = line + text.count("\n", counted, position), position
                yield line, item
                position = _skip_space(text, end)
                if text.startswith("]", position):
                    break
                if not text.startswith(",", position):
                    raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
                position = _skip_space(text, position + 1)
        position = _skip_space(text, position + 1)
        if position < len(text):
            raise json.JSONDecodeError("Extra data", text, position)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"{source}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})",
            rule="record.json",
        ) from None


def check_task_run_records(
    records: Iterable[tuple[int, Any]], source: str, *, limit: int = 20, integration: str = "OLBRIDGE"
) -> CheckedRecords:
    """The task runs of (line number, decoded record) pairs, and each bad record (up to ``limit``)
    as ``source:line: message``."""
    runs: list[TaskRun] = []
    problems: list[str] = []
    not_json = False
    for number, record in records:
        if isinstance(record, BadJson):
            problems.append(f"{source}:{number}: {record.message}")
            not_json = True
        else:
            try:
                runs.append(parse_task_run(record, integration=integration))
            except ValidationError as exc:
                problems.append(f"{source}:{number}: {exc}")
        if len(problems) >= limit:
            problems.append(f"(stopped after {limit} bad lines)")
            break
    return CheckedRecords(tuple(runs), tuple(problems), not_json)


def parse_task_run_records(
    records: Iterable[tuple[int, Any]], source: str, *, limit: int = 20, integration: str = "OLBRIDGE"
) -> list[TaskRun]:
    """Task runs from (line number, decoded record) pairs. The whole input is checked first: with any
    bad record this raises a ValidationError that lists them (up to ``limit``) by line number."""
    checked = check_task_run_records(records, source, limit=limit, integration=integration)
    runs, problems = list(checked.runs), checked.problems
    if problems:
        raise ValidationError(
            f"{len(problems)} bad line(s); nothing was recorded:\n  " + "\n  ".join(problems), rule="record.lines"
        )
    if not runs:
        raise ValidationError(f"{source}: no task runs in it", rule="record.empty")
    return runs
