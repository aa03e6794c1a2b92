"""Prefect 3 asset events as catalog task runs (pure: events in, records out).

When a task made with ``@materialize`` ends, Prefect emits, from inside the task run:

- ``prefect.asset.referenced``, one per upstream asset (its ``asset_deps`` and the assets of the
  tasks whose results it took), the asset as the event's resource;
- ``prefect.asset.materialization.succeeded`` (or ``.failed``), one per materialized asset, with
  the upstream assets as related resources of role ``asset`` and the values given to
  ``add_asset_metadata`` as the payload.

An asset resource has ``prefect.resource.id`` (the asset key, a URI) and, from
``AssetProperties``, ``prefect.resource.name``, ``prefect.asset.description``,
``prefect.asset.url`` and ``prefect.asset.owners`` (a JSON list). Every event also names its
``flow-run``, ``task-run`` and ``flow`` as related resources.

One task run's events become one :class:`~bridge.model.TaskRun`: the flow name is the flow id, the
task name the task id, the flow run id the execution id and the task run id the task run id; the
materialized assets are its outputs and the referenced ones its inputs; a ``failed``
materialization ends it FAILED (and its outputs are not written).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.adapters.prefect.client import TaskRunInfo
from bridge.canonical import canonical
from bridge.errors import ValidationError
from bridge.model import (
    AssetDeclaration,
    JobInfo,
    Origin,
    TaskRun,
    TaskRunKey,
    TaskState,
    check_id,
    parse_time,
)

SUCCEEDED = "prefect.asset.materialization.succeeded"
FAILED = "prefect.asset.materialization.failed"
REFERENCED = "prefect.asset.referenced"
KINDS = (SUCCEEDED, FAILED, REFERENCED)
JOB = JobInfo(integration="PREFECT", job_type="TASK")
# a flow's, flow run's or task run's resource id: Prefect's ids are UUIDs, letters, digits and
# dashes (a task run's is put in the path of a request to the server: no '/', '?', '#' or '.' of
# an event's may steer it elsewhere)
_RUN_ID_RE = re.compile(r"prefect\.(flow-run|task-run|flow)\.([0-9A-Za-z-]{1,64})")
# a task run's default name is "<task name>-<first 3 characters of its dynamic key>"
_DEFAULT_SUFFIX_RE = re.compile(r"-[0-9a-f]{3}")


@attrs.frozen
class AssetEvent:
    """One asset event, checked."""

    id: str
    event: str
    occurred: datetime
    asset: AssetDeclaration
    upstream: tuple[str, ...]  # related assets (role "asset") of a materialization
    flow_run_id: str
    task_run_id: str
    task_run_name: str
    flow_name: str

    @property
    def is_materialization(self) -> bool:
        return self.event in (SUCCEEDED, FAILED)


@attrs.frozen
class EventGroup:
    """The events of one task run, oldest first."""

    task_run_id: str
    events: tuple[AssetEvent, ...]


@attrs.frozen
class Problem:
    """Why an event or a task run's events cannot be imported."""

    where: str  # "event <id>" or "task run <id>"
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{where} must be a non-empty string, not {value!r}", rule="prefect.event")
    return value


