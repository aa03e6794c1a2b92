"""The ``task_run`` API: task runs recorded from Python, in the spirit of Kestra's task declarations
and Prefect's ``@materialize``::

    with task_run(catalog, "company.data", "reports", "export_report") as run:
        run.reads("dbt.main.my_second_dbt_model")
        run.writes("reports.second_model_report", type="File", namespace="company.data",
                   metadata={"path": "second_model_report.csv"},
                   columns=["customer", "total"],
                   column_lineage={"fields": {"total": [{"id": "dbt.main.my_second_dbt_model",
                                                         "column": "id", "transformation": "AGGREGATION"}]}})
        ...  # the work

The run is recorded as started when the block opens and ended when it closes: SUCCESS, or FAILED
when the block raises (then no output is written and the exception goes on).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from bridge.catalog import Catalog, RecordResult
from bridge.errors import ValidationError
from bridge.model import (
    AssetDeclaration,
    Column,
    ColumnLineage,
    FailureBehavior,
    JobInfo,
    Statistics,
    TaskRun,
    TaskRunKey,
    TaskState,
    check_declared,
    parse_column_lineage,
    parse_columns,
    utcnow,
)


class TaskRunRecorder:
    """An open task run: declare what it reads and writes, then end it."""

    def __init__(
        self,
        catalog: Catalog,
        key: TaskRunKey,
        *,
        clock: Callable[[], datetime] = utcnow,
        failure_behavior: FailureBehavior = FailureBehavior.WARN,
        job: JobInfo = JobInfo(),
    ) -> None:
        self.catalog = catalog
        self.key = key
        self.clock = clock
        self.failure_behavior = failure_behavior
        self.job = job
        self.started_at = clock()
        self.inputs: list[AssetDeclaration] = []
        self.outputs: list[AssetDeclaration] = []
        self.result: RecordResult | None = None
        self.catalog.record_task_run(self._run(TaskState.RUNNING, None, None))

    def _run(self, state: TaskState, ended_at: datetime | None, error: str | None) -> TaskRun:
        return TaskRun(
            key=self.key,
            state=state,
            started_at=self.started_at,
            ended_at=ended_at,
            inputs=tuple(self.inputs),
            outputs=tuple(self.outputs) if state.is_terminal else (),
            failure_behavior=self.failure_behavior,
            job=self.job,
            error=error,
        )

    def reads(self, asset_id: str, **fields: Any) -> AssetDeclaration:
        """Declare an input: ``type``, ``namespace``, ``display_name``, ``description``, ``metadata``."""
        decl = AssetDeclaration.create(asset_id, **fields)
        self.inputs.append(decl)
        return decl

    def writes(
        self,
        asset_id: str,
        *,
        statistics: Mapping[str, int] | None = None,
        columns: Sequence[str | Column | Mapping[str, Any]] | None = None,
        column_lineage: ColumnLineage | Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> AssetDeclaration:
        """Declare an output; it is written when the run ends well. ``statistics`` may give
        ``row_count``, ``size`` and ``file_count``; ``columns`` lists its columns (names, or
        ``{name, type, description}``); ``column_lineage`` says which input columns they come from
        (``{"fields": {column: [{"id", "column", "transformation"}]}, "dataset": [...]}``, see
        :mod:`bridge.model.column_lineage`), from inputs declared with :meth:`reads` before."""
        lineage = parse_column_lineage(column_lineage) if column_lineage is not None else None
        decl = AssetDeclaration.create(
            asset_id,
            statistics=Statistics(**(statistics or {})),
            columns=parse_columns(columns),
            column_lineage=lineage,
            **fields,
        )
        if lineage is not None:
            check_declared(
                lineage,
                output_id=decl.id,
                output_columns=[c.name for c in decl.columns] if decl.columns else None,
                input_ids=[d.id for d in self.inputs],
                where="columnLineage",
            )
        self.outputs.append(decl)
        return decl

    def end(self, state: TaskState | str = TaskState.SUCCESS, error: str | None = None) -> RecordResult:
        final = TaskState.parse(state)
        if not final.is_terminal:
            raise ValidationError(f"{final.value} does not end a task run", rule="state.terminal", value=final.value)
        self.result = self.catalog.record_task_run(self._run(final, self.clock(), error))
        return self.result


@contextmanager
def task_run(
    catalog: Catalog,
    namespace: str,
    flow_id: str,
    task_id: str,
    *,
    execution_id: str | None = None,
    task_run_id: str | None = None,
    clock: Callable[[], datetime] = utcnow,
    failure_behavior: FailureBehavior | str = FailureBehavior.WARN,
    job: JobInfo = JobInfo(),
) -> Iterator[TaskRunRecorder]:
    """Open a task run; see the module's documentation."""
    key = TaskRunKey.create(
        namespace, flow_id, task_id, execution_id or uuid.uuid4().hex, task_run_id or uuid.uuid4().hex
    )
    recorder = TaskRunRecorder(
        catalog, key, clock=clock, failure_behavior=FailureBehavior.parse(failure_behavior), job=job
    )
    try:
        yield recorder
    except BaseException as exc:
        if recorder.result is None:
            recorder.end(TaskState.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    if recorder.result is None:
        recorder.end(TaskState.SUCCESS)


__all__ = ["TaskRunRecorder", "task_run"]
