"""Task runs: their key, state and job, the rules a run keeps, and a run as the catalog keeps it
with its usages (the assets it read and wrote)."""

from __future__ import annotations

import enum
from datetime import datetime

import attrs

from bridge.errors import ValidationError, ValidationProblems
from bridge.model.assets import AssetDeclaration, Origin, Statistics
from bridge.model.column_lineage import ColumnEdge, declared_problems
from bridge.model.ids import check_key_part, check_namespace
from bridge.model.times import format_time


class TaskState(enum.StrEnum):
    """Kestra's task-run states; the terminal ones end a run."""

    CREATED = "CREATED"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    RESTARTED = "RESTARTED"
    RETRYING = "RETRYING"
    KILLING = "KILLING"
    SUCCESS = "SUCCESS"
    WARNING = "WARNING"
    FAILED = "FAILED"
    KILLED = "KILLED"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"
    RETRIED = "RETRIED"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def writes_outputs(self) -> bool:
        """Only a task run that ends well writes its outputs."""
        return self in (TaskState.SUCCESS, TaskState.WARNING)

    @property
    def run_event_type(self) -> str:
        """The OpenLineage eventType that ends a run in this state (START for a run still going)."""
        return _EVENT_TYPE.get(self, "START")

    @classmethod
    def parse(cls, value: object, where: str = "state") -> TaskState:
        if isinstance(value, TaskState):
            return value
        if isinstance(value, str):
            try:
                return cls(value.upper())
            except ValueError:
                pass
        raise ValidationError(
            f"unknown task state {value!r}; one of {', '.join(s.value for s in cls)}",
            rule="state.unknown",
            value=value,
            where=where,
        )


_TERMINAL = frozenset(
    {
        TaskState.SUCCESS,
        TaskState.WARNING,
        TaskState.FAILED,
        TaskState.KILLED,
        TaskState.CANCELLED,
        TaskState.SKIPPED,
        TaskState.RETRIED,
    }
)
_EVENT_TYPE = {
    TaskState.SUCCESS: "COMPLETE",
    TaskState.WARNING: "COMPLETE",
    TaskState.FAILED: "FAIL",
    TaskState.RETRIED: "FAIL",
    TaskState.KILLED: "ABORT",
    TaskState.CANCELLED: "ABORT",
    TaskState.SKIPPED: "ABORT",
}


class FailureBehavior(enum.StrEnum):
    """What a failed asset write does to a task run that otherwise succeeded (Kestra's
    ``assetFailureBehavior``)."""

    WARN = "WARN"  # the run ends in WARNING (the default)
    FAIL = "FAIL"  # the run ends FAILED and writes no outputs
    IGNORE = "IGNORE"  # the run keeps its state; the failure is kept in its warnings

    @classmethod
    def parse(cls, value: object, where: str = "failureBehavior") -> FailureBehavior:
        if isinstance(value, FailureBehavior):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        raise ValidationError(
            f"unknown failure behaviour {value!r}; one of WARN, FAIL, IGNORE",
            rule="failureBehavior.unknown",
            value=value,
            where=where,
        )

    def apply(self, state: TaskState) -> TaskState:
        if self is FailureBehavior.FAIL and state.writes_outputs:
            return TaskState.FAILED
        if self is FailureBehavior.WARN and state is TaskState.SUCCESS:
            return TaskState.WARNING
        return state


@attrs.frozen
class TaskRunKey:
    """What identifies a task run: Kestra's flow namespace, flow id, task id, execution id, task run id."""

    flow_namespace: str
    flow_id: str
    task_id: str
    execution_id: str
    task_run_id: str

    @classmethod
    def create(
        cls, flow_namespace: object, flow_id: object, task_id: object, execution_id: object, task_run_id: object
    ) -> TaskRunKey:
        ns = check_namespace(flow_namespace, "namespace")
        if ns is None:
            raise ValidationError("a task run needs its flow's namespace", rule="key.required", where="namespace")
        return cls(
            flow_namespace=ns,
            flow_id=check_key_part(flow_id, "flowId"),
            task_id=check_key_part(task_id, "taskId"),
            execution_id=check_key_part(execution_id, "executionId"),
            task_run_id=check_key_part(task_run_id, "taskRunId"),
        )


