"""olbridge past one machine, with real processes on one PostgreSQL catalog.

- Three ``olbridge stream`` workers drain one outbox to a loopback backend; one is killed with
  SIGKILL midway and started again: no event is lost, every run's START arrives before its end,
  and the duplicates are no more than the killed worker's claims in flight.
- Three ``olbridge serve`` processes take overlapping events from concurrent clients (the same
  datasets, the same runs' START and COMPLETE sent to different processes, some events sent to two
  processes): the catalog equals a one-by-one ingest of the same events, table by table.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from bridge.catalog import Catalog
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter
from bridge.receiver.imports import catalog_intake
from tests.backend import Backend, Reply, wait_for
from tests.helpers import (
    DATASET_EVENT_URL,
    PRODUCER,
    Served,
    catalog_state,
    in_threads,
    ol_dataset,
    ol_run_event,
    serve_process,
)
from tests.postgres import PostgresServer
from tests.test_faults import OLBRIDGE, expected, fill

# --- stream workers ---------------------------------------------------------------------------


def stream_worker(catalog: str, url: str) -> subprocess.Popen[str]:
    command = [OLBRIDGE, "--catalog", catalog, "stream", "--url", url, "--batch-size", "5", "--poll", "0.05"]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )


def registered(catalog: str, worker: subprocess.Popen[str], timeout: float = 120) -> None:
    """Wait until the ``stream`` process ``worker`` is among the catalog's workers: a load started
    before (a slow start under load) could be over before the worker sends anything."""
    with Catalog(catalog) as opened:
        found = wait_for(lambda: worker.pid in {w.pid for w in opened.workers.list()}, timeout=timeout)
    assert found or worker.poll() is not None, "the stream worker did not register"


def stopped(worker: subprocess.Popen[str]) -> tuple[int, str]:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        _, stderr = worker.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        worker.kill()
        _, stderr = worker.communicate(timeout=30)
    return worker.returncode, stderr


def test_three_stream_workers_share_the_outbox_and_a_killed_one_loses_nothing(
    postgres_url: str, converter: Converter
) -> None:
    with Catalog(postgres_url) as catalog:
        fill(catalog, 600)
        history = expected(catalog, converter)
    assert len(history) == 1200
    with Backend(lambda event, attempt: Reply(201, delay=0.002)) as backend, Catalog(postgres_url) as catalog:
        workers = [stream_worker(postgres_url, backend.url) for _ in range(3)]
        try:
            # every worker registered (a slow start under load would leave the victim unknown)
            pids = {w.pid for w in workers}
            assert wait_for(lambda: pids <= {w.pid for w in catalog.workers.list()}, timeout=120), "not registered"
            assert wait_for(lambda: backend.accepted_count >= 300, timeout=120), "nothing was delivered"
            victim = workers[0]
            victim.send_signal(signal.SIGSTOP)  # frozen: what it holds now is what it had in flight
            (killed,) = [w for w in catalog.workers.list() if w.pid == victim.pid]
            in_flight = catalog.outbox.claims().get(killed.id, 0)
            arrived = backend.accepted_count
            victim.send_signal(signal.SIGKILL)
            victim.wait(timeout=30)
            killed_at = time.monotonic()
            # its claims are taken over by the others (its process is gone on this host)
            # (it may have held no claim when it was frozen: then wait until it is forgotten too)
            assert wait_for(lambda: killed.id not in catalog.outbox.claims(), timeout=30)
            assert wait_for(lambda: killed.id not in {w.id for w in catalog.workers.list()}, timeout=30)
            released = time.monotonic() - killed_at
            workers[0] = stream_worker(postgres_url, backend.url)  # started again
            sharing = wait_for(lambda: len(catalog.workers.list()) == 3, timeout=60)
            status = subprocess.run(
                [OLBRIDGE, "--catalog", postgres_url, "status", "--json"], capture_output=True, text=True, timeout=60
            )
            assert wait_for(lambda: backend.counts(history)["lost"] == 0, timeout=180), backend.counts(history)
        finally:
            results = [stopped(w) for w in workers]
        counts = backend.counts(history)
    print(
        f"\n3 stream workers, one killed with SIGKILL once {arrived} events had arrived: {counts}; the killed "
        f"worker held {in_flight} claim(s) in flight, released {released:.1f}s after its death"
    )
    for code, stderr in results:
        assert code == 0, stderr
    assert counts["delivered"] == 1200 and counts["lost"] == 0 and counts["unexpected"] == 0
    assert counts["duplicated"] <= in_flight
    assert backend.out_of_order_runs() == []  # START before COMPLETE, for every run
    assert sharing
    shown = json.loads(status.stdout)["workers"]
    assert len(shown) == 3 and all({"claims", "pid", "host", "heartbeatAgeSeconds"} <= set(w) for w in shown)


# --- receivers ------------------------------------------------------------------------------------

TOKEN = "t0ken"


@contextlib.contextmanager
def serving(catalog: str, *extra: str) -> Iterator[str]:
    """``olbridge serve`` on a free port (two HTTP workers, and ``extra`` options), until the
    block ends; it must then stop cleanly."""
    options = ("--workers", "2", *extra)
    env = {**os.environ, "OLBRIDGE_TOKEN": TOKEN}
    with serve_process(catalog, *options, env=env, ready_timeout=60, stop_timeout=60) as served:
        yield served.url
    assert served.returncode == 0, served.stderr
    assert "Traceback" not in served.stderr, served.stderr


def overlapping_events(runs: int) -> list[dict[str, Any]]:
    """Runs of a few recurring jobs over a few shared datasets, each a START and a COMPLETE whose
    outputs carry facets that change from run to run, and DatasetEvents describing the shared
    datasets again: every event touches rows other events touch."""
    shared = [ol_dataset("s3://raw-bucket", f"orders/part-{n}") for n in range(3)] + [
        ol_dataset("postgres://warehouse:5432", f"analytics.public.t{n}") for n in range(3)
    ]
    events: list[dict[str, Any]] = []
    for r in range(runs):
        run_id = str(uuid.UUID(int=r + 1, version=4))
        job = ("airflow", f"dag.task_{r % 4}")
        start = f"2025-03-01T08:{r // 60:02d}:{r % 60:02d}.000Z"
        end = f"2025-03-01T09:{r // 60:02d}:{r % 60:02d}.000Z"
        inputs = [shared[r % 3], shared[3 + (r + 1) % 3]]
        output = shared[3 + r % 3]
        described = ol_dataset(
            output["namespace"],
            output["name"],
            documentation={"description": f"as run {r} left it"},
            schema={"fields": [{"name": "id", "type": "BIGINT"}, {"name": f"c{r % 5}", "type": "TEXT"}]},
        )
        events.append(ol_run_event("START", run_id=run_id, job=job, inputs=inputs, time=start))
        events.append(ol_run_event("COMPLETE", run_id=run_id, job=job, inputs=inputs, outputs=[described], time=end))
    for n in range(runs // 4):
        dataset = shared[n % len(shared)]
        events.append(
            {
                "eventTime": f"2025-03-01T10:{n // 60:02d}:{n % 60:02d}.000Z",
                "producer": PRODUCER,
                "schemaURL": DATASET_EVENT_URL,
                "dataset": ol_dataset(
                    dataset["namespace"], dataset["name"], documentation={"description": f"described {n}"}
                ),
            }
        )
    return events


def deliveries(events: list[dict[str, Any]], servers: int, seed: int) -> list[tuple[int, list[dict[str, Any]]]]:
    """(server, events of one request): a run's START and COMPLETE to different servers, a quarter
    of the events to a second server too, in a shuffled order; single events and small batches."""
    rng = random.Random(seed)
    sends: list[tuple[int, dict[str, Any]]] = []
    for n, event in enumerate(events):
        home = (n // 2 + n % 2) % servers  # START of run r to r % 3, its COMPLETE to (r + 1) % 3
        sends.append((home, event))
        if rng.random() < 0.25:
            sends.append(((home + 1 + rng.randrange(servers - 1)) % servers, event))
    rng.shuffle(sends)
    requests_: list[tuple[int, list[dict[str, Any]]]] = []
    while sends:
        server, event = sends.pop()
        batch = [event]
        while sends and len(batch) < rng.choice((1, 1, 3, 8)) and sends[-1][0] == server:
            batch.append(sends.pop()[1])
        requests_.append((server, batch))
    return requests_


def post(url: str, events: list[dict[str, Any]], *, attempts: int = 50, seen: list[int] | None = None) -> int:
    """The status of sending ``events`` (one: the single-event endpoint), a 503 (the writer busy or
    restarting, the database away) retried every 0.1 s as producers do, ``attempts`` times at
    most; each answer's status goes to ``seen``, and a 503 must say when to retry."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for _ in range(attempts):
        if len(events) == 1:
            answer = requests.post(f"{url}/api/v1/lineage", json=events[0], headers=headers, timeout=60)
        else:
            answer = requests.post(f"{url}/api/v1/lineage/batch", json=events, headers=headers, timeout=60)
        if seen is not None:
            seen.append(answer.status_code)
        if answer.status_code != 503:
            return answer.status_code
        assert answer.headers.get("Retry-After"), answer.headers
        time.sleep(0.1)
    return answer.status_code


