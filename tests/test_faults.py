"""Fault tests: the stream worker against a real loopback backend that misbehaves.

Each test counts the events sent (that reached the backend), delivered (distinct events taken),
duplicated and lost (expected events never taken), and checks that no run's end was taken
before its START. Lost is always zero. The in-process tests drive the worker's clock and sleep,
so backoff costs no real time; the kill and stop tests run ``olbridge stream`` as a process.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.delivery.dispatch import Dispatcher
from bridge.delivery.history import iter_events
from bridge.delivery.report import FailureReport
from bridge.delivery.retry import RetryPolicy
from bridge.delivery.senders import DELIVERED, HttpSender, Outcome
from bridge.delivery.worker import StreamWorker
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter
from tests.backend import ACCEPT, Backend, Reply, free_port, wait_for
from tests.conftest import T0
from tests.helpers import decl, run, terminated

OLBRIDGE = str(Path(sys.executable).parent / "olbridge")


class FakeTime:
    """A clock that only moves when the worker sleeps; ``on_sleep`` sees each sleep."""

    def __init__(self, on_sleep: Callable[[int], object] | None = None) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))


def fill(catalog: Catalog, runs: int) -> None:
    catalog.record_task_runs(
        run(
            f"task{i % 5}",
            execution=f"e{i}",
            start=T0 + timedelta(seconds=i),
            inputs=(decl(f"raw.t{i % 7}"),),
            outputs=(decl(f"mart.t{i % 11}", type="Table"),),
        )
        for i in range(runs)
    )


def expected(catalog: Catalog, converter: Converter) -> list[dict[str, Any]]:
    return list(iter_events(catalog, converter))


def worker(
    catalog: Catalog,
    converter: Converter,
    backend: Backend,
    fake: FakeTime,
    *,
    timeout: float = 2.0,
    batch: bool = False,
) -> StreamWorker:
    sender = HttpSender(backend.url, timeout=timeout, batch=batch, clock=fake.clock)
    return StreamWorker(
        catalog,
        converter,
        Dispatcher(sender, concurrency=3, batch_size=4),
        policy=RetryPolicy(base=0.5, cap=30),
        clock=fake.clock,
        sleep=fake.sleep,
    )


@pytest.fixture
def history(catalog: Catalog, converter: Converter) -> list[dict[str, Any]]:
    fill(catalog, 20)
    return expected(catalog, converter)


def test_backend_down_then_up(catalog: Catalog, converter: Converter, history: list[dict[str, Any]]) -> None:
    backend = Backend(port=free_port())
    fake = FakeTime(on_sleep=lambda n: backend.start() if n == 4 else None)
    try:
        w = worker(catalog, converter, backend, fake)
        stats = w.run(once=True)
    finally:
        backend.stop()
        w.dispatcher.close()
    counts = backend.counts(history)
    assert counts == {"sent": 40, "delivered": 40, "duplicated": 0, "lost": 0, "unexpected": 0}
    assert stats.retried > 0 and stats.delivered == 40 and stats.dead == 0
    assert stats.attempts == 40 + stats.retried
    assert len(fake.sleeps) >= 4 and min(fake.sleeps) > 0  # it waited for the retries while the backend was down
    assert backend.out_of_order_runs() == []
    assert catalog.outbox.status().pending == 0


@pytest.mark.parametrize("batch", [False, True])
def test_flapping_5xx(catalog: Catalog, converter: Converter, history: list[dict[str, Any]], batch: bool) -> None:
    answers = iter([500, 502, 503, 201] * 1000)
    lock = threading.Lock()

    def flap(event: dict[str, Any], attempt: int) -> Reply:
        with lock:
            return Reply(next(answers))

    with Backend(flap, batch=batch) as backend:
        w = worker(catalog, converter, backend, FakeTime(), batch=batch)
        stats = w.run(once=True)
        w.dispatcher.close()
    counts = backend.counts(history)
    assert (counts["delivered"], counts["duplicated"], counts["lost"]) == (40, 0, 0)
    assert counts["sent"] == 160 and stats.retried == 120
    assert backend.out_of_order_runs() == []
    assert (backend.batch_requests > 0) is batch


def test_429_with_retry_after(catalog: Catalog, converter: Converter, history: list[dict[str, Any]]) -> None:
    fake = FakeTime()
    began = fake.now
    http_date = format_datetime(datetime.fromtimestamp(fake.now + 12, UTC), usegmt=True)

    def limited(event: dict[str, Any], attempt: int) -> Reply:
        if attempt == 1:
            after = "7" if event["eventType"] == "START" else http_date
            return Reply(429, '{"message":"slow down"}', {"Retry-After": after})
        return ACCEPT

    with Backend(limited) as backend:
        w = worker(catalog, converter, backend, fake)
        w.run(once=True)
        w.dispatcher.close()
    counts = backend.counts(history)
    assert (counts["sent"], counts["delivered"], counts["duplicated"], counts["lost"]) == (80, 40, 0, 0)
    assert fake.sleeps and min(fake.sleeps) > 0
    # every wait is what a Retry-After said: 7 s from a START's 429, up to the HTTP date for an end
    assert fake.sleeps[0] == 7.0
    assert fake.now - began >= 12  # the ends waited for the HTTP date
    assert backend.out_of_order_runs() == []


def test_slow_responses_past_the_timeout(catalog: Catalog, converter: Converter, history: list[dict[str, Any]]) -> None:
    slow_runs = {e["run"]["runId"] for e in history[:10] if e.get("eventType") == "START"}

    def slow(event: dict[str, Any], attempt: int) -> Reply:
        if attempt == 1 and event["run"]["runId"] in slow_runs and event["eventType"] != "START":
            return Reply(201, delay=1.0)  # taken, but the answer comes after the sender gave up
        return ACCEPT

    with Backend(slow) as backend:
        w = worker(catalog, converter, backend, FakeTime(), timeout=0.3)
        stats = w.run(once=True)
        w.dispatcher.close()
    counts = backend.counts(history)
    assert (counts["delivered"], counts["lost"]) == (40, 0)
    # at-least-once: each timed-out end was sent again (a busy machine may time out a few more)
    ends = Counter(key[1] for key in backend.taken if key[2] != "START")
    assert all(ends[run_id] >= 2 for run_id in slow_runs)
    assert counts["duplicated"] >= len(slow_runs) and stats.retried >= len(slow_runs)
    assert backend.out_of_order_runs() == []


def test_one_422_is_dead_lettered_and_the_rest_delivered(
    tmp_path: Path, resolver: Resolver, converter: Converter
) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        fill(catalog, 20)
        history = expected(catalog, converter)
    bad_run = history[6]["run"]["runId"]
    refusing = [True]

    def refuse_one(event: dict[str, Any], attempt: int) -> Reply:
        if refusing[0] and event.get("run", {}).get("runId") == bad_run:
            return Reply(422, '{"errors":["inputs[0].namespace must not be null"]}')
        return ACCEPT

    with Backend(refuse_one) as backend:
        first = subprocess.run(
            [OLBRIDGE, "--catalog", str(db), "stream", "--url", backend.url, "--once", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert first.returncode == 1, first.stderr  # a --once run that made a dead letter fails
        assert "1 event(s) became dead letters" in first.stderr
        assert "note: 1 event(s) wait behind a dead letter of their run (or asset, or job)" in first.stderr
        assert json.loads(first.stdout)["dead"] == 1
        counts = backend.counts(history)
        assert (counts["delivered"], counts["duplicated"]) == (38, 0)
        dead = subprocess.run(
            [OLBRIDGE, "--catalog", str(db), "outbox", "list", "--dead", "--json"], capture_output=True, text=True
        )
        [letter] = json.loads(dead.stdout)
        assert letter["kind"] == "run-start" and letter["lastStatus"] == 422
        assert letter["lastError"] == '{"errors":["inputs[0].namespace must not be null"]}'
        status = json.loads(
            subprocess.run([OLBRIDGE, "--catalog", str(db), "status", "--json"], capture_output=True, text=True).stdout
        )
        assert (status["pending"], status["dead"], status["held"], status["delivered"]) == (1, 1, 1, 38)  # the end

        refusing[0] = False  # the backend is fixed: queue the letter again and stream
        retried = subprocess.run([OLBRIDGE, "--catalog", str(db), "outbox", "retry", "--all"], capture_output=True)
        assert retried.returncode == 0
        again = subprocess.run(
            [OLBRIDGE, "--catalog", str(db), "stream", "--url", backend.url, "--once"], capture_output=True, timeout=60
        )
        assert again.returncode == 0
    counts = backend.counts(history)
    assert (counts["delivered"], counts["duplicated"], counts["lost"]) == (40, 0, 0)
    assert backend.out_of_order_runs() == []


@pytest.fixture
def big_catalog(tmp_path: Path, converter: Converter) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        fill(catalog, 500)
        yield db, expected(catalog, converter)


def test_worker_killed_mid_stream_loses_nothing(big_catalog: tuple[Path, list[dict[str, Any]]]) -> None:
    counts = killed_then_again(big_catalog, ["--batch-size", "5"], 300)
    assert counts["duplicated"] <= 2 * 5 * 2  # at most the requests in flight when it was killed


def killed_then_again(big_catalog: tuple[Path, list[dict[str, Any]]], options: list[str], taken: int) -> dict[str, int]:
    """A stream worker (2 in flight, ``options``) SIGKILLed once the backend (without a batch
    endpoint) took ``taken`` events, then ``stream --once``: the backend's counts, every event
    delivered, none lost, in order by run."""
    db, history = big_catalog
    with Backend(lambda e, a: Reply(201, delay=0.002)) as backend:
        command = [OLBRIDGE, "--catalog", str(db), "stream", "--url", backend.url, "--concurrency", "2"]
        worker = subprocess.Popen([*command, *options], stderr=subprocess.PIPE)
        try:
            assert wait_for(lambda: backend.accepted_count >= taken, timeout=60)
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=30)
        assert worker.returncode == -signal.SIGKILL
        assert backend.accepted_count < 1000
        restarted = subprocess.run([*command, *options, "--once"], capture_output=True, text=True, timeout=120)
        assert restarted.returncode == 0, restarted.stderr
    counts = backend.counts(history)
    assert (counts["delivered"], counts["lost"], counts["unexpected"]) == (1000, 0, 0)
    assert backend.out_of_order_runs() == []
    return counts


def test_a_worker_killed_sending_one_by_one_sends_again_only_its_round(
    big_catalog: tuple[Path, list[dict[str, Any]]],
) -> None:
    """To a backend without a batch endpoint (Marquez), with the default batch size: a round took
    concurrency x batch size events (400 here) and sent them one by one, recording their
    outcomes at its end, so a worker killed mid-round sent again hundreds of events the backend
    had taken (150 of 1,000 here). A round now gives each connection 8 events."""
    counts = killed_then_again(big_catalog, [], 150)
    assert counts["duplicated"] <= 2 * 8  # at most its round: 8 events each of its 2 connections


def test_sigterm_stops_cleanly_after_the_requests_in_flight(big_catalog: tuple[Path, list[dict[str, Any]]]) -> None:
    db, history = big_catalog
    with Backend(lambda e, a: Reply(201, delay=0.002)) as backend:
        command = [OLBRIDGE, "--catalog", str(db), "stream", "--url", backend.url, "--batch-size", "5"]
        code, _, stderr = terminated([*command, "--poll", "0.05"], lambda: backend.accepted_count >= 200)
        assert code == 0, stderr
        assert "SIGTERM: stopping after the requests in flight" in stderr
        with Catalog(db) as catalog:
            status = catalog.outbox.status()
        # what it took is recorded as delivered; nothing it took is sent again
        assert status.delivered == backend.accepted_count and status.pending == 1000 - status.delivered
        finished = subprocess.run([*command, "--once"], capture_output=True, timeout=120)
        assert finished.returncode == 0
    counts = backend.counts(history)
    assert (counts["delivered"], counts["duplicated"], counts["lost"]) == (1000, 0, 0)
    assert backend.out_of_order_runs() == []


def test_a_second_sigterm_stops_at_once_saying_what_was_left(tmp_path: Path) -> None:
    """A stop waits for the requests in flight; a second signal does not: the worker says so and
    exits 1 at once (what it had in flight is sent again by the next run), where it waited for a
    request the backend holds for 20 s."""
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        fill(catalog, 3)
    with Backend(lambda e, a: Reply(201, delay=20)) as backend:
        command = [OLBRIDGE, "--catalog", str(db), "stream", "--url", backend.url, "--timeout", "60", "--poll", "0.05"]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: backend.arrived >= 1, timeout=60)
            process.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            began = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=15)
            took = time.monotonic() - began
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 1 and took < 10, (took, stderr)
    assert "SIGTERM: stopping after the requests in flight" in stderr
    assert "Error: SIGTERM again: stopping at once, without the work in flight" in stderr, stderr
    assert "does not answer" not in stderr and "Traceback" not in stderr
    with Catalog(db) as catalog:
        assert catalog.outbox.status().pending == 6  # nothing recorded: the next run sends it all


def test_a_sigterm_given_twice_at_once_is_one_stop(tmp_path: Path) -> None:
    """``timeout`` passes its signal on to the command and to its process group: the command got
    SIGTERM twice at once, took the second for a request to stop at once, dropped the round in
    flight (sent again by the next run) and said that the backend did not answer. Two at once are
    one stop: the request in flight is answered and recorded, and the worker exits 0."""
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        fill(catalog, 3)
    with Backend(lambda e, a: Reply(201, delay=1.5)) as backend:
        command = [
            OLBRIDGE,
            "--catalog",
            str(db),
            "stream",
            "--url",
            backend.url,
            "--poll",
            "0.05",
            "--concurrency",
            "1",
        ]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: backend.arrived >= 1, timeout=60)
            process.send_signal(signal.SIGTERM)
            time.sleep(0.05)  # both delivered (two pending at once are one), as close as a wrapper sends them
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, stderr
    assert "SIGTERM: stopping after the requests in flight" in stderr and "Error" not in stderr, stderr
    with Catalog(db) as catalog:
        assert catalog.outbox.status().delivered >= 1  # what was in flight, recorded


# --- failures said as they happen, kept for status, and a bounded retry budget ---------------


@pytest.mark.parametrize(
    ("failure", "respond", "said"),
    [
        ("connection refused", None, "connection refused (ConnectionError: [Errno 111] Connection refused)"),
        ("timeout", lambda e, a: Reply(201, delay=0.5), "timeout (ReadTimeout: Read timed out. (read timeout=0.2))"),
        ("HTTP 5xx", lambda e, a: Reply(503, "busy"), "HTTP 503 busy"),
        ("HTTP 429", lambda e, a: Reply(429, "slow down", {"Retry-After": "7"}), "HTTP 429 slow down"),
    ],
)
def test_every_failure_is_reported_kept_and_once_gives_up_leaving_the_events_pending(
    catalog: Catalog, converter: Converter, failure: str, respond: Callable[..., Reply] | None, said: str
) -> None:
    fill(catalog, 3)
    backend = Backend(respond, port=free_port())
    if respond is not None:
        backend.start()
    fake = FakeTime()
    lines: list[str] = []
    try:
        # a short read timeout only where it is the failure: an answer due must not be late by luck
        w = worker(catalog, converter, backend, fake, timeout=0.2 if failure == "timeout" else 5.0)
        w.report = FailureReport(backend.url, lines.append, clock=fake.clock, interval=5)
        w.give_up_after = 30
        stats = w.run(once=True)
    finally:
        backend.stop()
        w.dispatcher.close()
    assert w.gave_up is not None and w.gave_up.last is not None and w.gave_up.last.failure == failure
    assert stats.delivered == 0 and stats.dead == 0 and stats.retried >= 3
    began = FakeTime().now
    assert fake.now - began <= 30  # nothing waited for past the budget
    status = catalog.outbox.status()
    assert (status.pending, status.dead) == (6, 0)  # the events stay pending
    first = lines[0]
    assert first.startswith(f"delivery to {backend.url}: 3 event(s) failed, {said}; next retry at ")
    # at most a line every 5 s of the worker's clock (and the closing count of the ones not shown)
    assert len(lines) <= (fake.now - began) / 5 + 2
    # and every failure is counted: in a line of its own, or among the ones a later line says were not shown
    said_counts = [int(n) for line in lines for n in re.findall(r"(\d+) (?:event\(s\) failed|more )", line)]
    assert sum(said_counts) == stats.retried
    [kept] = catalog.outbox.errors()
    assert (kept.source, kept.target, kept.failure) == ("stream", backend.url, failure)


def test_stream_once_gives_up_with_an_error_and_status_shows_the_last_error(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        fill(catalog, 3)
    url = f"http://127.0.0.1:{free_port()}"
    command = [OLBRIDGE, "--catalog", str(db), "stream", "--url", url, "--once", "--backoff", "0.2"]
    down = subprocess.run([*command, "--give-up-after", "2"], capture_output=True, text=True, timeout=60)
    assert down.returncode == 1, down.stderr
    assert f"delivery to {url}: 3 event(s) failed, connection refused" in down.stderr
    assert "next retry at " in down.stderr
    error = down.stderr.strip().splitlines()[-1]
    assert error.startswith(f"Error: gave up on delivering to {url}: nothing delivered for ")
    assert "(--give-up-after 2" in error and "6 event(s) stay pending" in error
    status = subprocess.run([OLBRIDGE, "--catalog", str(db), "status"], capture_output=True, text=True)
    assert "pending: 6" in status.stdout and "dead letters: 0" in status.stdout
    [line] = [line for line in status.stdout.splitlines() if line.startswith("last error: ")]
    assert f"stream to {url}: connection refused ConnectionError: [Errno 111] Connection refused" in line


def test_stream_once_has_a_retry_budget_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    import bridge.cli.stream
    from bridge.cli import cli

    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        fill(catalog, 1)
    monkeypatch.setattr(bridge.cli.stream, "ONCE_BUDGET", 0.3)
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli, ["--catalog", str(db), "stream", "--url", url, "--once", "--backoff", "0.05"])
    assert result.exit_code == 1 and "(--give-up-after 0.3" in result.stderr
    assert "--give-up-after" in CliRunner().invoke(cli, ["stream", "--help"]).stdout


class Silent:
    """A backend that takes connections and reads requests, and never answers: how many requests
    came (each, with its connection, given up by its client's timeout)."""

    def __init__(self) -> None:
        import socket

        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.requests = 0
        self._open: list[Any] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:  # the accept's timeout: look at _done again
                continue
            self._open.append(conn)
            self.requests += 1

    def close(self) -> None:
        self._done.set()
        self._thread.join(5)
        for conn in self._open:
            conn.close()
        self.server.close()


@pytest.mark.parametrize("once", [True, False])
def test_a_round_to_a_backend_that_never_answers_ends_at_the_first_timeout(tmp_path: Path, once: bool) -> None:
    """One event a request (Marquez's way, or --no-batch) to a backend that takes the request
    and never answers: a round stops at its first unanswered request rather than waiting out a
    timeout an event, so ``--once --give-up-after`` ends near its budget, and a stream that runs
    on stops at SIGTERM, with the events pending (each was waited for in turn: 30 events, 30
    timeouts, before either)."""
    db = tmp_path / "c.db"
    with Catalog(db) as catalog:
        fill(catalog, 30)
    silent = Silent()
    try:
        command = [OLBRIDGE, "--catalog", str(db), "stream", "--url", silent.url, "--no-batch", "--timeout", "1"]
        command += ["--concurrency", "1", "--backoff", "1", "--max-backoff", "1"]
        if once:
            done = subprocess.run(
                [*command, "--once", "--give-up-after", "3"], capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 1 and "Error: gave up on delivering to" in done.stderr, done.stderr
        else:
            code, _, err = terminated(command, lambda: silent.requests >= 2)
            assert code == 0, err
        # a request a second at most (each its timeout, then the round's pause for its retry)
        assert 1 <= silent.requests <= 8, silent.requests
    finally:
        silent.close()
    with Catalog(db) as catalog:
        assert catalog.outbox.status().pending == 60


def test_a_first_round_to_a_backend_without_a_batch_endpoint_stops_at_its_first_unanswered_event(
    catalog: Catalog, converter: Converter
) -> None:
    """Marquez has no batch endpoint: the first batch request finds that out (404), and the round
    goes on one event a request; a request unanswered there ends the chunk, as in later rounds
    (it sent the whole chunk one by one, a timeout each)."""
    fill(catalog, 6)
    with Backend(lambda e, a: Reply(201, delay=1.0)) as backend:  # no batch endpoint; every event too slow
        fake = FakeTime()
        sender = HttpSender(backend.url, timeout=0.2, batch=True, clock=fake.clock)
        w = StreamWorker(
            catalog, converter, Dispatcher(sender, concurrency=1, batch_size=6), clock=fake.clock, sleep=fake.sleep
        )
        try:
            assert w.step()
        finally:
            w.dispatcher.close()
        assert not sender.batch and backend.arrived == 1  # the batch request, then one event
    assert catalog.outbox.status().pending == 12


class OneByOne:
    """A sender of one event a request (no batch endpoint) that answers each as ``answer`` says
    (given how many were sent before it), and keeps what it was sent."""

    target, max_concurrency, batch = "http://b", 2, False

    def __init__(self, answer: Callable[[int], Outcome]) -> None:
        self.answer = answer
        self.sent: list[str] = []

    def send(self, lines: list[str]) -> list[Outcome]:
        out = []
        for line in lines:
            out.append(self.answer(len(self.sent)))
            self.sent.append(line)
        return out

    def close(self) -> None:
        pass


UNANSWERED = Outcome(ok=False, retry=True, detail="ReadTimeout", error="timeout")


def test_a_round_of_what_is_in_flight_that_gets_no_answer_pauses(catalog: Catalog, converter: Converter) -> None:
    """One event a request, a round whose every request went unanswered (the backend away)
    pauses until the first retry, whether it left events unsent or tried them all (a round of
    one event a connection leaves none): it does not go on to the next run heads a round at a
    time, each a timeout, an attempt and a delivery error."""
    fill(catalog, 20)
    away = OneByOne(lambda before: UNANSWERED)
    w = StreamWorker(catalog, converter, Dispatcher(away, concurrency=2, batch_size=200), clock=FakeTime().clock)
    assert w.round_size == 2 * 8
    assert w.step()
    # each connection's share stopped at its first unanswered event; the round tried them all
    assert len(away.sent) == 2 and w._pause is not None  # the first retry's time: the next round waits for it


def test_one_event_unanswered_among_delivered_ones_makes_no_pause(catalog: Catalog, converter: Converter) -> None:
    """The pause after a round is for a backend that answered nothing: a round where one event
    went unanswered and others were delivered goes on at once (a slow event of its own paused
    the worker for its retry's 30 to 60 s, each time it was due)."""
    fill(catalog, 4)
    one_slow = OneByOne(lambda before: UNANSWERED if before == 0 else DELIVERED)
    w = StreamWorker(
        catalog, converter, Dispatcher(one_slow, concurrency=1, batch_size=2), clock=FakeTime().clock, round_size=4
    )
    assert w.step()
    # the first chunk stopped at its unanswered event, the second was delivered: no pause
    assert len(one_slow.sent) == 3 and w._pause is None
