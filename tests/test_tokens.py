"""``olbridge serve --tokens FILE``: named tokens, each allowed its job namespaces; an event for
another namespace is refused with 403 and changes nothing; the token's name is kept with every
event it brought, and ``/metrics`` counts by it. One shared token works as before."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from bridge.catalog import Catalog
from bridge.cli import cli
from bridge.config import NamedToken
from bridge.model import AssetDeclaration
from bridge.openlineage.facets import TASK_RUN_FACET_URL
from bridge.receiver.app import ReceiverApp
from bridge.receiver.intake import Intake
from bridge.receiver.metrics import Metrics
from tests.group_writer import GroupWriter
from tests.helpers import DATASET_EVENT_URL, JOB_EVENT_URL, PRODUCER, ol_dataset, ol_run_event
from tests.test_receiver_http import Client, contents, token_server

SPARK = NamedToken("spark", "spark-secret", ("spark-*", "etl"))
ANY = NamedToken("platform", "platform-secret", ("*",))
TOKENS_FILE = """\
[spark]
token = "spark-secret"
namespaces = ["spark-*", "etl"]

[platform]
token = "platform-secret"
namespaces = ["*"]
"""


T0 = datetime(2025, 3, 1, 8, tzinfo=UTC)

pytestmark = pytest.mark.both_engines


@pytest.fixture
def app(writer: GroupWriter) -> ReceiverApp:
    metrics = Metrics([SPARK.name, ANY.name])
    return ReceiverApp(Intake(writer.submit, metrics=metrics), tokens=[SPARK, ANY])


def post(app: ReceiverApp, path: str, value: Any, token: str | None) -> tuple[int, Any]:
    status, _, body = Client(app, token=token).post(path, value)
    return status, body


def tokens_of(path: str) -> list[tuple[str, str | None]]:
    with Catalog(path) as catalog:
        return [(s, t) for s, t in catalog._conn.execute("SELECT source, token FROM received_events ORDER BY pk")]


def run_event(n: int, namespace: str) -> dict[str, Any]:
    return ol_run_event(
        run_id=f"0194a1b2-0000-7000-8000-{n:012d}", job=(namespace, "job"), inputs=[ol_dataset("s3://b", f"k{n}")]
    )


def dataset_event(namespace: str) -> dict[str, Any]:
    return {
        "eventTime": "2025-03-01T09:00:00Z",
        "producer": PRODUCER,
        "schemaURL": DATASET_EVENT_URL,
        "dataset": ol_dataset(namespace, "orders"),
    }


def test_a_token_writes_its_namespaces_and_its_name_is_kept(app: ReceiverApp, catalog_path: str) -> None:
    assert post(app, "/api/v1/lineage", run_event(1, "spark-prod"), SPARK.token)[0] == 201
    assert post(app, "/api/v1/lineage", run_event(2, "etl"), SPARK.token)[0] == 201
    assert post(app, "/api/v1/lineage", run_event(3, "airflow"), ANY.token)[0] == 201
    assert tokens_of(catalog_path) == [
        ("run:0194a1b2-0000-7000-8000-000000000001", "spark"),
        ("run:0194a1b2-0000-7000-8000-000000000002", "spark"),
        ("run:0194a1b2-0000-7000-8000-000000000003", "platform"),
    ]


@pytest.mark.parametrize(
    ("event", "pointer", "namespace"),
    [
        (run_event(1, "airflow"), "/job/namespace", "airflow"),
        (run_event(1, "etl2"), "/job/namespace", "etl2"),  # a pattern matches the whole namespace
        (run_event(1, "Spark-prod"), "/job/namespace", "Spark-prod"),  # and its case
        ({**run_event(1, "airflow"), "schemaURL": "x"}, "/job/namespace", "airflow"),
        (dataset_event("kafka://broker:9092"), "/dataset/namespace", "kafka://broker:9092"),
        # a DatasetEvent writes its dataset, whatever job it names beside it (read as Marquez reads it)
        ({**dataset_event("secret"), "job": {"namespace": "etl", "name": "j"}}, "/dataset/namespace", "secret"),
        (
            {
                k: v
                for k, v in {**dataset_event("secret"), "job": {"namespace": "etl", "name": "j"}}.items()
                if k != "schemaURL"
            },
            "/dataset/namespace",
            "secret",
        ),
    ],
    ids=["other", "longer", "case", "any-kind", "dataset-event", "dataset-event-naming-a-job", "dataset-by-shape"],
)
def test_an_event_for_another_namespace_is_refused_with_403_and_changes_nothing(
    app: ReceiverApp, catalog_path: str, event: dict[str, Any], pointer: str, namespace: str
) -> None:
    before = contents(catalog_path)
    status, body = post(app, "/api/v1/lineage", event, SPARK.token)
    assert (status, body["error"]["code"], body["error"]["retriable"]) == (403, "forbidden", False)
    assert body["error"]["message"] == f"token 'spark' may not write namespace {namespace!r}"
    assert body["error"]["problems"] == [{"pointer": pointer, "message": body["error"]["message"], "rule": "token"}]
    assert contents(catalog_path) == before


def test_a_dataset_event_is_judged_by_its_dataset_namespace(app: ReceiverApp) -> None:
    assert post(app, "/api/v1/lineage", dataset_event("etl"), SPARK.token)[0] == 201
    # a DatasetEvent's job is not what it writes, where its schemaURL says what it is
    named = {**dataset_event("etl"), "job": {"namespace": "airflow", "name": "j"}, "outputs": [ol_dataset("hr", "x")]}
    assert post(app, "/api/v1/lineage", named, SPARK.token)[0] == 201


def test_an_event_read_as_a_dataset_event_by_its_shape_is_judged_by_every_reading(app: ReceiverApp) -> None:
    """Without a schemaURL an event with a ``dataset`` and a ``job`` is read as a DatasetEvent
    by its shape, and was judged by its dataset alone: forwarded, a reader that takes it for a
    RunEvent or a JobEvent (Marquez reads a RunEvent) writes its job's and its outputs'
    namespaces, which the token may not. Each is judged."""
    base = {k: v for k, v in dataset_event("etl").items() if k != "schemaURL"}
    for extra, pointer in [
        ({"job": {"namespace": "airflow", "name": "j"}}, "/job/namespace"),
        ({"job": {"namespace": "etl", "name": "j"}, "outputs": [ol_dataset("hr", "x")]}, "/outputs/0/namespace"),
    ]:
        status, body = post(app, "/api/v1/lineage", base | extra, SPARK.token)
        assert (status, body["error"]["problems"][0]["pointer"]) == (403, pointer), body


def test_an_event_without_a_namespace_goes_to_the_verdict(app: ReceiverApp) -> None:
    event = run_event(1, "spark-prod")
    del event["job"]
    status, body = post(app, "/api/v1/lineage", event, SPARK.token)
    assert (status, body["error"]["code"]) == (400, "invalid_event")


def test_in_a_batch_only_the_forbidden_events_fail(app: ReceiverApp, catalog_path: str) -> None:
    batch = [run_event(1, "spark-a"), run_event(2, "airflow"), run_event(3, "spark-b")]
    status, body = post(app, "/api/v1/lineage/batch", batch, SPARK.token)
    assert (status, body["status"]) == (200, "partial_success")
    (failed,) = body["failed_events"]
    assert (failed["index"], failed["retriable"], failed["problems"][0]["rule"]) == (1, False, "token")
    assert [t for _, t in tokens_of(catalog_path)] == ["spark", "spark"]
    before = contents(catalog_path)
    status, body = post(app, "/api/v1/lineage/batch", [run_event(4, "airflow"), run_event(5, "hive")], SPARK.token)
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert contents(catalog_path) == before


def test_a_wrong_or_missing_token_is_401(app: ReceiverApp, catalog_path: str) -> None:
    before = contents(catalog_path)
    for token in ("nope", None, "spark-secre", "spark-secret "):
        status, body = post(app, "/api/v1/lineage", run_event(1, "spark-a"), token)
        assert (status, body["error"]["code"]) == (401, "unauthorized")
    assert contents(catalog_path) == before


def test_a_named_token_is_read_whatever_the_case_of_its_scheme(app: ReceiverApp, catalog_path: str) -> None:
    event = run_event(1, "spark-a")
    status, _, body = Client(app, token=None).post("/api/v1/lineage", event, Authorization="bearer spark-secret")
    assert status == 201, body
    assert [token for _, token in tokens_of(catalog_path)] == ["spark"]


def test_metrics_count_each_token_by_result(app: ReceiverApp) -> None:
    post(app, "/api/v1/lineage", run_event(1, "spark-a"), SPARK.token)
    post(app, "/api/v1/lineage", run_event(1, "spark-a"), SPARK.token)  # a duplicate
    post(app, "/api/v1/lineage", run_event(2, "airflow"), SPARK.token)
    post(app, "/api/v1/lineage/batch", [run_event(3, "x"), run_event(4, "y")], SPARK.token)
    post(app, "/api/v1/lineage", run_event(5, "airflow"), ANY.token)
    text = app.metrics_text()
    for line in (
        'olbridge_receiver_token_events_total{token="spark",result="accepted"} 1',
        'olbridge_receiver_token_events_total{token="spark",result="duplicate"} 1',
        'olbridge_receiver_token_events_total{token="spark",result="forbidden"} 3',
        'olbridge_receiver_token_events_total{token="platform",result="accepted"} 1',
        'olbridge_receiver_token_events_total{token="platform",result="forbidden"} 0',
        'olbridge_receiver_events_total{result="refused"} 3',
        'olbridge_receiver_requests_total{route="/api/v1/lineage",status="403"} 1',
    ):
        assert line in text, line


def test_one_shared_token_works_as_before(writer: GroupWriter, catalog_path: str) -> None:
    app = ReceiverApp(Intake(writer.submit), token="shared")
    assert post(app, "/api/v1/lineage", run_event(1, "anything"), "shared")[0] == 201
    assert post(app, "/api/v1/lineage", run_event(2, "anything"), "other")[0] == 401
    assert tokens_of(catalog_path) == [("run:0194a1b2-0000-7000-8000-000000000001", None)]
    assert "token_events" not in app.metrics_text()


# --- the command ---------------------------------------------------------------------------------


def test_serve_refuses_a_shared_token_with_named_ones_and_a_bad_tokens_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKENS_FILE)
    db = str(tmp_path / "c.db")
    both = CliRunner().invoke(cli, ["--catalog", db, "serve", "--tokens", str(tokens)], env={"OLBRIDGE_TOKEN": "t"})
    assert both.exit_code == 2
    assert "give one shared token or named tokens, not both: OLBRIDGE_TOKEN and --tokens" in both.stderr
    # the one given named, not --token where --token-file was (a newcomer looked for a --token)
    shared = tmp_path / "token.txt"
    shared.write_text("t\n")
    given = ["--catalog", db, "serve", "--token-file", str(shared), "--tokens", str(tokens)]
    both = CliRunner().invoke(cli, given, env={"OLBRIDGE_TOKEN": None})
    assert both.exit_code == 2 and "--token-file and --tokens were given" in both.stderr, both.stderr
    # each named where it was given (the variable, not an option the command line never held)
    given = ["--catalog", db, "serve", "--token-file", str(shared)]
    both = CliRunner().invoke(cli, given, env={"OLBRIDGE_TOKEN": None, "OLBRIDGE_TOKENS_FILE": str(tokens)})
    assert both.exit_code == 2 and "--token-file and OLBRIDGE_TOKENS_FILE were given" in both.stderr, both.stderr
    tokens.write_text('[spark]\ntoken = "t"\n')
    bad = CliRunner().invoke(cli, ["--catalog", db, "serve", "--tokens", str(tokens)], env={"OLBRIDGE_TOKEN": None})
    assert bad.exit_code == 1
    assert (
        bad.stderr
        == f"Error: {tokens}: [spark]: 'namespaces' must be a non-empty list of namespaces or patterns ('spark-*')\n"
    )
    assert not Path(db).exists()


@pytest.mark.parametrize("variable", ["OLBRIDGE_TOKEN", "OLBRIDGE_TOKEN_FILE", "OLBRIDGE_TOKENS_FILE"])
def test_a_token_variable_set_but_empty_is_refused_not_taken_for_no_token(tmp_path: Path, variable: str) -> None:
    """A token's variable set but empty (a secret missing from a deployment's environment) was
    taken for "not set": serve started taking events from anyone. A usage error now; the same
    token given on the command line stands (the variable is not read then)."""
    db = str(tmp_path / "c.db")
    empty = {"OLBRIDGE_TOKEN": None, "OLBRIDGE_TOKEN_FILE": None, "OLBRIDGE_TOKENS_FILE": None, variable: ""}
    result = CliRunner().invoke(cli, ["--catalog", db, "serve", "--port", "0"], env=empty)
    assert result.exit_code == 2, result.output
    assert f"Error: {variable} is set but empty (for --" in result.stderr
    assert not Path(db).exists()
    if variable == "OLBRIDGE_TOKENS_FILE":  # the web view's too
        result = CliRunner().invoke(cli, ["--catalog", db, "ui", "--port", "0"], env=empty)
        assert result.exit_code == 2 and f"Error: {variable} is set but empty" in result.stderr, result.output
    result = CliRunner().invoke(cli, ["init"], env={"OLBRIDGE_CATALOG": ""})
    assert (result.exit_code, result.stderr) == (
        2,
        "Error: $OLBRIDGE_CATALOG is set but empty: give it a catalog, or unset it\n",
    )
    result = CliRunner().invoke(cli, ["--catalog", db, "init"], env={"OLBRIDGE_CATALOG": ""})
    assert result.exit_code == 0, result.output  # the command line gives it: the variable is not read
    result = CliRunner().invoke(cli, ["--catalog", db, "assets", "list"], env={"OLBRIDGE_CONFIG": ""})
    assert (result.exit_code, result.stderr) == (
        2,
        "Error: $OLBRIDGE_CONFIG is set but empty: give it a config file, or unset it\n",
    )
    # another tool's variable, read as that tool reads it (OpenLineage's client: empty, not set)
    result = CliRunner().invoke(cli, ["--catalog", db, "assets", "list"], env={"OPENLINEAGE_API_KEY": ""})
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("where", ["flag", "config"])
def test_serve_with_named_tokens_and_the_real_client(
    tmp_path: Path, catalog_target: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    tokens = tmp_path / "secrets" / "tokens.toml"
    tokens.parent.mkdir()
    tokens.write_text(TOKENS_FILE)
    catalog = catalog_target
    options: tuple[str, ...] = ()
    if where == "flag":
        options = ("--tokens", str(tokens))
    else:
        config = tmp_path / "olbridge.toml"
        config.write_text('[serve]\ntokens = "secrets/tokens.toml"\n')
        monkeypatch.setenv("OLBRIDGE_CONFIG", str(config))

    def client(url: str, token: str) -> OpenLineageClient:
        config = {"type": "http", "url": url, "auth": {"type": "api_key", "apiKey": token}}
        return OpenLineageClient(transport=HttpTransport(HttpConfig.from_dict(config)))

    def event(namespace: str) -> RunEvent:
        return RunEvent(
            eventType=RunState.COMPLETE,
            eventTime="2025-03-01T08:00:00Z",
            run=Run(runId="0194a1b2-0000-7000-8000-0000000000aa"),
            job=Job(namespace=namespace, name="load"),
            producer=PRODUCER,
        )

    with token_server(catalog, *options, token=None) as (url, _process):
        client(url, SPARK.token).emit(event("spark-prod"))
        with pytest.raises(requests.HTTPError) as refused:
            client(url, SPARK.token).emit(event("airflow"))
        assert refused.value.response is not None and refused.value.response.status_code == 403
        client(url, ANY.token).emit(event("airflow"))
        metrics = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {ANY.token}"}, timeout=10).text
        assert requests.get(f"{url}/metrics", timeout=10).status_code == 401  # behind the tokens
    assert 'olbridge_receiver_token_events_total{token="spark",result="accepted"} 1' in metrics
    assert 'olbridge_receiver_token_events_total{token="spark",result="forbidden"} 1' in metrics
    assert 'olbridge_receiver_token_events_total{token="platform",result="accepted"} 1' in metrics
    assert [t for _, t in tokens_of(catalog)] == ["spark", "platform"]


def _ledger(**facets: Any) -> dict[str, Any]:
    return ol_dataset("s3://finance", "ledger", **facets)


DOCUMENTED = {
    "documentation": {"description": "forged"},
    "ownership": {"owners": [{"name": "mallory"}]},
}


def _asset_said(path: str) -> tuple[str | None, Any, Any]:
    with Catalog(path) as catalog:
        asset = catalog.asset("s3://finance/ledger")
        return asset.description, dict(asset.received_facets), asset.identifiers


@pytest.fixture
def ledger(app: ReceiverApp, catalog_path: str) -> tuple[str | None, Any, Any]:
    """finance/ledger, described by the platform's token."""
    event = ol_run_event(
        run_id="0194a1b2-0000-7000-8000-000000000100",
        job=("finance-jobs", "load"),
        outputs=[_ledger(documentation={"description": "the ledger"}, ownership={"owners": [{"name": "fin"}]})],
    )
    assert post(app, "/api/v1/lineage", event, ANY.token)[0] == 201
    said = _asset_said(catalog_path)
    assert said[0] == "the ledger"
    return said