# the columns of each table that a process allocates as it goes (a row's place in its table), not
# what the events say
def tables(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, without the received events' keys, in one order."""
    with Catalog(url) as catalog:
        return catalog_state(catalog)


def test_three_receivers_on_one_catalog_equal_a_one_by_one_ingest(
    postgres: PostgresServer, postgres_url: str, resolver: Resolver
) -> None:
    events = overlapping_events(120)
    plan = deliveries(events, 3, seed=12)
    subprocess.run([OLBRIDGE, "--catalog", postgres_url, "init"], check=True, capture_output=True, timeout=120)
    answers: list[int] = []
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(serving(postgres_url)) for _ in range(3)]
        clients = 6

        def client(mine: list[tuple[int, list[dict[str, Any]]]]) -> None:
            for server, batch in mine:
                answers.append(post(urls[server], batch))

        in_threads(client, [(plan[n::clients],) for n in range(clients)], timeout=300)
    assert len(answers) == len(plan) and set(answers) <= {200, 201}, sorted(set(answers))
    one_by_one = postgres.url(postgres.create_database())
    try:
        with Catalog(one_by_one) as catalog:
            intake = catalog_intake(catalog, resolver)
            for event in events:
                assert intake.take([event])[0].status == "accepted"
        together, alone = tables(postgres_url), tables(one_by_one)
    finally:
        postgres.drop_database(one_by_one.rsplit("/", 1)[1])
    assert len(together["received_events"]) == len(events)
    assert len(together["assets"]) == 6 and len(together["external_sources"]) == 120
    for name in alone:
        assert together[name] == alone[name], name


