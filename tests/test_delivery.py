"""Senders, retry rules, configuration, and Marquez's semantics through the stream worker
(HTTP mocked with ``responses``)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from bridge.catalog import Catalog
from bridge.catalog.outbox import Dead, RetryLater
from bridge.delivery.config import sender_for
from bridge.delivery.dispatch import NOT_SENT, Dispatcher
from bridge.delivery.retry import RateLimiter, RetryPolicy, parse_retry_after
from bridge.delivery.senders import HttpSender, Outcome, TransportSender, classify
from bridge.delivery.worker import StreamWorker, settle_outcome
from bridge.errors import ConfigError
from bridge.openlineage.convert import Converter
from bridge.openlineage.validate import validate_event
from tests.conftest import at
from tests.helpers import decl, run

pytestmark = pytest.mark.both_engines

URL = "http://marquez.test:5000"
LINEAGE = f"{URL}/api/v1/lineage"
BATCH = f"{LINEAGE}/batch"
MARQUEZ_NAMESPACE = re.compile(r"^[A-Za-z0-9_\-.:/@+]{1,1024}$")


# --- rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "ok", "retry"),
    [
        (200, "", True, False),
        (201, "", True, False),
        (204, "", True, False),
        (400, "", False, False),
        (422, '{"errors":["job must not be null"]}', False, False),
        (404, "", False, False),
        (408, "", False, True),
        (429, "", False, True),
        (500, "", False, True),
        (500, '{"code":400,"message":"Cannot deserialize value of type `java.time.ZonedDateTime`"}', False, False),
        (500, '{"code":500,"message":"db down"}', False, True),
        (502, "", False, True),
        (503, "<html>busy</html>", False, True),
    ],
)
def test_classify(status: int, body: str, ok: bool, retry: bool) -> None:
    outcome = classify(status, body, {}, now=0)
    assert (outcome.ok, outcome.retry, outcome.status) == (ok, retry, status)
    if not ok:
        assert outcome.detail == body


def test_retry_after_in_seconds_and_as_an_http_date() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after(format_datetime(datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC), usegmt=True), now) == 30.0
    assert parse_retry_after("not a date", now) is None
    assert parse_retry_after(None, now) is None
    assert classify(429, "", {"Retry-After": "3"}, now).retry_after == 3.0


def test_backoff_doubles_with_jitter_up_to_the_cap_and_honours_retry_after() -> None:
    low = RetryPolicy(base=1, cap=10, jitter=lambda: 0.0)
    high = RetryPolicy(base=1, cap=10, jitter=lambda: 0.999999)
    assert [low.delay(n) for n in (1, 2, 3, 4, 5, 6)] == [0.5, 1, 2, 4, 5, 5]
    assert [round(high.delay(n), 3) for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 8, 10]
    assert low.delay(3, retry_after=7) == 7
    # the backend's ask, beyond --max-backoff (a backend that asks for 700 s was asked again every
    # 10 s), up to an hour
    assert low.delay(3, retry_after=700) == 700
    assert low.delay(3, retry_after=10**9) == 3600
    assert RetryPolicy(cap=7200).delay(3, retry_after=7200) == 7200  # a --max-backoff longer than an hour
    assert not RetryPolicy().gives_up(1000)
    assert RetryPolicy(max_attempts=3).gives_up(3)


def test_rate_limiter_spaces_requests() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(100, lambda: now[0], sleep)
    for _ in range(5):
        limiter.acquire(50)
    assert slept == [0.5, 0.5, 0.5, 0.5]  # 250 events at 100/s: 2 seconds after the first


def test_a_batch_that_went_one_by_one_pays_the_rate_limit_for_what_it_sent() -> None:
    """The first batch request found no batch endpoint (404): its share of ``--rate`` was taken
    for the whole batch (200 events: 20 s at 10 a second) though 8 events went; the rest is
    given back but for the 8 it sends one by one, so the next request waits 0.8 s, not 20."""
    from bridge.delivery.senders import DELIVERED

    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    class NoBatchEndpoint:
        target, max_concurrency, batch = "http://b", 1, True

        def try_batch(self, lines: Sequence[str]) -> None:
            self.batch = False  # the 404: one event a request from now on

        def send(self, lines: Sequence[str]) -> list[Outcome]:
            return [DELIVERED for _ in lines]

        def close(self) -> None:
            pass

    limiter = RateLimiter(10, lambda: now[0], sleep)
    dispatcher = Dispatcher(NoBatchEndpoint(), concurrency=1, batch_size=200, limiter=limiter)
    first = dispatcher.send(["e"] * 200, proceed=lambda: True)
    assert all(o.ok for o in first[:8]) and sum(o is NOT_SENT for o in first) == 192
    dispatcher.send(["e"], proceed=lambda: True)
    assert slept == [pytest.approx(0.8)]


# --- configuration --------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    import os

    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_url_flag_and_legacy_variables(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sender = sender_for("http://localhost:5000/", api_key="k")
    assert isinstance(sender, HttpSender)
    assert (sender.url, sender.batch_url) == ("http://localhost:5000/api/v1/lineage", f"{sender.url}/batch")
    assert sender.headers["Authorization"] == "Bearer k"
    monkeypatch.setenv("OPENLINEAGE_URL", "http://ol.test:5000")
    monkeypatch.setenv("OPENLINEAGE_API_KEY", "secret")
    sender = sender_for(None)
    assert isinstance(sender, HttpSender)
    assert sender.url == "http://ol.test:5000/api/v1/lineage" and sender.headers["Authorization"] == "Bearer secret"


def test_openlineage_yml_http_transport(clean_env: Path) -> None:
    (clean_env / "openlineage.yml").write_text(
        "transport:\n  type: http\n  url: http://ol.test:8080\n  endpoint: api/v2/lineage\n  timeout: 2.5\n"
        "  auth:\n    type: api_key\n    apiKey: abc\n  custom_headers:\n    X-Tenant: t1\n"
    )
    sender = sender_for(None)
    assert isinstance(sender, HttpSender)
    assert sender.url == "http://ol.test:8080/api/v2/lineage" and sender.timeout == 2.5
    assert sender.headers["Authorization"] == "Bearer abc" and sender.headers["X-Tenant"] == "t1"


def test_transport_variables_give_openlineage_python_transports(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, catalog: Catalog, converter: Converter
) -> None:
    out = clean_env / "events.jsonl"
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(out))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    sender = sender_for(None)
    assert isinstance(sender, TransportSender) and sender.target == "file transport"
    catalog.record_task_run(run("a"))
    stats = StreamWorker(catalog, converter, Dispatcher(sender)).run(once=True)
    assert stats.delivered == 2
    sent = [json.loads(line) for line in out.read_text().splitlines()]
    assert [e["eventType"] for e in sent] == ["START", "COMPLETE"]


def test_composite_transport_from_yaml(clean_env: Path) -> None:
    (clean_env / "openlineage.yml").write_text(
        "transport:\n  type: composite\n  transports:\n    one:\n      type: console\n"
        f"    two:\n      type: file\n      log_file_path: {clean_env / 'x.jsonl'}\n      append: true\n"
    )
    sender = sender_for(None)
    assert isinstance(sender, TransportSender) and sender.target == "composite transport"
    assert sender.send(['{"eventTime":"2025-01-01T00:00:00Z","producer":"p","schemaURL":"s"}']) == [Outcome(ok=True)]
    assert sender.prints  # its console prints the events on stdout (where --json may not go)
    # so does one a composite inside a composite holds; a file alone does not
    (clean_env / "openlineage.yml").write_text(
        "transport:\n  type: composite\n  transports:\n    outer:\n      type: composite\n      transports:\n"
        "        inner:\n          type: console\n"
    )
    nested = sender_for(None)
    assert isinstance(nested, TransportSender) and nested.prints
    (clean_env / "openlineage.yml").write_text(
        f"transport:\n  type: file\n  log_file_path: {clean_env / 'y.jsonl'}\n  append: true\n"
    )
    alone = sender_for(None)
    assert isinstance(alone, TransportSender) and not alone.prints


def test_an_api_key_from_the_environment_that_is_no_key_is_refused(clean_env: Path) -> None:
    for environ in (
        {"OPENLINEAGE_API_KEY": "sekrit\nx"},
        {"OPENLINEAGE_URL": "http://b", "OPENLINEAGE_API_KEY": "a b"},
    ):
        with pytest.raises(
            ConfigError, match=r"^OPENLINEAGE_API_KEY is no key: a key is printable ASCII without spaces$"
        ):
            sender_for("http://backend" if "OPENLINEAGE_URL" not in environ else None, environ=environ)


def test_no_configuration_is_an_error(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="no OpenLineage backend configured"):
        sender_for(None)
    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    with pytest.raises(ConfigError, match="OPENLINEAGE_DISABLED"):
        sender_for(None)
    with pytest.raises(ConfigError, match="http:// or https://"):
        sender_for("ftp://x")


def test_an_openlineage_configuration_that_cannot_be_read_says_so(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client logs a traceback and goes on without a file it cannot read (here: "no backend
    configured"); olbridge says what is wrong with it."""
    (clean_env / "openlineage.yml").write_text("transport: [a\n")
    with pytest.raises(ConfigError) as refused:
        sender_for(None)
    said = "the OpenLineage configuration cannot be read: line 2: expected ',' or ']', but got '<stream end>'"
    assert str(refused.value).endswith(f"openlineage.yml: {said}")  # on one line: where it is, what is wrong
    (clean_env / "openlineage.yml").write_text("transport:\n  type: http\x00\n")
    with pytest.raises(ConfigError) as refused:
        sender_for(None)
    said = "the OpenLineage configuration cannot be read: line 2: unacceptable character #x0000: special"
    assert f"openlineage.yml: {said}" in str(refused.value) and "\n" not in str(refused.value)
    (clean_env / "openlineage.yml").write_text("- a list\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        sender_for(None)
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(clean_env / "missing.yml"))
    with pytest.raises(ConfigError, match=r"^OPENLINEAGE_CONFIG names .*missing\.yml, which is no file$"):
        sender_for(None)


