"""A PostgreSQL catalog failing over, as an operator sees it: real ``olbridge serve`` and ``olbridge
stream`` processes on the test suite's PostgreSQL server while the database turns read-only and
back, another client holds the rows they write, the server's connections run out, or the catalog
is stamped by a newer olbridge. What docs/scaling.md's failure section says each does."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import requests
from psycopg import sql

from bridge.catalog import Catalog
from bridge.catalog.availability import Availability
from bridge.catalog.copy import count_rows
from tests.backend import Backend, Reply, wait_for
from tests.helpers import ol_run_event, serve_process
from tests.postgres import PostgresServer, children_of
from tests.test_faults import OLBRIDGE, fill
from tests.test_scale import TOKEN, post, registered, stopped, stream_worker

ENV = {**os.environ, "OLBRIDGE_TOKEN": TOKEN}


def run_events(runs: int, *, offset: int = 0) -> list[dict[str, Any]]:
    """Each run's START and COMPLETE, runs of a few jobs."""
    return [
        ol_run_event(
            kind,
            run_id=str(uuid.UUID(int=offset + r + 1, version=4)),
            job=("airflow", f"dag.task_{r % 5}"),
            time=f"2025-03-01T{hour}:{r // 60:02d}:{r % 60:02d}.000Z",
        )
        for r in range(runs)
        for kind, hour in (("START", "08"), ("COMPLETE", "09"))
    ]


def database_of(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?")[0]


def end_sessions(postgres: PostgresServer, database: str) -> None:
    """End every session on the database but the caller's (what a failover does to them)."""
    with postgres.connect() as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )


