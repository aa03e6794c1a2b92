"""Conversions between the catalog's rows and the records of :mod:`bridge.model`."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.canonical import canonical
from bridge.model import (
    Assertion,
    Asset,
    AssetDeclaration,
    Column,
    DeclaredJob,
    JobInfo,
    Origin,
    Statistics,
    StoredDeclaredJob,
    StoredTaskRun,
    StoredUsage,
    TaskRunKey,
    TaskState,
    format_time,
    normalize_type,
    parse_time,
)
from bridge.model.column_lineage import ColumnEdge

dumps = canonical  # every JSON text the catalog stores (bridge/canonical.py)


def read_time(value: str | None) -> datetime | None:
    if not value:
        return None
    if type(value) is str and value.endswith("Z"):
        try:  # the catalog's own text (format_time), read at once: a history read reads three a run
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    return parse_time(value, "catalog")


def columns_json(columns: Sequence[Column]) -> str | None:
    return dumps([attrs.asdict(c) for c in columns]) if columns else None


def assertions_json(assertions: Sequence[Assertion]) -> str | None:
    return dumps([attrs.asdict(a) for a in assertions]) if assertions else None


def asset_row(asset: Asset) -> tuple[Any, ...]:
    return (
        asset.id,
        asset.type,
        asset.namespace,
        asset.display_name,
        asset.description,
        dumps(dict(asset.metadata)),
        asset.origin.value,
        format_time(asset.created_at),
        format_time(asset.updated_at),
        format_time(asset.deleted_at) if asset.deleted_at else None,
        columns_json(asset.columns),
        assertions_json(asset.assertions),
    )


def asset_from_row(row: Sequence[Any]) -> Asset:
    created, updated = read_time(row[7]), read_time(row[8])
    assert created is not None and updated is not None
    return Asset(
        id=row[0],
        type=row[1],
        namespace=row[2],
        display_name=row[3],
        description=row[4],
        metadata=json.loads(row[5]),
        origin=Origin(row[6]),
        created_at=created,
        updated_at=updated,
        deleted_at=read_time(row[9]),
        columns=tuple(Column(**c) for c in json.loads(row[10])) if row[10] else (),
        assertions=tuple(Assertion(**a) for a in json.loads(row[11])) if row[11] else (),
    )


def statistics_json(stats: Statistics) -> str | None:
    return None if stats.is_empty() else dumps(attrs.asdict(stats))


def task_run_from_row(
    row: Sequence[Any],
    usages: list[StoredUsage],
    column_edges: Sequence[ColumnEdge] = (),
    unwritten: Sequence[str] = (),
) -> StoredTaskRun:
    started, execution_started = read_time(row[7]), read_time(row[12])
    assert started is not None and execution_started is not None
    return StoredTaskRun(
        pk=row[0],
        key=TaskRunKey(row[1], row[2], row[3], row[4], row[5]),
        state=TaskState(row[6]),
        started_at=started,
        ended_at=read_time(row[8]),
        execution_started_at=execution_started,
        job=_job_info(row[9]),
        warnings=_warnings(row[10]),
        error=row[11],
        usages=tuple(usages),
        column_edges=tuple(column_edges),
        unwritten=tuple(unwritten),
    )


# the same few texts come back run after run (a task's job, no warnings): each read once
@functools.lru_cache(maxsize=4096)
def _job_info(text: str) -> JobInfo:
    return JobInfo(**json.loads(text))


@functools.lru_cache(maxsize=256)
def _warnings(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


def snapshot(asset: Asset) -> str:
    record = asset.to_json()
    record["columns"] = [attrs.asdict(c) for c in asset.columns]
    record["assertions"] = [attrs.asdict(a) for a in asset.assertions]
    return dumps(record)


def from_snapshot(text: str) -> Asset:
    d = json.loads(text)
    created, updated = read_time(d["created"]), read_time(d["updated"])
    assert created is not None and updated is not None
    return Asset(
        id=d["id"],
        type=normalize_type(d["type"]),
        namespace=d["namespace"],
        origin=Origin(d["origin"]),
        created_at=created,
        updated_at=updated,
        display_name=d["displayName"],
        description=d["description"],
        metadata=d["metadata"],
        deleted_at=read_time(d["deleted"]),
        columns=tuple(Column(**c) for c in d.get("columns", [])),
        assertions=tuple(Assertion(**a) for a in d.get("assertions", [])),
    )


def _declaration_json(decl: AssetDeclaration) -> dict[str, Any]:
    return {
        "id": decl.id,
        "type": decl.type,
        "namespace": decl.namespace,
        "displayName": decl.display_name,
        "description": decl.description,
        "metadata": dict(decl.metadata),
    }


def declared_job_json(job: DeclaredJob) -> str:
    """What the catalog keeps of a declared job beyond its key (and hashes to see a change)."""
    return dumps(
        {
            "taskType": job.task_type,
            "inputs": [_declaration_json(d) for d in job.inputs],
            "outputs": [_declaration_json(d) for d in job.outputs],
            "enableAuto": job.enable_auto,
            "description": job.description,
            "integration": job.integration,
        }
    )


def _declaration(d: dict[str, Any]) -> AssetDeclaration:
    return AssetDeclaration(
        id=d["id"],
        type=d["type"],
        namespace=d["namespace"],
        display_name=d["displayName"],
        description=d["description"],
        metadata=d["metadata"],
    )


def declared_job_from_row(row: Sequence[Any]) -> StoredDeclaredJob:
    declared_at = read_time(row[5])
    assert declared_at is not None
    d = json.loads(row[4])
    job = DeclaredJob(
        flow_namespace=row[1],
        flow_id=row[2],
        task_id=row[3],
        task_type=d["taskType"],
        inputs=tuple(_declaration(i) for i in d["inputs"]),
        outputs=tuple(_declaration(o) for o in d["outputs"]),
        enable_auto=d["enableAuto"],
        description=d["description"],
        integration=d["integration"],
    )
    return StoredDeclaredJob(pk=row[0], job=job, declared_at=declared_at)