def metadata_value(value: Any) -> Any:
    """A payload value as flat catalog metadata: scalars as they are, anything nested as its
    compact JSON text (Prefect's metadata may nest; the catalog's is flat)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return canonical(value)


def asset_from_resource(resource: Any, payload: Any, where: str = "resource") -> AssetDeclaration:
    """The asset an event's resource and payload describe."""
    if not isinstance(resource, Mapping):
        raise ValidationError(f"{where} must be an object", rule="prefect.event")
    key = _text(resource.get("prefect.resource.id"), f"{where}['prefect.resource.id']")
    try:
        check_id(key)
    except ValidationError as exc:
        raise ValidationError(f"asset key {key!r} is not a valid asset id: {exc.message}", rule=exc.rule) from None
    metadata: dict[str, Any] = {}
    if payload is not None:
        if not isinstance(payload, Mapping):
            raise ValidationError(
                f"payload (the asset metadata) must be an object, not {type(payload).__name__}", rule="prefect.event"
            )
        metadata.update({str(k): metadata_value(v) for k, v in payload.items()})
    owners_text = resource.get("prefect.asset.owners")
    if owners_text is not None:
        try:
            owners = json.loads(owners_text) if isinstance(owners_text, str) else None
        except (ValueError, RecursionError):  # not JSON, or past what it reads: not a list of strings
            owners = None
        if not isinstance(owners, list) or not all(isinstance(o, str) for o in owners):
            raise ValidationError(
                f"{where}['prefect.asset.owners'] must be a JSON list of strings, not {owners_text!r}",
                rule="prefect.event",
            )
        if owners:
            metadata["owner"] = ", ".join(owners)
    url = resource.get("prefect.asset.url")
    if url is not None:
        metadata["url"] = _text(url, f"{where}['prefect.asset.url']")
    try:
        return AssetDeclaration.create(
            key,
            display_name=resource.get("prefect.resource.name"),
            description=resource.get("prefect.asset.description"),
            metadata=metadata,
        )
    except ValidationError as exc:
        raise exc.at(f"asset {key}") from None


def parse_event(raw: Any) -> AssetEvent:
    """One event from the events API; a ValidationError says what is wrong with it."""
    if not isinstance(raw, Mapping):
        raise ValidationError("an event must be a JSON object", rule="prefect.event")
    event = _text(raw.get("event"), "event")
    if event not in KINDS:
        raise ValidationError(f"not an asset event: {event!r}", rule="prefect.event")
    event_id = _text(raw.get("id"), "id")
    occurred = parse_time(raw.get("occurred"), "occurred")
    related = raw.get("related") or []
    if not isinstance(related, list) or not all(isinstance(r, Mapping) for r in related):
        raise ValidationError("related must be a list of resources", rule="prefect.event")
    runs: dict[str, tuple[str, str | None]] = {}
    upstream: list[str] = []
    for resource in related:
        role = resource.get("prefect.resource.role")
        resource_id = resource.get("prefect.resource.id")
        if role == "asset":
            upstream.append(check_id(_text(resource_id, "related asset's prefect.resource.id")))
            continue
        if role in ("flow-run", "task-run", "flow"):
            found = _RUN_ID_RE.fullmatch(resource_id) if isinstance(resource_id, str) else None
            if found is None or found.group(1) != role:
                raise ValidationError(f"related {role} has the id {resource_id!r}", rule="prefect.event")
            name = resource.get("prefect.resource.name")
            runs[role] = (found.group(2), name if isinstance(name, str) else None)
    for role in ("flow-run", "task-run", "flow"):
        if role not in runs:
            raise ValidationError(
                f"no related {role} resource: asset events are read from inside a task run", rule="prefect.event"
            )
    flow_name = runs["flow"][1]
    if not flow_name:
        raise ValidationError("the related flow resource has no prefect.resource.name", rule="prefect.event")
    asset = asset_from_resource(raw.get("resource"), raw.get("payload") if event != REFERENCED else None)
    return AssetEvent(
        id=event_id,
        event=event,
        occurred=occurred,
        asset=asset,
        upstream=tuple(upstream),
        flow_run_id=runs["flow-run"][0],
        task_run_id=runs["task-run"][0],
        task_run_name=runs["task-run"][1] or runs["task-run"][0],
        flow_name=flow_name,
    )


def parse_events(raws: Iterable[Any]) -> tuple[list[AssetEvent], list[Problem]]:
    """Checked events (each id once, oldest first) and the problems of the others."""
    events: dict[str, AssetEvent] = {}
    problems: list[Problem] = []
    for index, raw in enumerate(raws):
        raw_id = raw.get("id") if isinstance(raw, Mapping) else None
        try:
            parsed = parse_event(raw)
        except ValidationError as exc:
            problems.append(Problem(f"event {raw_id}" if raw_id else f"event #{index + 1}", str(exc)))
            continue
        events.setdefault(parsed.id, parsed)
    return sorted(events.values(), key=lambda e: (e.occurred, e.id)), problems