def read_only(postgres: PostgresServer, database: str, on: bool) -> None:
    """New sessions on the database read-only (as on a standby), or no longer."""
    name = sql.Identifier(database)
    with postgres.connect() as admin:
        if on:
            admin.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(name))
        else:
            admin.execute(sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only").format(name))


def init(url: str) -> None:
    subprocess.run([OLBRIDGE, "--catalog", url, "init"], check=True, capture_output=True, timeout=120)


def test_a_read_only_spell_under_load_pauses_the_worker_and_the_receiver_writes_again_within_seconds(
    postgres: PostgresServer, postgres_url: str
) -> None:
    """A producer sends to ``serve --forward`` and ``stream`` forwards to a backend; the database
    turns read-only (every session ended, the new ones read-only: a failover that landed on a
    standby), then writable again. Meanwhile the receiver answers 503 with Retry-After and
    ``/readyz`` 503; the worker pauses and says so once. Once writable, the receiver answers 201
    again within 10 s (it drops the connection that answered read-only), the worker carries on,
    every event answered 2xx is kept once and delivered once, each run in order."""
    init(postgres_url)
    database = database_of(postgres_url)
    events = run_events(250)  # sent over 10 s at least: the spell comes in the middle
    statuses: list[int] = []  # every answer, as it comes
    failed: list[BaseException] = []
    ready_while_read_only: list[int] = []

    def producer(url: str) -> None:
        try:
            for event in events:
                post(url, [event], attempts=900, seen=statuses)
                time.sleep(0.02)
        except BaseException as exc:
            failed.append(exc)

    try:
        with (
            Backend() as backend,
            serve_process(postgres_url, "--forward", env=ENV, ready_timeout=60, stop_timeout=60) as served,
        ):
            worker = stream_worker(postgres_url, backend.url)
            try:
                registered(postgres_url, worker)
                sending = threading.Thread(target=producer, args=(served.url,))
                sending.start()
                try:
                    assert wait_for(lambda: backend.accepted_count >= 10, timeout=60), "nothing was forwarded"
                    assert len(statuses) < len(events) / 2, "the load was over before the spell"
                    read_only(postgres, database, True)
                    end_sessions(postgres, database)
                    assert wait_for(lambda: statuses.count(503) >= 3 or bool(failed), timeout=30)
                    assert wait_for(lambda: requests.get(f"{served.url}/readyz", timeout=10).status_code == 503, 10)
                    ready_while_read_only.append(503)
                    time.sleep(2)
                    read_only(postgres, database, False)
                    writable, writable_at = len(statuses), time.monotonic()
                    # a bounded poll: the receiver's next 201 comes within 10 s of the database
                    # being writable again (it came after 2-3 minutes, at the writer's scheduled reconnect)
                    answered = wait_for(lambda: 201 in statuses[writable:] or bool(failed), 10)
                    assert answered and not failed, (failed, statuses[-5:])
                    again = time.monotonic() - writable_at
                    assert wait_for(lambda: requests.get(f"{served.url}/readyz", timeout=10).status_code == 200, 10)
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
                code, worker_err = stopped(worker)
    finally:
        read_only(postgres, database, False)
    with Catalog(postgres_url) as kept:
        received = kept.count_received()["received_events"]
    counts = backend.counts(events)
    answers = statuses
    print(f"\nread-only spell: {answers.count(503)} answers 503, a 201 again {again:.2f} s after; backend {counts}")
    assert code == 0 and "Traceback" not in worker_err, worker_err
    assert worker_err.count("is unavailable since") in (1, 2) and "is back after" in worker_err, worker_err
    assert served.returncode == 0 and "Traceback" not in served.stderr, served.stderr
    assert "error ignored terminating" not in served.stderr, served.stderr
    assert 1 <= served.stderr.count("is unavailable since") <= 2, served.stderr
    assert ready_while_read_only == [503]
    assert set(answers) <= {201, 503}, sorted(set(answers))
    assert received == len(events)
    assert counts["delivered"] == len(events) and counts["lost"] == 0 and counts["unexpected"] == 0
    assert counts["duplicated"] == 0
    assert backend.out_of_order_runs() == []


def test_a_row_lock_held_by_another_client_ends_in_503_within_the_deadline_and_sigterm_is_not_held(
    postgres: PostgresServer, postgres_url: str
) -> None:
    """Another client holds the rows the receiver writes (``SELECT ... FOR UPDATE`` in a
    transaction left open): a request that needs them is answered 503 with Retry-After once the
    lock_timeout the catalog URL sets passes, not after the receiver's 30 s deadline, the other
    events keep landing, and a SIGTERM stops the receiver within seconds while the lock is held."""
    init(postgres_url)
    url = f"{postgres_url}?lock_timeout=1s&statement_timeout=5s"
    start, complete = run_events(1)
    other = run_events(1, offset=100)[0]  # another job's run: no row in common
    other["job"]["name"] = "dag.elsewhere"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with serve_process(url, env=ENV, ready_timeout=60, stop_timeout=60) as served:
        assert requests.post(f"{served.url}/api/v1/lineage", json=start, headers=headers, timeout=30).status_code == 201
        with psycopg.connect(postgres_url) as holder:  # a transaction: the lock is held until it ends
            holder.execute("SELECT * FROM external_sources FOR UPDATE").fetchall()
            holder.execute("SELECT * FROM external_datasets FOR UPDATE").fetchall()
            # the run's end updates the run's row: it waits for the lock at most lock_timeout (1 s)
            began = time.monotonic()
            answer = requests.post(f"{served.url}/api/v1/lineage", json=complete, headers=headers, timeout=15)
            answered = time.monotonic() - began
            assert answer.status_code == 503 and answer.headers.get("Retry-After"), answer.text
            assert "lock" in answer.json()["error"]["message"] and "psycopg" not in answer.text, answer.text
            landed = requests.post(f"{served.url}/api/v1/lineage", json=other, headers=headers, timeout=15)
            assert landed.status_code == 201, landed.text
            began = time.monotonic()
            served.process.send_signal(signal.SIGTERM)
            code = served.process.wait(timeout=10)  # a few seconds: not the lock's 60 s
            stopping = time.monotonic() - began
            print(f"\nrow lock held: 503 after {answered:.2f} s, stopped {stopping:.2f} s after SIGTERM")
        assert code == 0
    with Catalog(postgres_url) as kept:
        assert kept.count_received()["received_events"] == 2


def test_a_reconnect_with_the_servers_connections_all_taken_keeps_the_receivers_slot() -> None:
    """The writer's connection is opened again on a schedule (1, 3, 7, ... s after it opens): with
    every other connection the server allows taken by other clients, the new one cannot be
    opened. The writer keeps the one it has (it opens the new one before it closes the old): the
    same session writes on, every request is answered 201."""
    with PostgresServer.start(settings={"max_connections": "12", "superuser_reserved_connections": "0"}) as server:
        url = server.url(server.create_database())
        init(url)
        others: list[psycopg.Connection[Any]] = []
        try:
            with (
                serve_process(url, env=ENV, ready_timeout=60, stop_timeout=60) as served,
                server.connect() as admin,
            ):
                writers = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'olbridge'"
                ).fetchall()
                while True:  # every slot left, to other clients
                    try:
                        others.append(server.connect())
                    except psycopg.OperationalError:
                        break
                assert others, "no slot was left to take"
                statuses = []
                for event in run_events(40):  # about 8 s of requests: past the reconnects due at 3 and 7 s
                    statuses.append(post(served.url, [event], attempts=1))
                    time.sleep(0.1)
                after = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'olbridge'").fetchall()
        finally:
            for conn in others:
                conn.close()
    assert set(statuses) == {201}, statuses
    assert len(writers) == 1 and after == writers


