"""The catalog's questions and the records its answers come in: asset queries (metadata filters,
Kestra's ``metadataQuery``, and purge criteria), the history filter every history reader takes, and
the records of an asset's usages and of the receiver's external runs."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.errors import ValidationError
from bridge.jsonkeys import camel_keys
from bridge.model import StoredDeclaredJob, check_id, check_namespace, format_time, metadata_text, normalize_type


class Operator(enum.StrEnum):
    EQUAL_TO = "EQUAL_TO"
    NOT_EQUAL_TO = "NOT_EQUAL_TO"
    IS_ONE_OF = "IS_ONE_OF"
    IS_NOT_ONE_OF = "IS_NOT_ONE_OF"
    CONTAINS = "CONTAINS"


@attrs.frozen
class MetadataFilter:
    """``{field, type, value}``: IS_ONE_OF and IS_NOT_ONE_OF take a list (or a comma-separated string)."""

    field: str
    operator: Operator
    values: tuple[str, ...]

    @classmethod
    def create(cls, field: object, operator: object, value: object, where: str = "metadataQuery") -> MetadataFilter:
        if not isinstance(field, str) or not field:
            raise ValidationError("a metadata filter needs a field name", rule="query.field", value=field, where=where)
        try:
            op = Operator(str(operator).upper())
        except ValueError:
            raise ValidationError(
                f"unknown filter type {operator!r}; one of {', '.join(o.value for o in Operator)}",
                rule="query.type",
                value=operator,
                where=where,
            ) from None
        if isinstance(value, list | tuple):
            values = tuple(metadata_text(v) for v in value)
        elif value is None:
            raise ValidationError("a metadata filter needs a value", rule="query.value", value=value, where=where)
        elif op in (Operator.IS_ONE_OF, Operator.IS_NOT_ONE_OF) and isinstance(value, str):
            values = tuple(v.strip() for v in value.split(","))
        else:
            values = (metadata_text(value),)
        if op not in (Operator.IS_ONE_OF, Operator.IS_NOT_ONE_OF) and len(values) != 1:
            raise ValidationError(f"{op.value} takes one value", rule="query.value", value=value, where=where)
        return cls(field, op, values)

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        present = self.field in metadata
        text = metadata_text(metadata[self.field]) if present else None
        if self.operator is Operator.EQUAL_TO:
            return text == self.values[0]
        if self.operator is Operator.NOT_EQUAL_TO:
            return text != self.values[0]
        if self.operator is Operator.IS_ONE_OF:
            return text in self.values
        if self.operator is Operator.IS_NOT_ONE_OF:
            return text not in self.values
        return text is not None and self.values[0] in text


@attrs.frozen
class AssetQuery:
    """Which assets to list. A namespace filter never matches a Global asset."""

    types: tuple[str, ...] = ()
    namespace: str | None = None
    metadata: tuple[MetadataFilter, ...] = ()
    ids: tuple[str, ...] = ()
    include_deleted: bool = False
    updated_before: datetime | None = None
    after: str | None = None  # the ids after this one
    limit: int | None = None  # at most so many (None: all)

    @classmethod
    def create(
        cls,
        *,
        types: Iterable[str] = (),
        namespace: str | None = None,
        metadata: Sequence[MetadataFilter] = (),
        ids: Iterable[str] = (),
        include_deleted: bool = False,
        updated_before: datetime | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> AssetQuery:
        return cls(
            types=tuple(dict.fromkeys(normalize_type(t) for t in types)),
            namespace=check_namespace(namespace),
            metadata=tuple(metadata),
            ids=tuple(dict.fromkeys(check_id(i, lookup=True) for i in ids)),
            include_deleted=include_deleted,
            updated_before=updated_before,
            after=after,
            limit=limit,
        )

    @property
    def is_empty(self) -> bool:
        return not (self.types or self.namespace or self.metadata or self.ids or self.updated_before)


@attrs.frozen
class PurgeResult:
    assets: int
    usages: int
    lineage: int
    ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"assets": self.assets, "usages": self.usages, "lineage": self.lineage, "ids": list(self.ids)}


RUN_FILTERS = ("since", "until", "namespace", "flow", "asset")  # a task run's, in placeholder order
CHANGE_FILTERS = ("since", "until", "namespace", "asset")  # an asset change's
JOB_FILTERS = ("since", "until", "namespace", "flow")  # a declared job's (its asset: read, then kept)


@attrs.frozen
class HistoryFilter:
    """Which part of the catalog's history to read, as ``export`` and ``backfill`` ask (the CLI's
    ``history_filters`` builds it) and every history reader of :class:`~bridge.catalog.Catalog`
    takes (``iter_task_runs``, ``iter_changes``, ``iter_declared_jobs``, ``count_history``).

    ``since`` and ``until`` bound the time (a run's start, a change's, a job's declaration);
    ``namespace`` is a flow namespace (an asset's, for its changes); ``flow`` a flow id (asset
    changes belong to no flow and are left out); ``asset`` keeps the runs that read or wrote it,
    its changes and the declared jobs that name it."""

    since: datetime | None = None
    until: datetime | None = None
    namespace: str | None = None
    flow: str | None = None
    asset: str | None = None

    def given(self, names: Sequence[str]) -> dict[str, bool]:
        """Which of the filters ``names`` are set, as :mod:`bridge.catalog.sql`'s statements take them."""
        return {name: getattr(self, name) is not None for name in names}

    def params(self, names: Sequence[str]) -> list[Any]:
        """The values of the filters ``names`` that are set, in order: their statement's parameters."""
        values = (getattr(self, name) for name in names)
        return [format_time(v) if isinstance(v, datetime) else v for v in values if v is not None]

    def keeps(self, declared: StoredDeclaredJob) -> bool:
        """Whether a declared job passes the asset filter: it names the asset (or none is given)."""
        return self.asset is None or self.asset in {d.id for d in (*declared.job.inputs, *declared.job.outputs)}

    def as_json(self) -> dict[str, Any]:
        return {k: format_time(v) if isinstance(v, datetime) else v for k, v in attrs.asdict(self).items()}


@attrs.frozen
class RunUsage:
    """A read or write of an asset by one of olbridge's task runs (:meth:`Catalog.usages_of`)."""

    direction: str
    time: str
    namespace: str
    flow_id: str
    task_id: str
    execution_id: str
    task_run_id: str
    state: str

    def to_json(self) -> dict[str, Any]:
        return camel_keys(attrs.asdict(self))


@attrs.frozen
class ExternalUsage:
    """A read or write of an asset by a job the receiver heard of (:meth:`Catalog.usages_of`)."""

    direction: str
    job_namespace: str
    job_name: str

    def to_json(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "external": True,
            "jobNamespace": self.job_namespace,
            "jobName": self.job_name,
        }


@attrs.frozen
class AssetUsages:
    """An asset's latest uses (:meth:`Catalog.latest_usages`): the latest reads and writes by
    olbridge's task runs, newest first, and the first of the jobs the receiver heard of (by
    namespace and name), each cut to a limit, with how many there are of each."""

    runs: tuple[RunUsage, ...]
    jobs: tuple[ExternalUsage, ...]
    reads: int  # by olbridge's task runs, all of them
    writes: int
    job_reads: int  # by received jobs, all of them
    job_writes: int

    @property
    def left_out(self) -> int:
        return self.reads + self.writes + self.job_reads + self.job_writes - len(self.runs) - len(self.jobs)

    def to_json(self) -> dict[str, Any]:
        """``assets show``'s keys: ``usages`` (the runs' then the jobs'), ``usageCounts`` and
        ``usagesLeftOut``."""
        return {
            "usages": [*(u.to_json() for u in self.runs), *(u.to_json() for u in self.jobs)],
            "usageCounts": {
                "reads": self.reads,
                "writes": self.writes,
                "externalReads": self.job_reads,
                "externalWrites": self.job_writes,
            },
            "usagesLeftOut": self.left_out,
        }


@attrs.frozen
class ExternalSource:
    """An external run (or a job without a run) the receiver took, with the datasets it read and
    wrote (:meth:`Catalog.external_sources`)."""

    source: str
    job_namespace: str
    job_name: str
    run_id: str | None
    parent_run_id: str | None
    state: str | None
    started: str | None
    ended: str | None
    first_seen: str
    last_seen: str
    producer: str | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        record = camel_keys(attrs.asdict(self))
        job = {"namespace": record.pop("jobNamespace"), "name": record.pop("jobName")}
        lists = {"inputs": list(self.inputs), "outputs": list(self.outputs)}
        return {"source": record.pop("source"), "job": job, **record, **lists}
