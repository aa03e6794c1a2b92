"""The asset model: ids, types, namespaces, metadata, task runs and their usages.

Every rule of the model lives here, as a validator that raises :class:`ValidationError` naming the
rule and the offending value. Records are frozen attrs classes; times are aware UTC datetimes.
"""

from __future__ import annotations

import enum
import math
import operator
import re
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from bridge.errors import ValidationError

if TYPE_CHECKING:
    from bridge.column_lineage import ColumnEdge, ColumnLineage

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# ids

ID_NAME_MAX = 150
ID_URI_MAX = 512
_ID_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_URI_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_URI_FORBIDDEN = set("<>#?%")


class IdForm(enum.StrEnum):
    NAME = "name"
    URI = "uri"


def id_form(asset_id: object, where: str = "id") -> IdForm:
    """Check an asset id and tell which of the two forms it has.

    Name form (Kestra): letters, digits, ``.``, ``_``, ``:``, ``-``, first character a letter or a
    digit, at most 150 characters. URI form (Prefect): ``scheme://...``, at most 512 characters, no
    whitespace and none of ``< > # ? %``.
    """
    if not isinstance(asset_id, str) or not asset_id:
        raise ValidationError("an asset id must be a non-empty string", rule="id.required", value=asset_id, where=where)
    scheme = _URI_SCHEME_RE.match(asset_id)
    if scheme:
        if len(asset_id) > ID_URI_MAX:
            raise ValidationError(
                f"a URI-form id has at most {ID_URI_MAX} characters, this one has {len(asset_id)}",
                rule="id.uri.length",
                value=asset_id,
                where=where,
            )
        rest = asset_id[scheme.end() :]
        if not rest:
            raise ValidationError(
                f"a URI-form id needs something after '{scheme.group(0)}': {asset_id!r}",
                rule="id.uri.empty",
                value=asset_id,
                where=where,
            )
        bad = sorted({c for c in asset_id if c.isspace() or c in _URI_FORBIDDEN or not c.isprintable()})
        if bad:
            shown = ", ".join(repr(c) for c in bad)
            raise ValidationError(
                f"a URI-form id may not contain whitespace or any of < > # ? %; found {shown} in {asset_id!r}",
                rule="id.uri.characters",
                value=asset_id,
                where=where,
            )
        return IdForm.URI
    if len(asset_id) > ID_NAME_MAX:
        raise ValidationError(
            f"a name-form id has at most {ID_NAME_MAX} characters, this one has {len(asset_id)}",
            rule="id.name.length",
            value=asset_id,
            where=where,
        )
    if not _ID_NAME_RE.fullmatch(asset_id):
        raise ValidationError(
            "a name-form id has only letters, digits, '.', '_', ':' and '-', and starts with a letter "
            f"or digit (or is a URI such as s3://bucket/key): {asset_id!r}",
            rule="id.name.characters",
            value=asset_id,
            where=where,
        )
    return IdForm.NAME


def is_uri_id(asset_id: str) -> bool:
    """Whether an id (already checked) has the URI form."""
    return _URI_SCHEME_RE.match(asset_id) is not None


def check_id(asset_id: object, where: str = "id") -> str:
    id_form(asset_id, where)
    assert isinstance(asset_id, str)
    return asset_id


