"""The helpers Metaflow steps call: Outerbounds-style assets recorded in the olbridge catalog::

    from bridge.adapters.metaflow import register_data, get_data

    @step
    def start(self):
        self.orders = load_orders()
        register_data("orders", "orders", annotations={"rows": len(self.orders)}, tags={"source": "erp"})
        self.next(self.train)

    @step
    def train(self):
        orders = get_data("orders")   # the artifact the latest instance points to
        ...

One Metaflow task (an attempt of a step) is one task run: flow id = the flow's name, task id =
the step's name, execution id = the run id, task run id = the task's pathspec (``Flow/run/step/task``,
``:attempt-N`` added for a retry). The first call records the run as started; every read is
recorded at once (so a step that dies still shows what it read); outputs are kept and written
when the task ends, with Metaflow's verdict: the task ended well → SUCCESS and the outputs are
written, it failed (or its outcome cannot be read) → FAILED and nothing is written. The catalog
comes from ``OLBRIDGE_CATALOG`` (or ``olbridge.toml``), as for the CLI.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from bridge.adapters.metaflow.assets import (
    ANNOTATION_PREFIX,
    INSTANCE_PREFIX,
    TAGS_KEY,
    AssetDefinition,
    Scope,
    definition_declaration,
    find_definition,
    instance_metadata,
    make_scope,
    resolve_branch,
)
from bridge.catalog import Catalog
from bridge.config import load_config
from bridge.errors import BridgeError, NotFoundError, ValidationError
from bridge.mapping import Resolver
from bridge.model import Asset, AssetDeclaration, JobInfo, TaskRun, TaskRunKey, TaskState, utcnow

ENV_ASSETS = "OLBRIDGE_METAFLOW_ASSETS"  # the folder holding data/ and models/
ENV_BRANCH = "OLBRIDGE_METAFLOW_BRANCH"  # a deployment's git branch
ENV_PROJECT = "OLBRIDGE_METAFLOW_PROJECT"  # the project, for flows without @project
JOB = JobInfo(integration="METAFLOW", job_type="TASK")
_ARTIFACT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@attrs.frozen
class StepContext:
    """What a helper needs of ``metaflow.current``."""

    flow_name: str
    run_id: str
    step_name: str
    task_id: str
    retry_count: int
    scope: Scope
    flow_dir: Path

    @property
    def pathspec(self) -> str:
        return f"{self.flow_name}/{self.run_id}/{self.step_name}/{self.task_id}"

    @property
    def key(self) -> TaskRunKey:
        attempt = f":attempt-{self.retry_count}" if self.retry_count else ""
        return TaskRunKey.create(
            self.scope.namespace, self.flow_name, self.step_name, self.run_id, self.pathspec + attempt
        )


@attrs.frozen
class AssetReference:
    """What :func:`consume_data_asset` returns: the asset as the catalog holds it on this branch."""

    id: str
    kind: str
    catalog_id: str
    namespace: str
    name: str | None
    description: str | None
    properties: Mapping[str, Any]
    annotations: Mapping[str, Any]
    tags: str | None
    pathspec: str | None  # the task that registered the latest instance, None without one
    artifact: str | None


def context_from(current: Any, env: Mapping[str, str]) -> StepContext:
    """A step's context from ``metaflow.current`` (or an object like it) and the environment."""
    if not getattr(current, "is_running_flow", False) or current.task_id is None:
        raise BridgeError("the Metaflow helpers work inside a running Metaflow step only")
    project = env.get(ENV_PROJECT) or current.get("project_name") or current.flow_name
    branch = resolve_branch(
        explicit=env.get(ENV_BRANCH), project_branch=current.get("branch_name"), username=current.username
    )
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return StepContext(
        flow_name=current.flow_name,
        run_id=str(current.run_id),
        step_name=current.step_name,
        task_id=str(current.task_id),
        retry_count=int(current.retry_count or 0),
        scope=make_scope(project, branch),
        flow_dir=Path(main).resolve().parent if main else Path.cwd(),
    )