@pytest.mark.both_engines
def test_readyz_follows_a_writer_that_cannot_start(engine: str, catalog_target: str) -> None:
    """The catalog is stamped by a newer olbridge while ``serve`` runs, and the writer is started
    again (its process killed): it cannot open the catalog, and ``/readyz`` says so (503, naming
    why) while POSTs get 503, rather than 200 from a read of its own. The writer is started
    again later each time, and says its error once; a SIGTERM still stops ``serve`` cleanly."""
    init(catalog_target)
    with serve_process(catalog_target, env=ENV, ready_timeout=60, stop_timeout=60) as served:
        if engine == "sqlite":
            with sqlite3.connect(catalog_target) as conn:
                conn.execute("PRAGMA user_version = 9999")
        else:
            with psycopg.connect(catalog_target, autocommit=True) as conn:
                conn.execute("UPDATE alembic_version SET version_num = '9999'")
        for pid in children_of(served.process.pid):
            os.kill(pid, signal.SIGKILL)

        def not_ready() -> str:
            try:
                answer = requests.get(f"{served.url}/readyz", timeout=10)
            except requests.ConnectionError:  # the workers are being started again
                return ""
            return str(answer.json()["error"]["message"]) if answer.status_code == 503 else ""

        # first "the writer exited", then why the next one cannot start
        assert wait_for(lambda: "newer" in not_ready(), timeout=30)
        answer = post(served.url, run_events(1)[:1], attempts=1)
        assert answer == 503
        time.sleep(4)  # the writer fails again at 1, 2 (and 4) s: said once
    assert served.returncode == 0, served.stderr
    assert served.stderr.count("newer than this olbridge") == 1, served.stderr
    assert "Traceback" not in served.stderr, served.stderr


def test_a_copy_of_a_catalog_under_load_verifies_and_carries_no_claims(
    postgres: PostgresServer, postgres_url: str
) -> None:
    """``catalog copy`` of a PostgreSQL catalog that a receiver and a stream worker are writing
    (the worker holding claims on the outbox, its backend slow): the copy is checked against the
    snapshot it was copied from (exit 0, every table the same), and it leaves the worker's
    registration and claims behind, so that a worker on the copy holds nothing of the source's."""
    init(postgres_url)
    with Catalog(postgres_url) as source:
        fill(source, 300)
    copy = postgres.url(postgres.create_database())
    events = run_events(3000)  # more than are sent before the copy is over: the producer is stopped then
    statuses: list[int] = []
    stop = threading.Event()

    def producer(url: str) -> None:
        for event in events:
            if stop.is_set():
                return
            post(url, [event], attempts=100, seen=statuses)

    with (
        Backend(lambda event, attempt: Reply(201, delay=0.02)) as backend,
        serve_process(postgres_url, env=ENV, ready_timeout=60, stop_timeout=60) as served,
    ):
        worker = stream_worker(postgres_url, backend.url)
        sending = threading.Thread(target=producer, args=(served.url,))
        sending.start()
        try:
            assert wait_for(lambda: backend.accepted_count >= 5 and len(statuses) >= 20, timeout=60)
            with Catalog(postgres_url) as source:
                assert wait_for(lambda: bool(source.outbox.claims()), timeout=10), "the worker holds no claims"
            done = subprocess.run(
                [OLBRIDGE, "catalog", "copy", postgres_url, copy, "--json"], capture_output=True, text=True, timeout=300
            )
            assert len(statuses) < len(events), "the load was over before the copy"
        finally:
            stop.set()
            sending.join(timeout=120)
            code, worker_err = stopped(worker)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["same"] is True and all(t["same"] for t in report["tables"]), report
    with Catalog(copy) as copied:
        assert copied.outbox.claims() == {}
        assert copied._conn.execute("SELECT count(*) FROM stream_workers").fetchone()[0] == 0
        assert sum(count_rows(copied).values()) == report["rows"]
    assert code == 0, worker_err


