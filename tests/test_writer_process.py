"""The writer process of ``olbridge serve`` and the workers' link to it: results come back per
event, a writer that dies costs the events in flight a retriable answer and nothing else, and a
worker reaches the next writer on the same socket by itself."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from bridge.catalog import Catalog
from bridge.errors import Unavailable
from bridge.mapping import Resolver
from bridge.receiver.intake import Intake, run_steps_async
from bridge.receiver.outcome import Outcome
from bridge.receiver.writer import CatalogWriter
from bridge.receiver.writer_process import PICKLED_FROM, RemoteWriter, listen, run_writer
from tests.helpers import ol_dataset, ol_run_event

FORK = multiprocessing.get_context("fork")


def event(n: int) -> dict[str, object]:
    return ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}", outputs=[ol_dataset("s3://bucket", f"key{n}")])


@attrs.define
class Link:
    """A writer socket, a catalog, writer processes started on demand, and a worker's link on an
    event loop of its own, as a worker has."""

    tmp_path: Path
    listener: socket.socket = attrs.field(init=False)
    remote: RemoteWriter = attrs.field(init=False)
    intake: Intake = attrs.field(init=False)
    loop: asyncio.AbstractEventLoop = attrs.field(init=False, factory=asyncio.new_event_loop)
    writers: list[multiprocessing.process.BaseProcess] = attrs.field(init=False, factory=list)

    def __attrs_post_init__(self) -> None:
        address = str(self.tmp_path / "writer.sock")
        self.listener = listen(address)
        Catalog(self.catalog_path).close()
        self.remote = RemoteWriter(address, timeout=20)
        self.intake = Intake(None)
        self.run(self._start())

    async def _start(self) -> None:
        self.remote.start()

    def run(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    def take(self, events: list[dict[str, object]]) -> list[Outcome]:
        steps = self.intake.taking(events)
        return self.run(run_steps_async(steps, write=self.remote.submit, read=_nothing))  # type: ignore[no-any-return]

    def close(self) -> None:
        self.run(self.remote.close())
        self.loop.close()

    @property
    def catalog_path(self) -> Path:
        return self.tmp_path / "catalog.db"

    def start_writer(self) -> multiprocessing.process.BaseProcess:
        # the writer opens the catalog in its own process (a connection must not cross a fork)
        process = FORK.Process(
            target=lambda: run_writer(self.listener, CatalogWriter(self.catalog_path, Resolver.load()))
        )
        process.start()
        self.writers.append(process)
        return process

    def statuses(self, *events: dict[str, object]) -> list[str]:
        return [outcome.status for outcome in self.take(list(events))]

    def received(self) -> int:
        with Catalog(self.catalog_path) as catalog:
            return catalog.count_received()["received_events"]


async def _nothing(limit: int) -> bytes:
    return b""


@pytest.fixture
def link(tmp_path: Path) -> Iterator[Link]:
    made = Link(tmp_path)
    yield made
    made.close()
    made.listener.close()
    for process in made.writers:  # a test that failed before stopping its writer leaves none behind
        if process.is_alive():
            process.kill()
        process.join(20)


def stop(process: multiprocessing.process.BaseProcess, how: signal.Signals = signal.SIGTERM) -> int | None:
    assert process.pid is not None
    os.kill(process.pid, how)
    process.join(20)
    return process.exitcode


def test_events_go_through_the_writer_process(link: Link) -> None:
    writer = link.start_writer()
    outcomes = link.take([event(1), event(2), event(1)])
    assert [o.status for o in outcomes] == ["accepted", "accepted", "duplicate"]
    assert outcomes[0].placeholders == ("s3://bucket/key1",)  # reported across the process boundary
    assert stop(writer) == 0
    assert link.received() == 2


def test_a_dead_writer_s_next_group_waits_for_the_one_started_again(link: Link) -> None:
    """A worker keeps its connection to the writer. The writer killed, the worker's next group
    goes on a new connection, which the writer started again (by the supervisor, at once) takes:
    it went on the dead one's and was answered 503, once a worker, though the new writer was
    ready. (A group in flight as the writer dies is still answered 503, retriable.)"""
    first = link.start_writer()
    assert link.statuses(event(1)) == ["accepted"]
    stop(first, signal.SIGKILL)
    starting = threading.Timer(0.5, link.start_writer)
    starting.start()
    assert link.statuses(event(2), event(1)) == ["accepted", "duplicate"]
    starting.join(20)
    assert stop(link.writers[-1]) == 0
    assert link.received() == 2


def _explode() -> None:
    raise ValueError("cannot be made again")


class Unreadable:
    """Pickles, but cannot be unpickled (as an object of a class the writer's code lacks)."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return _explode, ()


def test_a_message_the_writer_cannot_read_fails_alone_and_the_writer_goes_on(link: Link) -> None:
    writer = link.start_writer()
    results = link.run(link.remote.submit([Unreadable(), Unreadable()]))  # type: ignore[list-item]
    assert len(results) == 2
    assert all(isinstance(r, Unavailable) and "could not read the events" in str(r) for r in results)
    assert writer.is_alive()
    assert link.statuses(event(1)) == ["accepted"]  # the writer took the next events, on the same link
    assert stop(writer) == 0
    assert link.received() == 1


def test_a_group_the_writer_thread_cannot_hand_on_fails_alone_and_the_next_ones_go_on() -> None:
    """A fault while handing a group on (here: the writer raising) answers that group's requests
    as retriable, and leaves the writer's thread serving: it used to end it, and every request
    after was refused until the process was restarted."""
    from bridge.catalog import IngestResult
    from bridge.receiver.writer import QueuedWriter

    class Flaky(QueuedWriter):
        calls = 0

        def _write(self, events: list[Any]) -> list[IngestResult | Exception]:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise TypeError("cannot pickle this")
            return [IngestResult("accepted") for _ in events]

    writer = Flaky(timeout=10)
    try:
        (first,) = writer.submit(["one"])  # type: ignore[list-item]
        assert isinstance(first, Unavailable) and "cannot pickle this" in str(first)
        assert writer.alive
        assert writer.submit(["two"]) == [IngestResult("accepted")]  # type: ignore[list-item]
    finally:
        writer.close()


def test_a_group_the_worker_cannot_hand_on_fails_alone_and_the_next_ones_go_on(tmp_path: Path) -> None:
    """The same on a worker's event loop: a fault while handing a group to the writer process
    answers that group's requests as retriable, and the next groups go on."""
    from bridge.catalog import IngestResult

    class Flaky(RemoteWriter):
        calls = 0

        async def _write(self, frame: bytes, count: int) -> list[IngestResult | Exception]:
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise TypeError("cannot pickle this")
            parts = pickle.loads(frame[8:])
            assert sum(len(pickle.loads(p) if isinstance(p, bytes) else p) for p in parts) == count
            return [IngestResult("accepted") for _ in range(count)]

    async def scenario() -> None:
        writer = Flaky(str(tmp_path / "none.sock"), timeout=10)
        writer.start()
        try:
            (first,) = await writer.submit(["one"])  # type: ignore[list-item]
            assert isinstance(first, Unavailable) and "cannot pickle this" in str(first)
            assert writer.alive
            assert await writer.submit(["two"]) == [IngestResult("accepted")]  # type: ignore[list-item]
            # a request of many events pickles them as it hands them over: one that cannot fails alone
            third = await writer.submit([lambda: None] * PICKLED_FROM)  # type: ignore[list-item]
            assert len(third) == PICKLED_FROM and all(isinstance(r, Unavailable) and "pickle" in str(r) for r in third)
            assert await writer.submit(["four"]) == [IngestResult("accepted")]  # type: ignore[list-item]
            # a request of a few events goes in its group's message: one that cannot be pickled
            # fails alone, the others of its group go on
            fifth, sixth, seventh = await asyncio.gather(
                writer.submit(["five"]),  # type: ignore[list-item]
                writer.submit([lambda: None]),  # type: ignore[list-item]
                writer.submit(["seven", "eight"]),  # type: ignore[list-item]
            )
            assert fifth == [IngestResult("accepted")] and seventh == [IngestResult("accepted")] * 2
            assert len(sixth) == 1 and isinstance(sixth[0], Unavailable) and "pickle" in str(sixth[0])
            assert Flaky.calls == 4, "five, seven and eight went in one group"
        finally:
            await writer.close()
        assert not writer.alive

    asyncio.run(scenario())


def test_a_group_whose_message_cannot_be_made_fails_and_the_next_ones_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's pickle may fail where no request's alone does (memory, say): its requests fail
    as retriable, and the worker's hand-over goes on with the next groups."""
    from bridge.catalog import IngestResult
    from bridge.receiver import writer_process

    real = writer_process._frame

    def frame(value: Any) -> bytes:
        if isinstance(value, list) and len(value) > 1:
            raise MemoryError("no room for the group")
        return real(value)

    monkeypatch.setattr(writer_process, "_frame", frame)

    class Answering(RemoteWriter):
        async def _write(self, frame: bytes, count: int) -> list[IngestResult | Exception]:
            return [IngestResult("accepted") for _ in range(count)]

    async def scenario() -> None:
        writer = Answering(str(tmp_path / "none.sock"), timeout=10)
        writer.start()
        try:
            one, two = await asyncio.gather(writer.submit(["a"]), writer.submit(["b"]))  # type: ignore[list-item]
            assert all(isinstance(r, Unavailable) and "no room for the group" in str(r) for r in one + two)
            assert writer.alive
            assert await writer.submit(["c"]) == [IngestResult("accepted")]  # type: ignore[list-item]
        finally:
            await writer.close()

    asyncio.run(scenario())


def test_a_writer_that_does_not_answer_costs_a_retry_after_the_timeout_and_a_full_queue_refuses(
    tmp_path: Path,
) -> None:
    """A writer process that takes a group and never answers: the request is answered retriable
    once its time is up (not held for ever), and past the requests a worker may hold waiting, the
    next one is told the catalog is busy at once."""

    address = str(tmp_path / "silent.sock")
    silent = listen(address)  # accepts (the kernel does) and never reads nor answers

    async def scenario() -> None:
        writer = RemoteWriter(address, timeout=0.5, max_queued=1)
        writer.start()
        in_flight = asyncio.ensure_future(writer.submit([event(1)]))  # type: ignore[list-item]
        await asyncio.sleep(0.05)  # the group goes out; the writer holds it
        queued = asyncio.ensure_future(writer.submit([event(2)]))  # type: ignore[list-item]
        await asyncio.sleep(0)
        with pytest.raises(Unavailable, match="busy"):
            await writer.submit([event(3)])  # type: ignore[list-item]
        for waiting in (in_flight, queued):
            with pytest.raises(Unavailable, match=r"did not commit within 0\.5 s"):
                await waiting
        await writer.close()  # the group in flight never comes back: it stops without it, in its time
        assert not writer.alive

    try:
        asyncio.run(scenario())
    finally:
        silent.close()


def test_a_group_is_handed_to_the_writer_whole_without_waiting_for_it_to_read(tmp_path: Path) -> None:
    """A worker's group goes into the socket in one write, up to what the system lets a socket
    buffer (4 MiB asked): the writer reads it whole at once. With the default buffer (about
    200 KiB) a group of 1 MiB went over in pieces, each waiting for the writer to read the last
    and for the worker's loop to turn, while the writer sat blocked in the middle of reading it."""
    from bridge.receiver.writer_process import BUFFER

    # a group no larger than the system lets a socket hold (where net.core.wmem_max is below 2 MiB
    # the group shrinks with it, and the default buffer may hold it too: the buffer's size, below,
    # tells the fix apart there)
    allowed = int(Path("/proc/sys/net/core/wmem_max").read_text())
    size = min(1024 * 1024, allowed // 2)
    address = str(tmp_path / "reader.sock")
    reader = listen(address)  # takes the connection and reads nothing until asked below

    async def scenario() -> tuple[int, int]:
        writer = RemoteWriter(address, timeout=5)
        writer.start()
        pending = asyncio.ensure_future(writer.submit(["x" * size]))  # type: ignore[list-item]
        conn, _ = await asyncio.get_running_loop().run_in_executor(None, reader.accept)
        conn.setblocking(False)
        queued = 0
        for _ in range(100):  # bounded: a second at most
            await asyncio.sleep(0.01)
            try:
                queued = len(conn.recv(8 * size, socket.MSG_PEEK))
            except BlockingIOError:
                continue
            if queued > size:
                break
        assert writer._stream is not None, "the worker never connected to the writer"
        sent_from = writer._stream[1].get_extra_info("socket")
        buffer = int(sent_from.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
        conn.close()
        pending.cancel()
        await writer.close()
        return queued, buffer

    try:
        queued, buffer = asyncio.run(scenario())
    finally:
        reader.close()
    assert queued > size  # the whole frame waits in the socket, unread
    # the worker's socket asked for BUFFER: Linux grants up to wmem_max and reports twice what it
    # grants, where the default (net.core.wmem_default, about 200 KiB) would be reported as it is
    assert buffer >= min(BUFFER, 2 * allowed), (buffer, BUFFER, allowed)


def test_a_batch_lets_the_event_loop_turn_while_it_is_judged() -> None:
    """A worker judges and reads a batch on its event loop: every few events it lets the loop
    turn (the writer's answers, the other connections), rather than hold it for the whole batch."""
    from bridge.catalog import IngestResult
    from bridge.receiver.intake import PAUSE_EVERY

    batch = [event(n) for n in range(3 * PAUSE_EVERY)]
    turns: list[int] = []

    async def scenario() -> list[str]:
        async def other_work() -> None:
            while True:
                turns.append(1)
                await asyncio.sleep(0)

        async def write(events: Any) -> list[IngestResult | Exception]:
            seen_at_write.append(len(turns))
            return [IngestResult("accepted") for _ in events]

        seen_at_write: list[int] = []
        beside = asyncio.ensure_future(other_work())
        outcomes = await run_steps_async(Intake(None).taking(batch), write=write, read=_nothing)
        beside.cancel()
        assert seen_at_write and seen_at_write[0] >= 2, seen_at_write  # the loop turned while judging
        return [o.status for o in outcomes]

    assert asyncio.run(scenario()) == ["accepted"] * len(batch)


def test_a_readiness_check_runs_off_the_event_loop() -> None:
    """/readyz may connect to the catalog's server (up to its connect timeout when the server is
    away): the worker runs the check on a thread, and its loop serves the other requests meanwhile."""
    import threading

    from bridge.receiver.app import ReceiverApp, Request

    loop_thread: list[int] = []
    checked_on: list[int] = []
    waited: list[bool] = []  # whether the loop turned while the check waited
    started, turned = threading.Event(), threading.Event()

    def ready() -> str | None:
        checked_on.append(threading.get_ident())
        started.set()
        # a slow connection, which ends once the loop has turned a few times meanwhile: run on the
        # loop, it would block the loop and wait in vain (bounded)
        waited.append(turned.wait(timeout=10))
        return "the catalog cannot be read: it is away"

    async def scenario() -> int:
        loop_thread.append(threading.get_ident())

        async def other_work() -> None:
            after_start = 0
            for _ in range(2000):  # bounded: about 20 s at most
                if started.is_set():
                    after_start += 1
                    if after_start == 5:  # turns of the loop while the check is under way
                        turned.set()
                        return
                await asyncio.sleep(0.01)

        beside = asyncio.ensure_future(other_work())
        app = ReceiverApp(Intake(None), ready=ready)
        reply = await run_steps_async(app.exchange(Request("GET", "/readyz")), write=_no_write, read=_nothing)
        beside.cancel()
        return reply.status

    assert asyncio.run(scenario()) == 503
    assert checked_on and checked_on[0] != loop_thread[0]
    assert waited == [True]  # the loop went on while the check waited


async def _no_write(events: Any) -> list[Any]:
    raise AssertionError("nothing to write")


@attrs.define
class CountingWriter:
    """A writer process on a new catalog that notes the size of each group it writes, each
    written ``pause`` seconds late."""

    tmp_path: Path
    pause: float = 0.0
    listener: socket.socket = attrs.field(init=False)
    process: multiprocessing.process.BaseProcess = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        catalog = self.tmp_path / "catalog.db"
        Catalog(catalog).close()
        self.listener = listen(self.address)
        sizes, pause = self.sizes, self.pause

        class Counting(CatalogWriter):
            def write(self, events: Any) -> Any:
                with sizes.open("a") as out:
                    out.write(f"{len(events)}\n")
                time.sleep(pause)
                return super().write(events)

        self.process = FORK.Process(target=lambda: run_writer(self.listener, Counting(catalog, Resolver.load())))
        self.process.start()

    @property
    def address(self) -> str:
        return str(self.tmp_path / "writer.sock")

    @property
    def sizes(self) -> Path:
        return self.tmp_path / "groups.txt"

    def groups(self) -> list[int]:
        return [int(line) for line in self.sizes.read_text().split()]

    def stop(self) -> None:
        stop(self.process)
        self.listener.close()


def test_the_writer_takes_every_worker_s_events_in_one_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After answering workers the writer waits (briefly) for their next events: what the workers
    gathered while it wrote goes in one group. (Without the wait, one worker's message waited at
    the writer behind the others' and went alone: two workers made groups of half the size.)"""
    from bridge.receiver import writer_process

    # the writer's wait for the workers it asked, after the first answer: long, for a loaded machine
    monkeypatch.setattr(writer_process, "GATHER", 1.0)
    writer = CountingWriter(tmp_path, pause=0.3)  # a slow group: the workers gather meanwhile

    async def worker(first: int) -> list[str]:
        remote = RemoteWriter(writer.address, timeout=20)
        remote.start()
        intake = Intake(None)
        taken = []
        for n in range(first, first + 3):  # one after another: each waits for the group before
            outcomes = await run_steps_async(intake.taking([event(n)]), write=remote.submit, read=_nothing)
            taken += [o.status for o in outcomes]
        await remote.close()
        return taken

    async def scenario() -> list[list[str]]:
        return list(await asyncio.gather(worker(0), worker(100), worker(200)))

    try:
        assert asyncio.run(scenario()) == [["accepted"] * 3] * 3
    finally:
        writer.stop()
    # a group holds an event of each of the three workers (without the wait, never more than two:
    # one worker's message went alone while the others' waited)
    groups = writer.groups()
    assert sum(groups) == 9
    assert max(groups) == 3, groups


@pytest.mark.parametrize("gather", [0.0, 2.0])
def test_after_a_group_of_small_requests_a_worker_waits_for_their_clients_next_ones(
    tmp_path: Path, gather: float
) -> None:
    """With ``gather``, a group of several small requests answered, the worker waits (up to
    ``gather`` seconds) for as many requests again before it sends the next group: two clients that
    send again 0.05 s and 0.3 s after their answers go in one group; without it, each alone."""
    writer = CountingWriter(tmp_path)

    async def scenario() -> list[list[str]]:
        remote = RemoteWriter(writer.address, timeout=20, gather=gather)
        remote.start()
        intake = Intake(None)

        async def client(first: int, pause: float) -> list[str]:
            taken = []
            for n in (first, first + 1):
                outcomes = await run_steps_async(intake.taking([event(n)]), write=remote.submit, read=_nothing)
                taken += [o.status for o in outcomes]
                await asyncio.sleep(pause)
            return taken

        try:
            return list(await asyncio.gather(client(0, 0.05), client(100, 0.3)))
        finally:
            await remote.close()

    try:
        assert asyncio.run(scenario()) == [["accepted"] * 2] * 2
    finally:
        writer.stop()
    groups = writer.groups()
    assert groups == ([2, 2] if gather else [2, 1, 1]), groups