def metaflow_outcome(context: StepContext) -> tuple[TaskState, str | None]:
    """How Metaflow says the task ended (its ``_task_ok``), read when the task process exits."""
    try:
        from metaflow.client.core import Task

        task = Task(context.pathspec, attempt=context.retry_count, _namespace_check=False)
        ok = bool(task.finished)
    except Exception as exc:  # the client cannot tell: do not claim success
        return TaskState.FAILED, f"the task's outcome could not be read from Metaflow: {type(exc).__name__}: {exc}"
    return (TaskState.SUCCESS, None) if ok else (TaskState.FAILED, "the Metaflow task failed")


def load_artifact(pathspec: str, artifact: str) -> Any:
    """The value of an artifact of a finished task, through the Metaflow client."""
    from metaflow.client.core import Task

    try:
        return Task(pathspec, _namespace_check=False)[artifact].data
    except KeyError:
        raise NotFoundError(f"task {pathspec} has no artifact {artifact!r}") from None
    except Exception as exc:
        raise NotFoundError(
            f"cannot read artifact {artifact!r} of task {pathspec}: {type(exc).__name__}: {exc}"
        ) from exc


def catalog_path(env: Mapping[str, str]) -> Path | str:
    """The catalog as the CLI finds it: ``OLBRIDGE_CATALOG`` (a file, or a postgresql:// URL), else
    the config's, else ./olbridge.db."""
    return load_config(None, env).catalog


def catalog_naming(env: Mapping[str, str]) -> Resolver:
    """The naming rules of the config the CLI finds, as ``olbridge export`` names assets by."""
    config = load_config(None, env)
    return Resolver.load(config.mappings, config.default_namespace)


@attrs.define
class _Output:
    pointers: dict[str, Any]
    annotations: Mapping[str, Any] | None
    tags: Mapping[str, Any] | Iterable[str] | None


class StepRecorder:
    """The task run of one Metaflow task: inputs recorded as they are read, outputs at the end."""

    def __init__(
        self,
        context: StepContext,
        catalog: Path | str,
        *,
        clock: Callable[[], datetime] = utcnow,
        outcome: Callable[[StepContext], tuple[TaskState, str | None]] = metaflow_outcome,
        naming: Resolver | None = None,
    ) -> None:
        self.context = context
        self.catalog_path = catalog
        self.naming = naming  # the config's rules, by which a new asset takes a placeholder over
        self.clock = clock
        self.outcome = outcome
        self.started_at: datetime | None = None
        self.inputs: dict[str, AssetDeclaration] = {}
        self.outputs: dict[str, _Output] = {}
        self.state: TaskState | None = None

    def _run(
        self,
        state: TaskState,
        started_at: datetime,
        inputs: Mapping[str, AssetDeclaration],
        outputs: tuple[AssetDeclaration, ...],
        error: str | None,
    ) -> TaskRun:
        return TaskRun(
            key=self.context.key,
            state=state,
            started_at=started_at,
            ended_at=self.clock() if state.is_terminal else None,
            inputs=tuple(inputs.values()),
            outputs=outputs,
            job=JOB,
            error=error,
        )

    def _record_running(self, inputs: dict[str, AssetDeclaration], definition: AssetDefinition | None) -> None:
        """Record the run as started, with ``inputs``, and the definition of its branch. The
        recorder takes the inputs and the start only once the catalog has them: a refused call
        leaves the task run as it was."""
        if self.state is not None:
            raise BridgeError(f"the task run of {self.context.pathspec} has already ended ({self.state.value})")
        now = self.clock()
        started_at = self.started_at or now
        scope = self.context.scope
        with Catalog(self.catalog_path, naming=self.naming) as catalog:
            updates = []
            if definition is not None:
                stored = catalog.get_asset(scope.catalog_id(definition.kind, definition.id))
                updates.append(definition_declaration(definition, scope, stored))
            catalog.record([self._run(TaskState.RUNNING, started_at, inputs, (), None)], updates, now=now)
        self.started_at, self.inputs = started_at, inputs

    def read(self, definition: AssetDefinition, scope: Scope | None = None) -> None:
        """Record a read of the asset on this task's branch, or on another one (``scope``), whose
        definition this task leaves alone."""
        own = scope is None or scope == self.context.scope
        catalog_id = (scope or self.context.scope).catalog_id(definition.kind, definition.id)
        inputs = {**self.inputs, catalog_id: AssetDeclaration.create(catalog_id)}
        self._record_running(inputs, definition if own else None)

    def write(
        self,
        definition: AssetDefinition,
        artifact: str,
        annotations: Mapping[str, Any] | None,
        tags: Mapping[str, Any] | Iterable[str] | None,
    ) -> None:
        pointers = {"pathspec": self.context.pathspec, "artifact": artifact, "runId": self.context.run_id}
        instance_metadata(None, pointers, annotations, tags)  # checked now, so the call fails, not the end
        self._record_running(self.inputs, definition)
        catalog_id = self.context.scope.catalog_id(definition.kind, definition.id)
        self.outputs[catalog_id] = _Output(pointers, annotations, tags)

    def end(self, state: TaskState | None = None, error: str | None = None) -> TaskState | None:
        """End the task run: with ``state``, or Metaflow's verdict on the task. None when no call was
        recorded: there is no task run to end, and the catalog is left alone."""
        if self.state is not None:
            return self.state
        if self.started_at is None:
            return None
        if state is None:
            state, error = self.outcome(self.context)
        outputs = []
        with Catalog(self.catalog_path, naming=self.naming) as catalog:
            for catalog_id, out in self.outputs.items():
                stored = catalog.get_asset(catalog_id)
                metadata = instance_metadata(stored, out.pointers, out.annotations, out.tags)
                outputs.append(AssetDeclaration.create(catalog_id, metadata=metadata))
            result = catalog.record_task_run(self._run(state, self.started_at, self.inputs, tuple(outputs), error))
        self.state = result.state
        return result.state