SYMLINKED = {"symlinks": {"identifiers": [{"namespace": "s3://finance", "name": "ledger", "type": "TABLE"}]}}


@pytest.mark.parametrize(
    ("outputs", "pointer"),
    [
        ([_ledger(**DOCUMENTED)], "/outputs/0/namespace"),
        ([ol_dataset("spark-x", "out"), _ledger()], "/outputs/1/namespace"),
        ([ol_dataset("etl", "copy", **SYMLINKED)], "/outputs/0/facets/symlinks/identifiers/0/namespace"),
        (
            [
                ol_dataset(
                    "etl",
                    "copy",
                    schema={"fields": [{"name": "a"}]},
                    columnLineage={"fields": {"a": {"inputFields": [{"namespace": "etl", "name": "x", "field": "a"}]}}},
                ),
                _ledger(
                    schema={"fields": [{"name": "a"}]},
                    columnLineage={"fields": {"a": {"inputFields": [{"namespace": "etl", "name": "x", "field": "a"}]}}},
                ),
            ],
            "/outputs/1/namespace",
        ),
    ],
    ids=["output", "second-output", "symlink", "column-edge"],
)
def test_a_token_writes_no_dataset_outside_its_namespaces(
    app: ReceiverApp, catalog_path: str, ledger: Any, outputs: list[dict[str, Any]], pointer: str
) -> None:
    """(#30) A spark token's event of job etl with an output in finance replaced the ledger's
    description and owner: now a 403 that changes nothing (in a batch, that event only)."""
    before = contents(catalog_path)
    event = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000101", job=("etl", "job"), outputs=outputs)
    status, body = post(app, "/api/v1/lineage", event, SPARK.token)
    assert (status, body["error"]["code"]) == (403, "forbidden"), body
    assert body["error"]["problems"][0]["pointer"] == pointer
    assert "may not write namespace 's3://finance'" in body["error"]["message"]
    assert contents(catalog_path) == before
    status, body = post(app, "/api/v1/lineage/batch", [run_event(7, "etl"), event], SPARK.token)
    assert (status, [f["index"] for f in body["failed_events"]]) == (200, [1])
    assert _asset_said(catalog_path) == ledger


