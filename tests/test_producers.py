"""Events written the way real integrations write them (tests/producers/, one file each: the
Airflow provider and openlineage-airflow, Spark locally, on Dataproc and on Databricks, Flink,
Hive, dbt-ol, the Python client and an in-house script; producer versions 0.12 to 1.40): each is
taken, with exactly its expected warnings, through the HTTP app, a real ``olbridge serve``,
``olbridge import`` and ``olbridge validate --receiver``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from bridge.catalog import Catalog
from bridge.cli import cli
from bridge.mapping import Resolver
from bridge.receiver.app import ReceiverApp
from bridge.receiver.intake import Intake
from tests.group_writer import GroupWriter
from tests.test_receiver_http import TOKEN, Client, running_server

CORPUS = Path(__file__).resolve().parent / "producers"

# file -> the warnings the receiver keeps beside the event (none: taken silently)
EXPECTED: dict[str, list[str]] = {
    "airflow-provider-1.9.0-start.json": [],
    "airflow-provider-2.2.0-fail.json": [],
    # openlineage-airflow 0.12 and dbt-ol 0.12 sent no schemaURL; Marquez reads them as RunEvents
    "openlineage-airflow-0.12.0-complete.json": ["/: 'schemaURL' is required"],
    "openlineage-airflow-1.4.1-start.json": [],
    "dbt-ol-0.12.0-model-start.json": ["/: 'schemaURL' is required"],
    "dbt-ol-1.20.5-model-complete.json": [],
    # DatasourceDatasetFacet 1-0-0: checked as a facet only, so the same uri 'file' says nothing
    "spark-0.12.0-local-complete.json": [],
    # 1-0-1: Spark names the source by its namespace, which is no URI with a scheme here
    "spark-1.9.1-dataproc-bigquery-complete.json": [
        "/outputs/0/facets/dataSource/uri: must be a URI with a scheme, not 'bigquery'"
    ],
    "spark-1.23.0-dataproc-serverless-start.json": [
        "/inputs/0/facets/dataSource/uri: must be a URI with a scheme, not 'bigquery'"
    ],
    "spark-1.40.0-databricks-complete.json": [
        "/inputs/0/facets/dataSource/uri: must be a URI with a scheme, not 'dbfs'"
    ],
    # an empty identifiers list is what the spec allows and Marquez stores
    "flink-1.33.0-kafka-running.json": [],
    "hive-1.34.0-complete.json": [],
    "python-client-1.40.0-dataset-event.json": [],
    "in-house-script-nightly-export.json": [
        "/eventTime: must be an RFC 3339 date-time with offset, not '2025-03-01T02:17:45.118204'",
        "/run/runId: must be a UUID, not 'nightly-export-2025-03-01'",
        "/run/facets/parent/run/runId: must be a UUID, not 'scheduled__2025-03-01T02:00:00+00:00'",
        "/run/facets/nominalTime/nominalStartTime: must be an RFC 3339 date-time with offset, "
        "not '2025-03-01T02:00:00'",
    ],
}
FILES = sorted(EXPECTED)


def _event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((CORPUS / name).read_text())
    return event


def test_every_file_of_the_corpus_has_its_expectation() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.json")) == FILES
    producers = {_event(name)["producer"].split("/tree/")[-1].split("/")[0] for name in FILES}
    assert {"0.12.0", "1.40.0"} <= producers  # the oldest and the newest integration versions


@pytest.fixture
def apps(tmp_path: Path, resolver: Resolver) -> Iterator[tuple[Client, Client, Path]]:
    path = tmp_path / "corpus.db"
    Catalog(path).close()
    writer = GroupWriter(path, resolver)
    yield (
        Client(ReceiverApp(Intake(writer.submit), token=TOKEN)),
        Client(ReceiverApp(Intake(writer.submit, strict=True), token=TOKEN)),
        path,
    )
    writer.close()


@pytest.mark.parametrize("name", FILES)
def test_each_producers_event_is_taken_with_its_warnings(name: str, apps: tuple[Client, Client, Path]) -> None:
    default, strict, path = apps
    event = _event(name)
    status, _, body = strict.post("/api/v1/lineage", event)
    if EXPECTED[name]:  # --strict refuses what the spec refuses, and changes nothing
        assert status == 400, body
        with Catalog(path) as catalog:
            assert catalog.count_received()["received_events"] == 0
    else:
        assert status == 201, body
    status, _, body = default.post("/api/v1/lineage", event)
    assert status == 201, body
    assert body["warnings"] == EXPECTED[name]
    with Catalog(path) as catalog:
        rows = catalog._conn.execute("SELECT warnings, producer FROM received_events").fetchall()
    assert [(json.loads(w), p) for w, p in rows] == [(EXPECTED[name], event["producer"])]


def test_a_real_server_takes_the_corpus_singly_and_in_a_batch(tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    events = [_event(name) for name in FILES]
    with running_server(tmp_path / "single.db") as url:
        for name, event in zip(FILES, events, strict=True):
            answer = requests.post(f"{url}/api/v1/lineage", json=event, headers=headers, timeout=10)
            assert answer.status_code == 201, (name, answer.text)
            assert answer.json()["warnings"] == EXPECTED[name]
    with running_server(tmp_path / "batch.db") as url:
        answer = requests.post(f"{url}/api/v1/lineage/batch", json=events, headers=headers, timeout=10)
        assert answer.status_code == 200
        body = answer.json()
        assert (body["status"], body["summary"]["successful"]) == ("success", len(FILES))
        assert body["warnedEvents"] == [
            {"index": i, "warnings": EXPECTED[name]} for i, name in enumerate(FILES) if EXPECTED[name]
        ]
    for db in ("single.db", "batch.db"):
        with Catalog(tmp_path / db) as catalog:
            assert catalog.count_received()["received_events"] == len(FILES)
            kept = sorted(json.loads(w) for (w,) in catalog._conn.execute("SELECT warnings FROM received_events"))
            assert kept == sorted(EXPECTED[name] for name in FILES)


def test_import_takes_the_corpus_by_the_same_verdict(tmp_path: Path) -> None:
    files = [str(CORPUS / name) for name in FILES]
    db = str(tmp_path / "imported.db")
    result = CliRunner().invoke(cli, ["--catalog", db, "import", *files, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["accepted"], summary["refused"]) == (len(FILES), 0)
    assert summary["acceptedWithWarnings"] == sum(bool(w) for w in EXPECTED.values())
    strict = CliRunner().invoke(cli, ["--catalog", str(tmp_path / "strict.db"), "import", *files, "--strict", "--json"])
    assert strict.exit_code == 1, strict.output  # an import that refused any event fails
    assert json.loads(strict.stdout)["refused"] == sum(bool(w) for w in EXPECTED.values())


def test_validate_is_the_strict_spec_check_and_receiver_shows_the_verdict() -> None:
    files = [str(CORPUS / name) for name in FILES]
    strict = CliRunner().invoke(cli, ["validate", *files, "--json"])
    assert strict.exit_code == 1  # the spec refuses what the receiver takes with a warning
    assert json.loads(strict.stdout)["invalid"] == sum(bool(w) for w in EXPECTED.values())
    judged = CliRunner().invoke(cli, ["validate", "--receiver", *files, "--json"])
    assert judged.exit_code == 0, judged.output
    report = json.loads(judged.stdout)
    warned = sum(bool(w) for w in EXPECTED.values())
    assert (report["events"], report["taken"], report["warned"], report["refused"]) == (
        len(FILES),
        len(FILES) - warned,
        warned,
        0,
    )
    by_file = {p["where"].rsplit("/", 1)[-1]: p["problems"] for p in report["problems"]}
    assert by_file == {name: warnings for name, warnings in EXPECTED.items() if warnings}