@attrs.frozen
class JobInfo:
    """What a task run says about its job, beyond its name (kept for the job facets). Kestra's
    ``tenantId`` and ``flowRevision`` are kept when a record carries them."""

    integration: str = "OLBRIDGE"
    job_type: str = "TASK"
    sql: str | None = None
    description: str | None = None
    tenant_id: str | None = None
    flow_revision: int | None = None


# JobInfo fields added after catalogs were first written: left out of a run's record hash while
# unset, so a run recorded before them is still "unchanged" when recorded again.
JOB_INFO_LATER_FIELDS = frozenset({"tenant_id", "flow_revision"})


@attrs.frozen
class TaskRun:
    """A task run as it is recorded: its key, state, times and declared inputs and outputs."""

    key: TaskRunKey
    state: TaskState
    started_at: datetime
    ended_at: datetime | None = None
    inputs: tuple[AssetDeclaration, ...] = ()
    outputs: tuple[AssetDeclaration, ...] = ()
    failure_behavior: FailureBehavior = FailureBehavior.WARN
    job: JobInfo = JobInfo()
    origin: Origin = Origin.DECLARED
    error: str | None = None


def check_task_run(run: TaskRun) -> None:
    """The rules a task run keeps whatever the catalog holds: every problem at once (one raised
    as it is, several as a :class:`ValidationProblems`)."""
    problems = task_run_problems(run)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ValidationProblems(problems)


def task_run_problems(run: TaskRun, *, column_lineage: bool = True) -> list[ValidationError]:
    """Each rule of :func:`check_task_run` the run breaks, its own error; without
    ``column_lineage``, its column lineage is not checked (a caller that could not read all of
    the run's assets would find inputs missing that are only unreadable)."""
    problems: list[ValidationError] = []
    if run.outputs and not run.state.is_terminal:
        problems.append(
            ValidationError(
                f"outputs are written when a task run ends; state {run.state.value} has not ended",
                rule="taskrun.outputs",
                value=run.state.value,
                where="outputs",
            )
        )
    if run.ended_at is not None and run.ended_at < run.started_at:
        problems.append(
            ValidationError(
                "a task run cannot end before it starts",
                rule="taskrun.times",
                value=format_time(run.ended_at),
                where="endDate",
            )
        )
    if run.state.is_terminal and run.ended_at is None:
        problems.append(
            ValidationError(
                f"state {run.state.value} ends the task run, so it needs an end time",
                rule="taskrun.times",
                where="endDate",
            )
        )
    if not run.state.is_terminal and run.ended_at is not None:  # an end would make it an ended run
        problems.append(
            ValidationError(
                f"state {run.state.value} has not ended, so it takes no end time",
                rule="taskrun.times",
                value=format_time(run.ended_at),
                where="endDate",
            )
        )
    if not column_lineage:
        return problems
    for index, decl in enumerate(run.inputs):
        if decl.column_lineage is not None:
            problems.append(
                ValidationError(
                    "column lineage belongs to an output: it says where the output's columns come from",
                    rule="columnLineage.input",
                    where=f"inputs[{index}].columnLineage",
                )
            )
    input_ids = [d.id for d in run.inputs]
    for index, decl in enumerate(run.outputs):
        if decl.column_lineage is not None:
            problems += declared_problems(
                decl.column_lineage,
                output_id=decl.id,
                output_columns=[c.name for c in decl.columns] if decl.columns else None,
                input_ids=input_ids,
                where=f"outputs[{index}].columnLineage",
            )
    return problems


@attrs.frozen
class StoredUsage:
    asset_id: str
    direction: str  # "input" | "output"
    position: int
    statistics: Statistics = Statistics()


@attrs.frozen
class StoredTaskRun:
    """A task run as the catalog keeps it, with its usages."""

    pk: int
    key: TaskRunKey
    state: TaskState
    started_at: datetime
    ended_at: datetime | None
    execution_started_at: datetime
    job: JobInfo
    warnings: tuple[str, ...]
    error: str | None
    usages: tuple[StoredUsage, ...]
    column_edges: tuple[ColumnEdge, ...] = ()  # of the outputs it wrote
    # the outputs it was to write and did not (it ended FAILED, KILLED, CANCELLED, RETRIED or
    # SKIPPED), by id, of those the catalog held when it ended
    unwritten: tuple[str, ...] = ()

    @property
    def inputs(self) -> tuple[StoredUsage, ...]:
        return tuple(u for u in self.usages if u.direction == "input")

    @property
    def outputs(self) -> tuple[StoredUsage, ...]:
        return tuple(u for u in self.usages if u.direction == "output")