@pytest.mark.parametrize(
    ("file", "variable", "said"),
    [
        ("  timeout: abc\n", None, "'abc'"),
        ("  timeout: .inf\n", None, "inf"),
        ("  timeout: true\n", None, "True"),
        ("", "-5", "-5"),
        ("", "0", "0"),
    ],
    ids=["a word", "infinite", "a boolean", "negative, from the environment", "none"],
)
def test_a_transport_timeout_that_is_no_number_of_seconds_is_an_error_before_anything_is_sent(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, file: str, variable: str | None, said: str
) -> None:
    """(a review) ``timeout: abc`` (or ``OPENLINEAGE__TRANSPORT__TIMEOUT=-5``) was a traceback as
    the first request went, after the backfill's progress had begun."""
    (clean_env / "openlineage.yml").write_text(f"transport:\n  type: http\n  url: http://127.0.0.1:9\n{file}")
    if variable is not None:
        monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TIMEOUT", variable)
    with pytest.raises(ConfigError) as refused:
        sender_for(None)
    assert str(refused.value) == (
        "the OpenLineage http transport configuration is wrong: timeout must be a number of seconds above 0 "
        f"(up to a year), not {said}"
    )
    (clean_env / "openlineage.yml").write_text("transport:\n  type: http\n  url: http://127.0.0.1:9\n  timeout: 2.5\n")
    monkeypatch.delenv("OPENLINEAGE__TRANSPORT__TIMEOUT", raising=False)
    sender = sender_for(None)
    assert getattr(sender, "timeout", None) == 2.5, vars(sender)