def slugify(text: str, max_length: int = ID_NAME_MAX) -> str:
    """A valid name-form id built from free text: ``"Sales Report (EU) 2025"`` → ``sales-report-eu-2025``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9._:-]+", "-", ascii_text)
    slug = re.sub(r"-{2,}", "-", slug).strip("-._:")
    slug = slug[:max_length].rstrip("-._:")
    if not slug:
        raise ValidationError(
            f"cannot build an id from {text!r}: nothing usable is left", rule="id.slugify", value=text
        )
    return slug


# ---------------------------------------------------------------------------------------------
# types

SHORT_TYPES = ("Table", "File", "Dataset", "VM", "Model", "External")
EXTERNAL = "External"
KESTRA_TYPE_ALIASES = {
    "io.kestra.plugin.ee.assets.Table": "Table",
    "io.kestra.plugin.ee.assets.File": "File",
    "io.kestra.plugin.ee.assets.Dataset": "Dataset",
    "io.kestra.plugin.ee.assets.VM": "VM",
    "io.kestra.plugin.ee.assets.Model": "Model",
    "io.kestra.core.models.assets.External": "External",
    "io.kestra.plugin.ee.assets.External": "External",
    # the class names of Kestra's core, which its serialized assets carry
    "io.kestra.core.models.assets.Table": "Table",
    "io.kestra.core.models.assets.File": "File",
    "io.kestra.core.models.assets.Dataset": "Dataset",
    "io.kestra.core.models.assets.VM": "VM",
}
# Kestra's typed assets mirror some metadata keys as properties of their own (a Table's
# ``system: duckdb`` is its ``metadata.system``).
KESTRA_TYPED_PROPERTIES = {
    "Table": ("system", "database", "schema", "name"),
    "File": ("system", "path"),
    "Dataset": ("system", "location", "format"),
    "VM": ("provider", "region", "state"),
}
_CUSTOM_TYPE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
_TYPE_MAX = 255


def normalize_type(value: object, where: str = "type") -> str:
    """The canonical type: a short name, a Kestra class name's short name, or a custom dotted type."""
    if not isinstance(value, str) or not value:
        raise ValidationError(
            "an asset type must be a non-empty string", rule="type.required", value=value, where=where
        )
    if value in SHORT_TYPES:
        return value
    if value in KESTRA_TYPE_ALIASES:
        return KESTRA_TYPE_ALIASES[value]
    for short in SHORT_TYPES:
        if value.lower() == short.lower():
            raise ValidationError(
                f"unknown asset type {value!r}; types are case-sensitive, did you mean {short!r}?",
                rule="type.case",
                value=value,
                where=where,
            )
    if len(value) <= _TYPE_MAX and _CUSTOM_TYPE_RE.fullmatch(value):
        return value
    raise ValidationError(
        f"unknown asset type {value!r}: use one of {', '.join(SHORT_TYPES)}, a Kestra class name such as "
        "io.kestra.plugin.ee.assets.Table, or a custom dotted type such as company.infra.Snapshot",
        rule="type.unknown",
        value=value,
        where=where,
    )


# ---------------------------------------------------------------------------------------------
# namespaces

NAMESPACE_MAX = 150
_NAMESPACE_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")


