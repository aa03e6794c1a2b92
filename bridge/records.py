"""Task runs as JSON records, with the field names of Kestra's ``AssetLineage``.

One record::

    {"namespace": "company.data", "flowId": "reports", "taskId": "export", "executionId": "e1",
     "taskRunId": "t1", "state": "SUCCESS", "startDate": "2025-01-01T10:00:00Z",
     "endDate": "2025-01-01T10:01:00Z",
     "inputs": [{"id": "dbt.main.orders"}],
     "outputs": [{"id": "reports.orders", "type": "File", "namespace": "company.data",
                  "metadata": {"path": "orders.csv"}}]}

``tenantId`` and ``flowRevision`` are accepted and not kept (one catalog is one tenant).
``failureBehavior`` (WARN, FAIL, IGNORE) is an olbridge extension, and so is ``statistics``
(``rowCount``, ``size``, ``fileCount``) on an output. Unknown keys are refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from bridge.errors import ValidationError
from bridge.model import (
    AssetDeclaration,
    FailureBehavior,
    Statistics,
    TaskRun,
    TaskRunKey,
    TaskState,
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
    "failureBehavior",
}
_ASSET_KEYS = {"id", "type", "namespace", "displayName", "description", "metadata", "statistics"}
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


def parse_asset(value: Any, where: str) -> AssetDeclaration:
    if not isinstance(value, dict):
        raise ValidationError("an asset must be an object with at least an 'id'", rule="record.asset", where=where)
    _unknown(value, _ASSET_KEYS, where)
    if "id" not in value:
        raise ValidationError("an asset needs an 'id'", rule="id.required", where=where)
    try:
        return AssetDeclaration.create(
            id=value["id"],
            type=value.get("type"),
            namespace=value.get("namespace"),
            display_name=value.get("displayName"),
            description=value.get("description"),
            metadata=value.get("metadata"),
            statistics=parse_statistics(value.get("statistics"), f"{where}.statistics"),
        )
    except ValidationError as exc:
        raise exc.at(where) from None


def parse_task_run(value: Any, where: str = "") -> TaskRun:
    """A task run from one record; every problem is a ValidationError that says where."""
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
            items = value.get(field, [])
            if not isinstance(items, list):
                raise ValidationError(f"'{field}' must be a list of assets", rule="record.assets", where=field)
            lists[field] = tuple(parse_asset(item, f"{field}[{i}]") for i, item in enumerate(items))
        behavior = FailureBehavior.parse(value.get("failureBehavior", "WARN"))
        return TaskRun(
            key=key,
            state=state,
            started_at=started,
            ended_at=ended,
            inputs=lists["inputs"],
            outputs=lists["outputs"],
            failure_behavior=behavior,
        )
    except ValidationError as exc:
        raise exc.at(where) if where else exc from None


def parse_task_run_lines(lines: Iterable[str], source: str, *, limit: int = 20) -> list[TaskRun]:
    """Task runs from JSON lines. The whole input is checked first: with any bad line this raises
    a ValidationError that lists the bad lines (up to ``limit``) by number."""
    runs: list[TaskRun] = []
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            runs.append(parse_task_run(json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"{source}:{number}: not valid JSON: {exc.msg} (column {exc.colno})")
        except ValidationError as exc:
            problems.append(f"{source}:{number}: {exc}")
        if len(problems) >= limit:
            problems.append(f"(stopped after {limit} bad lines)")
            break
    if problems:
        raise ValidationError(
            f"{len(problems)} bad line(s); nothing was recorded:\n  " + "\n  ".join(problems), rule="record.lines"
        )
    if not runs:
        raise ValidationError(f"{source}: no task runs in it", rule="record.empty")
    return runs