_active: StepRecorder | None = None  # the task run of the task this process runs
_exit_hooked: list[bool] = []  # whether _end_active is registered to run at exit


def _end_active() -> None:
    global _active
    recorder, _active = _active, None
    if recorder is None:
        return
    try:
        recorder.end()
    except BridgeError as exc:
        print(f"olbridge: could not end the task run of {recorder.context.pathspec}: {exc}", file=sys.stderr)


def _recorder(context: StepContext) -> StepRecorder:
    """The task run of this task; it ends when the task process exits (Metaflow runs one task a
    process), or when a call comes from another task."""
    global _active
    if _active is not None and _active.context.key != context.key:
        _end_active()
    if _active is None:
        if not _exit_hooked:  # registered with the first task run, not by every import of this module
            atexit.register(_end_active)  # ends the task run when the task process exits
            _exit_hooked.append(True)
        _active = StepRecorder(context, catalog_path(os.environ), naming=catalog_naming(os.environ))
    return _active


def _context() -> StepContext:
    from metaflow.metaflow_current import current

    return context_from(current, os.environ)


def _definition(name: str, kind: str, context: StepContext, assets_dir: str | Path | None) -> AssetDefinition:
    root = assets_dir if assets_dir is not None else os.environ.get(ENV_ASSETS)
    return find_definition(name, kind, context.flow_dir, Path(root) if root else None)


def _register(
    kind: str,
    name: str,
    artifact: str,
    annotations: Mapping[str, Any] | None,
    tags: Mapping[str, Any] | Iterable[str] | None,
    assets_dir: str | Path | None,
) -> None:
    if not isinstance(artifact, str) or not _ARTIFACT_RE.fullmatch(artifact):
        raise ValidationError(
            f"artifact is the name of a step artifact (self.<name>), not {artifact!r}", rule="metaflow.artifact"
        )
    context = _context()
    definition = _definition(name, kind, context, assets_dir)
    _recorder(context).write(definition, artifact, annotations, tags)