def _skipped_abort(run_id: str) -> Any:
    """The ABORT of a run another olbridge recorded SKIPPED, naming the ledger as an output."""
    event = ol_run_event(
        "ABORT", run_id=run_id, job=("etl", "job"), outputs=[_ledger(documentation={"description": "taken over"})]
    )
    event["run"].setdefault("facets", {})["olbridge_taskRun"] = {
        "_producer": PRODUCER,
        "_schemaURL": TASK_RUN_FACET_URL,
        "state": "SKIPPED",
    }
    return event


def test_a_skipped_olbridge_run_names_outputs_it_does_not_write(
    app: ReceiverApp, catalog_path: str, ledger: Any
) -> None:
    """The ABORT of a run another olbridge recorded SKIPPED names the outputs it was to write (for
    Marquez's job edges) and writes none: a token needs no right to their namespaces, and the
    outputs, their facets with them, are left as they were."""
    event = _skipped_abort("0194a1b2-0000-7000-8000-000000000102")
    assert post(app, "/api/v1/lineage", event, SPARK.token)[0] == 201
    assert _asset_said(catalog_path) == ledger
    # and the RUNNING olbridge's stream sends of a run recorded running, then skipped
    running = {**_skipped_abort("0194a1b2-0000-7000-8000-000000000106"), "eventType": "RUNNING"}
    assert post(app, "/api/v1/lineage", running, SPARK.token)[0] == 201
    assert _asset_said(catalog_path) == ledger
    event["run"]["facets"]["olbridge_taskRun"]["state"] = "KILLED"  # a killed run wrote: refused as before
    event["run"]["runId"] = "0194a1b2-0000-7000-8000-000000000103"
    assert post(app, "/api/v1/lineage", event, SPARK.token)[0] == 403
    # a JobEvent has no run: one it carries, SKIPPED or not, is ignored and its outputs written, so
    # the exemption is no way past the token's namespaces (it overwrote the ledger with a warning)
    job_event = {k: v for k, v in event.items() if k not in ("eventType", "schemaURL")}
    job_event["schemaURL"] = JOB_EVENT_URL
    job_event["run"]["facets"]["olbridge_taskRun"]["state"] = "SKIPPED"
    status, body = post(app, "/api/v1/lineage", job_event, SPARK.token)
    assert (status, body["error"]["problems"][0]["pointer"]) == (403, "/outputs/0/namespace"), body
    assert _asset_said(catalog_path) == ledger
    # nor is it on an event olbridge never sends of a skipped run (its START and ABORT alone): a
    # COMPLETE is a write, whatever its facets say
    event["run"]["facets"]["olbridge_taskRun"]["state"] = "SKIPPED"
    completed = {**event, "eventType": "COMPLETE"}
    completed["run"] = {**event["run"], "runId": "0194a1b2-0000-7000-8000-000000000104"}
    assert post(app, "/api/v1/lineage", completed, SPARK.token)[0] == 403