def test_the_plan_sends_each_runs_start_and_complete_to_different_servers() -> None:
    events = overlapping_events(12)
    plan = deliveries(events, 3, seed=12)
    sent: dict[tuple[str, str], set[int]] = {}
    for server, batch in plan:
        for event in batch:
            if "run" in event:
                sent.setdefault((event["run"]["runId"], event["eventType"]), set()).add(server)
    for r in range(12):
        run_id = str(uuid.UUID(int=r + 1, version=4))
        assert r % 3 in sent[(run_id, "START")] and (r + 1) % 3 in sent[(run_id, "COMPLETE")]
    total = sum(len(batch) for _, batch in plan)
    assert len(events) < total < 2 * len(events)  # some sent to two servers


def test_a_rolling_restart_of_two_receivers_loses_nothing(postgres_url: str) -> None:
    """Two ``olbridge serve`` processes on one catalog behind a client that, as a load balancer
    does, sends to the next process when one refuses the connection or answers 503; each is
    stopped with SIGTERM in turn while requests are in flight, and started again: each stops
    cleanly, and every event is kept once."""
    events = [
        ol_run_event(
            kind, run_id=str(uuid.UUID(int=r + 1, version=4)), job=("airflow", f"dag.task_{r % 7}"), time=time_
        )
        for r in range(150)
        for kind, time_ in (
            ("START", f"2025-03-02T08:{r // 60:02d}:{r % 60:02d}.000Z"),
            ("COMPLETE", f"2025-03-02T09:{r // 60:02d}:{r % 60:02d}.000Z"),
        )
    ]
    subprocess.run([OLBRIDGE, "--catalog", postgres_url, "init"], check=True, capture_output=True, timeout=120)
    env = {**os.environ, "OLBRIDGE_TOKEN": TOKEN}
    pool: list[str] = []  # where the client sends, as a load balancer's pool
    answers: list[int] = []  # each try's status; 0: the connection refused, -1: reset after the request
    taken: list[int] = []  # one entry an event answered 2xx (appends: safe across threads)

    def producer(mine: list[dict[str, Any]]) -> None:
        turn = 0
        for event in mine:
            for _ in range(600):  # bounded: a minute of refusals at most
                turn += 1
                url = pool[turn % len(pool)]
                try:
                    answer = requests.post(
                        f"{url}/api/v1/lineage", json=event, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
                    )
                except requests.ConnectionError as exc:  # refused, or reset with the request sent
                    answers.append(-1 if "reset" in str(exc) or "aborted" in str(exc) else 0)
                    time.sleep(0.1)
                    continue
                answers.append(answer.status_code)
                if answer.status_code != 503:
                    taken.append(answer.status_code)
                    break
                time.sleep(0.1)

    started: list[Served] = []  # each process, the two stopped in turn and their replacements
    with contextlib.ExitStack() as stack:

        def start() -> Served:
            started.append(
                stack.enter_context(serve_process(postgres_url, "--workers", "2", env=env, ready_timeout=60))
            )
            return started[-1]

        def roll(served: Served) -> None:
            served.process.send_signal(signal.SIGTERM)  # still in the pool: its clients find it gone
            served.process.wait(timeout=60)
            again = start()
            pool[:] = [url for url in pool if url != served.url] + [again.url]

        first, second = start(), start()
        pool[:] = [first.url, second.url]
        sending = [threading.Thread(target=producer, args=(events[n::3],)) for n in range(3)]
        for thread in sending:
            thread.start()
        try:
            assert wait_for(lambda: len(taken) >= 60, timeout=120), f"{len(taken)} events taken"
            roll(first)
            assert wait_for(lambda: len(taken) >= 160, timeout=120), f"{len(taken)} events taken"
            roll(second)
        finally:
            for thread in sending:
                thread.join(timeout=300)
        assert not any(thread.is_alive() for thread in sending), "a producer did not finish"
    with Catalog(postgres_url) as catalog:
        received = catalog.count_received()["received_events"]
    print(
        f"\nrolling restart: {answers.count(0)} connections refused, {answers.count(-1)} reset after the request, "
        f"{answers.count(503)} answers 503"
    )
    assert len(started) == 4
    for served in started:
        assert served.returncode == 0 and "Traceback" not in served.stderr, served.stderr
    assert set(answers) <= {-1, 0, 201, 503}, sorted(set(answers))
    assert len(taken) == len(events) and received == len(events)


