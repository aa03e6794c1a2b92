"""The receiver's decision table (docs/receiver.md), row by row: each row's events go through the
verdict and through the HTTP app, by default and with ``--strict``."""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.mapping import Resolver
from bridge.receiver.app import ReceiverApp
from bridge.receiver.intake import Intake, Limits, Outcome
from bridge.receiver.policy import judge
from tests.group_writer import GroupWriter
from tests.helpers import DATASET_EVENT_URL, JOB_EVENT_URL, RUN_EVENT_URL
from tests.test_receiver_http import TOKEN, Client

ROOT = Path(__file__).resolve().parent.parent
OL = "https://openlineage.io/spec/facets"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/spark"
RUN_ID = "0194a1b2-0000-7000-8000-00000000f00d"


def _facet(version: str, facet: str, /, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": f"{OL}/{version}/{facet}.json#/$defs/{facet}", **fields}


def base_event() -> dict[str, Any]:
    """A RunEvent valid by the spec and by Marquez, with every facet Marquez reads into a class."""
    return {
        "eventType": "COMPLETE",
        "eventTime": "2025-03-01T08:05:00.000Z",
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_URL,
        "run": {
            "runId": RUN_ID,
            "facets": {
                "nominalTime": _facet("1-0-1", "NominalTimeRunFacet", nominalStartTime="2025-03-01T08:00:00Z"),
                "parent": _facet(
                    "1-2-0",
                    "ParentRunFacet",
                    run={"runId": "0194a1b2-0000-7000-8000-00000000beef"},
                    job={"namespace": "airflow", "name": "nightly"},
                ),
                "processing_engine": _facet("1-1-1", "ProcessingEngineRunFacet", version="3.5.1", name="spark"),
            },
        },
        "job": {
            "namespace": "spark-jobs",
            "name": "nightly.load_orders",
            "facets": {
                "documentation": _facet("1-1-0", "DocumentationJobFacet", description="Loads orders"),
                "sourceCodeLocation": _facet(
                    "1-1-0", "SourceCodeLocationJobFacet", type="git", url="https://git.example.com/etl.git"
                ),
                "sql": _facet("1-1-0", "SQLJobFacet", query="INSERT INTO orders SELECT * FROM raw"),
                "jobType": _facet(
                    "2-0-4", "JobTypeJobFacet", processingType="BATCH", integration="SPARK", jobType="SQL_JOB"
                ),
            },
        },
        "inputs": [
            {
                "namespace": "s3://raw-bucket",
                "name": "orders",
                "facets": {
                    "schema": _facet(
                        "1-2-0", "SchemaDatasetFacet", fields=[{"name": "id", "type": "long"}, {"name": "amount"}]
                    ),
                    "dataSource": _facet(
                        "1-0-1", "DatasourceDatasetFacet", name="s3://raw-bucket", uri="s3://raw-bucket"
                    ),
                    "documentation": _facet("1-1-0", "DocumentationDatasetFacet", description="Raw orders"),
                    "symlinks": _facet(
                        "1-0-1",
                        "SymlinksDatasetFacet",
                        identifiers=[{"namespace": "hive://metastore:9083", "name": "raw.orders", "type": "TABLE"}],
                    ),
                },
            }
        ],
        "outputs": [
            {
                "namespace": "s3://warehouse",
                "name": "orders",
                "facets": {
                    "lifecycleStateChange": _facet(
                        "1-0-1", "LifecycleStateChangeDatasetFacet", lifecycleStateChange="OVERWRITE"
                    ),
                    # Marquez keeps column lineage only for columns the output's schema lists
                    "schema": _facet("1-2-0", "SchemaDatasetFacet", fields=[{"name": "id", "type": "long"}]),
                    "columnLineage": _facet(
                        "1-2-0",
                        "ColumnLineageDatasetFacet",
                        fields={
                            "id": {"inputFields": [{"namespace": "s3://raw-bucket", "name": "orders", "field": "id"}]}
                        },
                    ),
                },
                "outputFacets": {
                    "outputStatistics": _facet("1-0-2", "OutputStatisticsOutputDatasetFacet", rowCount=10)
                },
            }
        ],
    }


def dataset_event() -> dict[str, Any]:
    return {
        "eventTime": "2025-03-01T09:00:00Z",
        "producer": PRODUCER,
        "schemaURL": DATASET_EVENT_URL,
        "dataset": {"namespace": "kafka://broker:9092", "name": "orders"},
    }


def job_event() -> dict[str, Any]:
    return {
        "eventTime": "2025-03-01T09:00:00Z",
        "producer": PRODUCER,
        "schemaURL": JOB_EVENT_URL,
        "job": {"namespace": "airflow", "name": "publish"},
        "outputs": [{"namespace": "kafka://broker:9092", "name": "orders"}],
    }


def _set(event: Any, path: str, value: Any) -> Any:
    """``event`` with the value at ``path`` (``a/0/b``) set, or removed when ``value`` is
    KeyError; ``path`` "" replaces the whole event."""
    if path == "":
        return value
    out = copy.deepcopy(event)
    *parents, last = path.split("/")
    target: Any = out
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key: Any = int(last) if isinstance(target, list) else last
    if value is KeyError:
        del target[key]
    else:
        target[key] = value
    return out


RF, JF = "run/facets", "job/facets"
IN, OUT = "inputs/0/facets", "outputs/0/facets"


class Row:
    def __init__(
        self, row: str, name: str, *changes: tuple[str, Any], expect: str, pointer: str | None = None, base: Any = None
    ) -> None:
        self.row, self.name, self.changes, self.expect, self.pointer = row, name, changes, expect, pointer
        self.base = base

    @property
    def id(self) -> str:
        return f"{self.row}-{self.name}"

    def event(self) -> Any:
        event = self.base() if self.base is not None else base_event()
        if isinstance(event, dict) and "job" in event and isinstance(event["job"], dict):
            event["job"]["name"] = self.id  # each row's event differs from every other row's
        if isinstance(event, dict) and isinstance(event.get("run"), dict) and "runId" in event["run"]:
            # and is its own run: one runId named under two jobs is said in a warning
            event["run"]["runId"] = str(uuid.uuid5(uuid.NAMESPACE_URL, self.id))
        for path, value in self.changes:
            event = _set(event, path, value)
        return event


COLUMN_LINEAGE_URL = (
    "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"
)


def _column_lineage_output(read: int) -> dict[str, Any]:
    """An output whose column lineage reads ``read`` datasets the event names nowhere else."""
    fields = {"c": {"inputFields": [{"namespace": "s3://b", "name": f"k{i}", "field": "c"} for i in range(read)]}}
    facet = {"_producer": PRODUCER, "_schemaURL": COLUMN_LINEAGE_URL, "fields": fields}
    return {"namespace": "s3://b", "name": "out", "facets": {"columnLineage": facet}}


ROWS = [
    # --- refused: what Marquez refuses ------------------------------------------------------
    Row("R1", "a-string", ("", "event"), expect="refused", pointer=""),
    Row("R1", "null", ("", None), expect="refused", pointer=""),
    Row("R2", "no-eventTime", ("eventTime", KeyError), expect="refused", pointer=""),
    Row("R2", "no-producer", ("producer", KeyError), expect="refused", pointer=""),
    Row("R2", "no-run", ("run", KeyError), expect="refused", pointer=""),
    Row("R2", "no-runId", ("run/runId", KeyError), expect="refused", pointer="/run"),
    Row("R2", "no-job-namespace", ("job/namespace", KeyError), expect="refused", pointer="/job"),
    Row("R2", "no-dataset-name", ("inputs/0/name", KeyError), expect="refused", pointer="/inputs/0"),
    Row("R2", "dataset-event-without-dataset", ("dataset", KeyError), base=dataset_event, expect="refused", pointer=""),
    Row("R2", "job-event-without-job", ("job", KeyError), base=job_event, expect="refused", pointer=""),
    Row("R3", "bare-date", ("eventTime", "2025-03-01"), expect="refused", pointer="/eventTime"),
    Row("R3", "words", ("eventTime", "yesterday"), expect="refused", pointer="/eventTime"),
    Row("R3", "offset-past-18h", ("eventTime", "2025-03-01T08:00:00+19:00"), expect="refused", pointer="/eventTime"),
    Row("R3", "month-13", ("eventTime", "2025-13-01T08:00:00Z"), expect="refused", pointer="/eventTime"),
    Row("R3", "space-for-T", ("eventTime", "2025-03-01 08:00:00Z"), expect="refused", pointer="/eventTime"),
    # the spec's date-time takes any digits of a second; Marquez's parser nine at most
    Row("R3", "ten-digits", ("eventTime", "2025-03-01T08:00:00.1234567890Z"), expect="refused", pointer="/eventTime"),
    Row("R4", "run-a-string", ("run", "r1"), expect="refused", pointer="/run"),
    Row("R4", "inputs-an-object", ("inputs", {"a": 1}), expect="refused", pointer="/inputs"),
    Row("R4", "dataset-a-string", ("inputs/0", "s3://raw-bucket/orders"), expect="refused", pointer="/inputs/0"),
    Row("R4", "namespace-an-object", ("job/namespace", {"n": 1}), expect="refused", pointer="/job/namespace"),
    Row("R5", "runId-a-number", ("run/runId", 42), expect="refused", pointer="/run/runId"),
    Row("R5", "eventTime-epoch", ("eventTime", 1740816000), expect="refused", pointer="/eventTime"),
    Row("R5", "producer-a-number", ("producer", 1), expect="refused", pointer="/producer"),
    Row("R5", "eventType-a-number", ("eventType", 3), expect="refused", pointer="/eventType"),
    Row("R5", "schemaURL-a-number", ("schemaURL", 2), expect="refused", pointer="/schemaURL"),
    Row("R6", "schemaURL-with-space", ("schemaURL", RUN_EVENT_URL.replace("Run", "Run ")), expect="refused"),
    Row(
        "R7",
        "dataset-event-read-as-run-event",
        ("schemaURL", "https://openlineage.io/spec/2-0-2/OpenLineage.json"),
        base=dataset_event,
        expect="refused",
        pointer="/schemaURL",
    ),
    Row("R8", "input-namespace", ("inputs/0/namespace", "s3 bucket?"), expect="refused", pointer="/inputs/0/namespace"),
    Row("R8", "job-namespace-too-long", ("job/namespace", "n" * 1025), expect="refused", pointer="/job/namespace"),
    Row(
        "R8",
        "symlink-namespace",
        (f"{IN}/symlinks/identifiers/0/namespace", "hive://meta store"),
        expect="refused",
        pointer=f"/{IN}/symlinks/identifiers/0/namespace",
    ),
    Row(
        "R8",
        "parent-job-namespace",
        (f"{RF}/parent/job/namespace", "air flow"),
        expect="refused",
        pointer=f"/{RF}/parent/job/namespace",
    ),
    Row("R9", "blank-job-name", ("job/name", "  "), expect="refused", pointer="/job/name"),
    Row("R9", "blank-dataset-name", ("inputs/0/name", ""), expect="refused", pointer="/inputs/0/name"),
    Row("R10", "nul", ("inputs/0/name", "ord\u0000ers"), expect="refused", pointer="/inputs/0/name"),
    Row("R11", "facet-key", (f"{RF}/{'k' * 256}", {"_producer": PRODUCER, "_schemaURL": PRODUCER}), expect="refused"),
    Row(
        "R11",
        "field-name",
        (f"{IN}/schema/fields/0/name", "c" * 256),
        expect="refused",
        pointer=f"/{IN}/schema/fields/0/name",
    ),
    Row("R12", "run-facets-an-array", (RF, []), expect="refused", pointer=f"/{RF}"),
    Row(
        "R12", "input-facets-a-string", ("inputs/0/inputFacets", "x"), expect="refused", pointer="/inputs/0/inputFacets"
    ),
    Row(
        "R13",
        "typed-facet-a-string",
        (f"{JF}/documentation", "Loads orders"),
        expect="refused",
        pointer=f"/{JF}/documentation",
    ),
    Row(
        "R13", "no-_producer", (f"{RF}/nominalTime/_producer", KeyError), expect="refused", pointer=f"/{RF}/nominalTime"
    ),
    Row(
        "R13",
        "_schemaURL-not-a-uri",
        (f"{IN}/schema/_schemaURL", "schema facet 1-2-0"),
        expect="refused",
        pointer=f"/{IN}/schema/_schemaURL",
    ),
    Row(
        "R13",
        "description-facet-an-object",
        (f"{IN}/description", {"text": "x"}),
        expect="refused",
        pointer=f"/{IN}/description",
    ),
    Row(
        "R14",
        "nominalStartTime",
        (f"{RF}/nominalTime/nominalStartTime", KeyError),
        expect="refused",
        pointer=f"/{RF}/nominalTime",
    ),
    Row("R14", "parent-run-empty", (f"{RF}/parent/run", {}), expect="refused", pointer=f"/{RF}/parent/run"),
    Row("R14", "parent-job-name", (f"{RF}/parent/job/name", KeyError), expect="refused", pointer=f"/{RF}/parent/job"),
    Row(
        "R14",
        "job-description",
        (f"{JF}/documentation/description", KeyError),
        expect="refused",
        pointer=f"/{JF}/documentation",
    ),
    Row("R14", "sql-query", (f"{JF}/sql/query", None), expect="refused", pointer=f"/{JF}/sql"),
    Row("R14", "jobType-jobType", (f"{JF}/jobType/jobType", KeyError), expect="refused", pointer=f"/{JF}/jobType"),
    Row(
        "R14",
        "schema-field-name",
        (f"{IN}/schema/fields/1", {"type": "int"}),
        expect="refused",
        pointer=f"/{IN}/schema/fields/1",
    ),
    Row(
        "R14",
        "column-lineage-inputFields",
        (f"{OUT}/columnLineage/fields/id", {"transformationType": "IDENTITY"}),
        expect="refused",
        pointer=f"/{OUT}/columnLineage/fields/id",
    ),
    Row(
        "R14",
        "column-lineage-input-field",
        (f"{OUT}/columnLineage/fields/id/inputFields/0/field", KeyError),
        expect="refused",
        pointer=f"/{OUT}/columnLineage/fields/id/inputFields/0",
    ),
    Row(
        "R14",
        "symlink-name",
        (f"{IN}/symlinks/identifiers/0/name", KeyError),
        expect="refused",
        pointer=f"/{IN}/symlinks/identifiers/0",
    ),
    Row(
        "R15",
        "schema-fields-a-string",
        (f"{IN}/schema/fields", "id,amount"),
        expect="refused",
        pointer=f"/{IN}/schema/fields",
    ),
    Row(
        "R15",
        "field-type-an-object",
        (f"{IN}/schema/fields/0/type", {"t": 1}),
        expect="refused",
        pointer=f"/{IN}/schema/fields/0/type",
    ),
    Row(
        "R15",
        "nominalStartTime-words",
        (f"{RF}/nominalTime/nominalStartTime", "yesterday"),
        expect="refused",
        pointer=f"/{RF}/nominalTime/nominalStartTime",
    ),
    Row(
        "R15",
        "url-an-array",
        (f"{JF}/sourceCodeLocation/url", ["x"]),
        expect="refused",
        pointer=f"/{JF}/sourceCodeLocation/url",
    ),
    Row(
        "R16",
        "symlinks-without-identifiers",
        (f"{IN}/symlinks/identifiers", KeyError),
        expect="refused",
        pointer=f"/{IN}/symlinks",
    ),
    Row(
        "R16",
        "dataSource-without-name",
        (f"{IN}/dataSource/name", KeyError),
        expect="refused",
        pointer=f"/{IN}/dataSource",
    ),
    Row(
        "R16",
        "dataSource-blank-name",
        (f"{IN}/dataSource/name", " "),
        expect="refused",
        pointer=f"/{IN}/dataSource/name",
    ),
    Row(
        "R17",
        "too-many-datasets",
        ("inputs", [{"namespace": "s3://b", "name": f"k{i}"} for i in range(21)]),
        expect="refused",
        pointer="",
    ),
    Row(
        "R17",
        "too-many-datasets-through-column-lineage",  # each a placeholder: counted (it was not)
        ("outputs", [_column_lineage_output(20)]),
        expect="refused",
        pointer="",
    ),
    Row("R18", "year-10000-in-utc", ("eventTime", "9999-12-31T23:59:59-01:00"), expect="refused", pointer="/eventTime"),
    Row("R18", "year-0-in-utc", ("eventTime", "0001-01-01T00:00:00+01:00"), expect="refused", pointer="/eventTime"),
    Row("R19", "job-name-past-the-keys", ("job/name", "j" * 1_200), expect="refused", pointer="/job/name"),
    Row(
        "R19",
        "dataset-name-past-the-keys",
        ("inputs/0/name", "\u00e9" * 1_000),
        expect="refused",
        pointer="/inputs/0/name",
    ),
    Row("R19", "runId-past-the-keys", ("run/runId", "r" * 256), expect="refused", pointer="/run/runId"),
    # --- taken with a warning (refused with --strict) ----------------------------------------
    Row("W1", "no-schemaURL", ("schemaURL", KeyError), expect="warned", pointer=""),
    Row(
        "W1",
        "dataset-event-by-shape",
        ("schemaURL", KeyError),
        base=dataset_event,
        expect="warned",
        pointer="/schemaURL",
    ),
    Row("W1", "schemaURL-null", ("schemaURL", None), expect="warned", pointer="/schemaURL"),
    Row(
        "W1",
        "dataset-event-schemaURL-null",
        ("schemaURL", None),
        base=dataset_event,
        expect="warned",
        pointer="/schemaURL",
    ),
    Row("W2", "no-offset", ("eventTime", "2025-03-01T08:05:00.123456"), expect="warned", pointer="/eventTime"),
    Row("W2", "offset-without-colon", ("eventTime", "2025-03-01T09:05:00+0100"), expect="warned", pointer="/eventTime"),
    Row("W2", "no-seconds", ("eventTime", "2025-03-01T08:05Z"), expect="warned", pointer="/eventTime"),
    Row(
        "W3",
        "runId-not-a-uuid",
        ("run/runId", "scheduled__2025-03-01T06:00:00+00:00"),
        expect="warned",
        pointer="/run/runId",
    ),
    Row("W4", "eventType-unknown", ("eventType", "DONE"), expect="warned", pointer="/eventType"),
    Row("W5", "producer-not-a-uri", ("producer", "spark"), expect="warned", pointer="/producer"),
    Row("W5", "producer-blank", ("producer", ""), expect="warned", pointer="/producer"),
    Row(
        "W6",
        "schemaURL-relative",
        ("schemaURL", "OpenLineage.json#/$defs/RunEvent"),
        expect="warned",
        pointer="/schemaURL",
    ),
    Row(
        "W7",
        "dataset-event-with-job",
        ("job", {"namespace": "a", "name": "b"}),
        base=dataset_event,
        expect="warned",
        pointer="",
    ),
    Row("W7", "job-event-with-run", ("run", {"runId": RUN_ID}), base=job_event, expect="warned", pointer=""),
    Row(
        "W8", "dataSource-uri-file", (f"{IN}/dataSource/uri", "file"), expect="warned", pointer=f"/{IN}/dataSource/uri"
    ),
    Row(
        "W8",
        "dataSource-uri-bigquery",
        (f"{IN}/dataSource/uri", "bigquery"),
        expect="warned",
        pointer=f"/{IN}/dataSource/uri",
    ),
    Row(
        "W8",
        "url-a-path",
        (f"{JF}/sourceCodeLocation/url", "/opt/airflow/dags/etl.py"),
        expect="warned",
        pointer=f"/{JF}/sourceCodeLocation/url",
    ),
    Row(
        "W8",
        "lifecycle-outside-enum",
        (f"{OUT}/lifecycleStateChange/lifecycleStateChange", "APPEND"),
        expect="warned",
        pointer=f"/{OUT}/lifecycleStateChange/lifecycleStateChange",
    ),
    Row(
        "W8",
        "symlink-without-type",
        (f"{IN}/symlinks/identifiers/0/type", KeyError),
        expect="warned",
        pointer=f"/{IN}/symlinks/identifiers/0",
    ),
    Row(
        "W8",
        "field-type-a-number",
        (f"{IN}/schema/fields/0/type", 5),
        expect="warned",
        pointer=f"/{IN}/schema/fields/0/type",
    ),
    Row(
        "W8",
        "parent-runId-not-a-uuid",
        (f"{RF}/parent/run/runId", "manual__2025-03-01"),
        expect="warned",
        pointer=f"/{RF}/parent/run/runId",
    ),
    Row(
        "W8",
        "nominal-time-naive",
        (f"{RF}/nominalTime/nominalStartTime", "2025-03-01T08:00:00"),
        expect="warned",
        pointer=f"/{RF}/nominalTime/nominalStartTime",
    ),
    Row(
        "W8",
        "_producer-relative",
        (f"{JF}/jobType/_producer", "spark"),
        expect="warned",
        pointer=f"/{JF}/jobType/_producer",
    ),
    Row(
        "W8",
        "_deleted-a-string",
        (f"{IN}/documentation/_deleted", "no"),
        expect="warned",
        pointer=f"/{IN}/documentation/_deleted",
    ),
    Row("W8", "typed-facet-null", (f"{JF}/sql", None), expect="warned", pointer=f"/{JF}/sql"),
    Row(
        "W9",
        "ownership-owners-a-string",
        (f"{IN}/ownership", _facet("1-0-1", "OwnershipDatasetFacet", owners="team:data")),
        expect="warned",
        pointer=f"/{IN}/ownership/owners",
    ),
    Row(
        "W9",
        "processing-engine-no-version",
        (f"{RF}/processing_engine/version", KeyError),
        expect="warned",
        pointer=f"/{RF}/processing_engine",
    ),
    Row(
        "W9",
        "custom-facet-without-_producer",
        (f"{RF}/spark_properties", {"properties": {"spark.master": "yarn"}}),
        expect="warned",
        pointer=f"/{RF}/spark_properties",
    ),
    Row(
        "W9",
        "custom-facet-a-string",
        (f"{RF}/airflow_runArgs", "externalTrigger=false"),
        expect="warned",
        pointer=f"/{RF}/airflow_runArgs",
    ),
    Row(
        "W9",
        "output-facet-bad-row-count",
        ("outputs/0/outputFacets/outputStatistics/rowCount", "ten"),
        expect="warned",
        pointer="/outputs/0/outputFacets/outputStatistics/rowCount",
    ),
    Row("W10", "facets-null", (RF, None), expect="warned", pointer=f"/{RF}"),
    Row("W11", "eventType-null", ("eventType", None), expect="warned", pointer="/eventType"),
    Row("W11", "inputs-null", ("inputs", None), expect="warned", pointer="/inputs"),
    Row("W11", "outputs-null", ("outputs", None), expect="warned", pointer="/outputs"),
    Row("W11", "job-event-outputs-null", ("outputs", None), base=job_event, expect="warned", pointer="/outputs"),
    # --- taken silently -----------------------------------------------------------------------
    Row(
        "S1",
        "dataSource-1-0-0-uri-file",
        (f"{IN}/dataSource", _facet("1-0-0", "DatasourceDatasetFacet", name="file", uri="file")),
        expect="silent",
    ),
    Row(
        "S1",
        "old-style-schema-url",
        (
            f"{RF}/parent/_schemaURL",
            "https://raw.githubusercontent.com/OpenLineage/OpenLineage/main/spec/OpenLineage.json#/definitions/ParentRunFacet",
        ),
        (f"{RF}/parent/run/runId", "manual__2025-03-01"),
        expect="silent",
    ),
    Row(
        "S2",
        "custom-facet",
        (
            f"{RF}/airflow",
            {"_producer": PRODUCER, "_schemaURL": "https://example.com/AirflowRunFacet.json", "dag": {"dag_id": "d"}},
        ),
        expect="silent",
    ),
    Row(
        "S2",
        "unknown-fields",
        ("x-tenant", "acme"),
        (f"{IN}/schema/fields/0/ordinal_position", 1),
        (f"{JF}/sql/x-engine", "trino"),
        expect="silent",
    ),
    Row("S3", "empty-symlinks", (f"{IN}/symlinks/identifiers", []), expect="silent"),
    Row("S4", "offset-and-nanoseconds", ("eventTime", "2025-03-01T13:35:00.123456789+05:30"), expect="silent"),
    Row("S2", "a-dataset-in-a-run-event", ("dataset", {"namespace": "not read here?", "name": ""}), expect="silent"),
]


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory, resolver: Resolver) -> Iterator[tuple[Client, Client, Path]]:
    path = tmp_path_factory.mktemp("verdict") / "catalog.db"
    Catalog(path).close()
    writer = GroupWriter(path, resolver)
    limits = Limits(max_datasets=20)
    default = Client(ReceiverApp(Intake(writer.submit, limits=limits), token=TOKEN))
    strict = Client(ReceiverApp(Intake(writer.submit, strict=True, limits=limits), token=TOKEN))
    yield default, strict, path
    writer.close()