def test_a_forwarded_skipped_run_is_judged_by_its_outputs_too(writer: GroupWriter, catalog_path: str) -> None:
    """``serve --tokens --forward``: the event goes on to the backend as it came, which reads its
    outputs whatever its facets say: a token's skipped run's outputs of another namespace were
    taken (201) and forwarded, a write of another team's dataset in Marquez."""
    app = ReceiverApp(Intake(writer.submit), tokens=[SPARK, ANY], forward=True)
    event = _skipped_abort("0194a1b2-0000-7000-8000-000000000105")
    status, body = post(app, "/api/v1/lineage", event, SPARK.token)
    assert (status, body["error"]["problems"][0]["pointer"]) == (403, "/outputs/0/namespace"), body
    with Catalog(catalog_path) as catalog:
        assert catalog.outbox.status().pending == 0  # nothing to forward


def test_an_input_of_another_namespace_is_read_but_its_facets_are_not_applied(
    app: ReceiverApp, catalog_path: str, ledger: Any
) -> None:
    event = ol_run_event(
        run_id="0194a1b2-0000-7000-8000-000000000102",
        job=("etl", "job"),
        inputs=[_ledger(**DOCUMENTED, **SYMLINKED), ol_dataset("etl", "mine", documentation={"description": "ok"})],
        outputs=[ol_dataset("etl", "out")],
    )
    status, _, body = Client(app, token=SPARK.token).post("/api/v1/lineage", event)
    assert status == 201, body
    assert body["warnings"] == [
        "/inputs/0: token 'spark' may not write namespace 's3://finance': the facets the event carries for this "
        "input were not applied"
    ]
    assert _asset_said(catalog_path) == ledger
    with Catalog(catalog_path) as catalog:
        assert "ok" in [a.description for a in catalog.list_assets()]  # its own namespace's input
        assert catalog.count_received()["received_events"] == 2


