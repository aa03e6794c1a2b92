"""The receiver's writes: external OpenLineage events become placeholders, external runs and jobs,
their usages and lineage edges. Each write runs inside a transaction the caller holds.

The state they leave depends only on the set of events taken, never on their order or on the
clock: times come from the events, and where two events disagree (a run's state, a dataset's
facets) the one that ranks higher wins (:attr:`IncomingEvent.rank`, :attr:`IncomingEvent.state_rank`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import TYPE_CHECKING, Any

import attrs

from bridge.catalog import sql
from bridge.catalog.rows import asset_row
from bridge.catalog.writes import get_asset
from bridge.model import EXTERNAL, Asset, Origin, format_time, parse_time
from bridge.receiver.events import TERMINAL, IncomingEvent, SeenDataset

if TYPE_CHECKING:
    from bridge.mapping.resolver import Resolver


@attrs.frozen
class IngestResult:
    """What taking one external event did."""

    status: str  # "accepted" | "duplicate"
    placeholders: tuple[str, ...] = ()  # External placeholders it created
    assets: tuple[str, ...] = ()  # the asset ids of its datasets, in the event's order
    warnings: tuple[str, ...] = ()


def _hashed_id(namespace: str, name: str) -> str:
    return "ol:" + hashlib.sha256(f"{namespace}\n{name}".encode()).hexdigest()[:16]


def _choose_id(cur: sqlite3.Cursor, ds: SeenDataset, resolver: Resolver) -> tuple[str, dict[str, Any], str | None]:
    """The asset id for a dataset not seen before, the metadata its rule gives, and a warning when
    the id the rules give stands for another dataset already (a collision)."""
    ref = resolver.asset_for(ds.namespace, ds.name)
    candidate, metadata = ref.id, dict(ref.metadata)
    bound = cur.execute(sql.BINDING_OF_ASSET, (candidate,)).fetchone()
    other: tuple[str, str] | None = (bound[0], bound[1]) if bound else None
    if other is None:
        existing = get_asset(cur, candidate)
        if existing is not None:
            named = resolver.dataset_for(existing.id, existing.type, existing.metadata)
            if (named.namespace, named.name) != (ds.namespace, ds.name):
                other = (named.namespace, named.name)
    if other is None:
        return candidate, metadata, None
    fallback = _hashed_id(ds.namespace, ds.name)
    warning = (
        f"dataset {ds.namespace} {ds.name} maps to asset id {candidate!r}, which is already the dataset "
        f"{other[0]} {other[1]}; kept apart as {fallback!r}"
    )
    return fallback, {}, warning


def _placeholder(
    current: Asset | None,
    asset_id: str,
    ds: SeenDataset,
    event: IncomingEvent,
    base: dict[str, Any],
    times: tuple[str, str],
    wins_seen: bool,
    wins_facets: bool,
) -> Asset:
    first, last = times
    metadata: dict[str, Any] = dict(current.metadata) if current is not None else dict(base)
    metadata.update(olNamespace=ds.namespace, olName=ds.name, firstSeen=first, lastSeen=last)
    if wins_seen or current is None:
        metadata["producer"] = event.producer
    description = current.description if current is not None else None
    columns = current.columns if current is not None else ()
    if wins_facets:
        description, columns = ds.description, ds.columns
        for key, value in (
            ("owner", ", ".join(ds.owners)),
            ("datasetType", ds.dataset_type or ""),
            ("symlinks", ", ".join(ds.symlinks)),
        ):
            if value:
                metadata[key] = value
            else:
                metadata.pop(key, None)
    created, updated = parse_time(first, "first_seen"), parse_time(last, "last_seen")
    if current is None:
        return Asset(
            id=asset_id,
            type=EXTERNAL,
            namespace=None,
            origin=Origin.EXTERNAL,
            created_at=created,
            updated_at=updated,
            description=description,
            metadata=metadata,
            columns=columns,
        )
    return attrs.evolve(
        current,
        created_at=min(created, current.created_at),
        updated_at=updated,
        description=description,
        metadata=metadata,
        columns=columns,
    )


def _take_dataset(
    cur: sqlite3.Cursor, ds: SeenDataset, event: IncomingEvent, resolver: Resolver
) -> tuple[str, bool, str | None]:
    """Bind a dataset to its asset and keep what the event says of it: (asset id, whether a
    placeholder was created, a collision warning)."""
    moment, rank = format_time(event.event_time), event.rank
    facets_rank = rank if ds.described else None
    warning = None
    base: dict[str, Any] = {}
    row = cur.execute(sql.GET_BINDING, (ds.namespace, ds.name)).fetchone()
    if row is None:
        asset_id, base, warning = _choose_id(cur, ds, resolver)
        first, last, wins_seen, wins_facets = moment, moment, True, ds.described
        cur.execute(sql.INSERT_BINDING, (ds.namespace, ds.name, asset_id, first, last, rank, facets_rank))
    else:
        asset_id, first, last, seen_rank, stored_facets = row
        first, last = min(first, moment), max(last, moment)
        wins_seen = rank > seen_rank
        wins_facets = ds.described and (stored_facets is None or rank > stored_facets)
        cur.execute(
            sql.UPDATE_BINDING,
            (
                first,
                last,
                max(seen_rank, rank),
                facets_rank if wins_facets else stored_facets,
                ds.namespace,
                ds.name,
            ),
        )
    current = get_asset(cur, asset_id)
    if current is not None and current.origin is not Origin.EXTERNAL:
        return asset_id, False, warning  # the catalog's own asset: never overwritten from outside
    asset = _placeholder(current, asset_id, ds, event, base, (first, last), wins_seen, wins_facets)
    if asset != current:
        cur.execute(sql.UPSERT_PLACEHOLDER, asset_row(asset))
    return asset_id, current is None, warning


def _take_source(cur: sqlite3.Cursor, event: IncomingEvent) -> None:
    assert event.source is not None and event.job_namespace is not None and event.job_name is not None
    moment = format_time(event.event_time)
    kind = (event.event_type or "").upper()
    if event.kind == "RunEvent":
        state, rank = (kind or None), event.state_rank
        started = moment if kind == "START" else None
        ended = moment if kind in TERMINAL else None
    else:
        state, rank, started, ended = None, event.rank, None, None
    cur.execute(
        sql.UPSERT_SOURCE,
        (
            event.source,
            event.job_namespace,
            event.job_name,
            event.run_id,
            event.parent_run_id,
            state,
            rank,
            started,
            ended,
            moment,
            moment,
            event.producer,
        ),
    )


def ingest_event(cur: sqlite3.Cursor, event: IncomingEvent, resolver: Resolver) -> IngestResult:
    """Take one accepted external event. A re-sent one changes nothing."""
    cur.execute(
        sql.INSERT_RECEIVED,
        (
            event.digest,
            event.kind,
            event.event_type,
            format_time(event.event_time),
            event.source,
            event.producer,
            json.dumps(list(event.warnings)),
            event.body,
        ),
    )
    if cur.rowcount == 0:
        return IngestResult("duplicate")
    source = event.source
    if source is not None:
        _take_source(cur, event)
    placeholders, ids, warnings = [], [], list(event.warnings)
    for ds in event.datasets:
        asset_id, created, warning = _take_dataset(cur, ds, event, resolver)
        ids.append(asset_id)
        if created:
            placeholders.append(asset_id)
        if warning:
            warnings.append(warning)
        if source is None or ds.direction is None:
            continue
        cur.execute(sql.INSERT_EXTERNAL_USAGE, (source, ds.direction, asset_id))
        if cur.rowcount == 0:
            continue
        other = "output" if ds.direction == "input" else "input"
        for (peer,) in cur.execute(sql.EXTERNAL_USAGES_OF_SOURCE, (source, other)).fetchall():
            if peer == asset_id:
                continue
            edge = (asset_id, peer) if ds.direction == "input" else (peer, asset_id)
            cur.execute(sql.INSERT_EXTERNAL_EDGE, (*edge, source))
    return IngestResult("accepted", tuple(dict.fromkeys(placeholders)), tuple(ids), tuple(warnings))