def test_the_base_event_is_valid_everywhere() -> None:
    verdict = judge(base_event(), strict=True)
    assert verdict.accepted and verdict.warnings == (), verdict


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_each_row_of_the_decision_table(row: Row, clients: tuple[Client, Client, Path]) -> None:
    default, strict, _path = clients
    event = row.event()
    verdict, strict_verdict = judge(event), judge(event, strict=True)
    status, _, body = default.post("/api/v1/lineage", event)
    strict_status, _, strict_body = strict.post("/api/v1/lineage", event)
    if row.expect == "refused":
        assert status == 400 and strict_status == 400, body
        if row.row != "R17":  # a limit, checked before the verdict
            assert not verdict.accepted and not strict_verdict.accepted
        if row.pointer is not None:
            assert body["error"]["problems"][0]["pointer"] == row.pointer, body
    elif row.expect == "warned":
        assert verdict.accepted, verdict.refusals
        assert row.pointer in [w.pointer for w in verdict.warnings], verdict.warnings
        assert status == 201 and body["status"] == "accepted", body
        assert any(w.startswith((row.pointer or "/") + ":") for w in body["warnings"]), body
        assert strict_status == 400 and not strict_verdict.accepted, strict_body
    else:
        assert verdict.accepted and verdict.warnings == (), verdict
        assert strict_verdict.accepted, strict_verdict.refusals
        assert status == 201 and body == {"status": "accepted", "warnings": [], "placeholders": body["placeholders"]}
        assert strict_status == 201  # the same event again: a duplicate, taken