def group_by_task_run(events: Sequence[AssetEvent]) -> list[EventGroup]:
    """The events of each task run, in the order the task runs' first events occurred."""
    groups: dict[str, list[AssetEvent]] = {}
    for event in events:
        groups.setdefault(event.task_run_id, []).append(event)
    return [EventGroup(run_id, tuple(items)) for run_id, items in groups.items()]


def task_name(task_run_name: str, info: TaskRunInfo | None) -> str:
    """The task's name: the task run's name without the ``-<key>`` suffix Prefect gives a default
    run name (the first 3 characters of the run's dynamic key); a custom run name as it is."""
    name = info.name if info is not None else task_run_name
    if info is not None and info.dynamic_key:
        suffix = f"-{info.dynamic_key[:3]}"
        return name[: -len(suffix)] if name.endswith(suffix) and len(name) > len(suffix) else name
    found = _DEFAULT_SUFFIX_RE.search(name)
    if found and found.end() == len(name) and found.start() > 0:
        return name[: found.start()]
    return name


def _add(found: dict[str, AssetDeclaration], decl: AssetDeclaration) -> None:
    """Add an asset to those found, merged with what an earlier event of the run said of it."""
    first = found.get(decl.id)
    if first is None:
        found[decl.id] = decl
        return
    found[decl.id] = attrs.evolve(
        first,
        display_name=decl.display_name or first.display_name,
        description=decl.description or first.description,
        metadata={**first.metadata, **decl.metadata},
    )


def task_run_from_group(
    group: EventGroup,
    info: TaskRunInfo | None,
    *,
    namespace: str,
    output_type: Callable[[str], str | None],
) -> TaskRun | None:
    """The task run a group of events tells of, or None when it has no materialization yet (only
    references). ``output_type`` gives the type a new output asset gets (None: keep the stored one)."""
    events = group.events
    materialized = [e for e in events if e.is_materialization]
    if not materialized:
        return None
    first = events[0]
    for event in events[1:]:
        if event.flow_run_id != first.flow_run_id or event.flow_name != first.flow_name:
            raise ValidationError(
                f"its events name two flow runs ({first.flow_run_id}, {event.flow_run_id})", rule="prefect.group"
            )
    outputs: dict[str, AssetDeclaration] = {}
    for event in materialized:
        _add(outputs, event.asset)
    inputs: dict[str, AssetDeclaration] = {}
    for event in events:
        if event.event == REFERENCED and event.asset.id not in outputs:
            _add(inputs, event.asset)
    for event in materialized:
        for upstream in event.upstream:
            if upstream not in outputs and upstream not in inputs:
                inputs[upstream] = AssetDeclaration.create(upstream)
    failed = any(e.event == FAILED for e in materialized)
    started = min(e.occurred for e in events)
    ended = max(e.occurred for e in events)
    if info is not None and info.start_time is not None:
        started = min(started, info.start_time)
    if info is not None and info.end_time is not None:
        ended = max(ended, info.end_time)
    key = TaskRunKey.create(
        namespace, first.flow_name, task_name(first.task_run_name, info), first.flow_run_id, group.task_run_id
    )
    return TaskRun(
        key=key,
        state=TaskState.FAILED if failed else TaskState.SUCCESS,
        started_at=started,
        ended_at=ended,
        inputs=tuple(inputs.values()),
        outputs=tuple(attrs.evolve(d, type=output_type(d.id)) for d in outputs.values()),
        job=JOB,
        origin=Origin.DECLARED,
        error="a materialization failed (prefect.asset.materialization.failed)" if failed else None,
    )