def _consume(
    kind: str, name: str, branch: str | None, assets_dir: str | Path | None, *, load: bool
) -> tuple[AssetReference, Any]:
    context = _context()
    definition = _definition(name, kind, context, assets_dir)
    scope = make_scope(context.scope.project, branch) if branch else context.scope
    with Catalog(catalog_path(os.environ)) as catalog:
        stored = catalog.get_asset(scope.catalog_id(kind, definition.id))
    reference = _reference(definition, scope, stored)
    value = None
    if load:
        if reference.pathspec is None or reference.artifact is None:
            raise NotFoundError(
                f"{kind} asset {definition.id!r} has no instance on branch {scope.branch} "
                "(register one with register_data / register_model first)"
            )
        value = load_artifact(reference.pathspec, reference.artifact)
    _recorder(context).read(definition, scope)
    return reference, value


def _reference(definition: AssetDefinition, scope: Scope, stored: Asset | None) -> AssetReference:
    metadata = stored.metadata if stored is not None and not stored.is_deleted else {}
    pathspec, artifact = metadata.get(f"{INSTANCE_PREFIX}pathspec"), metadata.get(f"{INSTANCE_PREFIX}artifact")
    return AssetReference(
        id=definition.id,
        kind=definition.kind,
        catalog_id=scope.catalog_id(definition.kind, definition.id),
        namespace=scope.namespace,
        name=definition.name,
        description=definition.description,
        properties=dict(definition.properties),
        annotations={k[len(ANNOTATION_PREFIX) :]: v for k, v in metadata.items() if k.startswith(ANNOTATION_PREFIX)},
        tags=metadata.get(TAGS_KEY),
        pathspec=str(pathspec) if pathspec is not None else None,
        artifact=str(artifact) if artifact is not None else None,
    )


# ---------------------------------------------------------------------------------------------
# the helpers


def register_data(
    name: str,
    artifact: str,
    annotations: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | Iterable[str] | None = None,
    *,
    assets_dir: str | Path | None = None,
) -> None:
    """Register a new instance of data asset ``name``: it points to artifact ``self.<artifact>`` of
    this task. Written when the task ends well."""
    _register("data", name, artifact, annotations, tags, assets_dir)


def register_model(
    name: str,
    artifact: str,
    annotations: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | Iterable[str] | None = None,
    *,
    assets_dir: str | Path | None = None,
) -> None:
    """Register a new instance of model asset ``name`` (see :func:`register_data`)."""
    _register("model", name, artifact, annotations, tags, assets_dir)


def get_data(name: str, *, branch: str | None = None, assets_dir: str | Path | None = None) -> Any:
    """The value of the artifact the latest instance of data asset ``name`` points to; this task
    is recorded as reading the asset. ``branch`` reads another branch's instance (``"main"`` while
    developing)."""
    return _consume("data", name, branch, assets_dir, load=True)[1]


def get_model(name: str, *, branch: str | None = None, assets_dir: str | Path | None = None) -> Any:
    """The value of the artifact the latest instance of model asset ``name`` points to."""
    return _consume("model", name, branch, assets_dir, load=True)[1]


def consume_data_asset(name: str, *, branch: str | None = None, assets_dir: str | Path | None = None) -> AssetReference:
    """Record a read of data asset ``name`` without loading anything (an external asset: an S3
    path, a table); returns what the catalog knows of it."""
    return _consume("data", name, branch, assets_dir, load=False)[0]


def consume_model_asset(
    name: str, *, branch: str | None = None, assets_dir: str | Path | None = None
) -> AssetReference:
    """Record a read of model asset ``name`` without loading anything."""
    return _consume("model", name, branch, assets_dir, load=False)[0]


__all__ = [
    "AssetReference",
    "StepContext",
    "StepRecorder",
    "consume_data_asset",
    "consume_model_asset",
    "get_data",
    "get_model",
    "register_data",
    "register_model",
]