def test_a_transport_that_cannot_be_set_up_is_one_error_without_the_clients_traceback(
    clean_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The client logs the error of a transport it cannot make (a traceback on stderr), then
    raises it: olbridge says it once, as an Error line."""
    (clean_env / "openlineage.yml").write_text("transport:\n  type: bogus\n")
    with caplog.at_level(logging.DEBUG), pytest.raises(ConfigError, match=r"^cannot set up the 'bogus' OpenLineage"):
        sender_for(None)
    assert [r for r in caplog.records if r.name.startswith("openlineage")] == []


# --- Marquez semantics through the worker ---------------------------------------------------


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def worker(catalog: Catalog, converter: Converter, **options: Any) -> StreamWorker:
    sender = HttpSender(URL, batch=options.pop("batch", False))
    slept: list[float] = []
    return StreamWorker(
        catalog,
        converter,
        Dispatcher(sender, concurrency=1, batch_size=options.pop("batch_size", 50)),
        policy=RetryPolicy(base=0.01, cap=0.01, max_attempts=options.pop("max_attempts", 0)),
        sleep=slept.append,
        **options,
    )


def bodies(mock: responses.RequestsMock, url: str = LINEAGE) -> list[dict[str, Any]]:
    return [json.loads(call.request.body) for call in mock.calls if call.request.url == url]


def history(catalog: Catalog) -> None:
    catalog.record_task_runs(
        [
            run(
                "load",
                inputs=(decl("raw.orders"),),
                outputs=(
                    decl("analytics.orders", type="Table", description="Orders, cleaned", metadata={"owner": "ops"}),
                ),
                namespace="company.data",
            ),
            run("report", inputs=(decl("analytics.orders"),), start=at(5), execution="e2"),
        ]
    )
    catalog.set_asset(decl("reports.daily", type="File", description="Daily report"), now=at(10))
    catalog.delete_asset("reports.daily", now=at(11))


def test_marquez_201_is_success_and_every_event_is_valid(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock, official: Callable[[Any], list[str]]
) -> None:
    history(catalog)
    mocked.post(LINEAGE, status=201)
    stats = worker(catalog, converter).run(once=True)
    sent = bodies(mocked)
    assert stats.delivered == len(sent) == 6 and catalog.outbox.status().pending == 0
    assert catalog.outbox.status().delivered == 6
    for event in sent:
        assert official(event) == []
        assert validate_event(event) == []
    runs = [e for e in sent if "run" in e]
    for event in runs:
        assert event["job"]["facets"]["jobType"]["jobType"] == "TASK"
    by_run: dict[str, list[str]] = {}
    for event in runs:
        by_run.setdefault(event["run"]["runId"], []).append(event["eventType"])
    assert sorted(by_run.values()) == [["START", "COMPLETE"]] * 2


def test_documentation_is_always_sent_when_known(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock
) -> None:
    history(catalog)
    mocked.post(LINEAGE, status=201)
    worker(catalog, converter).run(once=True)
    known = {"analytics.orders": "Orders, cleaned", "reports.daily": "Daily report"}
    described: dict[str, list[str | None]] = {}  # each time a documented dataset was sent, the description it carried
    for event in bodies(mocked):
        for dataset in [*event.get("inputs", []), *event.get("outputs", []), event.get("dataset") or {}]:
            if dataset.get("name") in known:
                description = dataset["facets"].get("documentation", {}).get("description")
                described.setdefault(dataset["name"], []).append(description)
    assert described.keys() == known.keys(), described  # both were sent: nothing passed unseen
    for name, descriptions in described.items():
        assert descriptions == [known[name]] * len(descriptions), (name, descriptions)


def test_namespaces_are_marquez_namespaces_and_symlinks_never_empty(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock
) -> None:
    history(catalog)
    catalog.record_task_run(
        run("x", execution="e3", outputs=(decl("s3://bucket/key.csv", type="File"),), namespace="ops.team-1")
    )
    mocked.post(LINEAGE, status=201)
    worker(catalog, converter).run(once=True)
    for event in bodies(mocked):
        datasets = [
            *event.get("inputs", []),
            *event.get("outputs", []),
            *([event["dataset"]] if "dataset" in event else []),
        ]
        namespaces = [d["namespace"] for d in datasets] + ([event["job"]["namespace"]] if "job" in event else [])
        for namespace in namespaces:
            assert MARQUEZ_NAMESPACE.match(namespace) and ";" not in namespace and "=" not in namespace
        for dataset in datasets:
            if "symlinks" in dataset["facets"]:
                assert dataset["facets"]["symlinks"]["identifiers"]


def test_assets_without_runs_are_dataset_events_and_a_delete_is_a_drop(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock
) -> None:
    catalog.set_asset(decl("reports.daily", type="File"), now=at(1))
    catalog.delete_asset("reports.daily", now=at(2))
    mocked.post(LINEAGE, status=201)
    worker(catalog, converter).run(once=True)
    update, drop = bodies(mocked)
    assert update["schemaURL"].endswith("/DatasetEvent") and "run" not in update
    assert "lifecycleStateChange" not in update["dataset"]["facets"]
    assert drop["dataset"]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (422, '{"errors":["job.name must not be null"]}'),
        (400, ""),
        (500, '{"code":400,"message":"Cannot deserialize value of type `java.time.ZonedDateTime`"}'),
    ],
)
def test_refusals_are_dead_letters_without_retry(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock, status: int, body: str
) -> None:
    catalog.record_task_run(run("a"))
    mocked.post(LINEAGE, status=status, body=body)
    stats = worker(catalog, converter).run(once=True)
    assert len(mocked.calls) == 1 and stats.dead == 1 and stats.retried == 0
    dead = catalog.outbox.items(dead=True)
    assert [(d.kind, d.last_status, d.last_error, d.attempts) for d in dead] == [("run-start", status, body, 1)]
    assert [i.kind for i in catalog.outbox.items()] == ["run-start", "run-end"]  # the end waits for its START


def test_5xx_and_connection_errors_are_retried(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock
) -> None:
    import requests

    catalog.record_task_run(run("a"))
    mocked.post(LINEAGE, body=requests.ConnectionError("refused"))
    mocked.post(LINEAGE, status=503)
    mocked.post(LINEAGE, status=201)
    stats = worker(catalog, converter).run(once=True)
    assert (stats.delivered, stats.retried, stats.dead) == (2, 2, 0)


def test_max_attempts_turns_retries_into_a_dead_letter(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock
) -> None:
    catalog.record_task_run(run("a"))
    mocked.post(LINEAGE, status=503, body="busy")
    stats = worker(catalog, converter, max_attempts=3).run(once=True)
    assert len(mocked.calls) == 3 and stats.dead == 1
    assert [(d.attempts, d.last_status, d.last_error) for d in catalog.outbox.items(dead=True)] == [(3, 503, "busy")]


def test_no_batch_endpoint_falls_back_to_one_event_a_request_and_remembers(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock
) -> None:
    catalog.record_task_runs([run("a"), run("b"), run("c")])
    mocked.post(BATCH, status=404, json={"code": 404, "message": "HTTP 404 Not Found"})
    mocked.post(LINEAGE, status=201)
    stats = worker(catalog, converter, batch=True).run(once=True)
    assert stats.delivered == 6
    assert [call.request.url for call in mocked.calls].count(BATCH) == 1
    assert len(bodies(mocked)) == 6


@pytest.mark.parametrize("status", [200, 207])  # 207 (Multi-Status) was taken for every event delivered
def test_batch_endpoint_with_per_event_results(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock, status: int
) -> None:
    catalog.record_task_runs([run("a"), run("b"), run("c")])
    failed = [{"index": 1, "reason": "bad", "retriable": False}, {"index": 2, "reason": "later", "retriable": True}]
    mocked.post(BATCH, status=status, json={"status": "partial_success", "summary": {}, "failed_events": failed})
    mocked.post(BATCH, status=204)
    mocked.post(LINEAGE, status=201)  # a round of one event goes to the single-event endpoint
    w = worker(catalog, converter, batch=True)
    assert w.step()
    assert (w.stats.delivered, w.stats.dead, w.stats.retried) == (1, 1, 1)
    assert [len(b) for b in bodies(mocked, BATCH)] == [3]
    dead = catalog.outbox.items(dead=True)
    assert [(d.ref, d.last_error) for d in dead] == [(2, "bad")]
    w.run(once=True)
    assert w.stats.delivered == 4  # a's end, c's START (retried) and c's end; b waits behind its dead START
    assert [i.ref for i in catalog.outbox.items()] == [2, 2]


def test_a_batch_too_large_for_the_backend_makes_later_batches_smaller(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock
) -> None:
    """A backend behind a proxy that takes bodies of 4 events at most answers a larger batch 413:
    every later group went to the batch endpoint whole again, 413 again, then one event a
    request, for good. Now the refused batch goes again in halves, and later batches hold no
    more than the halves that were taken; each event is delivered once."""
    catalog.record_task_runs([run(f"r{n}") for n in range(40)])
    sizes: list[tuple[str, int]] = []  # each batch request: the first event's type, its events

    def batch(request: Any) -> tuple[int, dict[str, str], str]:
        events = json.loads(request.body)
        sizes.append((events[0]["eventType"], len(events)))
        if len(events) > 4:
            return 413, {}, "<html>413 Request Entity Too Large</html>"
        return 200, {}, json.dumps({"status": "success", "summary": {}, "failed_events": []})

    mocked.add_callback(responses.POST, BATCH, callback=batch)
    mocked.post(LINEAGE, status=201)
    w = worker(catalog, converter, batch=True, batch_size=40)
    w.run(once=True)
    assert (w.stats.delivered, w.stats.dead) == (80, 0)
    sender = w.dispatcher.sender
    assert isinstance(sender, HttpSender) and (sender.batch, sender.batch_limit) == (True, 3)
    assert [n for kind, n in sizes if kind != "START"] and all(n <= 3 for kind, n in sizes if kind != "START"), sizes
    taken = sum(n for _, n in sizes if n <= 4) + len(bodies(mocked))
    assert taken == 80  # each event sent once where it was taken


def test_an_event_too_large_alone_leaves_later_batches_as_they_were(mocked: responses.RequestsMock) -> None:
    """An event the backend refuses as too large even alone (413) halved the size of later
    batches each time a batch held one, until batching was off for good. It is refused alone (a
    dead letter), and batches of events that fit go on as before."""
    requests_made: list[int] = []

    def batch(request: Any) -> tuple[int, dict[str, str], str]:
        requests_made.append(len(json.loads(request.body)))
        if len(request.body) > 20_000:
            return 413, {}, "too large"
        return 200, {}, json.dumps({"status": "success", "summary": {}, "failed_events": []})

    mocked.add_callback(responses.POST, BATCH, callback=batch)
    mocked.add_callback(
        responses.POST, LINEAGE, callback=lambda request: (413 if len(request.body) > 20_000 else 201, {}, "")
    )
    small, huge = json.dumps({"e": "x" * 40}), json.dumps({"e": "x" * 30_000})
    dispatcher = Dispatcher(HttpSender(URL), concurrency=1, batch_size=100)
    for _ in range(6):
        outcomes = dispatcher.send([small] * 99 + [huge])
        assert [o.ok for o in outcomes] == [True] * 99 + [False] and outcomes[-1].status == 413
    requests_made.clear()
    for _ in range(10):
        assert all(o.ok for o in dispatcher.send([small] * 100))
    assert requests_made == [100] * 10
    sender = dispatcher.sender
    assert isinstance(sender, HttpSender) and (sender.batch, sender.batch_limit) == (True, None)


def test_a_batch_refused_as_a_whole_is_sent_one_by_one_to_find_the_bad_event(
    catalog: Catalog, converter: Converter, mocked: responses.RequestsMock
) -> None:
    catalog.record_task_runs([run("a"), run("b")])
    mocked.post(BATCH, status=422, json={"errors": ["[1].job must not be null"]})
    mocked.post(LINEAGE, status=201)
    mocked.post(LINEAGE, status=422, json={"errors": ["job must not be null"]})
    mocked.post(LINEAGE, status=201)
    w = worker(catalog, converter, batch=True)
    w.step()
    assert (w.stats.delivered, w.stats.dead) == (1, 1)
    sender = w.dispatcher.sender
    assert isinstance(sender, HttpSender) and sender.batch  # the backend has a batch endpoint


class FakeKafka:
    kind = "kafka"

    def __init__(self) -> None:
        self.message_key: str | None = None
        self.keys: list[str | None] = []
        self.fail = 1

    def emit(self, event: dict[str, Any]) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("broker down")
        self.keys.append(self.message_key)

    def close(self) -> None: ...


def test_transport_sender_keys_kafka_messages_and_retries_failures(catalog: Catalog, converter: Converter) -> None:
    catalog.record_task_run(run("a"))
    catalog.set_asset(decl("reports.x", type="File"), now=at(9))
    kafka = FakeKafka()
    stats = StreamWorker(catalog, converter, Dispatcher(TransportSender(kafka)), sleep=lambda s: None).run(once=True)
    assert (stats.delivered, stats.retried) == (3, 1)
    # the START failed once, so the DatasetEvent (another key) went first
    assert kafka.keys == ["dataset:olbridge/reports.x", "run:company.data/flow", "run:company.data/flow"]


def test_a_locked_catalog_delays_recording_the_outcome(
    tmp_path: Path, converter: Converter, mocked: responses.RequestsMock
) -> None:
    import sqlite3

    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        catalog.record_task_run(run("a"))
        mocked.post(LINEAGE, status=201)
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process writing
        catalog._conn.execute("PRAGMA busy_timeout = 10")
        waits: list[float] = []

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            if len(waits) == 2:
                other.execute("COMMIT")

        w = StreamWorker(catalog, converter, Dispatcher(HttpSender(URL, batch=False)), sleep=sleep, poll=0.5)
        w.run(once=True)
        other.close()
        assert waits[:2] == [0.5, 0.5] and w.stats.delivered == 2
        assert catalog.outbox.status().pending == 0


def test_failure_report_says_each_kind_at_most_once_per_interval_and_counts_the_rest() -> None:
    from bridge.delivery.report import FailureReport

    now = [datetime(2026, 1, 1, tzinfo=UTC).timestamp()]
    lines: list[str] = []
    report = FailureReport(URL, lines.append, clock=lambda: now[0], interval=5)
    refused = Outcome(
        ok=False, retry=True, detail="ConnectionError: [Errno 111] Connection refused", error="connection refused"
    )
    busy = Outcome(ok=False, retry=True, status=503, detail="<html>\n busy </html>")
    report.failed([refused] * 3 + [Outcome(ok=True)], "next retry at A")
    report.failed([busy], "next retry at B")
    for _ in range(4):  # within 5 s: counted, not said
        now[0] += 1
        report.failed([refused, refused], "next retry at C")
    now[0] += 1
    report.failed([refused], "next retry at D")
    report.failed([Outcome(ok=True)], "nothing to say")
    now[0] += 1
    report.failed([busy], "next retry at E")  # 6 s after its last line
    report.failed([Outcome(ok=False, status=422, detail='{"errors":["bad"]}')], "kept as a dead letter")
    now[0] += 1
    report.failed([busy, busy], "next retry at F")
    report.flush()
    assert lines == [
        f"delivery to {URL}: 3 event(s) failed, connection refused (ConnectionError: [Errno 111] Connection refused); "
        "next retry at A",
        f"delivery to {URL}: 1 event(s) failed, HTTP 503 <html> busy </html>; next retry at B",
        f"delivery to {URL}: 1 event(s) failed, connection refused (ConnectionError: [Errno 111] Connection refused); "
        "next retry at D (8 more such failure(s) since 2026-01-01T00:00:01Z)",
        f"delivery to {URL}: 1 event(s) failed, HTTP 503 <html> busy </html>; next retry at E",
        f'delivery to {URL}: 1 event(s) failed, refused (HTTP 422 {{"errors":["bad"]}}); kept as a dead letter',
        f"delivery to {URL}: 2 more HTTP 5xx failure(s) since 2026-01-01T00:00:07Z",
    ]


def test_failures_without_an_answer_are_named_short() -> None:
    from bridge.delivery.senders import unanswered

    refused = unanswered(
        requests.ConnectionError(
            "HTTPConnectionPool(host='h', port=9): Max retries exceeded (Caused by NewConnectionError("
            '"...: Failed to establish a new connection: [Errno 111] Connection refused"))'
        )
    )
    assert (refused.failure, refused.detail) == (
        "connection refused",
        "ConnectionError: [Errno 111] Connection refused",
    )
    timeout = unanswered(requests.ReadTimeout("HTTPConnectionPool(host='h', port=1): Read timed out. (read timeout=5)"))
    assert (timeout.failure, timeout.detail) == ("timeout", "ReadTimeout: Read timed out. (read timeout=5)")
    unknown = unanswered(requests.ConnectionError("Failed to resolve 'nowhere' ([Errno -2] Name or service not known)"))
    assert (unknown.failure, unknown.detail) == (
        "connection error",
        "ConnectionError: [Errno -2] Name or service not known",
    )
    assert [classify(s, "", {}, 0).failure for s in (429, 408, 502, 400)] == [
        "HTTP 429",
        "HTTP 408",
        "HTTP 5xx",
        "refused",
    ]


def test_out_of_attempts_an_answer_to_retry_is_a_dead_letter_but_no_answer_stays_pending() -> None:
    policy = RetryPolicy(base=1.0, max_attempts=2, jitter=lambda: 0.0)
    unavailable = Outcome(ok=False, retry=True, status=503, detail="busy")
    down = Outcome(ok=False, retry=True, error="connection refused", detail="[Errno 111] Connection refused")
    assert isinstance(settle_outcome(1, 1, unavailable, policy, 100.0), RetryLater)
    assert isinstance(settle_outcome(1, 2, unavailable, policy, 100.0), Dead)
    later = settle_outcome(2, 2, down, policy, 100.0)
    assert isinstance(later, RetryLater) and later.attempts == 2
    assert isinstance(settle_outcome(2, 50, down, policy, 100.0), RetryLater)


@pytest.mark.parametrize(
    ("status", "location", "delivered"),
    [
        (302, "/login", False),  # followed, the POST became a GET: a login page's 200 read as delivered
        (301, "/api/v1/lineage/", False),
        (303, "/see", False),
        (307, "/v2/api/v1/lineage", True),  # keeps the POST and its body, on the same host: followed
        (308, "/v2/api/v1/lineage", True),
        (308, "http://elsewhere.invalid/api/v1/lineage", False),  # another host: the token goes nowhere else
    ],
)
def test_a_backend_that_redirects_is_followed_only_where_the_post_is_kept(
    status: int, location: str, delivered: bool
) -> None:
    """A 3xx from the backend is an answer, not delivery, but for a 307 or 308 on its own host
    (the same POST, with its body, at the new address). The others are refused with where they
    led, and nothing but a POST reaches the server."""
    import http.server
    import threading

    seen: list[str] = []

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(f"POST {self.path} {len(body)}")
            if self.path.startswith("/v2/"):
                self.send_response(200)
            else:
                self.send_response(status)
                self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            seen.append(f"GET {self.path}")
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        sender = HttpSender(f"http://127.0.0.1:{server.server_address[1]}", timeout=5, batch=False)
        outcomes = sender.send(['{"eventType":"START"}', '{"eventType":"COMPLETE"}'])
        sender.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert all(s.startswith("POST ") and not s.endswith(" 0") for s in seen), seen  # each with its body
    if delivered:
        assert [(o.ok, o.status) for o in outcomes] == [(True, 200)] * 2
        assert sum(s.startswith("POST /v2/") for s in seen) == 2
    else:
        assert [(o.ok, o.retry, o.status) for o in outcomes] == [(False, False, status)] * 2
        assert all(f"a redirect to {location}" in (o.detail or "") for o in outcomes)


def _to_the_console(folder: Path) -> tuple[list[str], dict[str, str]]:
    """A catalog in ``folder`` (``c.db``) of one task run, and an ``openlineage.yml`` of the
    console transport beside it: the command line of olbridge on it, and an environment with no
    OpenLineage variables (for a command run in ``folder``)."""
    import os
    import sys

    with Catalog(folder / "c.db") as catalog:
        catalog.record_task_run(run("a", outputs=(decl("mart.a", type="Table"),)))
    (folder / "openlineage.yml").write_text("transport:\n  type: console\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENLINEAGE")}
    return [str(Path(sys.executable).parent / "olbridge"), "--catalog", str(folder / "c.db")], env


@pytest.mark.parametrize("command", [["stream", "--once"], ["backfill"]])
def test_the_console_transport_prints_each_event_on_stdout(tmp_path: Path, command: list[str]) -> None:
    """openlineage-python's console transport hands each event to a logger at INFO, which
    nothing printed: `stream` and `backfill` to it said every event delivered (the outbox
    emptied) and showed none. Each event is a line on stdout."""
    import subprocess

    base, env = _to_the_console(tmp_path)
    done = subprocess.run([*base, *command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"], done.stdout
    assert all(validate_event(e) == [] for e in events)


def test_the_console_transport_keeps_what_stdout_would_not_take(tmp_path: Path) -> None:
    """stdout closed under it (`| head`): logging swallowed the failed writes, and the events were
    deleted as delivered. They stay queued; and `--json`, whose summary would go among the
    events, is a usage error."""
    import os
    import subprocess

    base, env = _to_the_console(tmp_path)
    db = tmp_path / "c.db"
    command = [*base, "stream", "--once", "--give-up-after", "1"]
    read, write = os.pipe()
    os.close(read)  # nobody reads: every write fails
    try:
        done = subprocess.run(
            command, cwd=tmp_path, env=env, stdout=write, stderr=subprocess.PIPE, text=True, timeout=120
        )
    finally:
        os.close(write)
    assert done.returncode == 1, done.stderr
    with Catalog(db) as catalog:
        assert catalog.outbox.status().pending == 2
    mixed = subprocess.run([*command, "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert mixed.returncode == 2 and "--json prints its summary on stdout" in mixed.stderr, mixed.stderr


def test_a_stop_the_command_set_itself_is_not_taken_for_a_first_signal() -> None:
    """A command sets its stop event itself as it ends (a stream closing its watch): a SIGTERM
    then was taken for a second one, and the process exited 1 at once, its cleanup skipped."""
    import subprocess
    import sys

    script = (
        "import os, signal, time\n"
        "from bridge.cli.output import stop_on_signals\n"
        "with stop_on_signals('{signal}: stopping') as stop:\n"
        "    stop.set()\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(0.2)\n"
        "print('cleaned up')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "cleaned up\n", (done.stdout, done.stderr)
    assert "SIGTERM: stopping" in done.stderr and "again" not in done.stderr
