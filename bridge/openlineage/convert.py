"""Conversion: catalog records in, OpenLineage event dicts out.

Pure: no clock, no randomness, no I/O. The same records give the same events, byte for byte once
serialized (:func:`bridge.openlineage.serialize.dumps`), so exports are reproducible and replays
idempotent.

- A task run becomes a START RunEvent at its start and, once ended, a COMPLETE / FAIL / ABORT one
  at its end. The job is ``<flowId>.<taskId>`` in the flow's namespace (with an optional prefix);
  the flow execution is the parent run (``parent`` facet, with ``root``).
- Run ids are UUIDv7-shaped and derived from the catalog's keys and start time.
- An asset change outside any run (metadata set, delete) becomes a DatasetEvent; a delete carries
  ``lifecycleStateChange: DROP``.
- A task run's column edges become the ``columnLineage`` facet of its outputs
  (:mod:`bridge.openlineage.column_facet`).
- A flow's declared lineage of a task (Kestra's ``assets`` block) becomes a JobEvent for the same
  job its runs name, with the declared inputs and outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from bridge.mapping.resolver import Resolver
from bridge.memo import Memo
from bridge.model import (
    EXTERNAL,
    Asset,
    AssetChange,
    AssetDeclaration,
    JobInfo,
    Origin,
    StoredDeclaredJob,
    StoredTaskRun,
    StoredUsage,
    TaskRunKey,
    TaskState,
    format_time,
    merge_metadata,
)
from bridge.openlineage import facets as f
from bridge.openlineage.column_facet import run_datasets
from bridge.openlineage.run_ids import static_uuid
from bridge.openlineage.serialize import dumps
from bridge.version import PRODUCER, __version__

# A received dataset's facets that are statements about the producer's run, not about the
# dataset: kept beside its placeholder (``assets show``, health), never passed on in the events
# of olbridge's runs, whose datasets they would then describe. By the spec's kinds of facet:
# - dataset facets that say what a run did to the dataset: ``lifecycleStateChange`` (it
#   overwrote, dropped it), ``columnLineage`` and ``lineage`` (the run's lineage into it, from the
#   run's inputs), ``version`` (the version the run read or wrote, not the one olbridge's run read);
# - the input and output facets, per run by definition (what the run read or wrote, measured or
#   checked): ``inputStatistics``, ``outputStatistics``, ``dataQualityMetrics``,
#   ``dataQualityAssertions``, ``subset``, ``icebergScanReport``, ``icebergCommitReport``, when a
#   producer sent them among the dataset facets (olbridge keeps only those). An asset's own checks
#   still go out as olbridge's ``dataQualityAssertions``, an output's own statistics as its
#   ``outputStatistics``, its own column edges as its ``columnLineage``.
# What describes the dataset (schema, documentation, ownership, dataSource, storage, catalog,
# hierarchy, tags, ...) and custom facets, which no kind tells, are passed on.
EVENT_FACETS = frozenset(
    {
        "lifecycleStateChange",
        "columnLineage",
        "lineage",
        "version",
        "inputStatistics",
        "outputStatistics",
        "dataQualityMetrics",
        "dataQualityAssertions",
        "subset",
        "icebergScanReport",
        "icebergCommitReport",
    }
)


@attrs.frozen
class ConvertOptions:
    producer: str = PRODUCER
    job_namespace_prefix: str = ""


def task_run_id(key: TaskRunKey, started_at: datetime) -> str:
    """The run id of a task run: deterministic, UUIDv7-shaped, time-ordered by start."""
    data = f"olbridge/task-run/{key.flow_namespace}/{key.flow_id}/{key.execution_id}/{key.task_run_id}"
    return static_uuid(started_at, data.encode())


def execution_run_id(key: TaskRunKey, execution_started_at: datetime) -> str:
    """The run id of a flow execution (the parent of its task runs)."""
    data = f"olbridge/execution/{key.flow_namespace}/{key.flow_id}/{key.execution_id}"
    return static_uuid(execution_started_at, data.encode())


class Converter:
    """Turns catalog records into OpenLineage events with one resolver and one set of options.

    It keeps the dataset facets of each asset version it has built, so a long export does not
    build the same facets again; the result is the same with or without that memory."""

    def __init__(self, resolver: Resolver, options: ConvertOptions = ConvertOptions()) -> None:
        self.resolver = resolver
        self.options = options
        # an asset's facets by its version (id, updated_at, deleted): not a placeholder's that
        # carries its producers' facets or identifiers, which change without a new version
        self._datasets: Memo[dict[str, Any]] = Memo(max_entries=50_000)
        self._dataset_text: Memo[str] = Memo(max_entries=50_000)
        self._job_text: Memo[str] = Memo(max_entries=50_000)  # a job's text by task and job info
        self._execution_ids: Memo[str] = Memo(max_entries=1_000)  # runs of an execution start together
        # each placeholder's received facets as passed on (_passed), by the mapping read: an
        # export reads an asset once and names it in many events (a schema's check is ~40 us)
        self._passed: Memo[tuple[Mapping[str, Any], dict[str, Any]]] = Memo(max_entries=10_000)
        self._producer_json = dumps(options.producer)
        self._run_schema_json = dumps(f.RUN_EVENT)

    # --- datasets --------------------------------------------------------------------------

    def dataset(self, asset: Asset) -> dict[str, Any]:
        """``{namespace, name, facets}`` of an asset; the dict is shared, do not change it."""
        if asset.received_facets or asset.identifiers:
            return self._build_dataset(asset)
        key = (asset.id, asset.updated_at, asset.is_deleted)
        found = self._datasets.get(key)
        return found if found is not None else self._datasets.put(key, 0, self._build_dataset(asset))

    def _build_dataset(self, asset: Asset) -> dict[str, Any]:
        producer = self.options.producer
        named = self.resolver.dataset_for(asset.id, asset.type, asset.metadata)
        metadata = asset.metadata
        facets: dict[str, Any] = {}
        kind = f.dataset_kind(asset.type, _text(metadata.get("materialized")), _text(metadata.get("datasetType")))
        if kind is not None:
            facets["datasetType"] = f.dataset_type(producer, kind)
        # the type of olbridge's symlink identifier, and of a producer's that came without one
        symlink_type = kind or f.SYMLINK_TABLE
        facets["dataSource"] = f.data_source(producer, named.namespace)
        if asset.description:
            facets["documentation"] = f.documentation(producer, asset.description)
        owner = _text(metadata.get("owner"))
        if owner:
            facets["ownership"] = f.ownership(producer, [o.strip() for o in owner.split(",") if o.strip()])
        if asset.columns:
            facets["schema"] = f.schema(producer, asset.columns)
        # olbridge's identifier where the name alone would not bring the dataset back to this
        # asset (named otherwise, or named back by the rules as another id: a Kafka topic by its
        # metadata, an s3a:// id exported as s3://)
        if named.name != asset.id or self.resolver.asset_for(named.namespace, named.name).id != asset.id:
            facets["symlinks"] = f.symlinks(producer, self.resolver.default_namespace, asset.id, symlink_type)
        tag_text = _text(metadata.get("tags"))
        if tag_text:
            tag_facet = f.tags(producer, tag_text)
            if tag_facet:
                facets["tags"] = tag_facet
        if asset.assertions:
            facets["dataQualityAssertions"] = f.assertions(producer, asset.assertions)
        facets[f.ASSET_FACET_KEY] = f.asset_record(
            producer,
            asset_id=asset.id,
            asset_type=asset.type,
            namespace=asset.namespace,
            display_name=asset.display_name,
            metadata=metadata,
            origin=asset.origin.value,
        )
        if asset.received_facets or asset.identifiers:
            facets = self._with_received(asset, facets, symlink_type)
        return {"namespace": named.namespace, "name": named.name, "facets": facets}

    def _with_received(self, asset: Asset, own: dict[str, Any], symlink_type: str) -> dict[str, Any]:
        """A placeholder's facets: the ones its producers sent (the latest of each) as they sent
        them, olbridge's own where they sent none, the olbridge_asset facet, and ``symlinks``
        naming olbridge's identifier and then every one its producers gave (one given without a
        type typed as olbridge's is: ``symlink_type``)."""
        facets = {**own, **self._passed_facets(asset.received_facets), f.ASSET_FACET_KEY: own[f.ASSET_FACET_KEY]}
        identifiers: dict[tuple[str, str], dict[str, Any]] = {}
        for identifier in (own.get("symlinks") or {}).get("identifiers", ()):
            identifiers[identifier["namespace"], identifier["name"]] = identifier
        # the symlinks facet requires each identifier's type: one its producer gave none (Marquez
        # takes that) is typed as olbridge's own is
        for given in asset.identifiers:
            item = {"namespace": given.namespace, "name": given.name, "type": given.type or symlink_type}
            identifiers.setdefault((given.namespace, given.name), item)
        if identifiers:
            facets["symlinks"] = f.symlinks_of(self.options.producer, list(identifiers.values()))
        return facets

    def _passed_facets(self, received: Mapping[str, Any]) -> dict[str, Any]:
        """The received facets passed on: not what one producer's event said of its own run
        (:data:`EVENT_FACETS`), nor a facet the spec refuses (another producer's fault would make
        every olbridge event invalid). Kept by the mapping itself (held, so its id names no other)."""
        found = self._passed.get(id(received))
        if found is not None and found[0] is received:
            return found[1]
        # imported here, by the catalogs that hold received facets only (an export's start)
        from bridge.openlineage.validate import check_facet

        passed = {
            key: facet
            for key, facet in received.items()
            if key not in EVENT_FACETS and next(check_facet(facet, "DatasetFacet", ""), None) is None
        }
        return self._passed.put(id(received), 0, (received, passed))[1]

    def dataset_json(self, asset: Asset) -> str:
        """:meth:`dataset` serialized, kept per asset version like the dict."""
        if asset.received_facets or asset.identifiers:
            return dumps(self.dataset(asset))
        key = (asset.id, asset.updated_at, asset.is_deleted)
        found = self._dataset_text.get(key)
        return found if found is not None else self._dataset_text.put(key, 0, dumps(self.dataset(asset)))

    def _usage(
        self, usage: StoredUsage, assets: Mapping[str, Asset], when: datetime
    ) -> tuple[Asset, dict[str, Any] | None]:
        """The asset a usage refers to, and its ``outputFacets`` (None when it has none)."""
        asset = assets.get(usage.asset_id) or _purged(usage.asset_id, when)
        if usage.direction == "output" and not usage.statistics.is_empty():
            return asset, {"outputStatistics": f.output_statistics(self.options.producer, usage.statistics)}
        return asset, None

    # --- events ----------------------------------------------------------------------------

    def job_namespace(self, key: TaskRunKey) -> str:
        return self._job_namespace(key.flow_namespace)

    def _job_namespace(self, flow_namespace: str) -> str:
        return f"{self.options.job_namespace_prefix}{flow_namespace}"

    def _execution_run_id(self, key: TaskRunKey, started_at: datetime) -> str:
        """:func:`execution_run_id`, kept per execution: its task runs follow one another."""
        memo_key = (key.flow_namespace, key.flow_id, key.execution_id, started_at)
        found = self._execution_ids.get(memo_key)
        return found if found is not None else self._execution_ids.put(memo_key, 0, execution_run_id(key, started_at))

    def _job(self, namespace: str, key: TaskRunKey, info: JobInfo) -> dict[str, Any]:
        """The ``job`` of a task run's events."""
        producer = self.options.producer
        job_facets: dict[str, Any] = {"jobType": f.job_type(producer, info.integration, info.job_type)}
        if info.sql:
            job_facets["sql"] = f.sql(producer, info.sql)
        if info.description:
            job_facets["documentation"] = f.job_documentation(producer, info.description)
        kestra = {"kestra.tenantId": info.tenant_id, "kestra.flowRevision": info.flow_revision}
        if any(v is not None for v in kestra.values()):
            tags = {k: str(v) for k, v in kestra.items() if v is not None}
            job_facets["tags"] = f.job_tags(producer, tags, info.integration)
        return {"namespace": namespace, "name": f"{key.flow_id}.{key.task_id}", "facets": job_facets}

    def _job_json(self, run: StoredTaskRun) -> str:
        """:meth:`_job` serialized, kept per task and job info (the same for every run of a task)."""
        key = run.key
        namespace = self.job_namespace(key)
        memo_key = (namespace, key.flow_id, key.task_id, run.job)
        found = self._job_text.get(memo_key)
        if found is not None:
            return found
        text = dumps(self._job(namespace, key, run.job))
        return self._job_text.put(memo_key, len(text), text)

    def _envelopes(self, run: StoredTaskRun, *, with_job: bool = True, running: bool = False) -> list[dict[str, Any]]:
        """The RunEvents of a task run without their datasets: START (RUNNING with ``running``: the
        run as it now stands, recorded again while it runs), and the end event once the run has
        ended (without their ``job`` unless ``with_job``)."""
        producer = self.options.producer
        key = run.key
        namespace = self.job_namespace(key)
        run_id = task_run_id(key, run.started_at)
        parent_id = self._execution_run_id(key, run.execution_started_at)
        run_facets: dict[str, Any] = {
            "parent": f.parent(producer, parent_id, namespace, key.flow_id),
            "processing_engine": f.processing_engine(producer, __version__),
        }
        job = self._job(namespace, key, run.job) if with_job else None
        start = {
            "eventTime": format_time(run.started_at),
            "eventType": "RUNNING" if running else "START",
            "producer": producer,
            "schemaURL": f.RUN_EVENT,
            "run": {"runId": run_id, "facets": run_facets},
            "job": job,
        }
        end_type = run.state.run_event_type
        if run.ended_at is None or end_type == "START":
            return [start]
        if run.state in _STATE_UNSAID:  # both events: a skipped run's START names its outputs too
            run_facets[f.TASK_RUN_FACET_KEY] = f.task_run(producer, run.state.value)
        end_facets = run_facets
        if run.error and end_type == "FAIL":
            end_facets = {**run_facets, "errorMessage": f.error_message(producer, run.error)}
        end = {
            **start,
            "eventTime": format_time(run.ended_at),
            "eventType": end_type,
            "run": {"runId": run_id, "facets": end_facets},
        }
        return [start, end]

    def _column_datasets(
        self, run: StoredTaskRun, assets: Mapping[str, Asset]
    ) -> dict[str, dict[str, dict[str, Any]]] | None:
        """The run's datasets that its column edges change (the outputs' ``columnLineage``, the
        columns their ``schema`` facets must list), by direction and asset id; None when none."""
        if not run.column_edges:
            return None
        sides: dict[str, dict[str, dict[str, Any]]] = {"input": {}, "output": {}}
        for usage in run.usages:
            sides[usage.direction][usage.asset_id] = self.dataset(self._usage(usage, assets, run.started_at)[0])
        inputs, outputs = run_datasets(self.options.producer, run.column_edges, sides["input"], sides["output"])
        return {"input": inputs, "output": outputs}

    def run_facets(self, run: StoredTaskRun) -> tuple[dict[str, Any], dict[str, Any]]:
        """The run facets and the job facets of a task run's last event."""
        last = self._envelopes(run)[-1]
        return last["run"]["facets"], last["job"]["facets"]

    def task_run_events(self, run: StoredTaskRun, assets: Mapping[str, Asset]) -> list[dict[str, Any]]:
        """START, and COMPLETE / FAIL / ABORT once the run has ended, for one task run. ``assets``
        holds the asset records its usages refer to."""
        datasets: dict[str, list[dict[str, Any]]] = {"input": [], "output": []}
        changed = self._column_datasets(run, assets)
        for usage in run.usages:
            asset, output_facets = self._usage(usage, assets, run.started_at)
            dataset = self.dataset(asset)
            if changed is not None:
                dataset = changed[usage.direction].get(usage.asset_id, dataset)
            datasets[usage.direction].append({**dataset, "outputFacets": output_facets} if output_facets else dataset)
        datasets["output"] += [self.dataset(asset) for asset in _unwritten(run, assets)]
        return [{**e, "inputs": datasets["input"], "outputs": datasets["output"]} for e in self._envelopes(run)]

    def task_run_lines(self, run: StoredTaskRun, assets: Mapping[str, Asset], *, running: bool = False) -> list[str]:
        """:meth:`task_run_events`, each serialized exactly as :func:`dumps` would: the export
        path, which serializes each dataset once per asset version instead of once per event
        (``running``: the first a RUNNING event, the run as it now stands)."""
        datasets: dict[str, list[str]] = {"input": [], "output": []}
        changed = self._column_datasets(run, assets)
        for usage in run.usages:
            asset, output_facets = self._usage(usage, assets, run.started_at)
            own = changed[usage.direction].get(usage.asset_id) if changed is not None else None
            text = dumps(own) if own is not None else self.dataset_json(asset)
            if output_facets:  # "outputFacets" sorts after "namespace", the dataset's last key
                text = f'{text[:-1]},"outputFacets":{dumps(output_facets)}}}'
            datasets[usage.direction].append(text)
        datasets["output"] += [self.dataset_json(asset) for asset in _unwritten(run, assets)]
        inputs, outputs = ",".join(datasets["input"]), ",".join(datasets["output"])
        envelopes = self._envelopes(run, with_job=False, running=running)
        job = self._job_json(run)
        tail = f',"producer":{self._producer_json},"run":'
        start_run = envelopes[0]["run"]
        start_run_json = dumps(start_run)  # the end event's too, unless its facets differ (an error)
        # eventTime (format_time) and eventType are plain ASCII: no escaping needed
        return [
            f'{{"eventTime":"{e["eventTime"]}","eventType":"{e["eventType"]}","inputs":[{inputs}],"job":{job},'
            f'"outputs":[{outputs}]{tail}'
            f"{start_run_json if e['run']['facets'] is start_run['facets'] else dumps(e['run'])},"
            f'"schemaURL":{self._run_schema_json}}}'
            for e in envelopes
        ]

    def job_event(self, declared: StoredDeclaredJob, assets: Mapping[str, Asset]) -> dict[str, Any]:
        """A JobEvent for a flow's declared lineage of one task: the job ``<flowId>.<taskId>`` in the
        flow's namespace, as its runs name it, with the declared inputs and outputs. ``assets`` holds
        the catalog's records of the declared assets it has; the others are named from their
        declaration (an input without a type as ``External``)."""
        producer = self.options.producer
        job = declared.job
        facets: dict[str, Any] = {"jobType": f.job_type(producer, job.integration, "TASK")}
        if job.description:
            facets["documentation"] = f.job_documentation(producer, job.description)
        datasets: dict[str, list[dict[str, Any]]] = {"inputs": [], "outputs": []}
        for side, decls in (("inputs", job.inputs), ("outputs", job.outputs)):
            for decl in decls:
                stored = assets.get(decl.id)
                if stored is not None:
                    datasets[side].append(self.dataset(stored))
                else:  # not cached: a declaration is no asset version
                    datasets[side].append(self._build_dataset(_declared(decl, declared.declared_at)))
        return {
            "eventTime": format_time(declared.declared_at),
            "producer": producer,
            "schemaURL": f.JOB_EVENT,
            "job": {
                "namespace": self._job_namespace(job.flow_namespace),
                "name": f"{job.flow_id}.{job.task_id}",
                "facets": facets,
            },
            "inputs": datasets["inputs"],
            "outputs": datasets["outputs"],
        }

    def asset_change_event(self, change: AssetChange) -> dict[str, Any]:
        """A DatasetEvent for a change made outside any task run."""
        dataset = self.dataset(change.asset)
        facets = dataset["facets"]
        if change.kind == "delete":
            facets = {**facets, "lifecycleStateChange": f.lifecycle_drop(self.options.producer)}
        return {
            "eventTime": format_time(change.changed_at),
            "producer": self.options.producer,
            "schemaURL": f.DATASET_EVENT,
            "dataset": {"namespace": dataset["namespace"], "name": dataset["name"], "facets": facets},
        }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _declared(decl: AssetDeclaration, when: datetime) -> Asset:
    """What stands for a declared asset the catalog does not hold (yet)."""
    return Asset(
        id=decl.id,
        type=decl.type or EXTERNAL,
        namespace=decl.namespace,
        origin=Origin.DECLARED if decl.type else Origin.EXTERNAL,
        created_at=when,
        updated_at=when,
        display_name=decl.display_name,
        description=decl.description,
        metadata=merge_metadata({}, decl.metadata),
    )