def test_availability_says_each_change_once() -> None:
    """The catalog going away and coming back is one line each, however many writes fail."""
    said: list[str] = []
    clock = iter([10.0, 12.5]).__next__
    available = Availability(said.append, clock=clock, wall=lambda: 1_800_000_000.0)
    available.up()
    for _ in range(100):
        available.down("it is read-only (a standby?)")
    assert not available.available and available.reason == "it is read-only (a standby?)"
    available.up()
    available.up()
    assert said == [
        "the catalog is unavailable since 2027-01-15T08:00:00Z: it is read-only (a standby?); waiting for it",
        "the catalog is back after 2.5 s",
    ]


@contextlib.contextmanager
def streamed(server: PostgresServer) -> Iterator[tuple[str, Backend, subprocess.Popen[str]]]:
    """A catalog of 3 runs on ``server`` (its URL), a loopback backend, and a ``stream`` worker
    to it, killed if it still runs at the end (the backend stopped)."""
    url = server.url(server.create_database())
    init(url)
    with Catalog(url) as catalog:
        fill(catalog, 3)
    backend = Backend().start()
    worker = stream_worker(url, backend.url)
    try:
        yield url, backend, worker
    finally:
        if worker.poll() is None:
            worker.kill()
        backend.stop()


def test_a_server_hung_with_its_connections_up_is_not_ready_and_holds_no_stop_for_ever(tmp_path: Any) -> None:
    """A server that answers nothing while its connections stay up (every PostgreSQL process
    stopped, as a hung host or storage leaves them: TCP still acknowledges, so no keepalive ends
    them) held ``/readyz`` at 200 while every request waited its 30 s for a 503, and held SIGTERM
    of ``serve`` and of ``stream`` for as long as it hung. ``/readyz`` now says 503 once the
    writer's probe has waited 10 s; ``serve`` stops without its writer 30 s after telling it to
    (exit 1, saying why), ``stream`` 60 s after the signal (exit 1, saying why)."""
    with PostgresServer.start() as server:
        with (
            streamed(server) as (url, backend, worker),
            serve_process(url, env=ENV, ready_timeout=60, stop_timeout=120) as served,
        ):
            assert wait_for(lambda: backend.accepted_count == 6, timeout=60), backend.accepted_count
            assert server.pid is not None
            hung = [server.pid, *children_of(server.pid)]
            for pid in hung:
                os.kill(pid, signal.SIGSTOP)
            try:

                def not_ready() -> bool:
                    answer = requests.get(f"{served.url}/readyz", timeout=5)
                    return answer.status_code == 503 and "has not answered the writer" in answer.text

                assert wait_for(not_ready, timeout=40)
                served.process.send_signal(signal.SIGTERM)
                worker.send_signal(signal.SIGTERM)
                served.process.wait(timeout=90)
                worker.wait(timeout=120)
            finally:
                for pid in hung:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
        _, said = worker.communicate(timeout=30)
    assert served.returncode == 1, served.stderr
    assert "the writer did not stop within 30 s" in served.stderr and "Traceback" not in served.stderr
    assert worker.returncode == 1, said
    assert "Error: still not stopped 60 s after SIGTERM: what it waits on" in said and "Traceback" not in said


def test_a_stream_stopped_while_the_database_is_away_exits_0() -> None:
    """SIGTERM to ``stream`` while the server is down (a failover under way, a rolling restart):
    nothing is in flight, so it stops as it stops otherwise (exit 0); it exited 1 with an
    ``Error:`` as it counted, once stopped, what waits behind dead letters."""
    with PostgresServer.start() as server:
        with streamed(server) as (_url, backend, worker):
            assert wait_for(lambda: backend.accepted_count == 6, timeout=60), backend.accepted_count
            server.halt()
            time.sleep(1.5)  # the worker finds it away
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=90)
        _, said = worker.communicate(timeout=30)
    assert worker.returncode == 0, said
    assert "Error:" not in said and "Traceback" not in said, said


