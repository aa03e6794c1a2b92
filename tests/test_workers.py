"""One stream worker at a time on a SQLite catalog: the outbox's lease, its heartbeat, and the
workers ``olbridge status`` shows. The process tests run ``olbridge stream`` against a loopback
backend and count every event by its identity there."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.catalog.engine import Busy
from bridge.catalog.workers import LeaseClaim, StreamWorkerInfo, Workers
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.heartbeat import process_space, register_as
from bridge.delivery.lease import OutboxLease, process_is_gone
from bridge.delivery.senders import DELIVERED, Outcome
from bridge.delivery.worker import StreamWorker
from bridge.errors import ExportError
from bridge.openlineage.convert import Converter
from tests.backend import Backend, Reply, wait_for
from tests.helpers import invoke
from tests.test_faults import OLBRIDGE, expected, fill

pytestmark = pytest.mark.both_engines

T = 1_800_000_000.0


def info(name: str, host: str = "host-a", pid: int = 1) -> StreamWorkerInfo:
    return StreamWorkerInfo(id=name, host=host, pid=pid, target="http://b", started_at="t", heartbeat_at=T)


def test_the_lease_goes_to_one_worker_and_is_taken_over_only_from_a_stale_or_dead_one(
    tmp_path: Path, catalog_target: str
) -> None:
    db = catalog_target
    with Catalog(db) as one, Catalog(db) as other:
        a, b = info("a", pid=11), info("b", pid=22)
        one.workers.beat(a, T)
        other.workers.beat(b, T)
        assert one.workers.acquire("a", T, 5, acquired_at="since-a") == LeaseClaim(taken=True)
        assert one.workers.acquire("a", T + 1, 5, acquired_at="later") == LeaseClaim(taken=True)  # held: kept
        refused = other.workers.acquire("b", T + 1, 5, acquired_at="since-b")
        held = refused.holder
        assert not refused.taken and held is not None
        assert (held.worker, held.host, held.pid, held.acquired_at) == ("a", "host-a", 11, "since-a")
        assert held.describe(T + 1) == "pid 11 on host-a, since since-a, to http://b, last heartbeat 1.0s ago"
        assert one.workers.beat(a, T + 4) and not other.workers.beat(b, T + 4)
        assert not other.workers.acquire("b", T + 8, 5, acquired_at="since-b").taken  # a beat 4 s ago
        claim = other.workers.acquire("b", T + 8, 5, acquired_at="since-b", is_dead=lambda h, p: p == 11)
        assert claim.taken and claim.holder is not None
        assert (claim.holder.pid, claim.why) == (11, "its process is gone")
        assert not one.workers.beat(a, T + 9)  # a finds it lost
        assert other.workers.holder().worker == "b"  # type: ignore[union-attr]
        claim = one.workers.acquire("a", T + 20, 5, acquired_at="x")  # b went stale in turn
        assert (claim.taken, claim.why) == (True, "its last heartbeat is 16.0s old")
        listed = {w.id: w.lease_since for w in other.workers.list()}
        assert listed == {"a": "x"}  # b, stale, was forgotten
        other.workers.release("b")  # releasing a lease it no longer holds changes nothing
        one.workers.release("a")
        assert one.workers.holder() is None and one.workers.list() == []


def test_a_process_gone_is_known_dead_only_where_its_pid_means_the_same() -> None:
    """Where a pid means something is the kernel's boot and the pid namespace, not the host's
    name: containers that share the host's network share its name, not its processes. A worker
    registers its own."""
    child = subprocess.Popen(["true"])
    child.wait()
    here = process_space()
    assert process_is_gone(here, child.pid)
    assert not process_is_gone(here, os.getpid())
    assert not process_is_gone(here.rsplit("/", 1)[0] + "/1", child.pid)  # another pid namespace
    assert not process_is_gone("another-boot/" + here.rsplit("/", 1)[1], child.pid)  # another host
    assert not process_is_gone(None, child.pid)  # a worker that did not say (registered before)
    assert register_as("http://b", T).space == here


def test_a_holder_whose_lease_was_taken_over_stops(tmp_path: Path, catalog_target: str) -> None:
    db = catalog_target
    now = [T]
    with Catalog(db) as catalog, Catalog(db) as other:
        lease = OutboxLease(catalog, "http://b", ttl=5, interval=0.01, clock=lambda: now[0])
        stop = threading.Event()
        assert lease.acquire(wait=False, stop=stop, sleep=stop.wait)
        lease.check()  # held
        lines: list[str] = []
        second = OutboxLease(other, "http://b", ttl=5, interval=0.01, clock=lambda: now[0])
        with pytest.raises(ExportError, match=r"being delivered by another olbridge stream \(pid \d+ on "):
            second.acquire(wait=False, stop=stop, sleep=stop.wait)
        assert [w.id for w in other.workers.list()] == [lease.info.id]  # the refused one unregistered
        other.workers.beat(second.info, T)
        now[0] += 1  # the holder's heartbeat thread keeps it fresh ...
        beats = lambda: {w.id: w.heartbeat_at for w in catalog.workers.list()}  # noqa: E731
        assert wait_for(lambda: beats()[lease.info.id] == now[0], timeout=10)
        lease._stop.set()  # ... until it stalls
        lease._thread.join()  # type: ignore[union-attr]
        lease._stop.clear()
        now[0] += 6
        assert second.acquire(wait=True, stop=stop, sleep=stop.wait, notify=lines.append)
        [took] = lines  # no wait: the holder was stale already
        assert took.startswith(f"took the outbox over from pid {os.getpid()} on {socket.gethostname()}, since ")
        assert took.endswith(": its last heartbeat is 6.0s old")
        lease._thread = threading.Thread(target=lease._beat, daemon=True)  # the stalled one wakes up
        lease._thread.start()
        assert wait_for(lambda: lease.lost_to is not None, timeout=10)
        with pytest.raises(ExportError, match=r"took the outbox of .* over .* stopping so that nothing goes twice"):
            lease.check()
        lease.release()
        second.release()
        assert catalog.workers.list() == []


def stopped(lease: OutboxLease) -> str | None:
    """What check() raises (None: nothing, the worker goes on)."""
    try:
        lease.check()
    except ExportError as exc:
        return str(exc)
    return None


def test_a_lease_whose_heartbeat_cannot_open_the_catalog_stops(
    catalog_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Catalog(catalog_target) as catalog:
        lease = OutboxLease(catalog, "http://b", interval=0.01)

        def cannot_reopen() -> Catalog:
            raise RuntimeError("too many open files")

        monkeypatch.setattr(catalog, "reopen", cannot_reopen)
        stop = threading.Event()
        assert lease.acquire(wait=False, stop=stop, sleep=stop.wait)
        assert wait_for(lambda: stopped(lease) is not None, timeout=10)
        assert stopped(lease) == (
            f"the heartbeat of this olbridge stream on {catalog.path} failed: RuntimeError: too many open files; "
            "stopping so that nothing goes twice (what it holds is taken over 5s after its last heartbeat)"
        )
        lease.release()
        assert catalog.workers.list() == []


def test_a_busy_catalog_does_not_stop_the_heartbeat_but_any_other_failure_does(
    catalog_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Catalog(catalog_target) as catalog:
        lease = OutboxLease(catalog, "http://b", interval=0.01)
        stop = threading.Event()
        assert lease.acquire(wait=False, stop=stop, sleep=stop.wait)
        beat = Workers.beat
        calls: list[str] = []

        def busy_then_broken(self: Workers, worker: StreamWorkerInfo, now: float) -> bool:
            calls.append("beat")
            if len(calls) <= 3:
                raise Busy("the catalog is locked")
            if len(calls) <= 6:
                return beat(self, worker, now)
            raise ValueError("a fault")

        monkeypatch.setattr(Workers, "beat", busy_then_broken)
        assert wait_for(lambda: len(calls) >= 7, timeout=10)
        assert wait_for(lambda: not lease._thread.is_alive(), timeout=10)  # type: ignore[union-attr]
        assert "failed: ValueError: a fault; stopping" in (stopped(lease) or "")
        assert calls == ["beat"] * 7  # busy three times, beating on; the fault ended it
        lease.release()


def test_a_worker_whose_heartbeat_fails_stops_sending(
    catalog_target: str, converter: Converter, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Catalog(catalog_target) as catalog:
        fill(catalog, 10)  # 20 events, 5 a round
        lease = OutboxLease(catalog, "http://b", interval=0.01)
        sent: list[str] = []

        def broken(self: Workers, worker: StreamWorkerInfo, now: float) -> bool:
            raise RuntimeError("the heartbeat broke")

        class Sender:
            target = "http://b"
            max_concurrency = 1

            def send(self, lines: list[str]) -> list[Outcome]:
                if not sent:  # the heartbeat dies while the first round is being sent
                    monkeypatch.setattr(Workers, "beat", broken)
                    assert wait_for(lambda: not lease._thread.is_alive(), timeout=10)  # type: ignore[union-attr]
                sent.extend(lines)
                return [DELIVERED for _ in lines]

            def close(self) -> None:
                pass

        worker = StreamWorker(catalog, converter, Dispatcher(Sender(), concurrency=1, batch_size=5), lease=lease)
        with pytest.raises(ExportError, match=r"heartbeat .* failed: RuntimeError: the heartbeat broke; stopping"):
            worker.run(once=True)
        assert len(sent) == 5 and worker.stats.delivered == 5  # the first round, then nothing
        assert catalog.outbox.status().pending == 15
        assert catalog.workers.list() == []  # the lease given back


def test_stream_says_an_error_and_stops_when_its_heartbeat_fails(
    catalog_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Catalog(catalog_target) as catalog:
        fill(catalog, 10)

    sending = threading.Event()

    def cannot_reopen(self: Catalog) -> Catalog:  # the heartbeat fails once the first round is being sent
        sending.wait(timeout=10)
        raise RuntimeError("too many open files")

    def heartbeat_gone(event: dict[str, Any], attempt: int) -> Reply:
        sending.set()
        assert wait_for(lambda: not any(t.name == "olbridge-heartbeat" for t in threading.enumerate()), timeout=10)
        return Reply(201)

    monkeypatch.setattr(Catalog, "reopen", cannot_reopen)
    with Backend(heartbeat_gone) as backend:
        args = ["stream", "--url", backend.url, "--once", "--batch-size", "5", "--concurrency", "1"]
        code, _, stderr = invoke(catalog_target, *args)
        accepted = backend.accepted_count
    assert code == 1 and accepted == 5  # one round, then it stopped
    assert stderr.splitlines()[-1].startswith("Error: the heartbeat of this olbridge stream on ")
    assert "failed: RuntimeError: too many open files; stopping so that nothing goes twice" in stderr
    assert "Traceback" not in stderr


# --- real processes -----------------------------------------------------------------------------


@pytest.fixture
def busy_catalog(tmp_path: Path, converter: Converter) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        fill(catalog, 600)
        yield db, expected(catalog, converter)


def test_two_stream_once_workers_send_each_event_once(busy_catalog: tuple[Path, list[dict[str, Any]]]) -> None:
    db, history = busy_catalog
    with Backend(lambda e, a: Reply(201, delay=0.003)) as backend:
        command = [OLBRIDGE, "--catalog", str(db), "stream", "--url", backend.url, "--once", "--batch-size", "5"]
        workers = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        try:
            results = [(w, w.communicate(timeout=120)[1]) for w in workers]
        finally:  # one that did not finish in time (the test fails) does not outlive it
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.communicate(timeout=30)
        for worker, stderr in results:
            other = next(w for w in workers if w is not worker)
            if worker.returncode == 1:  # refused: it names the one delivering and since when
                error = stderr.strip().splitlines()[-1]
                assert error.startswith(f"Error: the outbox of {db} is being delivered by another olbridge stream")
                assert f"(pid {other.pid} on {socket.gethostname()}, since " in error
            else:
                assert worker.returncode == 0, stderr
        counts = backend.counts(history)
    assert counts == {"sent": 1200, "delivered": 1200, "duplicated": 0, "lost": 0, "unexpected": 0}
    assert backend.out_of_order_runs() == []


def stall_between_transactions(process: subprocess.Popen[Any], db: Path) -> None:
    """Stop ``process`` (SIGSTOP) where it holds no write transaction of the SQLite catalog at
    ``db``: one stopped inside one holds every writer of the file (SQLite's one write lock), which
    no lease can take over; stopped there, it is let go on at once and stopped again a moment on."""
    for _ in range(200):
        process.send_signal(signal.SIGSTOP)
        try:
            probe = sqlite3.connect(db, timeout=0.2)
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.rollback()
                return
            finally:
                probe.close()
        except sqlite3.OperationalError:  # locked: it was inside a write
            process.send_signal(signal.SIGCONT)
            time.sleep(0.01)
    raise AssertionError("the worker never left the catalog's write lock")


def test_a_second_stream_waits_and_takes_over_a_stalled_worker(
    busy_catalog: tuple[Path, list[dict[str, Any]]],
) -> None:
    db, history = busy_catalog
    with Backend(lambda e, a: Reply(201, delay=0.005)) as backend:
        command = [OLBRIDGE, "--catalog", str(db), "stream", "--url", backend.url, "--batch-size", "5"]
        first = subprocess.Popen([*command, "--concurrency", "1"], stderr=subprocess.DEVNULL)
        second: subprocess.Popen[str] | None = None
        try:
            assert wait_for(lambda: backend.accepted_count >= 100, timeout=60)
            status = json.loads(
                subprocess.run([OLBRIDGE, "--catalog", str(db), "status", "--json"], capture_output=True).stdout
            )
            [shown] = status["workers"]
            assert (shown["pid"], shown["holdsLease"], shown["target"]) == (first.pid, True, backend.url)
            stall_between_transactions(first, db)  # alive, but its heartbeat stops
            taken = backend.accepted_count
            second = subprocess.Popen([*command, "--poll", "0.05"], stderr=subprocess.PIPE, text=True)
            assert wait_for(lambda: backend.counts(history)["delivered"] == len(history), timeout=90)
            status = json.loads(
                subprocess.run([OLBRIDGE, "--catalog", str(db), "status", "--json"], capture_output=True).stdout
            )
            holders = [w["pid"] for w in status["workers"] if w["holdsLease"]]
            assert holders == [second.pid] and status["pending"] == 0
            second.send_signal(signal.SIGTERM)
            _, stderr = second.communicate(timeout=30)
        finally:
            first.kill()
            first.wait()
            if second is not None and second.poll() is None:
                second.kill()
                second.wait()
        assert second.returncode == 0, stderr
        here = socket.gethostname()
        said = stderr.splitlines()
        over = f"took the outbox over from pid {first.pid} on {here}"
        took = [n for n, text in enumerate(said) if text.startswith(over)]
        assert len(took) == 1, stderr
        # it waits while the stalled worker's lease runs: said unless a slow start outlived it
        waiting = [text for text in said[: took[0]] if text.startswith("waiting:")]
        assert all(
            text.startswith(
                f"waiting: the outbox is being delivered by another olbridge stream (pid {first.pid} on {here}, since "
            )
            for text in waiting
        ), stderr
    counts = backend.counts(history)
    assert (counts["delivered"], counts["lost"], counts["unexpected"]) == (len(history), 0, 0)
    assert counts["duplicated"] <= 5  # at most the request the stalled worker had in flight
    assert taken >= 100 and backend.out_of_order_runs() == []


def test_a_retry_due_now_that_another_worker_holds_is_waited_for_not_claimed_in_a_spin(
    catalog_target: str, converter: Converter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the next retry may be a row another worker has claimed: this worker takes
    nothing, and the retry is already due. It waits a moment before it claims again (each claim
    is a write transaction); it used to claim again at once, as fast as the catalog answered."""
    import time

    from bridge.delivery.worker import HELD_RETRY_WAIT

    stop = threading.Event()
    takes: list[float] = []

    class HeldByAnother:  # an OutboxHold under which another worker holds every row
        owner = "this"

        def acquire(self, **kwargs: Any) -> bool:
            return True

        def check(self) -> None:
            pass

        def take(self, now: float, limit: int, *, alerts_only: bool = False) -> list[Any]:
            takes.append(now)
            if len(takes) == 20:
                stop.set()
            return []

        def release(self) -> None:
            pass

    class Sender:
        target = "http://b"
        max_concurrency = 1

        def send(self, lines: list[str]) -> list[Outcome]:
            raise AssertionError("nothing is this worker's to send")

        def close(self) -> None:
            pass

    slept: list[float] = []
    with Catalog(catalog_target) as catalog:
        due = lambda self, alerts_only=False: time.time() - 1  # noqa: E731
        monkeypatch.setattr(type(catalog.outbox), "next_retry_at", due)
        hold: Any = HeldByAnother()
        worker = StreamWorker(catalog, converter, Dispatcher(Sender()), lease=hold, sleep=slept.append, stop=stop)
        worker.run()
    assert len(takes) == 20
    assert len(slept) >= 19 and min(slept) >= HELD_RETRY_WAIT


def test_stream_waits_while_the_catalog_cannot_be_read_before_a_round_and_loses_nothing(
    catalog_target: str, converter: Converter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog busy or out of reach when a round takes its rows (a PostgreSQL server
    restarting, say): the worker waits and takes them again, as it does when settling; it used to
    stop with an error."""
    from bridge.catalog.outbox import Outbox

    with Catalog(catalog_target) as catalog:
        fill(catalog, 4)
        events = expected(catalog, converter)
        failures = iter([Busy("the server is restarting")] * 2)
        real_heads = Outbox.heads

        def heads(self: Outbox, now: float, limit: int, *, alerts_only: bool = False) -> Any:
            failure = next(failures, None)
            if failure is not None:
                raise failure
            return real_heads(self, now, limit, alerts_only=alerts_only)

        monkeypatch.setattr(Outbox, "heads", heads)

        class Sender:
            target = "http://b"
            max_concurrency = 1

            def send(self, lines: list[str]) -> list[Outcome]:
                sent.extend(json.loads(line) for line in lines)
                return [DELIVERED for _ in lines]

            def close(self) -> None:
                pass

        sent: list[dict[str, Any]] = []
        slept: list[float] = []
        stats = StreamWorker(catalog, converter, Dispatcher(Sender()), sleep=slept.append).run(once=True)
    assert sent == events and stats.delivered == len(events)
    assert len(slept) >= 2
