"""Declared lineage: the static lineage a flow declares for its tasks (Kestra's ``assets``
blocks), as declared jobs, and a declared job as the catalog keeps it."""

from __future__ import annotations

from datetime import datetime

import attrs

from bridge.model.assets import AssetDeclaration


@attrs.frozen
class DeclaredJob:
    """A task's static lineage as its flow declares it (Kestra's ``assets`` block on a task): the
    job ``<flowId>.<taskId>`` with its declared inputs and outputs. It becomes a JobEvent."""

    flow_namespace: str
    flow_id: str
    task_id: str
    task_type: str
    inputs: tuple[AssetDeclaration, ...] = ()
    outputs: tuple[AssetDeclaration, ...] = ()
    enable_auto: bool = False
    description: str | None = None
    integration: str = "KESTRA"


@attrs.frozen
class DeclaredFlow:
    """A flow's declared lineage: one declared job per task that has an ``assets`` block."""

    namespace: str
    flow_id: str
    jobs: tuple[DeclaredJob, ...] = ()
    warnings: tuple[str, ...] = ()  # what reading it reported (not kept: they name the file read)


@attrs.frozen
class StoredDeclaredJob:
    """A declared job as the catalog keeps it: one integer key, and when it was last declared."""

    pk: int
    job: DeclaredJob
    declared_at: datetime
