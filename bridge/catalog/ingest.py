"""A group of received events taken into the catalog: in one transaction, else (one of them
failing) one event at a time, each in a savepoint of its own (:meth:`Catalog.ingest`). The writes
themselves are :mod:`bridge.catalog.external`'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bridge.catalog import external, positions, sql, sql_received
from bridge.catalog.engine import Cursor, Database, Engine, unavailable_reason
from bridge.catalog.external import IngestResult
from bridge.catalog.health_state import WatchSeen
from bridge.catalog.positions import Position
from bridge.errors import BridgeError, Busy, CatalogError, CommitUnknown
from bridge.model.received import IncomingEvent

if TYPE_CHECKING:
    from bridge.mapping.resolver import Resolver


def ingest(
    db: Database,
    events: Sequence[IncomingEvent],
    resolver: Resolver,
    *,
    position: Position | None = None,
    watch: WatchSeen | None = None,
) -> list[IngestResult | Exception]:
    """Take accepted external events in one transaction, with the ``position`` of the import
    they come from, if any. Should one of them fail, the group is taken again one event at a
    time, each in a savepoint of its own: the failing event leaves no trace and comes back as
    its exception, the others land (and the position only when none came back busy). Re-sent
    events come back as duplicates and change nothing. Where several processes write
    (PostgreSQL), a group that loses a race with another is taken again; it lands once,
    whichever process took its events first."""

    def whole(cur: Cursor) -> list[IngestResult | Exception]:
        taken: list[IngestResult | Exception] = list(
            external.ingest_events(cur, events, resolver, engine=db.engine, watch=watch)
        )
        if position is not None:
            positions.save(cur, position)
        return taken

    try:
        return db.write(whole)
    except Exception as exc:
        uncertain = db.uncertain(exc)
        if uncertain is not None:  # the connection lost as it committed: landed, or not?
            return _settled(db, events, uncertain, exc)
        if isinstance(exc, Busy) or not _one_event(db.engine, exc):
            raise  # not one event's fault: the caller's to report
        moved = _schema_moved(db)
        if moved is not None:  # a constraint of a schema this olbridge does not know: no event's fault
            raise Busy(moved) from exc

    def each(cur: Cursor) -> list[IngestResult | Exception]:
        results: list[IngestResult | Exception] = []
        for event in events:
            cur.execute("SAVEPOINT event")
            try:
                results.extend(external.ingest_events(cur, [event], resolver, engine=db.engine, watch=watch))
            except Exception as exc:
                if db.engine.conflict(exc) or not (_one_event(db.engine, exc) or db.engine.busy(exc)):
                    raise
                cur.execute("ROLLBACK TO event")
                results.append(_event_error(db.engine, exc))
            cur.execute("RELEASE event")
        # past an event the catalog could not take now, the import must read it again
        if position is not None and not any(isinstance(result, Busy) for result in results):
            positions.save(cur, position)
        return results

    try:
        return db.write(each)
    except Exception as exc:
        uncertain = db.uncertain(exc)
        if uncertain is None:
            raise
        return _settled(db, events, uncertain, exc)  # as the whole group's, above


def _one_event(engine: Engine, exc: BaseException) -> bool:
    """Whether an error of a group's write may be one event's (then each is taken alone)."""
    if isinstance(exc, Busy) or engine.busy(exc):
        return False
    return isinstance(exc, BridgeError | ValueError) or engine.refused(exc)


def _schema_moved(db: Database) -> str | None:
    """What is wrong when the catalog's schema is no longer the one this olbridge opened it at
    (``olbridge migrate`` run by a newer olbridge under a running receiver, whose writes a new
    column's constraint refuses): None when it is the same (or cannot be read now)."""
    try:
        version = db.engine.version(db.conn)
    except Exception:
        return None
    if version is None or version == sql.SCHEMA_VERSION:
        return None
    return (
        f"the catalog's schema is at version {version}, this olbridge's at {sql.SCHEMA_VERSION}: it was migrated "
        "while this process ran; restart it with the olbridge that migrated it"
    )


def _event_error(engine: Engine, exc: Exception) -> Exception:
    """What taking one event came to when it failed: its refusal, or a Busy to retry it."""
    if isinstance(exc, BridgeError | ValueError):
        return exc
    if engine.refused(exc):
        return CatalogError(f"the catalog cannot store the event: {engine.refusal(exc)}")
    return Busy(f"the catalog could not take the event: {unavailable_reason(engine, exc)}")


__all__ = ["ingest"]


# seconds a group whose connection was lost as it committed is asked after, on new connections (a
# server restarting answers again within seconds), before its outcome is given up as not known
LANDED_WITHIN = 10.0


def _settled(
    db: Database, events: Sequence[IncomingEvent], results: list[IngestResult | Exception], exc: Exception
) -> list[IngestResult | Exception]:
    """The results of a group whose connection was lost as it committed: its own where every
    event it took anew is stored (one alone could be another writer's, which took the same event
    once this transaction's hold on it ended: a client's retry through another receiver);
    ``exc`` raised where any is not (the group, one transaction, did not land: a retry of those
    stored is answered duplicate); :class:`CommitUnknown` where the catalog could not be asked
    within :data:`LANDED_WITHIN` seconds. A group that took nothing anew (every event a
    duplicate, or refused) is its results either way."""
    new = sorted(
        {
            (e.time_text, e.digest)
            for e, r in zip(events, results, strict=True)
            if isinstance(r, IngestResult) and r.status == "accepted"
        }
    )
    if not new:
        return results
    deadline = time.monotonic() + LANDED_WITHIN
    while True:
        try:
            stored = _stored(db, new)
        except Exception:
            if time.monotonic() >= deadline:
                raise CommitUnknown(
                    f"the connection was lost as the group committed, and the catalog could not be asked since "
                    f"whether it landed: {unavailable_reason(db.engine, exc)}"
                ) from exc
            time.sleep(0.5)
            continue
        if stored < len(new):
            raise exc
        return results


def _stored(db: Database, pairs: Sequence[tuple[str, str]]) -> int:
    """How many of these (event time, digest) pairs are received events, asked on the catalog's
    connection (a new one, the lost one given up)."""
    conn = db.conn
    found = 0
    for start in range(0, len(pairs), 200):
        chunk = pairs[start : start + 200]
        params = [part for pair in chunk for part in pair]
        found += len(conn.execute(sql_received.received_digests(len(chunk)), params).fetchall())
    return found
