"""The writer process of ``olbridge serve`` and the workers' link to it: results come back per
event, a writer that dies costs the events in flight a retriable answer and nothing else, and a
worker reaches the next writer on the same socket by itself."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from bridge.catalog import Catalog
from bridge.mapping import Resolver
from bridge.receiver.intake import Intake
from bridge.receiver.writer import CatalogWriter
from bridge.receiver.writer_process import RemoteWriter, listen, run_writer
from tests.helpers import ol_dataset, ol_run_event

FORK = multiprocessing.get_context("fork")


def event(n: int) -> dict[str, object]:
    return ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}", outputs=[ol_dataset("s3://bucket", f"key{n}")])


@attrs.define
class Link:
    """A writer socket, a catalog, writer processes started on demand, and a worker's link."""

    tmp_path: Path
    listener: socket.socket = attrs.field(init=False)
    remote: RemoteWriter = attrs.field(init=False)
    intake: Intake = attrs.field(init=False)
    writers: list[multiprocessing.process.BaseProcess] = attrs.field(init=False, factory=list)

    def __attrs_post_init__(self) -> None:
        address = str(self.tmp_path / "writer.sock")
        self.listener = listen(address)
        Catalog(self.catalog_path).close()
        self.remote = RemoteWriter(address, timeout=20)
        self.intake = Intake(self.remote.submit)

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
        return [outcome.status for outcome in self.intake.take(list(events))]

    def received(self) -> int:
        with Catalog(self.catalog_path) as catalog:
            return catalog.count_received()["received_events"]


@pytest.fixture
def link(tmp_path: Path) -> Iterator[Link]:
    made = Link(tmp_path)
    yield made
    made.remote.close()
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
    outcomes = link.intake.take([event(1), event(2), event(1)])
    assert [o.status for o in outcomes] == ["accepted", "accepted", "duplicate"]
    assert outcomes[0].placeholders == ("s3://bucket/key1",)  # reported across the process boundary
    assert stop(writer) == 0
    assert link.received() == 2


def test_a_dead_writer_costs_a_retry_and_the_next_one_takes_over(link: Link) -> None:
    first = link.start_writer()
    assert link.statuses(event(1)) == ["accepted"]
    stop(first, signal.SIGKILL)
    lost = link.intake.take([event(2)])[0]
    assert lost.status == "unavailable" and lost.retriable, lost
    assert "not reachable" in lost.message
    second = link.start_writer()
    assert link.statuses(event(2), event(1)) == ["accepted", "duplicate"]
    assert stop(second) == 0
    assert link.received() == 2


def test_a_group_the_writer_thread_cannot_hand_on_fails_alone_and_the_next_ones_go_on() -> None:
    """A fault while handing a group on (here: the writer raising) answers that group's requests
    as retriable, and leaves the writer's thread serving: it used to end it, and every request
    after was refused until the process was restarted."""
    from bridge.catalog import IngestResult
    from bridge.receiver.writer import QueuedWriter, Unavailable

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
