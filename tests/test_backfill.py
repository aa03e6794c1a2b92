"""Backfill: history replayed to a loopback backend in time order, resumable, filterable."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bridge.catalog import Catalog, HistoryFilter
from bridge.catalog import engine as engine_module
from bridge.catalog.backfills import Backfills
from bridge.cli import cli
from bridge.delivery.backfill import Backfill
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.history import iter_events
from bridge.delivery.retry import RateLimiter, RetryPolicy
from bridge.delivery.senders import HttpSender
from bridge.errors import Busy, CatalogError, ConfigError
from bridge.mapping import Resolver
from bridge.model import AssetDeclaration, TaskRun, TaskRunKey, TaskState, format_time
from bridge.openlineage.convert import Converter, task_run_id
from bridge.openlineage.serialize import dumps
from tests.backend import ACCEPT, Backend, Reply, event_key, free_port
from tests.conftest import T0, at
from tests.helpers import decl, run, terminated
from tests.test_faults import OLBRIDGE, FakeTime

pytestmark = pytest.mark.both_engines


def dispatcher(backend: Backend, *, concurrency: int = 1, batch_size: int = 50, **options: Any) -> Dispatcher:
    return Dispatcher(
        HttpSender(backend.url, batch=backend.batch), concurrency=concurrency, batch_size=batch_size, **options
    )


def backfill(catalog: Catalog, converter: Converter, backend: Backend | None, **options: Any) -> Backfill:
    d = dispatcher(backend, concurrency=options.pop("concurrency", 1)) if backend is not None else None
    options.setdefault("checkpoint", "test")
    policy = RetryPolicy(base=0.001, cap=0.01, max_attempts=options.pop("policy_attempts", 0))
    return Backfill(catalog, converter, d, policy=policy, **options)


def history(catalog: Catalog) -> None:
    catalog.record_task_runs(
        [
            run("a", start=at(0), end=at(30), outputs=(decl("t.a", type="Table"),)),
            run("b", start=at(10), inputs=(decl("t.a"),), execution="e2", namespace="other.team"),
            run("c", start=at(20), state="RUNNING", execution="e3", flow="nightly"),
        ]
    )
    catalog.set_asset(decl("t.a", metadata={"owner": "ops"}), now=at(5))
    catalog.set_asset(decl("reports.x", type="File", namespace="other.team"), now=at(15))
    catalog.delete_asset("reports.x", now=at(25))


def test_runs_by_start_time_with_asset_changes_between(catalog: Catalog, converter: Converter) -> None:
    history(catalog)
    with Backend(batch=True) as backend:
        summary = backfill(catalog, converter, backend, window=2).run()
    got = [(e.get("eventType", "DatasetEvent"), e["eventTime"][11:16]) for e in backend.accepted]
    assert got == [
        ("START", "08:00"),  # window 1: run a, the change at 08:05 ...
        ("DatasetEvent", "08:05"),
        ("COMPLETE", "08:30"),  # ... then a's end
        ("START", "08:10"),  # window 2: run b and the change at 08:15
        ("DatasetEvent", "08:15"),
        ("COMPLETE", "08:11"),
        ("START", "08:20"),  # window 3: run c (still running) and the delete at 08:25
        ("DatasetEvent", "08:25"),
    ]
    assert sorted(map(dumps, backend.accepted)) == sorted(map(dumps, iter_events(catalog, converter)))
    assert (summary.runs, summary.changes, summary.events, summary.refused, summary.complete) == (3, 3, 8, 0, True)
    assert catalog.backfills.checkpoint("test") is not None


def test_replaying_twice_sends_identical_events(catalog: Catalog, converter: Converter) -> None:
    history(catalog)
    sent = []
    for _ in range(2):
        with Backend() as backend:
            backfill(catalog, converter, backend, resume=False).run()
        sent.append(backend.accepted)
    assert sent[0] == sent[1] and len(sent[0]) == 8


def test_a_finished_backfill_resumes_at_its_end(catalog: Catalog, converter: Converter) -> None:
    history(catalog)
    with Backend() as backend:
        backfill(catalog, converter, backend).run()
        again = backfill(catalog, converter, backend).run()
        assert (again.events, again.resumed_from) == (0, (catalog.backfills.checkpoint("test").position))  # type: ignore[union-attr]
        catalog.record_task_run(run("later", start=at(60), execution="e9"))
        later = backfill(catalog, converter, backend).run()
    assert later.events == 2 and later.runs == 1
    assert backend.counts(iter_events(catalog, converter))["duplicated"] == 0


@pytest.mark.parametrize(
    ("filters", "runs", "changes"),
    [
        (HistoryFilter(), 3, 3),
        (HistoryFilter(since=at(10)), 2, 2),
        (HistoryFilter(until=at(10)), 1, 1),
        (HistoryFilter(namespace="other.team"), 1, 2),
        (HistoryFilter(flow="nightly"), 1, 0),
        (HistoryFilter(asset="t.a"), 2, 1),
    ],
)
def test_filters(catalog: Catalog, converter: Converter, filters: HistoryFilter, runs: int, changes: int) -> None:
    history(catalog)
    summary = backfill(catalog, converter, None, filters=filters).run()
    assert (summary.runs, summary.changes, summary.dry_run, summary.invalid) == (runs, changes, True, 0)
    assert summary.events == len(list(iter_events(catalog, converter, filters)))  # the export reads the same


def test_a_checkpoint_made_with_other_filters_is_refused(catalog: Catalog, converter: Converter) -> None:
    history(catalog)
    with Backend() as backend:
        backfill(catalog, converter, backend, filters=HistoryFilter(flow="nightly")).run()
        with pytest.raises(ConfigError, match="other filters"):
            backfill(catalog, converter, backend).run()
        assert backfill(catalog, converter, backend, resume=False).run().events == 8


def test_a_refused_start_is_reported_and_its_run_not_ended(catalog: Catalog, converter: Converter) -> None:
    history(catalog)
    bad = next(e for e in iter_events(catalog, converter) if e.get("job", {}).get("name") == "flow.b")

    def refuse(event: dict[str, Any], attempt: int) -> Reply:
        if event_key(event) == event_key(bad):
            return Reply(422, '{"errors":["bad"]}')
        return Reply(503) if attempt == 1 else ACCEPT  # and everything else needs a retry

    with Backend(refuse) as backend:
        summary = backfill(catalog, converter, backend).run()
    assert (summary.events, summary.refused, summary.skipped) == (6, 1, 1)
    assert summary.retries == 6  # each delivered event once
    [problem] = summary.problems
    assert problem["status"] == 422 and problem["detail"] == '{"errors":["bad"]}'
    assert problem["event"].startswith("START other.team/flow.b run ")


def test_one_backfill_of_a_checkpoint_at_a_time(catalog: Catalog, converter: Converter) -> None:
    """Two backfills of one checkpoint at once (a scheduled one overlapping the one before) each
    sent every event from where the checkpoint stood, and both exited 0. The second refuses to
    start, naming the first, and sends nothing; the first gives its hold back at its end."""
    from bridge.catalog.retention import release_lease, take_lease

    history(catalog)
    other, kind = "another-host:4321:beef", "backfill-lease:test"
    assert take_lease(catalog.db, other, time.time(), 60.0, kind=kind)
    with Backend() as backend:
        with pytest.raises(
            CatalogError, match=r"another backfill is sending checkpoint 'test' \(pid 4321 on another-host"
        ):
            backfill(catalog, converter, backend).run()
        assert backend.requests == 0
        release_lease(catalog.db, other, kind=kind)
        assert backfill(catalog, converter, backend).run().complete
        sent = backend.accepted_count
        assert sent == len(list(iter_events(catalog, converter)))
        assert backfill(catalog, converter, backend).run().complete  # given back: the next one runs
        assert backend.accepted_count == sent  # (from where the first left it: nothing more)
        assert take_lease(catalog.db, other, time.time(), 60.0, kind=kind)  # and nobody holds it


def test_a_password_in_the_url_is_neither_shown_nor_kept(catalog_target: str) -> None:
    """``--url http://user:password@host``: the password was in every failure line, the
    ``Error:``, the delivery errors and the stream worker's registration kept in the catalog, and
    the backfill's checkpoint was named by it. It is masked wherever the URL is shown or kept (the
    requests go to the URL as given); a checkpoint kept before under the URL with its password
    goes on under that name."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_runs(run(f"t{i}", start=at(i), end=at(i + 0.5)) for i in range(3))
    dead = f"http://ops:s3cret@127.0.0.1:{free_port()}"
    stream = [OLBRIDGE, "--catalog", catalog_target, "stream", "--once", "--give-up-after", "1", "--url", dead]
    done = subprocess.run(stream, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "ops:***@127.0.0.1" in done.stderr, done.stderr
    status = subprocess.run([OLBRIDGE, "--catalog", catalog_target, "status"], capture_output=True, text=True)
    assert "ops:***@" in status.stdout + status.stderr
    with Backend() as backend:
        url = backend.url.replace("http://", "http://ops:s3cret@")
        done = subprocess.run(
            [OLBRIDGE, "--catalog", catalog_target, "backfill", "--url", url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert backend.accepted_count == 6
    with Catalog(catalog_target) as catalog:
        kept = [
            str(row) for table in ("positions", "delivery_errors", "stream_workers") for row in rows_of(catalog, table)
        ]
        assert [checkpoint.name for checkpoint in catalog.backfills.checkpoints()] == [url.replace("s3cret", "***")]
    assert not [row for row in kept if "s3cret" in row]
    assert "s3cret" not in done.stdout + done.stderr


def rows_of(catalog: Catalog, table: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in catalog._conn.execute(f"SELECT * FROM {table}")]


def test_a_checkpoint_kept_under_a_url_with_its_password_goes_on(catalog_target: str) -> None:
    with Catalog(catalog_target) as catalog:
        catalog.record_task_runs(run(f"t{i}", start=at(i), end=at(i + 0.5)) for i in range(3))
    with Backend() as backend:
        url = backend.url.replace("http://", "http://ops:s3cret@")
        named = [OLBRIDGE, "--catalog", catalog_target, "backfill", "--url", url, "--checkpoint", url]
        assert subprocess.run(named, capture_output=True, text=True, timeout=120).returncode == 0
        with Catalog(catalog_target) as catalog:
            catalog.record_task_runs([run("later", start=at(10), end=at(11))])
        again = [OLBRIDGE, "--catalog", catalog_target, "backfill", "--url", url, "--json"]
        done = subprocess.run(again, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert backend.accepted_count == 8  # the runs before went once; the later one now
    with Catalog(catalog_target) as catalog:
        assert [checkpoint.name for checkpoint in catalog.backfills.checkpoints()] == [url]


def test_a_catalog_away_while_the_lease_is_renewed_stops_nothing(
    catalog: Catalog, converter: Converter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint's lease is renewed as the backfill goes; a renewal the catalog could not
    take (locked, restarting) stopped the backfill with the driver's error, its window on the wire
    sent and not kept, so the next run sent it again. It is renewed once the catalog is back."""
    from bridge.delivery import backfill as backfill_module

    history(catalog)
    real, calls = backfill_module.take_lease, [0]

    def away_once(*args: Any, **kwargs: Any) -> bool:
        calls[0] += 1
        if calls[0] == 3:  # a renewal, while the catalog is away (what its write says after its retries)
            raise Busy("the catalog is locked by another process")
        return real(*args, **kwargs)

    monkeypatch.setattr(backfill_module, "take_lease", away_once)
    monkeypatch.setattr(backfill_module, "RENEW_EVERY", 0.0)
    with Backend() as backend:
        assert backfill(catalog, converter, backend, window=2).run().complete
        sent = backend.accepted_count
        assert sent == len(list(iter_events(catalog, converter))) and calls[0] > 3
        assert backfill(catalog, converter, backend, window=2).run().complete
        assert backend.accepted_count == sent  # nothing twice


def test_rate_limit(catalog: Catalog, converter: Converter) -> None:
    catalog.record_task_runs(run(f"t{i}", start=at(i)) for i in range(50))
    fake = FakeTime()
    with Backend() as backend:
        limited = Dispatcher(
            HttpSender(backend.url), concurrency=1, batch_size=10, limiter=RateLimiter(20, fake.clock, fake.sleep)
        )
        began = fake.now
        Backfill(catalog, converter, limited, clock=fake.clock, sleep=fake.sleep).run()
    assert backend.accepted_count == 100
    # no batch endpoint: the first request took the batch's 10 and gave 2 back (a round sends 8
    # events a connection, one a request), then each event is paced as it goes, 20 a second
    assert fake.now - began == pytest.approx((10 - 2) / 20 + 91 / 20)


def test_cli_backfill_dry_run_and_delivery(tmp_path: Path, catalog_target: str) -> None:
    db = catalog_target
    with Catalog(db) as catalog:
        history(catalog)
    runner = CliRunner()
    dry = runner.invoke(cli, ["--catalog", db, "backfill", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout) | {"seconds": 0, "eventsPerSecond": 0} == {
        "checkpoint": None,
        "dryRun": True,
        "resumedFrom": None,
        "runs": 3,
        "changes": 3,
        "jobs": 0,
        "events": 8,
        "invalid": 0,
        "refused": 0,
        "undelivered": 0,
        "skipped": 0,
        "running": 0,
        "resent": 0,
        "attempts": 0,
        "retries": 0,
        "seconds": 0,
        "complete": True,
        "stoppedBefore": None,
        "error": None,
        "problems": [],
        "eventsPerSecond": 0,
    }
    with Backend() as backend:
        sent = runner.invoke(cli, ["--catalog", db, "backfill", "--url", backend.url, "--rate", "1000/s", "--json"])
        assert sent.exit_code == 0, sent.output
        summary = json.loads(sent.stdout)
        assert (summary["events"], summary["checkpoint"]) == (8, backend.url)
        assert "backfill delivered 8 event(s) of 3 task run(s), 3 asset change(s) and 0 declared job(s)" in sent.stderr
        assert sent.stderr.splitlines()[0] == f"backfill to {backend.url}: 0/8 events"
        again = runner.invoke(cli, ["--catalog", db, "backfill", "--url", backend.url])
        assert "backfill delivered 0 event(s)" in again.stderr
        assert again.stderr.splitlines()[0] == f"backfill to {backend.url}: 8/8 events"  # resumed at the end
        assert backend.accepted_count == 8
        # a dry run of the same --url reads its checkpoint: what the real run would send, nothing
        dry_again = runner.invoke(cli, ["--catalog", db, "backfill", "--url", backend.url, "--dry-run", "--json"])
        assert dry_again.exit_code == 0, dry_again.output
        checked = json.loads(dry_again.stdout)
        assert (checked["events"], checked["runs"], checked["checkpoint"]) == (0, 0, backend.url)
        assert checked["resumedFrom"] is not None and backend.accepted_count == 8
    bad_rate = runner.invoke(cli, ["--catalog", db, "backfill", "--url", "http://x", "--rate", "fast"])
    assert bad_rate.exit_code == 2 and "not a rate" in bad_rate.output


def test_a_backfill_says_which_runs_it_passed_while_they_ran(tmp_path: Path, catalog_target: str) -> None:
    """A running run's START goes and the checkpoint passes it: a later backfill of the checkpoint
    does not send its end. The backfill says so on stderr, not only deep in its JSON."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_runs([run("done"), run("long", state="RUNNING", start=at(5))])
    with Backend() as backend:
        sent = CliRunner().invoke(cli, ["--catalog", catalog_target, "backfill", "--url", backend.url, "--json"])
        assert sent.exit_code == 0, sent.output
        assert json.loads(sent.stdout)["running"] == 1
        assert "note: 1 task run(s) were still running" in sent.stderr and "olbridge stream does" in sent.stderr


# --- a long history, interrupted and resumed ------------------------------------------------

RUNS = 100_000


@pytest.fixture(scope="module")
def long_history() -> Iterator[Catalog]:
    """100,000 task runs, one an execution; every tenth writes a table."""
    with Catalog(":memory:") as catalog:

        def runs() -> Iterator[TaskRun]:
            for i in range(RUNS):
                start = T0 + timedelta(seconds=i)
                outputs = (AssetDeclaration.create(f"mart.t{i % 50}", type="Table"),) if i % 10 == 0 else ()
                yield TaskRun(
                    key=TaskRunKey(f"ns{i % 3}", f"flow{i % 20}", f"task{i % 5}", f"e{i}", f"e{i}.t"),
                    state=TaskState.SUCCESS if i % 97 else TaskState.FAILED,
                    started_at=start,
                    ended_at=start + timedelta(seconds=45),
                    outputs=outputs,
                )

        catalog.record_task_runs(runs())
        yield catalog


def test_a_backfill_past_a_page_of_runs_reads_each_page_on_the_connection_it_has(
    catalog_target: str, converter: Converter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(a review) On PostgreSQL a backfill of 2,000 runs stopped with "the connection is closed"
    once a checkpoint's write had replaced the catalog's connection (a new one for new plans,
    its first a second on): the next page of runs was read on the one it replaced, and the
    window it had sent was never checkpointed, so each run again sent it again. Here every
    write replaces it."""
    monkeypatch.setattr(engine_module, "REPLAN_FIRST", 0.0)
    with Catalog(catalog_target) as catalog:
        runs = [run(f"t{i}", start=at(0) + timedelta(seconds=i), execution=f"e{i}") for i in range(1_201)]
        catalog.record_task_runs(runs)
        with Backend(batch=True) as backend:
            summary = backfill(catalog, converter, backend, window=500).run()
        assert (summary.complete, summary.runs, summary.events) == (True, 1_201, 2_402)
        assert backend.accepted_count == 2_402 and len({dumps(e) for e in backend.accepted}) == 2_402


def test_a_checkpoint_the_catalog_cannot_take_now_is_written_once_it_is_back(
    catalog: Catalog, converter: Converter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(a review) A database restarting as a window's checkpoint was written stopped the backfill
    with an error, the window sent and not remembered: run again, it sent the whole window again.
    The write waits for the catalog (said once as it goes, once as it comes back), and the
    window is remembered."""
    history(catalog)
    real, failures = Backfills.save, [2]

    def restarting(self: Backfills, *args: Any, **kwargs: Any) -> None:
        if failures[0]:
            failures[0] -= 1
            raise Busy("the server is shutting down or cannot take connections")
        real(self, *args, **kwargs)

    monkeypatch.setattr(Backfills, "save", restarting)
    said: list[str] = []
    with Backend() as backend:
        summary = backfill(catalog, converter, backend, sleep=lambda seconds: None, say=said.append).run()
        assert summary.complete and failures == [0]
        again = backfill(catalog, converter, backend).run()
    assert again.events == 0 and len(backend.accepted) == summary.events == 8  # nothing sent twice
    assert len(said) == 2 and said[0].startswith("the catalog is unavailable since "), said
    assert said[0].endswith(": the server is shutting down or cannot take connections; waiting for it"), said
    assert said[1].startswith("the catalog is back after "), said


def test_a_long_backfill_interrupted_and_resumed(long_history: Catalog, converter: Converter) -> None:
    catalog = long_history
    assert catalog.count_task_runs() == RUNS
    wanted = []
    for stored in catalog.iter_task_runs():
        run_id = task_run_id(stored.key, stored.started_at)
        wanted += [("run", run_id, "START"), ("run", run_id, stored.state.run_event_type)]
    stop = threading.Event()

    def interrupt(backend: Backend) -> None:
        if backend.accepted_count >= 70_000:
            stop.set()

    with Backend(batch=True, keep_bodies=False, on_accept=interrupt) as backend:
        first = Backfill(
            catalog, converter, dispatcher(backend, concurrency=2, batch_size=500), checkpoint="big", stop=stop
        ).run()
        assert not first.complete and 70_000 <= first.events < 2 * RUNS
        assert backend.accepted_count == first.events  # the window in flight finished: nothing half sent
        saved = catalog.backfills.checkpoint("big")
        assert saved is not None and (saved.events, saved.runs) == (first.events, first.runs)
        second = Backfill(
            catalog, converter, dispatcher(backend, concurrency=2, batch_size=500), checkpoint="big"
        ).run()
    assert second.complete and second.resumed_from == saved.position
    assert first.events + second.events == 2 * RUNS and first.runs + second.runs == RUNS
    counts = backend.counts(wanted)
    assert counts == {"sent": 2 * RUNS, "delivered": 2 * RUNS, "duplicated": 0, "lost": 0, "unexpected": 0}
    assert backend.out_of_order_runs() == []
    # runs went in start order: a window's STARTs before the next window's
    order = {run_id: n for n, (_, run_id, _) in enumerate(wanted[::2])}
    starts = [order[run_id] for _, run_id, kind in backend.taken if kind == "START"]
    windows = [n // 1000 for n in starts]
    assert windows == sorted(windows)


def test_declared_flows_stream_and_backfill_as_job_events(
    catalog: Catalog, converter: Converter, official: Any
) -> None:
    from bridge.adapters.kestra import declare_flows
    from bridge.delivery.worker import StreamWorker
    from tests.test_kestra import GUIDE_FLOW

    history(catalog)
    declare_flows(catalog, [GUIDE_FLOW], now=at(40))
    jobs = [e for e in iter_events(catalog, converter) if "run" not in e and "dataset" not in e]
    assert len(jobs) == 2
    with Backend(batch=True) as backend:  # the outbox: queued with the declaration, sent by stream
        StreamWorker(catalog, converter, dispatcher(backend), policy=RetryPolicy(base=0.001, cap=0.01)).run(once=True)
        streamed = [e for e in backend.accepted if e["schemaURL"].endswith("/JobEvent")]
    assert sorted(map(dumps, streamed)) == sorted(map(dumps, jobs))
    assert all(official(e) == [] for e in streamed)
    declare_flows(catalog, [GUIDE_FLOW], now=at(50))  # declared again as it was: nothing queued
    assert catalog.outbox.status().pending == 0
    with Backend(batch=True) as backend:  # backfill: the declared jobs first, then the history
        summary = backfill(catalog, converter, backend, window=2).run()
        kinds = [e["schemaURL"].rsplit("/", 1)[1] for e in backend.accepted]
    assert kinds[:2] == ["JobEvent", "JobEvent"] and "JobEvent" not in kinds[2:]
    assert (summary.jobs, summary.runs, summary.complete) == (2, 3, True)


def test_the_history_s_count_is_the_events_a_read_of_it_gives(catalog: Catalog, converter: Converter) -> None:
    from bridge.adapters.kestra import declare_flows
    from tests.test_kestra import GUIDE_FLOW

    history(catalog)
    declare_flows(catalog, [GUIDE_FLOW], now=at(40))
    for filters in (
        HistoryFilter(),
        HistoryFilter(namespace="other.team"),
        HistoryFilter(namespace="company.data"),
        HistoryFilter(flow="nightly"),
        HistoryFilter(flow="dbt_build_with_lineage"),
        HistoryFilter(since=at(12), until=at(41)),
    ):
        read = sum(1 for _ in iter_events(catalog, converter, filters))
        assert catalog.count_history(filters) == read, filters
    assert catalog.count_history() == 10  # 3 STARTs, 2 ends, 3 asset changes, 2 declared jobs
    named = {a.id for d in catalog.iter_declared_jobs() for a in (*d.job.inputs, *d.job.outputs)}
    for asset in sorted(named | {"t.a", "reports.x"}):  # backfill --asset: what a dry run reads
        dry = Backfill(catalog, converter, None, filters=HistoryFilter(asset=asset)).run()
        assert catalog.count_history(HistoryFilter(asset=asset)) == dry.events, asset


def test_a_backfill_resumed_anywhere_among_declared_jobs_sends_each_once(
    catalog: Catalog, converter: Converter, tmp_path: Path
) -> None:
    from bridge.adapters.kestra import declare_flows
    from tests.test_kestra import GUIDE_FLOW, SNAPSHOT_FLOW

    declare_flows(catalog, [GUIDE_FLOW], now=at(0))
    declare_flows(catalog, [SNAPSHOT_FLOW], now=at(10))
    changed = tmp_path / "dbt_build_with_lineage.yml"  # the first flow again, changed: declared anew
    changed.write_text(GUIDE_FLOW.read_text().replace("owner: analytics-team", "owner: data-team"))
    declare_flows(catalog, [changed], now=at(20))
    job = backfill(catalog, converter, None)
    order = [position for position, _ in job._items(None)]
    assert len(order) == 3
    for stop, position in enumerate(order):  # stopped after any job: the rest, each once, in order
        assert [p for p, _ in job._items(position)] == order[stop + 1 :]


def test_a_job_declared_after_a_backfill_passed_the_jobs_goes_when_it_resumes(
    catalog: Catalog, converter: Converter
) -> None:
    """Declared jobs go first; one declared once the checkpoint is past them goes when it resumes
    (it was never sent: a resumed backfill read the jobs only before its position), once, and a
    dry run counts it as the real run sends it."""
    from bridge.adapters.kestra import declare_flows
    from tests.test_kestra import GUIDE_FLOW, SNAPSHOT_FLOW

    history(catalog)
    declare_flows(catalog, [GUIDE_FLOW], now=at(40))
    with Backend(batch=True) as backend:
        first = backfill(catalog, converter, backend, window=2).run()
        assert (first.jobs, first.runs, first.complete) == (2, 3, True)
        declare_flows(catalog, [SNAPSHOT_FLOW], now=at(50))
        catalog.record_task_runs([run("d", start=at(60), end=at(61), execution="e4")])
        dry = backfill(catalog, converter, None, window=2).run()
        sent = len(backend.accepted)
        second = backfill(catalog, converter, backend, window=2).run()
        late = backend.accepted[sent:]
        assert [e["schemaURL"].rsplit("/", 1)[1] for e in late] == ["JobEvent", "RunEvent", "RunEvent"]
        jobs = [e for e in iter_events(catalog, converter) if "run" not in e and "dataset" not in e]
        assert len(jobs) == 3 and dumps(late[0]) == dumps(jobs[-1])  # the job declared last
        assert (second.jobs, second.runs, second.events) == (1, 1, 3) == (dry.jobs, dry.runs, dry.events)
        third = backfill(catalog, converter, backend, window=2).run()
        assert (third.events, len(backend.accepted)) == (0, sent + 3)


# --- the checkpoint never moves past an event the backend did not take ----------------------


def olbridge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([OLBRIDGE, *args], capture_output=True, text=True, timeout=120)


def test_backend_down_then_up_every_event_delivered_once(
    tmp_path: Path, converter: Converter, catalog_target: str
) -> None:
    db = catalog_target
    with Catalog(db) as catalog:
        history(catalog)
        wanted = list(iter_events(catalog, converter))
    backend = Backend(port=free_port())  # not started: connections are refused
    command = ["--catalog", db, "backfill", "--url", backend.url, "--backoff", "0.01"]
    down = olbridge(*command, "--max-attempts", "2")
    assert down.returncode == 1, down.stderr
    error = down.stderr.strip().splitlines()[-1]
    assert error.startswith(f"Error: backfill stopped: 8 event(s) could not be delivered to {backend.url}")
    assert "connection refused" in error and "stopped before START company.data/flow.a run " in error
    assert "0 refused, 8 undelivered" in down.stderr  # not counted as refused
    assert f"delivery to {backend.url}: 6 event(s) failed, connection refused" in down.stderr
    assert "next retry at" in down.stderr
    status = json.loads(olbridge("--catalog", db, "status", "--json").stdout)
    [kept] = status["backfills"]
    assert (kept["checkpoint"], kept["position"], kept["events"], kept["refused"]) == (backend.url, None, 0, 0)
    assert kept["lastError"]["failure"] == "connection refused" and status["lastError"] == kept["lastError"]
    with backend:
        up = olbridge(*command)
        assert up.returncode == 0, up.stderr
        assert "backfill delivered 8 event(s) of 3 task run(s), 3 asset change(s)" in up.stderr
        again = olbridge(*command)
        assert again.returncode == 0 and "backfill delivered 0 event(s)" in again.stderr
    counts = backend.counts(wanted)
    assert counts == {"sent": 8, "delivered": 8, "duplicated": 0, "lost": 0, "unexpected": 0}
    assert backend.out_of_order_runs() == []


def test_a_backfill_to_a_backend_that_never_answers_gives_up_by_default(catalog_target: str) -> None:
    """A backfill is a job that ends: without --max-attempts it gives up after 10 attempts an
    event (about one to three minutes at the default backoff), an error, exit 1, resumable."""
    with Catalog(catalog_target) as catalog:
        history(catalog)
    down = Backend(port=free_port()).url  # nothing listens
    done = olbridge(
        "--catalog", catalog_target, "backfill", "--url", down, "--backoff", "0.001", "--max-backoff", "0.001"
    )
    assert done.returncode == 1, done.stderr
    assert "could not be delivered" in done.stderr and "after 10 attempt(s) each" in done.stderr


def test_a_backfill_stopped_before_its_end_exits_1(catalog_target: str) -> None:
    """Stopped by SIGTERM (or Ctrl-C) with events left, a backfill says so as an error and exits 1,
    not 0: a cron job or a CI step must not take it for done."""
    with Catalog(catalog_target) as catalog:
        history(catalog)
    down = Backend(port=free_port()).url
    command = [OLBRIDGE, "--catalog", catalog_target, "backfill", "--url", down, "--max-attempts", "0"]
    process = subprocess.Popen(
        [*command, "--backoff", "0.05", "--max-backoff", "0.05"], stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    try:
        for line in process.stderr:  # the first failure said: it is retrying
            if "connection refused" in line:
                break
        process.send_signal(signal.SIGTERM)
        rest = process.stderr.read()
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 1, rest
    assert "Error: the backfill was stopped before its end; run it again to resume" in rest, rest


def stopped_once(command: list[str], backend: Backend, when: Callable[[], bool]) -> tuple[int, str, int]:
    """``command`` run until ``when`` holds, then sent SIGTERM: its exit status, its stderr, and
    the backend's requests when it held."""
    seen: list[int] = []

    def ready() -> bool:
        if when():
            seen.append(backend.requests)
        return bool(seen)

    code, _out, err = terminated(command, ready)
    return code, err, seen[0]


def test_a_stop_under_a_rate_limit_sends_nothing_more_and_loses_nothing(catalog_target: str) -> None:
    """SIGTERM during ``backfill --rate``: the requests waiting for the rate limit are not made
    (they all went at once, within a tenth of a second, while stderr said it stopped after the
    requests in flight); what did not go is sent by the next run, and nothing twice."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_runs(run(f"t{i}", start=at(i), end=at(i + 0.5)) for i in range(40))
        wanted = list(iter_events(catalog, Converter(Resolver.load())))
    with Backend(batch=True) as backend:
        command = [OLBRIDGE, "--catalog", catalog_target, "backfill", "--url", backend.url]
        limited = [*command, "--rate", "10/s", "--batch-size", "1", "--concurrency", "4"]
        code, err, at_the_stop = stopped_once(limited, backend, lambda: backend.requests >= 3)
        assert code == 1, err
        assert "SIGTERM: stopping after the requests in flight" in err
        assert "Error: the backfill was stopped before its end; run it again to resume" in err
        assert backend.requests - at_the_stop <= 4, (backend.requests, at_the_stop)  # those in flight, at most
        assert backend.accepted_count < 40
        again = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert again.returncode == 0, again.stderr
    counts = backend.counts(wanted)
    assert (counts["delivered"], counts["duplicated"], counts["lost"]) == (80, 0, 0)
    assert backend.out_of_order_runs() == []


def test_a_stop_sends_nothing_more_one_event_a_request(catalog_target: str) -> None:
    """SIGTERM during a backfill to a backend with no batch endpoint (Marquez): the events went on,
    one a request, for as long as the stop's grace allowed (60 s), and what went then was sent
    again by the next run. No request is made after the stop but those in flight; the next run
    sends the rest, nothing twice."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_runs(run(f"t{i}", start=at(i), end=at(i + 0.5)) for i in range(60))
        wanted = list(iter_events(catalog, Converter(Resolver.load())))
    with Backend(lambda event, attempt: Reply(delay=0.05)) as backend:
        command = [OLBRIDGE, "--catalog", catalog_target, "backfill", "--url", backend.url]
        code, err, at_the_stop = stopped_once(
            [*command, "--concurrency", "2"], backend, lambda: backend.accepted_count >= 5
        )
        assert code == 1, err
        assert "Error: the backfill was stopped before its end; run it again to resume" in err, err
        assert backend.requests - at_the_stop <= 2, (backend.requests, at_the_stop)  # those in flight, at most
        again = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert again.returncode == 0, again.stderr
    counts = backend.counts(wanted)
    assert (counts["delivered"], counts["duplicated"], counts["lost"]) == (120, 0, 0)
    assert backend.out_of_order_runs() == []


def test_a_backend_that_answers_nothing_costs_a_timeout_a_connection_not_an_event(
    catalog: Catalog, converter: Converter
) -> None:
    """Sent one a request, every event waited out its timeout in turn when the backend took the
    connection and never answered (hours at the defaults, where the docs said minutes): after an
    unanswered request the others wait for the next pass, and once an event is out of attempts
    the backfill stops there."""
    catalog.record_task_runs(run(f"t{i}", start=at(i), end=at(i + 0.5)) for i in range(30))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    taken: list[socket.socket] = []
    done = threading.Event()

    def take() -> None:
        listener.settimeout(0.1)
        while not done.is_set():
            with contextlib.suppress(OSError):
                taken.append(listener.accept()[0])

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        sender = HttpSender(url, batch=False, timeout=0.2)
        policy = RetryPolicy(base=0.001, cap=0.01, max_attempts=2)
        summary = Backfill(catalog, converter, Dispatcher(sender, concurrency=2), policy=policy).run()
    finally:
        done.set()
        thread.join(timeout=5)
        for connection in taken:
            connection.close()
        listener.close()
    assert not summary.complete and summary.events == 0
    assert summary.attempts <= 2 * 2, summary.attempts  # its attempts, a connection each: not 30 events' each
    assert summary.error is not None and "could not be delivered" in summary.error


def failing(keys: set[tuple[str, ...]], broken: list[bool], status: int = 503) -> Callable[..., Reply]:
    """A backend answering ``status`` to the events of ``keys`` while ``broken[0]``."""

    def respond(event: dict[str, Any], attempt: int) -> Reply:
        return Reply(status, "busy") if broken[0] and event_key(event) in keys else ACCEPT

    return respond


def keys_of(catalog: Catalog, converter: Converter, job: str, kinds: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {
        event_key(e)
        for e in iter_events(catalog, converter)
        if e.get("job", {}).get("name") == job and e["eventType"] in kinds
    }


@pytest.mark.parametrize(
    ("kinds", "undelivered", "before"),
    [(("START",), 2, "START other.team/flow.b"), (("COMPLETE",), 1, "COMPLETE other.team/flow.b")],
)
def test_out_of_attempts_the_checkpoint_stays_before_the_event_and_nothing_goes_twice(
    catalog: Catalog, converter: Converter, kinds: tuple[str, ...], undelivered: int, before: str
) -> None:
    history(catalog)
    wanted = list(iter_events(catalog, converter))
    broken = [True]
    b_events = keys_of(catalog, converter, "flow.b", ("START", "COMPLETE"))
    with Backend(failing(keys_of(catalog, converter, "flow.b", kinds), broken)) as backend:
        first = backfill(catalog, converter, backend, policy_attempts=3).run()
        assert first.error is not None and f"stopped before {before}" in first.error
        assert (first.refused, first.undelivered, first.complete) == (0, undelivered, False)
        assert first.stopped_before is not None and first.stopped_before.startswith(before)
        # a run's end never goes without its START; the rest of the window did go
        b_start = keys_of(catalog, converter, "flow.b", ("START",))
        assert set(backend.taken) & b_events == (set() if kinds == ("START",) else b_start)
        saved = catalog.backfills.checkpoint("test")
        assert saved is not None and saved.position is not None and saved.position[0] < format_time(at(10))
        assert saved.ahead  # what went past the event that did not
        broken[0] = False
        second = backfill(catalog, converter, backend, policy_attempts=3).run()
        assert second.error is None and second.complete and second.events == undelivered
    counts = backend.counts(wanted)
    assert (counts["delivered"], counts["duplicated"], counts["lost"]) == (8, 0, 0)
    assert backend.out_of_order_runs() == []
    assert catalog.backfills.checkpoint("test").ahead == ()  # type: ignore[union-attr]


def test_a_stop_during_retries_keeps_the_checkpoint_before_what_did_not_go(
    catalog: Catalog, converter: Converter
) -> None:
    history(catalog)
    wanted = list(iter_events(catalog, converter))
    broken = [True]
    stop = threading.Event()
    with Backend(failing({event_key(e) for e in wanted}, broken)) as backend:
        fake = FakeTime(on_sleep=lambda n: stop.set() if n == 3 else None)
        first = backfill(catalog, converter, backend, stop=stop, sleep=fake.sleep).run()
        assert (first.error, first.complete, first.events, first.undelivered) == (None, False, 0, 8)
        assert catalog.backfills.checkpoint("test").position is None  # type: ignore[union-attr]
        broken[0] = False
        assert backfill(catalog, converter, backend).run().complete
    counts = backend.counts(wanted)
    assert (counts["delivered"], counts["duplicated"], counts["lost"]) == (8, 0, 0)


def test_refused_events_are_kept_and_sent_again_on_request(
    tmp_path: Path, converter: Converter, catalog_target: str
) -> None:
    db = catalog_target
    with Catalog(db) as catalog:
        history(catalog)
        wanted = list(iter_events(catalog, converter))
        b_start = keys_of(catalog, converter, "flow.b", ("START",))
    broken = [True]
    with Backend(failing(b_start, broken, status=422)) as backend:
        command = ["--catalog", db, "backfill", "--url", backend.url, "--checkpoint", "history"]
        first = olbridge(*command, "--json")
        assert first.returncode == 1, first.stderr
        summary = json.loads(first.stdout)
        assert (summary["events"], summary["refused"], summary["skipped"], summary["undelivered"]) == (6, 1, 1, 0)
        assert summary["complete"] and summary["error"] is None
        assert "olbridge backfill --retry-refused" in first.stderr
        [kept] = json.loads(olbridge("--catalog", db, "status", "--json").stdout)["backfills"]
        assert (kept["checkpoint"], kept["refused"], kept["lastError"]["status"]) == ("history", 1, 422)
        assert "backfill history: up to " in olbridge("--catalog", db, "status").stdout
        assert olbridge(*command).returncode == 0  # a later run goes on: the refused event is not sent again
        assert Counter(backend.attempts[k] for k in b_start) == Counter({1: 1})
        broken[0] = False
        again = olbridge(*command, "--retry-refused", "--json")
        assert again.returncode == 0, again.stderr
        assert (json.loads(again.stdout)["resent"], json.loads(again.stdout)["events"]) == (2, 2)
        assert json.loads(olbridge("--catalog", db, "status", "--json").stdout)["backfills"][0]["refused"] == 0
        assert olbridge(*command, "--retry-refused").returncode == 0
    counts = backend.counts(wanted)
    assert (counts["delivered"], counts["duplicated"], counts["lost"]) == (8, 0, 0)
    assert backend.out_of_order_runs() == []
    bad = olbridge("--catalog", db, "backfill", "--url", backend.url, "--retry-refused", "--no-resume")
    assert bad.returncode == 2 and "--no-resume" in bad.stderr
