"""Stream workers side by side on PostgreSQL: each claims outbox rows (the catalog's part, against a
real server; tests/test_scale.py runs real ``olbridge stream`` processes).

A row is claimable only as the head of its run key, by one worker at a time, until its claim
expires; rows another worker is claiming at that moment are skipped, not waited for; a worker
settles only the rows it still holds; a dead worker's claims are released by the next one to look.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bridge.catalog import Catalog
from bridge.catalog.outbox import Delivered, Outbox, OutboxItem, RetryLater
from bridge.catalog.workers import StreamWorkerInfo
from bridge.delivery.claims import OutboxClaims
from bridge.delivery.heartbeat import process_is_gone, process_space
from bridge.errors import ExportError
from tests.backend import wait_for
from tests.helpers import invoke
from tests.test_faults import fill

NOW = 1_800_000_000.0
TTL = 30.0


@pytest.fixture
def shared(postgres_url: str) -> Iterator[tuple[Catalog, Catalog]]:
    """Two connections to one PostgreSQL catalog of 10 task runs (a START and an end each)."""
    with Catalog(postgres_url) as one, Catalog(postgres_url) as other:
        fill(one, 10)
        yield one, other


def keys(items: list[OutboxItem]) -> list[tuple[str, str]]:
    return [(item.run_key, item.kind) for item in items]


def test_workers_claim_different_heads_and_a_run_end_waits_for_its_start(shared: tuple[Catalog, Catalog]) -> None:
    one, other = shared
    first = one.outbox.claim("a", NOW, 6, TTL)
    second = other.outbox.claim("b", NOW, 100, TTL)
    assert [kind for _, kind in keys(first + second)] == ["run-start"] * 10
    assert len({item.run_key for item in first + second}) == 10  # every run once, by one worker
    assert other.outbox.claim("c", NOW, 100, TTL) == []  # the ends wait behind the claimed starts
    assert one.outbox.settle([Delivered(item.seq) for item in first[:2]], success_at="t", claimed_by="a") == 2
    ends = other.outbox.claim("c", NOW, 100, TTL)
    assert keys(ends) == [(item.run_key, "run-end") for item in first[:2]]
    assert {w: n for w, n in one.outbox.claims().items()} == {"a": 4, "b": 4, "c": 2}


def test_a_due_retry_is_claimable_and_one_not_due_is_not(shared: tuple[Catalog, Catalog]) -> None:
    one, other = shared
    (item,) = one.outbox.claim("a", NOW, 1, TTL)
    retry = RetryLater(item.seq, 1, NOW + 60, 503, "busy")
    assert one.outbox.settle([retry], success_at="t", claimed_by="a") == 1  # and released
    assert item.run_key not in {i.run_key for i in other.outbox.claim("b", NOW, 100, TTL)}
    (again,) = other.outbox.claim("c", NOW + 61, 100, TTL)
    assert (again.seq, again.attempts) == (item.seq, 1)


def test_an_expired_claim_is_taken_over_and_its_old_holder_settles_nothing(shared: tuple[Catalog, Catalog]) -> None:
    one, other = shared
    stalled = one.outbox.claim("a", NOW, 3, -1.0)  # already expired: its worker stopped beating
    one.workers.beat(StreamWorkerInfo(id="a", host="h", pid=1, target="t", started_at="s", heartbeat_at=NOW), NOW)
    # status shows what a claim holds: an expired one holds nothing (any worker may take its rows)
    assert one.outbox.claims() == {} and [w.claims for w in one.workers.list()] == [0]
    taken = other.outbox.claim("b", NOW, 3, TTL)
    assert [i.seq for i in taken] == [i.seq for i in stalled]
    seqs = [i.seq for i in stalled]
    assert one.outbox.confirm("a", seqs, TTL) == set()  # the stalled worker sends none of them
    assert other.outbox.confirm("b", seqs, TTL) == set(seqs)
    assert one.outbox.settle([Delivered(s) for s in seqs], success_at="t", claimed_by="a") == 0
    assert one.outbox.claims() == {"b": 3}
    assert other.outbox.settle([Delivered(s) for s in seqs], success_at="t", claimed_by="b") == 3
    assert one.outbox.status().delivered == 3  # counted once, by the holder


def test_a_renewed_claim_is_not_taken(shared: tuple[Catalog, Catalog]) -> None:
    one, other = shared
    mine = one.outbox.claim("a", NOW, 10, -1.0)
    assert one.outbox.renew("a", TTL) == 10
    assert other.outbox.claim("b", NOW, 100, TTL) == []
    assert one.outbox.release_claims("a") == 10
    assert [i.seq for i in other.outbox.claim("b", NOW, 100, TTL)] == [i.seq for i in mine]


def test_rows_another_worker_is_claiming_are_skipped_not_waited_for(
    shared: tuple[Catalog, Catalog], postgres_url: str
) -> None:
    one, _ = shared
    heads = [i.seq for i in one.outbox.heads(NOW, 100)]
    with psycopg.connect(postgres_url) as locker:  # a claim in progress holds its rows' locks
        locker.execute("SELECT seq FROM outbox WHERE seq = ANY(%s) FOR UPDATE", (heads[:4],))
        claimed = one.outbox.claim("b", NOW, 100, TTL)  # answers at once
        assert [i.seq for i in claimed] == heads[4:]
        locker.rollback()
    assert [i.seq for i in one.outbox.claim("c", NOW, 100, TTL)] == heads[:4]


def test_a_dead_workers_claims_are_released_when_the_next_one_looks(shared: tuple[Catalog, Catalog]) -> None:
    """A worker whose process is gone where pids mean what they mean here (this host, this pid
    namespace) is forgotten and its claims released at once; one whose pid is gone here but that
    ran in another pid namespace (a container sharing this host's name and network) is not: its
    process may well be running, and it keeps its claims until its heartbeat lapses."""
    one, other = shared
    child = subprocess.Popen(["true"])
    child.wait()
    here = process_space()
    elsewhere = here.rsplit("/", 1)[0] + "/1"  # another pid namespace of the same kernel

    def worker(name: str, pid: int, space: str) -> StreamWorkerInfo:
        return StreamWorkerInfo(
            id=name, host="here", pid=pid, target="t", started_at="s", heartbeat_at=NOW, space=space
        )

    dead, neighbour, alive = (
        worker("dead", child.pid, here),
        worker("neighbour", child.pid, elsewhere),
        worker("alive", 1, here),
    )
    one.workers.beat(dead, NOW)
    one.workers.beat(neighbour, NOW)
    other.workers.beat(alive, NOW)
    claimed = one.outbox.claim("dead", NOW, 4, TTL)
    kept = one.outbox.claim("neighbour", NOW, 2, TTL)
    assert [(w.id, w.claims) for w in other.workers.list()] == [("alive", 0), ("dead", 4), ("neighbour", 2)]
    others = other.outbox.claim("alive", NOW, 4, TTL)  # held: others are claimed instead
    assert others and not {i.seq for i in others} & {i.seq for i in claimed + kept}
    gone = other.workers.reap("alive", process_is_gone)
    assert [w.id for w in gone] == ["dead"]
    assert [(w.id, w.claims) for w in other.workers.list()] == [("alive", 4), ("neighbour", 2)]
    assert [i.seq for i in other.outbox.claim("alive", NOW, 4, TTL)] == [i.seq for i in claimed]


def test_a_worker_silent_for_ten_minutes_elsewhere_is_forgotten_its_claims_left_to_expire(
    shared: tuple[Catalog, Catalog],
) -> None:
    """A worker of another host or pid namespace (a pod restarted) whose death nobody here can
    see: once its heartbeat is ten minutes old, the next worker's start or beat forgets it (it was
    listed for ever, and every worker said it shared the outbox with it); its claims are not
    taken from it, they expire by the database's clock, and a worker forgotten while it still
    beats (its clock far behind) registers again at its next beat."""
    from bridge.delivery.claims import FORGET_AFTER

    one, other = shared

    def worker(name: str, beat: float) -> StreamWorkerInfo:
        return StreamWorkerInfo(
            id=name, host="elsewhere", pid=1, target="t", started_at="s", heartbeat_at=beat, space="other/1"
        )

    old, recent = worker("old", NOW - FORGET_AFTER - 1), worker("recent", NOW - FORGET_AFTER + 60)
    one.workers.beat(old, old.heartbeat_at)
    one.workers.beat(recent, recent.heartbeat_at)
    held = {i.seq for i in one.outbox.claim("old", NOW, 2, TTL)}
    claims = OutboxClaims(other, "t", clock=lambda: NOW, interval=3600.0)
    notes: list[str] = []
    assert claims.acquire(wait=False, stop=threading.Event(), sleep=lambda s: None, notify=notes.append)
    try:
        assert {w.id for w in other.workers.list()} == {claims.owner, "recent"}
        assert notes == ["sharing the outbox with 1 other olbridge stream worker(s); each claims its own events"]
        assert one.outbox.claims().get("old") == len(held) == 2  # not taken from it
        one.workers.beat(old, NOW)  # it was alive after all: registered again
        assert "old" in [w.id for w in other.workers.list()]
    finally:
        claims.release()


def test_a_worker_whose_heartbeat_fails_stops_before_its_next_round(
    shared: tuple[Catalog, Catalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, _ = shared
    claims = OutboxClaims(one, "http://b", interval=0.01)
    stop = threading.Event()
    assert claims.acquire(wait=False, stop=stop, sleep=stop.wait)
    assert len(claims.take(time.time(), 4)) == 4
    claims.check()  # beating

    def broken(self: Outbox, worker: str, ttl: float) -> int:
        raise psycopg.ProgrammingError("the claims cannot be renewed")

    monkeypatch.setattr(Outbox, "renew", broken)
    assert wait_for(lambda: not claims._thread.is_alive(), timeout=10)  # type: ignore[union-attr]
    with pytest.raises(ExportError, match=r"failed: ProgrammingError: the claims cannot be renewed; stopping"):
        claims.check()
    claims.release()
    assert one.outbox.claims() == {} and one.workers.list() == []


def test_a_worker_takes_again_what_it_claimed_in_a_round_that_failed_and_nobody_else_does(
    shared: tuple[Catalog, Catalog],
) -> None:
    """Its heartbeat keeps its claims from expiring, so rows a round claimed and never settled (the
    catalog out of reach before anything was sent) are taken again by its next round; before,
    they and every later event of their runs waited until the worker stopped."""
    one, other = shared
    failed = one.outbox.claim("a", NOW, 4, TTL)
    assert other.outbox.claim("b", NOW, 100, TTL)  # the other heads, not these
    assert other.outbox.claim("b", NOW, 100, TTL) and not {i.seq for i in other.outbox.claim("c", NOW, 100, TTL)} & {
        i.seq for i in failed
    }
    again = one.outbox.claim("a", NOW, 4, TTL)
    assert [i.seq for i in again] == [i.seq for i in failed]


def delivering(catalog: Catalog, sender: Any, done: Callable[[], bool]) -> None:
    """A stream worker with claims, in rounds of 5 events, sending through ``sender`` on a thread
    until ``done`` (at most 30 s), then stopped."""
    from bridge.delivery.dispatch import Dispatcher
    from bridge.delivery.worker import StreamWorker
    from bridge.mapping import Resolver
    from bridge.openlineage.convert import Converter

    stop = threading.Event()
    claims = OutboxClaims(catalog, "http://b", interval=0.05)
    dispatcher = Dispatcher(sender, concurrency=1, batch_size=5)
    worker = StreamWorker(catalog, Converter(Resolver.load()), dispatcher, lease=claims, sleep=stop.wait, stop=stop)
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        assert wait_for(done, timeout=30), f"not done in 30 s; claims {catalog.outbox.claims()}"
    finally:
        stop.set()
        runner.join(timeout=30)


def test_a_stream_worker_whose_round_fails_after_claiming_delivers_everything(
    shared: tuple[Catalog, Catalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog goes away between a round's claim and its send (a PostgreSQL restart): the
    worker waits, then delivers every event, its claimed ones included."""
    from bridge.delivery.senders import DELIVERED, Outcome
    from bridge.delivery.worker import StreamWorker

    one, _ = shared
    real_render = StreamWorker._render
    failures = [psycopg.OperationalError("the server closed the connection unexpectedly")]

    def render(self: StreamWorker, items: list[OutboxItem]) -> Any:
        if failures:
            raise failures.pop()
        return real_render(self, items)

    monkeypatch.setattr(StreamWorker, "_render", render)
    sent: list[str] = []

    class Sender:
        target = "http://b"
        max_concurrency = 1

        def send(self, lines: list[str]) -> list[Outcome]:
            sent.extend(lines)
            return [DELIVERED for _ in lines]

        def close(self) -> None:
            pass

    delivering(one, Sender(), lambda: len(sent) >= 20)
    assert not failures and len(sent) == 20 and one.outbox.status().pending == 0