def test_warnings_are_kept_beside_the_event(clients: tuple[Client, Client, Path]) -> None:
    default, _strict, path = clients
    event = base_event()
    event["job"]["name"] = "kept-beside"
    event["inputs"][0]["facets"]["dataSource"]["uri"] = "bigquery"
    status, _, body = default.post("/api/v1/lineage", event)
    assert status == 201
    with Catalog(path) as catalog:
        rows = catalog._conn.execute(
            "SELECT warnings FROM received_events WHERE body LIKE ?", ('%"name":"kept-beside"%',)
        ).fetchall()
    assert [row[0] for row in rows] == [
        "[\"/inputs/0/facets/dataSource/uri: must be a URI with a scheme, not 'bigquery'\"]"
    ]
    assert body["warnings"] == ["/inputs/0/facets/dataSource/uri: must be a URI with a scheme, not 'bigquery'"]


def test_the_verdict_does_not_depend_on_the_facets_schema_version() -> None:
    for version in ("1-0-0", "1-0-1", "1-1-0", "2-0-0"):
        for uri in ("file", "bigquery", "s3://raw-bucket"):
            event = base_event()
            event["inputs"][0]["facets"]["dataSource"] = _facet(version, "DatasourceDatasetFacet", name=uri, uri=uri)
            assert judge(event).accepted, (version, uri)
            event["inputs"][0]["facets"]["dataSource"].pop("name")  # what Marquez refuses, in every version
            assert not judge(event).accepted, (version, uri)