def check_namespace(value: object, where: str = "namespace") -> str | None:
    """A namespace, or None for a Global asset."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("a namespace must be a string", rule="namespace.type", value=value, where=where)
    if len(value) > NAMESPACE_MAX:
        raise ValidationError(
            f"a namespace has at most {NAMESPACE_MAX} characters, this one has {len(value)}",
            rule="namespace.length",
            value=value,
            where=where,
        )
    if not _NAMESPACE_RE.fullmatch(value):
        raise ValidationError(
            f"a namespace matches [a-z0-9][a-z0-9._-]* (lower case, digits, '.', '_', '-'): {value!r}",
            rule="namespace.characters",
            value=value,
            where=where,
        )
    return value


# ---------------------------------------------------------------------------------------------
# metadata

METADATA_KEY_MAX = 255


def check_metadata(value: object, where: str = "metadata", *, allow_null: bool = False) -> dict[str, Any]:
    """A flat map of string keys to scalars. With ``allow_null`` (updates), null means 'remove the key'."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"metadata must be an object of keys to scalar values, not {type(value).__name__}",
            rule="metadata.type",
            value=value,
            where=where,
        )
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > METADATA_KEY_MAX or "\x00" in key:
            raise ValidationError(
                f"metadata keys are non-empty strings of at most {METADATA_KEY_MAX} characters: {key!r}",
                rule="metadata.key",
                value=key,
                where=where,
            )
        if item is None:
            if not allow_null:
                raise ValidationError(
                    f"metadata key {key!r} is null; null only removes a key in an update",
                    rule="metadata.null",
                    value=item,
                    where=f"{where}.{key}",
                )
        elif isinstance(item, Mapping | list | tuple | set):
            raise ValidationError(
                f"metadata is flat: key {key!r} holds a {type(item).__name__}; keep values scalar "
                "(environment: prod, not labels: {environment: prod})",
                rule="metadata.nested",
                value=item,
                where=f"{where}.{key}",
            )
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValidationError(
                f"metadata key {key!r} holds {item}, which JSON cannot carry",
                rule="metadata.number",
                value=item,
                where=f"{where}.{key}",
            )
        elif isinstance(item, str) and "\x00" in item:
            raise ValidationError(
                f"metadata key {key!r} holds a NUL character", rule="metadata.nul", value=item, where=f"{where}.{key}"
            )
        elif not isinstance(item, str | int | float | bool):
            raise ValidationError(
                f"metadata key {key!r} holds a {type(item).__name__}; values are strings, numbers or booleans",
                rule="metadata.scalar",
                value=item,
                where=f"{where}.{key}",
            )
        out[key] = item
    return out


def metadata_text(value: Any) -> str:
    """How a metadata value reads in filters and name templates: as a string (true/false for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def merge_metadata(stored: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Merge an update over stored metadata; a key sent with null is removed."""
    merged = dict(stored)
    for key, value in update.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return dict(sorted(merged.items()))


def check_text(value: object, where: str, max_length: int = 100_000) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("must be a string", rule="text.type", value=value, where=where)
    if len(value) > max_length:
        raise ValidationError(f"has at most {max_length} characters", rule="text.length", value=value, where=where)
    if "\x00" in value:
        raise ValidationError("may not contain a NUL character", rule="text.nul", value=value, where=where)
    return value