def test_a_round_that_leaves_events_unsent_as_the_catalog_goes_away_sends_none_twice(
    shared: tuple[Catalog, Catalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round sent some of its events and left the rest (the backend stopped answering, or the
    round ran past half its claims' time), and the catalog went away as it gave their claims
    back: the outcomes of those it had delivered were dropped unrecorded, and its next round sent
    them again. They are recorded first; each event goes once."""
    from bridge.delivery.dispatch import NOT_SENT
    from bridge.delivery.senders import DELIVERED, Outcome

    one, _ = shared
    failures = [psycopg.OperationalError("the server closed the connection unexpectedly")]
    real_put_back = OutboxClaims.put_back

    def put_back(self: OutboxClaims, seqs: Any) -> None:
        if failures:
            raise failures.pop()
        real_put_back(self, seqs)

    monkeypatch.setattr(OutboxClaims, "put_back", put_back)
    sent: list[str] = []

    class Sender:
        target = "http://b"
        max_concurrency = 1
        rounds = 0

        def send(self, lines: list[str]) -> list[Outcome]:
            self.rounds += 1
            if self.rounds == 1:  # the first round: one delivered, the others left unsent
                sent.append(lines[0])
                return [DELIVERED, *[NOT_SENT] * (len(lines) - 1)]
            sent.extend(lines)
            return [DELIVERED for _ in lines]

        def close(self) -> None:
            pass

    delivering(one, Sender(), lambda: len(set(sent)) >= 20)  # (the worker's connection read by it alone)
    assert not failures and len(sent) == 20 and one.outbox.status().pending == 0, len(sent)


class _Recorder:
    """A backend's sender that keeps what it was sent, one event a request (as to Marquez); the
    first request waits for ``release`` when one is given (a worker stalled as it sends), or
    takes ``delay`` seconds."""

    target = "http://b"
    max_concurrency = 1
    batch = False

    def __init__(self, release: threading.Event | None = None, *, delay: float = 0.0) -> None:
        self.sent: list[str] = []
        self.release = release
        self.delay = delay  # s the first request takes

    def send(self, lines: list[str]) -> list[Any]:
        from bridge.delivery.senders import DELIVERED

        if self.release is not None and not self.sent:
            self.sent.extend(lines)
            assert self.release.wait(30)
            return [DELIVERED for _ in lines]
        if self.delay and not self.sent:
            time.sleep(self.delay)
        self.sent.extend(lines)
        return [DELIVERED for _ in lines]

    def close(self) -> None:
        pass


def test_a_worker_stalled_past_its_claims_does_not_send_what_another_took_over(
    shared: tuple[Catalog, Catalog],
) -> None:
    """A worker that stalls in a round (here its first request hangs, its heartbeat silent) past
    its claims' time: another takes them and delivers every run, START then end; the first, woken,
    sends nothing more of its round (it sent its round's rest after the others' ends, a START
    after its run's COMPLETE)."""
    from bridge.delivery.dispatch import Dispatcher
    from bridge.delivery.worker import StreamWorker
    from bridge.mapping import Resolver
    from bridge.openlineage.convert import Converter

    one, other = shared
    converter = Converter(Resolver.load())
    release, stop = threading.Event(), threading.Event()
    stalled_sender, sender = _Recorder(release), _Recorder()
    stalled_claims = OutboxClaims(one, "http://b", ttl=1.0, interval=3600.0)  # no heartbeat in the stall
    assert stalled_claims.acquire(wait=False, stop=stop, sleep=stop.wait)
    stalled = StreamWorker(
        one, converter, Dispatcher(stalled_sender, concurrency=1, batch_size=10), lease=stalled_claims
    )
    stalling = threading.Thread(target=stalled.step)
    stalling.start()
    try:
        assert wait_for(lambda: len(stalled_sender.sent) >= 1, timeout=30)
        time.sleep(1.2)  # its claims lapse
        claims = OutboxClaims(other, "http://b", interval=0.05)
        worker = StreamWorker(
            other, converter, Dispatcher(sender, concurrency=1, batch_size=10), lease=claims, stop=stop
        )
        runner = threading.Thread(target=worker.run)
        runner.start()
        assert wait_for(lambda: len(sender.sent) >= 20, timeout=30), len(sender.sent)
        stop.set()
        runner.join(timeout=30)
    finally:
        release.set()
        stalling.join(timeout=30)
        stalled_claims.release()
    assert len(sender.sent) == 20 and len(stalled_sender.sent) == 1  # what it had in flight, no more
    assert one.outbox.status().pending == 0


def test_a_round_cut_short_gives_back_the_claims_of_what_it_did_not_send(shared: tuple[Catalog, Catalog]) -> None:
    """A round that stops before it sent everything (its hold's time half gone since it
    confirmed, here a slow first request) releases the claims of the rest: the heartbeat would
    keep them from the other workers while this one waits or is away."""
    from bridge.delivery.dispatch import Dispatcher
    from bridge.delivery.worker import StreamWorker
    from bridge.mapping import Resolver
    from bridge.openlineage.convert import Converter

    one, _ = shared
    slow = _Recorder(delay=0.5)  # from its start: past half the hold's time, whatever came before
    claims = OutboxClaims(one, "http://b", ttl=0.6, interval=3600.0)
    stop = threading.Event()
    assert claims.acquire(wait=False, stop=stop, sleep=stop.wait)
    try:
        worker = StreamWorker(
            one, Converter(Resolver.load()), Dispatcher(slow, concurrency=1, batch_size=10), lease=claims
        )
        assert worker.step()
        assert len(slow.sent) == 1 and one.outbox.claims().get(claims.owner, 0) == 0
        assert one.outbox.status().pending == 19  # the one sent is delivered; the rest wait, unclaimed
    finally:
        claims.release()


def test_a_worker_stalled_past_the_sqlite_lease_sends_nothing_once_another_took_it(tmp_path: Path) -> None:
    """On SQLite one worker holds the whole outbox by a lease: one stalled past it (its
    heartbeat silent) finds it taken over when it confirms its round, and sends nothing."""
    from bridge.delivery.dispatch import Dispatcher
    from bridge.delivery.lease import OutboxLease
    from bridge.delivery.worker import StreamWorker
    from bridge.mapping import Resolver
    from bridge.openlineage.convert import Converter

    db = tmp_path / "c.db"
    with Catalog(db) as one, Catalog(db) as other:
        fill(one, 5)
        stop = threading.Event()
        stalled = OutboxLease(one, "http://b", ttl=0.3, interval=3600.0, is_dead=lambda space, pid: False)
        assert stalled.acquire(wait=False, stop=stop, sleep=stop.wait)
        time.sleep(0.5)  # its lease lapses, its heartbeat silent
        taker = OutboxLease(other, "http://b", ttl=0.3, is_dead=lambda space, pid: False)
        assert taker.acquire(wait=False, stop=stop, sleep=stop.wait)
        sender = _Recorder()
        worker = StreamWorker(
            one, Converter(Resolver.load()), Dispatcher(sender, concurrency=1, batch_size=10), lease=stalled
        )
        try:
            worker.step()
            assert sender.sent == [] and stalled.lost_to is not None
        finally:
            taker.release()
            stalled.release()


def test_outbox_drop_of_a_row_a_worker_holds_refuses_naming_the_worker(
    shared: tuple[Catalog, Catalog], postgres_url: str
) -> None:
    """``outbox drop`` of a row a stream worker holds (its event may be on its way) refuses,
    naming the worker, and drops nothing, rather than say "dropped" of an event then sent; once
    the claim is settled or has lapsed the row can be dropped, and its old holder then settles
    nothing of it (it confirms its claims before it sends: it sends nothing)."""
    one, _ = shared
    held, also_held = one.outbox.claim("host:123:beef", NOW, 2, TTL)
    (free,) = one.outbox.claim("other:9:cafe", NOW, 1, -1.0)  # a claim that lapsed already
    pending = one.outbox.status().pending
    code, _, err = invoke(postgres_url, "outbox", "drop", str(held.seq), str(free.seq))
    assert code == 1 and "host:123:beef" in err and "nothing was dropped" in err, err
    assert str(held.seq) in err and "Traceback" not in err
    assert one.outbox.status().pending == pending
    code, _, err = invoke(postgres_url, "outbox", "drop", str(free.seq))
    assert code == 0 and "dropped 1 row(s)" in err, err
    assert one.outbox.confirm("other:9:cafe", [free.seq], TTL) == set()
    assert one.outbox.settle([Delivered(held.seq)], success_at="t", claimed_by="host:123:beef") == 1
    code, _, err = invoke(postgres_url, "outbox", "drop", str(also_held.seq))
    assert code == 1 and "host:123:beef" in err, err


def test_a_round_confirms_its_claims_only_when_it_did_not_send_at_once(
    shared: tuple[Catalog, Catalog], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round that sends what it claimed at once sends it unconfirmed (the claim holds it for the
    ttl: a transaction a round less); one slowed between its claim and its requests past a share
    of the ttl (its rendering, here) confirms first, and sends nothing another worker took over
    meanwhile."""
    from bridge.delivery.dispatch import Dispatcher
    from bridge.delivery.worker import StreamWorker
    from bridge.mapping import Resolver
    from bridge.openlineage.convert import Converter

    one, other = shared
    confirmed: list[list[int]] = []
    confirm = Outbox.confirm

    def counted(outbox: Outbox, worker: str, seqs: Any, ttl: float) -> set[int]:
        confirmed.append(list(seqs))
        return confirm(outbox, worker, seqs, ttl)

    monkeypatch.setattr(Outbox, "confirm", counted)
    sender = _Recorder()
    converter = Converter(Resolver.load())
    stop = threading.Event()
    # a round that sends at once: an eighth of a long ttl (2 s) is time enough, however slow the machine
    roomy = OutboxClaims(one, "http://b", ttl=16.0, interval=3600.0)
    assert roomy.acquire(wait=False, stop=stop, sleep=stop.wait)
    try:
        worker = StreamWorker(one, converter, Dispatcher(sender, concurrency=1, batch_size=10), lease=roomy)
        assert worker.step()
        assert confirmed == [] and len(sender.sent) == 8  # a round of one connection: 8 STARTs
    finally:
        roomy.release()
    claims = OutboxClaims(one, "http://b", ttl=1.0, interval=3600.0)  # no heartbeat: its claims lapse
    assert claims.acquire(wait=False, stop=stop, sleep=stop.wait)
    try:
        worker = StreamWorker(one, converter, Dispatcher(sender, concurrency=1, batch_size=10), lease=claims)
        render = worker._render
        taken: list[OutboxItem] = []

        def slow(items: list[OutboxItem]) -> Any:
            time.sleep(1.2)  # past the ttl: the claims lapse, and another worker takes them
            taken.extend(other.outbox.claim("other:1:beef", time.time(), 100, 30.0))
            return render(items)

        monkeypatch.setattr(worker, "_render", slow)
        assert worker.step()
        assert len(confirmed) == 1 and taken, (confirmed, taken)
        assert len(sender.sent) == 8  # nothing more: what it claimed is the other worker's now
        assert {item.seq for item in taken} >= set(confirmed[0])
    finally:
        claims.release()
