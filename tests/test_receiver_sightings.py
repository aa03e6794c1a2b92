"""What a group of received events writes of the datasets it names: nothing for one seen again as
it was; for one whose sightings alone moved, its binding and placeholder moved in place (on
PostgreSQL by a least-of / greatest-of update, its row read and locked by nobody before), so that
writers side by side never wait for one another on a popular dataset until they write it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from bridge.catalog import Catalog, external
from bridge.catalog.external_rows import metadata_text
from bridge.catalog.health_state import LEASE_KIND
from bridge.catalog.retention import take_lease
from bridge.mapping import Resolver
from bridge.receiver.imports import catalog_intake
from tests.helpers import PRODUCER, catalog_state, ol_dataset, ol_run_event
from tests.postgres import PostgresServer

pytestmark = pytest.mark.both_engines

POPULAR = ol_dataset("s3://raw-bucket", "orders/2025")
POPULAR_ID = "s3://raw-bucket/orders/2025"
ODD_PRODUCER = 'https://example.com/odd "producer" \\ café'  # a quote, a backslash, past ASCII


def sighting(n: int, time: str, producer: str = PRODUCER) -> dict[str, Any]:
    """A run of its own reading the popular dataset (no facets), at ``time``."""
    event = ol_run_event(run_id=f"0194a1b2-0000-7000-8000-{n:012d}", inputs=[POPULAR], time=time)
    event["producer"] = producer
    return event


def updates_logged(catalog: Catalog) -> Callable[[], list[str]]:
    """Log every row update of the bindings and the assets from now on: a function giving the
    tables updated since, a row each."""
    conn: Any = catalog._conn
    if catalog.dialect == "sqlite":
        conn.execute("CREATE TABLE updated (name TEXT)")
        for table in ("external_datasets", "assets"):
            conn.execute(
                f"CREATE TRIGGER log_{table} AFTER UPDATE ON {table} BEGIN INSERT INTO updated VALUES ('{table}'); END"
            )
    else:
        conn.execute("CREATE TABLE updated (name TEXT)")
        conn.execute(
            "CREATE FUNCTION log_update() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO updated VALUES (TG_TABLE_NAME); RETURN NULL; END $$"
        )
        for table in ("external_datasets", "assets"):
            conn.execute(
                f"CREATE TRIGGER log_{table} AFTER UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION log_update()"
            )

    def read() -> list[str]:
        found = sorted(name for (name,) in conn.execute("SELECT name FROM updated").fetchall())
        conn.execute("DELETE FROM updated")
        return found

    return read


def sightings(catalog: Catalog) -> tuple[Any, ...]:
    """The popular dataset's binding (first, last, seen rank) and its placeholder's metadata text,
    created and updated times."""
    conn: Any = catalog._conn
    binding = conn.execute(
        "SELECT first_seen, last_seen, seen_rank FROM external_datasets WHERE asset_id = ?", (POPULAR_ID,)
    ).fetchone()
    asset = conn.execute("SELECT metadata, created_at, updated_at FROM assets WHERE id = ?", (POPULAR_ID,)).fetchone()
    return (*binding, *asset)


def test_a_dataset_seen_again_as_it_was_writes_nothing_and_a_later_sighting_moves_it_in_place(
    catalog: Catalog, resolver: Resolver
) -> None:
    intake = catalog_intake(catalog, resolver)
    for n, time in ((1, "2025-03-01T08:00:00Z"), (2, "2025-03-01T10:00:00Z")):
        assert intake.take([sighting(n, time)])[0].status == "accepted"
    before = sightings(catalog)
    updated = updates_logged(catalog)

    # seen again between its first and last sightings, in groups of one and of several
    assert intake.take([sighting(3, "2025-03-01T09:00:00Z")])[0].status == "accepted"
    assert [
        o.status for o in intake.take([sighting(4, "2025-03-01T08:30:00Z"), sighting(5, "2025-03-01T09:30:00Z")])
    ] == [
        "accepted",
        "accepted",
    ]
    assert updated() == []
    assert sightings(catalog) == before

    # seen later (by another producer) and earlier: its binding and placeholder once each a group
    assert intake.take([sighting(6, "2025-03-01T11:00:00Z", ODD_PRODUCER)])[0].ok
    assert updated() == ["assets", "external_datasets"]
    assert intake.take([sighting(7, "2025-03-01T07:00:00Z")])[0].ok
    assert updated() == ["assets", "external_datasets"]
    first, last, _, text, created, updated_at = sightings(catalog)
    assert (first, last) == ("2025-03-01T07:00:00.000000Z", "2025-03-01T11:00:00.000000Z")
    assert (created, updated_at) == (first, last)
    metadata = json.loads(text)
    assert (metadata["firstSeen"], metadata["lastSeen"], metadata["producer"]) == (first, last, ODD_PRODUCER)
    assert text == metadata_text(metadata)  # as olbridge writes it: sorted, compact


def described(text: str) -> dict[str, Any]:
    return ol_dataset("s3://raw-bucket", "orders/2025", documentation={"description": text})


@pytest.mark.parametrize("facets", ["none", "same", "changed"])
@pytest.mark.parametrize("paused_is_later", [True, False])
def test_a_group_holds_no_lock_on_a_dataset_it_names_until_it_writes(
    postgres: PostgresServer,
    catalog_template: str,
    resolver: Resolver,
    monkeypatch: pytest.MonkeyPatch,
    paused_is_later: bool,
    facets: str,
) -> None:
    """A group stopped between reading what it names and writing it does not hold another
    process's group naming the same dataset (it used to lock the dataset's rows as it read them:
    the other waited past its lock_timeout); both land, once each, and the catalog is the one the
    same events give taken one after another: the dataset's sightings, producer and facets the
    latest, whichever group committed first. Neither group is taken again but where the paused
    one's new facets were merged against ranks the other moved. A health watch is live: the
    dataset, only read, is marked when its placeholder is made and where a group rebuilt it (its
    metadata, which a selector may match, rewritten), not for its sightings alone (a read changes
    no health of its own)."""
    url = postgres.url(postgres.create_database(template=catalog_template)) + "?lock_timeout=1s"
    paused_time, other_time = ("2025-03-01T10:00:00Z", "2025-03-01T09:00:00Z")[:: 1 if paused_is_later else -1]
    first_event = sighting(1, "2025-03-01T08:00:00Z")
    paused_event = sighting(2, paused_time, "paused-producer")
    other_event = sighting(3, other_time, "other-producer")
    if facets != "none":
        first_event["inputs"] = other_event["inputs"] = [described("before")]
        paused_event["inputs"] = [described("before" if facets == "same" else "after")]
    read, go = threading.Event(), threading.Event()
    flushes: list[str] = []
    flush = external.GroupIngest.flush

    def paused_flush(self: external.GroupIngest) -> None:
        flushes.append(threading.current_thread().name)
        if threading.current_thread().name == "paused" and not read.is_set():
            read.set()
            assert go.wait(30)
        flush(self)

    outcomes: list[Any] = []
    lease_taken = datetime.now(UTC).timestamp()
    with Catalog(url) as first, Catalog(url) as second:
        assert take_lease(first.db, "a watch", lease_taken, 3600.0, kind=LEASE_KIND)
        assert catalog_intake(first, resolver).take([first_event])[0].ok
        monkeypatch.setattr(external.GroupIngest, "flush", paused_flush)
        paused = threading.Thread(
            target=lambda: outcomes.extend(catalog_intake(first, resolver).take([paused_event])), name="paused"
        )
        paused.start()
        try:
            assert read.wait(30)
            (other,) = catalog_intake(second, resolver).take([other_event])
        finally:
            go.set()
            paused.join(60)
        assert other.status == "accepted", other.message
        assert [o.status for o in outcomes] == ["accepted"]
        assert flushes.count("paused") == (2 if facets == "changed" else 1)
        _, last, _, text, _, updated_at = sightings(second)
        assert last == updated_at == "2025-03-01T10:00:00.000000Z"
        metadata = json.loads(text)
        assert (metadata["firstSeen"], metadata["lastSeen"]) == ("2025-03-01T08:00:00.000000Z", last)
        assert metadata["producer"] == ("paused-producer" if paused_is_later else "other-producer")
        together = catalog_state(second)
        # marked (made, then rebuilt where a group's facets say so): how often, a mark a group
        assert {asset_id for (asset_id,) in together.pop("health_marks")} == {POPULAR_ID}
    monkeypatch.undo()
    with Catalog(postgres.url(postgres.create_database(template=catalog_template))) as alone:
        assert take_lease(alone.db, "a watch", lease_taken, 3600.0, kind=LEASE_KIND)
        for event in (first_event, other_event, paused_event):
            assert catalog_intake(alone, resolver).take([event])[0].ok
        one_by_one = catalog_state(alone)
        assert {asset_id for (asset_id,) in one_by_one.pop("health_marks")} == {POPULAR_ID}
        assert one_by_one == together


def test_a_placeholder_with_nested_metadata_has_only_its_own_sightings_moved(
    catalog: Catalog, resolver: Resolver
) -> None:
    """Members of an object inside a placeholder's metadata that share the sightings' names (a
    record's input declaration may merge one in) stay as they are: only the placeholder's own
    move."""
    intake = catalog_intake(catalog, resolver)
    assert intake.take([sighting(1, "2025-03-01T08:00:00Z")])[0].ok
    conn: Any = catalog._conn
    (text,) = conn.execute("SELECT metadata FROM assets WHERE id = ?", (POPULAR_ID,)).fetchone()
    nested = {"lastSeen": "never", "producer": "someone else"}
    conn.execute(
        "UPDATE assets SET metadata = ? WHERE id = ?",
        (metadata_text({**json.loads(text), "details": nested}), POPULAR_ID),
    )
    assert intake.take([sighting(2, "2025-03-01T09:00:00Z", ODD_PRODUCER)])[0].ok
    metadata = json.loads(sightings(catalog)[3])
    assert metadata["details"] == nested
    assert (metadata["firstSeen"], metadata["lastSeen"], metadata["producer"]) == (
        "2025-03-01T08:00:00.000000Z",
        "2025-03-01T09:00:00.000000Z",
        ODD_PRODUCER,
    )


def written(n: int, time: str) -> dict[str, Any]:
    """A run of a job of its own writing the popular dataset (no facets), at ``time``."""
    return ol_run_event(
        run_id=f"0194a1b2-0000-7000-8000-{n:012d}", job=("airflow", f"job{n}"), outputs=[POPULAR], time=time
    )


def test_groups_writing_a_popular_dataset_do_not_wait_on_each_others_marks(
    postgres: PostgresServer, catalog_template: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A health watch live, every group writing the popular dataset marks it for the watch. A
    group stopped after its writes, before its commit (every lock it took held), does not hold
    another process's group writing the same dataset within the sightings it had: marks are rows
    appended, none updated by both (one row an asset, updated by each group, the other waited past
    its lock_timeout). Both land, and both marks."""
    url = postgres.url(postgres.create_database(template=catalog_template)) + "?lock_timeout=1s"
    written_at, go = threading.Event(), threading.Event()
    flush = external.GroupIngest.flush

    def paused_flush(self: external.GroupIngest) -> None:
        flush(self)
        if threading.current_thread().name == "paused" and not written_at.is_set():
            written_at.set()
            assert go.wait(30)

    outcomes: list[Any] = []
    with Catalog(url) as first, Catalog(url) as second:
        assert take_lease(first.db, "a watch", datetime.now(UTC).timestamp(), 3600.0, kind=LEASE_KIND)
        intake = catalog_intake(first, resolver)
        seen = [written(1, "2025-03-01T08:00:00Z"), written(2, "2025-03-01T10:00:00Z")]
        assert all(o.ok for o in intake.take(seen))
        monkeypatch.setattr(external.GroupIngest, "flush", paused_flush)
        paused = threading.Thread(
            target=lambda: outcomes.extend(intake.take([written(3, "2025-03-01T11:00:00Z")])), name="paused"
        )
        paused.start()
        try:
            assert written_at.wait(30)
            (other,) = catalog_intake(second, resolver).take([written(4, "2025-03-01T09:00:00Z")])
        finally:
            go.set()
            paused.join(60)
        assert other.status == "accepted", other.message
        assert [o.status for o in outcomes] == ["accepted"]
        conn: Any = second._conn
        assert conn.execute("SELECT asset_id FROM health_marks").fetchall() == [(POPULAR_ID,)] * 3  # a group each
        assert sightings(second)[:2] == ("2025-03-01T08:00:00.000000Z", "2025-03-01T11:00:00.000000Z")
