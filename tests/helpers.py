"""Builders for test records."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bridge.model import AssetDeclaration, FailureBehavior, TaskRun, TaskRunKey, TaskState
from tests.conftest import at


def decl(asset_id: str, **fields: Any) -> AssetDeclaration:
    return AssetDeclaration.create(asset_id, **fields)


def run(
    task: str = "task",
    *,
    inputs: tuple[AssetDeclaration, ...] = (),
    outputs: tuple[AssetDeclaration, ...] = (),
    state: str = "SUCCESS",
    start: datetime | None = None,
    end: datetime | None = None,
    execution: str = "e1",
    namespace: str = "company.data",
    flow: str = "flow",
    behavior: str = "WARN",
    error: str | None = None,
) -> TaskRun:
    parsed = TaskState.parse(state)
    started = start or at(0)
    return TaskRun(
        key=TaskRunKey.create(namespace, flow, task, execution, f"{execution}.{task}"),
        state=parsed,
        started_at=started,
        ended_at=end or (started + timedelta(minutes=1) if parsed.is_terminal else None),
        inputs=inputs,
        outputs=outputs,
        failure_behavior=FailureBehavior.parse(behavior),
        error=error,
    )