def test_a_forwarded_input_of_another_namespace_goes_on_without_its_facets(
    writer: GroupWriter, catalog_path: str
) -> None:
    """``serve --tokens --forward``: the receiver did not apply the facets a token's event gave
    an input of another namespace, but forwarded them as they came, for the backend (Marquez
    applies an input's facets to its dataset) to write another team's dataset. The forwarded
    event leaves them out; the rest goes on as it came, and an event with none goes on byte for
    byte."""
    app = ReceiverApp(Intake(writer.submit), tokens=[SPARK, ANY], forward=True)
    ledger = _ledger(**DOCUMENTED, **SYMLINKED)
    ledger["inputFacets"] = {"inputStatistics": {"_producer": PRODUCER, "_schemaURL": PRODUCER, "rowCount": 3}}
    mine = ol_dataset("etl", "mine", documentation={"description": "ok"})
    event = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000106", job=("etl", "job"), inputs=[ledger, mine])
    status, _, body = Client(app, token=SPARK.token).post("/api/v1/lineage", event)
    assert status == 201 and "(nor forwarded)" in body["warnings"][0], body
    plain = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000107", job=("etl", "job"), inputs=[mine])
    text = json.dumps(plain, indent=1)
    status, _, _ = Client(app, token=SPARK.token).request(
        "POST", "/api/v1/lineage", text.encode(), {"Content-Type": "application/json"}
    )
    assert status == 201
    with Catalog(catalog_path) as catalog:
        forwarded = [row[0] for row in catalog._conn.execute("SELECT payload FROM outbox ORDER BY seq")]
    first = json.loads(forwarded[0])
    assert first["inputs"] == [{"namespace": ledger["namespace"], "name": ledger["name"]}, mine]
    assert {**first, "inputs": event["inputs"]} == event  # the rest as it came
    assert forwarded[1] == text
    # a DatasetEvent by its shape alone (no schemaURL: another reader may read a RunEvent, and its
    # inputs) goes on without them too
    shaped = {
        "eventTime": "2025-03-01T09:00:00Z",
        "producer": PRODUCER,
        "eventType": "COMPLETE",
        "dataset": {"namespace": "etl", "name": "orders"},
        "job": {"namespace": "etl", "name": "j"},
        "inputs": [ledger],
    }
    status, _, body = Client(app, token=SPARK.token).post("/api/v1/lineage", shaped)
    assert status == 201 and any("(nor forwarded)" in w for w in body["warnings"]), body
    with Catalog(catalog_path) as catalog:
        (last,) = catalog._conn.execute("SELECT payload FROM outbox ORDER BY seq DESC LIMIT 1").fetchone()
    assert json.loads(last)["inputs"] == [{"namespace": ledger["namespace"], "name": ledger["name"]}]