@pytest.mark.parametrize("landed", ["yes", "no", "one by another writer"])
def test_a_group_whose_connection_is_lost_as_it_commits_is_answered_as_it_landed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, landed: str
) -> None:
    """The server ended the session as the group's COMMIT went (a fast shutdown: "terminating
    connection due to administrator command"), after the COMMIT was durable: the events were
    answered 503, "could not commit", and kept. The writer asks a new connection whether the
    group landed: its results where it did (a retry would have been answered duplicate), 503
    where it did not; and, where the catalog cannot be asked, a 503 that says it may have."""
    from bridge.catalog.postgres.cursor import SharedCursor
    from bridge.mapping import Resolver
    from bridge.receiver.imports import catalog_intake
    from bridge.receiver.writer import CatalogWriter

    resolver = Resolver.load()
    with Catalog(postgres_url) as verdicts:
        intake = catalog_intake(verdicts, resolver)
        events = [intake.prepare(event) for event in run_events(3)]
        more = [intake.prepare(event) for event in run_events(2, offset=10)]
    writer = CatalogWriter(postgres_url, resolver)

    def unreachable(engine: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    execute = SharedCursor.execute

    def lost(cur: SharedCursor, query: str, *args: Any, **kwargs: Any) -> Any:
        if query == "COMMIT":
            execute(cur, query if landed == "yes" else "ROLLBACK")
            cur.connection.close()
            if landed == "one by another writer":  # a retry of the first event, through another receiver
                with Catalog(postgres_url) as other:
                    monkeypatch.setattr(SharedCursor, "execute", execute)
                    assert other.ingest(events[:1], resolver)[0].status == "accepted"  # type: ignore[union-attr]
                    monkeypatch.setattr(SharedCursor, "execute", lost)
            raise psycopg.OperationalError("the connection to the server was lost")
        return execute(cur, query, *args, **kwargs)

    try:
        monkeypatch.setattr(SharedCursor, "execute", lost)
        results = writer.write(events)
        monkeypatch.setattr(SharedCursor, "execute", execute)
        with Catalog(postgres_url) as catalog:
            stored = catalog.count_received()["received_events"]
        if landed == "yes":
            assert [getattr(r, "status", r) for r in results] == ["accepted"] * 6 and stored == 6
        else:  # not this group's: the one another writer stored is not taken for it
            assert all("could not commit" in str(r) for r in results), results
            assert stored == (1 if landed == "one by another writer" else 0)
        if landed == "one by another writer":
            return
        # the catalog cannot be asked (its server gone for the while asked): a 503 saying it may have
        monkeypatch.setattr("bridge.catalog.ingest.LANDED_WITHIN", 0.5)
        monkeypatch.setattr(SharedCursor, "execute", lost)
        monkeypatch.setattr(type(writer.catalog.engine), "connect", unreachable)
        unknown = writer.write(more)
        assert all("may not have committed" in str(r) and "retry" in str(r) for r in unknown), unknown
    finally:
        monkeypatch.undo()
        writer.close()


@pytest.mark.parametrize("landed", [True, False])
def test_a_group_taken_one_event_at_a_time_whose_connection_is_lost_as_it_commits_is_answered_as_it_landed(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, landed: bool
) -> None:
    """A group one of whose events the catalog refuses is taken again one event at a time (each
    in a savepoint); where that transaction's COMMIT loses its connection, its results are given
    as it landed, as a whole group's are: the others accepted and the refused one refused where
    it landed (they were answered 503 "could not commit", and kept), 503 where it did not."""
    from bridge.catalog import external
    from bridge.catalog.postgres.cursor import SharedCursor
    from bridge.mapping import Resolver
    from bridge.receiver.imports import catalog_intake
    from bridge.receiver.writer import CatalogWriter

    resolver = Resolver.load()
    with Catalog(postgres_url) as verdicts:
        intake = catalog_intake(verdicts, resolver)
        events = [intake.prepare(event) for event in run_events(2)]
    refused = events[1]
    ingest_events = external.ingest_events

    def refusing(cur: Any, taken: Any, *args: Any, **kwargs: Any) -> Any:
        if any(e is refused for e in taken):
            raise ValueError("refused by the test")
        return ingest_events(cur, taken, *args, **kwargs)

    execute = SharedCursor.execute

    def lost(cur: SharedCursor, query: str, *args: Any, **kwargs: Any) -> Any:
        if query == "COMMIT":
            execute(cur, query if landed else "ROLLBACK")
            cur.connection.close()
            raise psycopg.OperationalError("the connection to the server was lost")
        return execute(cur, query, *args, **kwargs)

    writer = CatalogWriter(postgres_url, resolver)
    try:
        monkeypatch.setattr(external, "ingest_events", refusing)
        monkeypatch.setattr(SharedCursor, "execute", lost)
        results = writer.write(events)
        monkeypatch.setattr(SharedCursor, "execute", execute)
        with Catalog(postgres_url) as catalog:
            stored = catalog.count_received()["received_events"]
        if landed:
            assert [getattr(r, "status", None) for r in results] == ["accepted", None, "accepted", "accepted"], results
            assert "refused by the test" in str(results[1]) and stored == 3
        else:
            assert all("could not commit" in str(r) for r in results) and stored == 0, results
    finally:
        monkeypatch.undo()
        writer.close()