def check_key_part(value: object, where: str, max_length: int = 512) -> str:
    """A part of a task run's key (flow id, task id, execution id ...): a non-empty printable string."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("must be a non-empty string", rule="key.required", value=value, where=where)
    if len(value) > max_length or not value.isprintable():
        raise ValidationError(
            f"must be printable and at most {max_length} characters", rule="key.characters", value=value, where=where
        )
    return value


# ---------------------------------------------------------------------------------------------
# times


def format_time(moment: datetime) -> str:
    """The one text form of a time: UTC, microseconds, ``Z`` (``2025-01-31T12:00:00.000000Z``);
    it sorts as the time does."""
    utc = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    return utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def epoch_text(seconds: float) -> str:
    """:func:`format_time` of a time given in seconds since the epoch (a clock's reading)."""
    return format_time(datetime.fromtimestamp(seconds, UTC))


def parse_time(value: object, where: str, *, assume_utc: bool = False) -> datetime:
    """An ISO 8601 time with an offset (``Z`` or ``+01:00``). With ``assume_utc``, a bare date or a
    time without offset is read as UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ValidationError(
                f"not an ISO 8601 time: {value!r} (expected e.g. 2025-01-31T12:00:00Z)",
                rule="time.format",
                value=value,
                where=where,
            ) from None
    else:
        raise ValidationError(
            f"a time must be an ISO 8601 string, not {value!r}", rule="time.type", value=value, where=where
        )
    if moment.tzinfo is None:
        if not assume_utc:
            raise ValidationError(
                f"time {value!r} has no UTC offset; add 'Z' or '+00:00'", rule="time.offset", value=value, where=where
            )
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_window(
    since: str | None, until: str | None, *, names: tuple[str, str] = ("--since", "--until")
) -> tuple[datetime | None, datetime | None]:
    """A time window [since, until), each end optional and read as :func:`parse_time` with
    ``assume_utc``; a window whose start is not before its end is refused."""
    start = parse_time(since, names[0], assume_utc=True) if since else None
    end = parse_time(until, names[1], assume_utc=True) if until else None
    if start is not None and end is not None and start >= end:
        raise ValidationError(
            f"{names[0]} {since} is not before {names[1]} {until}: the window is empty",
            rule="time.window",
            value=(since, until),
        )
    return start, end


# ---------------------------------------------------------------------------------------------
# records


class Origin(enum.StrEnum):
    DECLARED = "declared"  # declared by a task run or set by a user
    AUTO = "auto"  # emitted by an adapter (dbt's enableAuto)
    EXTERNAL = "external"  # a placeholder: read by a flow, produced by none of ours


def pickles_as_tuple(cls: type[T]) -> type[T]:
    """Pickle a slotted attrs class as the tuple of its fields rather than a dict of them: about
    a third less time both ways, which counts where the receiver's workers hand events to its
    writer process."""
    names = tuple(field.name for field in attrs.fields(cls))  # type: ignore[arg-type]
    values = operator.attrgetter(*names)
    setter = object.__setattr__

    def getstate(self: T) -> tuple[Any, ...]:
        state = values(self)
        return state if isinstance(state, tuple) else (state,)

    def setstate(self: T, state: tuple[Any, ...]) -> None:
        for name, value in zip(names, state, strict=True):
            setter(self, name, value)

    setattr(cls, "__getstate__", getstate)  # noqa: B010 (a method on a class made elsewhere)
    setattr(cls, "__setstate__", setstate)  # noqa: B010
    return cls


@pickles_as_tuple
@attrs.frozen
class Column:
    name: str
    type: str | None = None
    description: str | None = None


@attrs.frozen
class Assertion:
    """A data-quality test on an asset (a dbt test), as its last run reported it."""

    assertion: str
    success: bool
    name: str | None = None
    column: str | None = None
    severity: str | None = None


@attrs.frozen
class Identifier:
    """Another name of a dataset, as a producer's ``symlinks`` facet gives it."""

    namespace: str
    name: str
    type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "type": self.type}


@attrs.frozen
class Asset:
    id: str
    type: str
    namespace: str | None
    origin: Origin
    created_at: datetime
    updated_at: datetime
    display_name: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    deleted_at: datetime | None = None
    columns: tuple[Column, ...] = ()
    assertions: tuple[Assertion, ...] = ()
    # what producers said of an External placeholder, read beside it (never part of its record):
    # the latest of each dataset facet they sent, and every symlink identifier they gave
    received_facets: Mapping[str, Any] = attrs.field(factory=dict, eq=False)
    identifiers: tuple[Identifier, ...] = attrs.field(default=(), eq=False)

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    def to_json(self) -> dict[str, Any]:
        """The record as ``assets list --json`` prints it."""
        out: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "namespace": self.namespace,
            "displayName": self.display_name,
            "description": self.description,
            "metadata": dict(self.metadata),
            "origin": self.origin.value,
            "created": format_time(self.created_at),
            "updated": format_time(self.updated_at),
            "deleted": format_time(self.deleted_at) if self.deleted_at else None,
        }
        if self.columns:
            out["columns"] = [attrs.asdict(c) for c in self.columns]
        if self.identifiers:
            out["identifiers"] = [i.to_json() for i in self.identifiers]
        if self.received_facets:
            out["facets"] = dict(self.received_facets)
        return out


@attrs.frozen
class Statistics:
    """What a task run wrote to an output: row count, size in bytes, file count."""

    row_count: int | None = None
    size: int | None = None
    file_count: int | None = None

    def is_empty(self) -> bool:
        return self.row_count is None and self.size is None and self.file_count is None