# the states an event's type does not tell from another (its olbridge_taskRun facet says them)
_STATE_UNSAID = frozenset(
    (TaskState.WARNING, TaskState.RETRIED, TaskState.KILLED, TaskState.CANCELLED, TaskState.SKIPPED)
)


def _unwritten(run: StoredTaskRun, assets: Mapping[str, Asset]) -> list[Asset]:
    """The outputs a run was to write and did not (it FAILed, was killed, cancelled or retried, or
    was skipped), among the datasets of its events, START and end (dbt-ol names a failed model's
    table in its START): the job's outputs in Marquez come from the datasets of its run's events,
    and a run without them would drop the job's edges to its outputs until its next success (a
    skipped run's facet ``olbridge_taskRun`` says it wrote none and failed none). They are
    those the catalog held when the run ended, decided as it was written, so that its events are
    the same whenever they are made, streamed as it ends or exported later (a purged one left out,
    as a purged usage is)."""
    return [asset for asset_id in run.unwritten if (asset := assets.get(asset_id)) is not None]


def _purged(asset_id: str, when: datetime) -> Asset:
    """What stands for an asset that was purged while a usage of it was kept."""
    return Asset(id=asset_id, type=EXTERNAL, namespace=None, origin=Origin.EXTERNAL, created_at=when, updated_at=when)


__all__ = ["ConvertOptions", "Converter", "execution_run_id", "task_run_id"]