def test_an_inputs_own_facets_of_another_namespace_check_nothing(
    app: ReceiverApp, catalog_path: str, ledger: Any
) -> None:
    """An input with input facets alone (no dataset facets) was not held to the rule: a failed
    ``dataQualityAssertions`` there FAILed another namespace's dataset."""
    dataset = _ledger()
    dataset["inputFacets"] = {
        "dataQualityAssertions": {
            "_producer": "https://github.com/example/producer/tree/1.0",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
            "assertions": [{"assertion": "not_null", "success": False, "column": "id"}],
        }
    }
    event = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000103", job=("etl", "job"), inputs=[dataset])
    status, _, body = Client(app, token=SPARK.token).post("/api/v1/lineage", event)
    assert status == 201 and body["warnings"] == [
        "/inputs/0: token 'spark' may not write namespace 's3://finance': the facets the event carries for this "
        "input were not applied"
    ], body
    with Catalog(catalog_path) as catalog:
        (placeholder,) = [a.id for a in catalog.list_assets() if "ledger" in a.id]
        assert catalog.latest_checks([placeholder], datetime.now(UTC)) == {}


def test_a_token_cannot_join_another_namespaces_run_by_its_run_id(app: ReceiverApp, catalog_path: str) -> None:
    """A token naming the runId of another namespace's run (under a job of its own) took the run
    over: its job, its state (FAIL) and its facets, with a warning only. Now a 403 that changes
    nothing, alone or in a batch, and names no job of the other namespace."""
    run_id = "0194a1b2-0000-7000-8000-000000000104"
    owner = ol_run_event("START", run_id=run_id, job=("finance-jobs", "load"), outputs=[_ledger()])
    assert post(app, "/api/v1/lineage", owner, ANY.token)[0] == 201
    before = contents(catalog_path)
    taken = ol_run_event("FAIL", run_id=run_id, job=("etl", "evil"), time="2025-03-01T09:00:00Z")
    status, body = post(app, "/api/v1/lineage", taken, SPARK.token)
    assert (status, body["error"]["code"]) == (403, "forbidden"), body
    assert body["error"]["problems"][0]["pointer"] == "/run/runId"
    assert f"may not write run {run_id}: it is the run of a job of another namespace" in body["error"]["message"]
    assert "finance" not in body["error"]["message"]
    assert contents(catalog_path) == before
    # nor by its id in capitals, which Marquez reads as the same run (a UUID ignores case), nor
    # spelled as Java's UUID parser reads it as the same (groups short of their leading zeros, a
    # "+"): they were taken as runs of their own here, and forwarded to Marquez ended this one
    for spelled in (run_id.upper(), "194a1b2-0-7000-8000-104", "0194a1b2-+0-7000-8000-000000000104"):
        shouted = ol_run_event("ABORT", run_id=spelled, job=("etl", "evil"), time="2025-03-01T09:30:00Z")
        status, body = post(app, "/api/v1/lineage", shouted, SPARK.token)
        assert (status, body["error"]["code"]) == (403, "forbidden"), (spelled, body)
        assert contents(catalog_path) == before
    status, body = post(app, "/api/v1/lineage/batch", [run_event(8, "etl"), taken], SPARK.token)
    assert (status, [f["index"] for f in body["failed_events"]]) == (200, [1])
    # counted as the token's forbidden events (they were its "refused", unlike a namespace's)
    text = Client(app, token=SPARK.token).request("GET", "/metrics")[2]
    assert 'olbridge_receiver_token_events_total{token="spark",result="forbidden"} 5' in text, text
    assert 'olbridge_receiver_token_events_total{token="spark",result="refused"} 0' in text
    # the platform's token may write every namespace: it may still name the run under another job
    assert post(app, "/api/v1/lineage", taken, ANY.token)[0] == 201