@attrs.frozen
class AssetDeclaration:
    """An asset as a task run declares it: ``{id, type, namespace, displayName, description, metadata}``.

    For an input only the id is needed. An output without a type keeps the stored asset's type; a
    new output needs one.
    """

    id: str
    type: str | None = None
    namespace: str | None = None
    display_name: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict)
    columns: tuple[Column, ...] = ()
    assertions: tuple[Assertion, ...] | None = None
    statistics: Statistics = Statistics()
    # an output's column lineage (bridge.column_lineage): its columns from the run's input columns
    column_lineage: ColumnLineage | None = None

    @classmethod
    def create(
        cls,
        id: str,
        type: str | None = None,
        namespace: str | None = None,
        display_name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        columns: Iterable[Column] = (),
        assertions: Iterable[Assertion] | None = None,
        statistics: Statistics | None = None,
        column_lineage: ColumnLineage | None = None,
    ) -> AssetDeclaration:
        """A declaration whose every field is checked (a column lineage is checked against the
        run's inputs when the run is, see :func:`check_task_run`)."""
        columns = tuple(columns)
        names = [c.name for c in columns]
        duplicate = next((n for n in names if names.count(n) > 1), None)
        if duplicate is not None:
            raise ValidationError(f"column {duplicate!r} is listed twice", rule="columns.duplicate", where="columns")
        return cls(
            id=check_id(id),
            type=normalize_type(type) if type is not None else None,
            namespace=check_namespace(namespace),
            display_name=check_text(display_name, "displayName", 1000),
            description=check_text(description, "description"),
            metadata=check_metadata(metadata, allow_null=True),
            columns=columns,
            assertions=tuple(assertions) if assertions is not None else None,
            statistics=statistics or Statistics(),
            column_lineage=column_lineage,
        )


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
# the same, of AssetDeclaration
DECLARATION_LATER_FIELDS = frozenset({"column_lineage"})


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
    """The rules a task run keeps whatever the catalog holds."""
    if run.outputs and not run.state.is_terminal:
        raise ValidationError(
            f"outputs are written when a task run ends; state {run.state.value} has not ended",
            rule="taskrun.outputs",
            value=run.state.value,
            where="outputs",
        )
    if run.ended_at is not None and run.ended_at < run.started_at:
        raise ValidationError(
            "a task run cannot end before it starts",
            rule="taskrun.times",
            value=format_time(run.ended_at),
            where="endDate",
        )
    if run.state.is_terminal and run.ended_at is None:
        raise ValidationError(
            f"state {run.state.value} ends the task run, so it needs an end time", rule="taskrun.times", where="endDate"
        )
    from bridge.column_lineage import check_declared  # it imports this module's id rules

    for index, decl in enumerate(run.inputs):
        if decl.column_lineage is not None:
            raise ValidationError(
                "column lineage belongs to an output: it says where the output's columns come from",
                rule="columnLineage.input",
                where=f"inputs[{index}].columnLineage",
            )
    input_ids = [d.id for d in run.inputs]
    for index, decl in enumerate(run.outputs):
        if decl.column_lineage is not None:
            check_declared(
                decl.column_lineage,
                output_id=decl.id,
                output_columns=[c.name for c in decl.columns] if decl.columns else None,
                input_ids=input_ids,
                where=f"outputs[{index}].columnLineage",
            )


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

    @property
    def inputs(self) -> tuple[StoredUsage, ...]:
        return tuple(u for u in self.usages if u.direction == "input")

    @property
    def outputs(self) -> tuple[StoredUsage, ...]:
        return tuple(u for u in self.usages if u.direction == "output")


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


@attrs.frozen
class AssetChange:
    """A change to an asset outside any task run (a metadata-only update or a delete), with the
    asset as it was just after the change. It becomes a DatasetEvent."""

    seq: int
    kind: str  # "update" | "delete"
    changed_at: datetime
    asset: Asset


def utcnow() -> datetime:
    """The clock of the CLI and the recording API (never called by conversion)."""
    return datetime.now(UTC)