def test_a_batch_lists_the_warnings_of_the_events_it_took(clients: tuple[Client, Client, Path]) -> None:
    default, _strict, _path = clients
    good, warned, bad = base_event(), base_event(), base_event()
    good["job"]["name"], warned["job"]["name"], bad["job"]["name"] = "batch-good", "batch-warned", "batch-bad"
    good["run"]["runId"] = "0194a1b2-0000-7000-8000-00000000f00e"  # runs of their own: one runId under
    warned["run"]["runId"] = "0194a1b2-0000-7000-8000-00000000f00f"  # two jobs says so in a warning
    warned["eventTime"] = "2025-03-01T08:05:00"
    del bad["run"]["runId"]
    status, _, body = default.post("/api/v1/lineage/batch", [good, warned, bad])
    assert (status, body["status"], body["summary"]["successful"]) == (200, "partial_success", 2)
    assert body["warnedEvents"] == [
        {"index": 1, "warnings": ["/eventTime: must be an RFC 3339 date-time with offset, not '2025-03-01T08:05:00'"]}
    ]
    assert [f["index"] for f in body["failed_events"]] == [2]


def test_the_docs_table_has_exactly_the_rows_tested() -> None:
    text = (ROOT / "docs" / "receiver.md").read_text()
    documented = set(re.findall(r"^\| \*\*([RWS]\d+)\*\* \|", text, flags=re.MULTILINE))
    assert documented == {r.row for r in ROWS}


@pytest.mark.parametrize(
    "datasets",
    [
        {"inputs": [{"namespace": ["x"], "name": "a"}]},
        {"outputs": [{"namespace": "s3://b", "name": {"n": 1}}]},
        {
            "outputs": [
                _column_lineage_output(0)
                | {"facets": {"columnLineage": {"fields": {"c": {"inputFields": [{"namespace": ["x"], "name": "a"}]}}}}}
            ]
        },
    ],
)
def test_a_dataset_named_by_no_strings_is_refused_not_a_fault(datasets: dict[str, Any]) -> None:
    """Counting an event's datasets (before the verdict) met a namespace that is a list: a
    TypeError, a 500 for the whole request. The verdict refuses the event."""
    outcome = Intake(None).prepare(base_event() | datasets)
    assert isinstance(outcome, Outcome) and outcome.status == "refused", outcome
