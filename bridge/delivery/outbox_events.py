"""The events the outbox's rows stand for, made when they are delivered: one renderer per kind.

A renderer gets the rows of its kind and gives each row's serialized event, or ``None`` when the
record it points at is gone (an asset change purged with its asset) and there is nothing left to
send. Rendering is the converter's, so an event from the outbox is byte for byte the one
``olbridge export`` and ``olbridge backfill`` give for the same record. A forwarded event
(``serve --forward``) is not rendered: it goes out as the receiver took it, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.catalog import Catalog
from bridge.catalog.outbox import ALERT, ASSET_CHANGE, FORWARD, JOB, RUN_END, RUN_START, RUN_UPDATE, OutboxItem
from bridge.delivery.history import AssetLookup
from bridge.errors import CatalogError, NotFoundError
from bridge.openlineage.convert import Converter
from bridge.openlineage.serialize import dumps

Rendered = dict[int, str | None]  # outbox seq -> the event, None when its record is gone
Renderer = Callable[[Catalog, Converter, AssetLookup, Sequence[OutboxItem]], Rendered]


def _run_events(catalog: Catalog, converter: Converter, lookup: AssetLookup, items: Sequence[OutboxItem]) -> Rendered:
    runs = catalog.task_runs_by_pk(sorted({item.ref for item in items}))
    lookup.read_ahead(i for run in runs.values() for i in (*(u.asset_id for u in run.usages), *run.unwritten))
    out: Rendered = {}
    for item in items:
        run = runs.get(item.ref)
        if run is None:
            out[item.seq] = None
            continue
        # a run recorded again while it runs: a RUNNING event, the run as it now stands
        lines = converter.task_run_lines(run, lookup.of_run(run), running=item.kind == RUN_UPDATE)
        if item.kind in (RUN_START, RUN_UPDATE):
            out[item.seq] = lines[0]
        else:
            out[item.seq] = lines[1] if len(lines) > 1 else None
    return out


def _asset_change(catalog: Catalog, converter: Converter, lookup: AssetLookup, items: Sequence[OutboxItem]) -> Rendered:
    out: Rendered = {}
    for item in items:
        change = catalog.get_change(item.ref)
        out[item.seq] = dumps(converter.asset_change_event(change)) if change is not None else None
    return out


def _job_events(catalog: Catalog, converter: Converter, lookup: AssetLookup, items: Sequence[OutboxItem]) -> Rendered:
    out: Rendered = {}
    for item in items:
        try:
            declared = catalog.declared_job(item.ref)
        except NotFoundError:  # no longer declared: nothing to send
            out[item.seq] = None
            continue
        out[item.seq] = dumps(converter.job_event(declared, lookup.of_declared(declared)))
    return out


def _forwarded(catalog: Catalog, converter: Converter, lookup: AssetLookup, items: Sequence[OutboxItem]) -> Rendered:
    payloads = catalog.outbox.payloads([item.seq for item in items])
    return {item.seq: payloads.get(item.seq) for item in items}


RENDERERS: dict[str, Renderer] = {
    RUN_START: _run_events,
    RUN_END: _run_events,
    RUN_UPDATE: _run_events,
    ASSET_CHANGE: _asset_change,
    JOB: _job_events,
    FORWARD: _forwarded,
    ALERT: _forwarded,  # the message as queued; the stream sends it to its alert's webhook
}


def render(catalog: Catalog, converter: Converter, items: Sequence[OutboxItem]) -> Rendered:
    """The events of outbox rows (see the module docstring). A kind this olbridge does not know
    (queued by a newer one) is a CatalogError."""
    lookup = AssetLookup(catalog)
    by_renderer: dict[Renderer, list[OutboxItem]] = {}
    for item in items:
        renderer = RENDERERS.get(item.kind)
        if renderer is None:
            raise CatalogError(f"outbox row {item.seq} has kind {item.kind!r}, which this olbridge cannot render")
        by_renderer.setdefault(renderer, []).append(item)
    out: Rendered = {}
    for renderer, group in by_renderer.items():
        out.update(renderer(catalog, converter, lookup, group))
    return out