# --- the database goes away and comes back -----------------------------------------------------


@pytest.mark.parametrize("crash", [False, True], ids=["restart", "crash"])
def test_a_database_restart_or_crash_loses_nothing_and_every_process_carries_on(crash: bool) -> None:
    """The catalog's PostgreSQL server restarts (a fast shutdown) or crashes (an immediate one,
    then recovery from its WAL) while a producer sends to ``olbridge serve --forward`` and
    ``olbridge stream`` forwards to a backend: while it is away the receiver answers 503 with
    Retry-After and ``/readyz`` 503, and the worker waits; once it is back both carry on by
    themselves. Every event answered 2xx is kept once and reaches the backend, each run's START
    before its COMPLETE; nobody was restarted but the database."""
    runs = 60
    events = [
        ol_run_event(
            kind, run_id=str(uuid.UUID(int=r + 1, version=4)), job=("airflow", f"dag.task_{r % 5}"), time=time_
        )
        for r in range(runs)
        for kind, time_ in (("START", f"2025-03-01T08:{r:02d}:00.000Z"), ("COMPLETE", f"2025-03-01T09:{r:02d}:00.000Z"))
    ]
    statuses: list[int] = []
    failed: list[BaseException] = []  # the producer's
    ready_while_away: list[int] = []
    with PostgresServer.start(durable=True) as server:  # durable: a crash keeps what was committed
        catalog = server.url(server.create_database())
        subprocess.run([OLBRIDGE, "--catalog", catalog, "init"], check=True, capture_output=True, timeout=120)
        with Backend() as backend, serving(catalog, "--forward") as url:
            worker = stream_worker(catalog, backend.url)
            try:

                def producer() -> None:
                    """Each event until it is answered 2xx (a minute of 503s at most); a failure
                    here is kept, for the test to say at once."""
                    try:
                        for event in events:
                            post(url, [event], attempts=600, seen=statuses)
                            time.sleep(0.01)
                    except BaseException as exc:
                        failed.append(exc)

                registered(catalog, worker)
                sending = threading.Thread(target=producer)
                sending.start()
                try:
                    assert wait_for(lambda: backend.accepted_count >= 20, timeout=60), "nothing was forwarded"
                    server.halt(crash=crash)
                    away = time.monotonic()
                    assert wait_for(lambda: statuses.count(503) >= 3 or bool(failed), timeout=30), failed or "no 503"
                    ready_while_away.append(requests.get(f"{url}/readyz", timeout=30).status_code)
                    time.sleep(max(0.0, 3.0 - (time.monotonic() - away)))
                    server.resume()
                finally:
                    sending.join(timeout=180)
                assert not sending.is_alive(), "the producer did not finish"
                assert not failed, failed
                delivered = wait_for(
                    lambda: backend.counts(events)["lost"] == 0 or worker.poll() is not None, timeout=120
                )
                assert worker.poll() is None, "the stream worker stopped"
                assert delivered, backend.counts(events)
            finally:
                code, stderr = stopped(worker)
            with Catalog(catalog) as kept:
                received = kept.count_received()["received_events"]
        counts = backend.counts(events)
    print(f"\ndatabase {'crashed' if crash else 'restarted'}: {statuses.count(503)} answers 503; backend {counts}")
    assert code == 0 and "Traceback" not in stderr, stderr
    assert ready_while_away == [503]
    assert statuses.count(503) >= 3 and set(statuses) <= {201, 503}, sorted(set(statuses))
    assert received == len(events)
    assert counts["delivered"] == len(events) and counts["lost"] == 0 and counts["unexpected"] == 0
    assert counts["duplicated"] <= 5  # at most a batch (--batch-size 5) sent but not yet marked
    assert backend.out_of_order_runs() == []