def test_metrics_are_behind_the_tokens(app: ReceiverApp, writer: GroupWriter) -> None:
    """(#30) /metrics needed no token and listed the token names: with tokens on, it takes one."""
    status, _, body = Client(app, token=None).request("GET", "/metrics")
    assert (status, body["error"]["code"]) == (401, "unauthorized")
    assert "spark" not in str(body)
    status, _, text = Client(app, token=SPARK.token).request("GET", "/metrics")
    assert status == 200 and "olbridge_receiver_events_total" in text
    shared = ReceiverApp(Intake(writer.submit), token="shared")
    assert Client(shared, token=None).request("GET", "/metrics")[0] == 401
    assert Client(shared, token="shared").request("GET", "/metrics")[0] == 200
    assert Client(ReceiverApp(Intake(writer.submit)), token=None).request("GET", "/metrics")[0] == 200


def test_a_token_file_others_can_read_is_warned_of(tmp_path: Path) -> None:
    """(#30) A token file readable by every user was taken silently."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKENS_FILE)
    token = tmp_path / "token.txt"
    token.write_text("s3cret\n")
    for path in (tokens, token):
        path.chmod(0o644)
    runner = CliRunner()
    with socket.create_server(("127.0.0.1", 0)) as taken:  # a port in use stops serve once the files are read
        port = str(taken.getsockname()[1])
        for option, path in (("--tokens", tokens), ("--token-file", token)):
            args = ["--catalog", str(tmp_path / "c.db"), "serve", option, str(path), "--port", port]
            result = runner.invoke(cli, args)
            assert "the address is in use" in result.stderr
            assert f"{path} can be read by other users (mode 0644); chmod 600 {path}" in result.stderr, result.stderr
            path.chmod(0o600)
            assert "can be read by other users" not in runner.invoke(cli, args).stderr


def test_a_collision_is_said_without_naming_a_dataset_the_token_may_not_write(
    app: ReceiverApp, catalog_path: str
) -> None:
    """A dataset whose id the rules give is another dataset's already is kept apart with a warning;
    that warning named the other dataset (a payroll database's host, say) to any token whose
    event collided with it. It names it to a token that may write its namespace only."""
    payroll = ol_dataset("postgres://payroll-db.internal:5432", "hr.public.salaries")
    assert post(app, "/api/v1/lineage", run_event(21, "airflow") | {"outputs": [payroll]}, ANY.token)[0] == 201
    guess = ol_dataset("postgres://guess:5432", "hr.public.salaries")
    status, body = post(app, "/api/v1/lineage", run_event(22, "etl") | {"inputs": [guess]}, SPARK.token)
    assert status == 201
    (warning,) = [w for w in body["warnings"] if "maps to asset id" in w]
    assert "payroll-db" not in warning and "another dataset's, in a namespace not this token's" in warning
    other = ol_dataset("postgres://other:5432", "hr.public.salaries")
    status, body = post(app, "/api/v1/lineage", run_event(23, "airflow") | {"inputs": [other]}, ANY.token)
    assert any("the dataset postgres://payroll-db.internal:5432 hr.public.salaries" in w for w in body["warnings"])
    with Catalog(catalog_path) as catalog:
        kept = [row[0] for row in catalog._conn.execute("SELECT warnings FROM external_sources ORDER BY source")]
    assert sum(text.count("payroll-db") for text in kept) == 1  # in the platform token's run alone


def test_naming_another_namespaces_dataset_moves_nothing_of_it_and_says_nothing_of_it(
    app: ReceiverApp, catalog_path: str, ledger: Any
) -> None:
    """An input of a namespace the token may not write is read: its sightings and producer stayed
    only in name (a later event of the token's moved the ledger's "last seen" and named its own
    producer there), and the answer's placeholders told whether the dataset existed."""
    with Catalog(catalog_path) as catalog:
        before = catalog.asset("s3://finance/ledger")
    event = ol_run_event(
        run_id="0194a1b2-0000-7000-8000-000000000131",
        job=("etl", "peek"),
        inputs=[_ledger(), ol_dataset("s3://finance", "no-such-table")],
        outputs=[ol_dataset("etl", "mine")],
        time="2030-01-01T00:00:00Z",
        producer="https://evil.example/peeked",
    )
    status, body = post(app, "/api/v1/lineage", event, SPARK.token)
    with Catalog(catalog_path) as catalog:
        after = catalog.asset("s3://finance/ledger")
        new = [a.id for a in catalog.list_assets() if a.metadata.get("olName") == "no-such-table"]
        mine = [a.id for a in catalog.list_assets() if a.metadata.get("olName") == "mine"]
    assert status == 201 and body["placeholders"] == mine, body  # its own new dataset alone
    assert after.metadata == before.metadata and after.updated_at == before.updated_at
    assert len(new) == 1  # the lineage still has the dataset it read


LAKE = NamedToken("lake", "lake-secret", ("team-a", "s3://lake-a*"))
CHECKS_URL = "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json"


def test_a_token_writes_no_asset_of_a_namespace_it_may_not_see(writer: GroupWriter, catalog_path: str) -> None:
    """An asset declared in team-b whose dataset is in a namespace the token may write
    (``s3://lake-a``) was failed, freshened and checked by that token's events, though its scope
    in the web view does not let it see it: as an output or a DatasetEvent's dataset, a 403 that
    changes nothing; as an input it is read, and the facets and assertions the event carries
    for it are not applied, said in a warning."""
    with Catalog(catalog_path) as catalog:
        catalog.set_asset(AssetDeclaration.create("s3://lake-a/coll", type="File", namespace="team-b"), now=T0)
        catalog.set_asset(AssetDeclaration.create("s3://lake-a/mine", type="File", namespace="team-a"), now=T0)
    app = ReceiverApp(Intake(writer.submit, metrics=Metrics([LAKE.name, ANY.name])), tokens=[LAKE, ANY])
    before = contents(catalog_path)
    coll, mine = ol_dataset("s3://lake-a", "coll"), ol_dataset("s3://lake-a", "mine")
    failed = ol_run_event("FAIL", run_id="0194a1b2-0000-7000-8000-000000000200", job=("team-a", "j"))
    failed["outputs"] = [mine, coll]
    dataset_event = {"eventTime": "2025-03-01T09:00:00Z", "producer": PRODUCER, "schemaURL": DATASET_EVENT_URL}
    for event, pointer in [(failed, "/outputs/1"), ({**dataset_event, "dataset": coll}, "/dataset")]:
        status, body = post(app, "/api/v1/lineage", event, LAKE.token)
        assert (status, body["error"]["code"]) == (403, "forbidden"), body
        assert body["error"]["problems"][0]["pointer"] == pointer
        assert (
            "may not write dataset s3://lake-a coll: it is an asset of a namespace not this token's"
            in (body["error"]["message"])
        )
        assert contents(catalog_path) == before
    checked = ol_dataset("s3://lake-a", "coll", documentation={"description": "forged"})
    checked["inputFacets"] = {
        "dataQualityAssertions": {
            "_producer": PRODUCER,
            "_schemaURL": CHECKS_URL,
            "assertions": [{"assertion": "not_null", "success": False}],
        }
    }
    read = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000210", job=("team-a", "j"), inputs=[checked])
    read["outputs"] = [mine]
    status, _, body = Client(app, token=LAKE.token).post("/api/v1/lineage", read)
    assert status == 201 and body["warnings"] == [
        "/inputs/0: token 'lake' may not write dataset s3://lake-a coll, an asset of a namespace not this token's: "
        "the facets the event carries for this input were not applied"
    ], body
    with Catalog(catalog_path) as catalog:
        assert catalog.latest_checks(["s3://lake-a/coll"], datetime.now(UTC)) == {}
        assert catalog.asset("s3://lake-a/coll").received_facets == {}
    assert post(app, "/api/v1/lineage", failed, ANY.token)[0] == 201  # a token of every namespace may
    with Catalog(catalog_path) as catalog:  # deleted, it is another namespace's no more
        catalog.delete_asset("s3://lake-a/coll", now=T0)
    failed["run"]["runId"] = "0194a1b2-0000-7000-8000-000000000211"
    assert post(app, "/api/v1/lineage", failed, LAKE.token)[0] == 201


def test_a_hidden_asset_read_by_another_name_stays_bound_to_its_asset(writer: GroupWriter, catalog_path: str) -> None:
    """An input read under another name (Spark's location, its Hive table a symlink) that is an
    asset of a namespace the token may not see: its facets are not applied, but it is still bound
    to that asset by its symlink; left out with its facets, the symlink no longer named the
    asset, and the dataset was bound to a new placeholder for good, the asset's lineage split."""
    hive = "hive://metastore:9083/sales.orders_enriched"
    with Catalog(catalog_path) as catalog:
        catalog.set_asset(AssetDeclaration.create(hive, type="Table", namespace="team-b"), now=T0)
    spark = NamedToken("spark", "spark-secret", ("spark", "hdfs://*", "hive://*"))
    app = ReceiverApp(Intake(writer.submit, metrics=Metrics([spark.name, ANY.name])), tokens=[spark, ANY])
    located = ol_dataset(
        "hdfs://namenode:8020",
        "/warehouse/sales.db/orders_enriched",
        documentation={"description": "forged"},
        symlinks={
            "identifiers": [{"namespace": "hive://metastore:9083", "name": "sales.orders_enriched", "type": "TABLE"}]
        },
    )
    event = ol_run_event(run_id="0194a1b2-0000-7000-8000-000000000220", job=("spark", "j"), inputs=[located])
    status, _, body = Client(app, token=spark.token).post("/api/v1/lineage", event)
    assert status == 201 and "an asset of a namespace not this token's" in body["warnings"][0], body
    assert body["placeholders"] == []
    with Catalog(catalog_path) as catalog:
        bound = catalog._conn.execute(
            "SELECT asset_id FROM external_datasets WHERE ol_namespace = ? AND ol_name = ?",
            ("hdfs://namenode:8020", "/warehouse/sales.db/orders_enriched"),
        ).fetchall()
        assert [row[0] for row in bound] == [hive]
        assert catalog.asset(hive).description is None  # the forged description not applied
