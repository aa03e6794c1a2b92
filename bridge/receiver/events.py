"""An accepted OpenLineage event read into what the catalog keeps of it (the records of
:mod:`bridge.model.received`). Pure: no clock, no I/O.

The same event (however its keys are ordered) gives the same digest, which is how a re-sent
event is recognised."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from bridge.canonical import canonical
from bridge.memo import Memo
from bridge.model import Column, parse_time
from bridge.model.received import IncomingEvent, ReceivedColumnEdge, SeenDataset, dataset_assertions, store_namespace
from bridge.openlineage.facets import skipped as skipped_run
from bridge.receiver.column_lineage import read_column_lineage


def _facet(facets: Any, key: str) -> dict[str, Any]:
    if isinstance(facets, dict):
        value = facets.get(key)
        if isinstance(value, dict):
            return value
    return {}


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _parent_run_id(facets: Any) -> str | None:
    """The run id of a run's parent: its ``parent`` facet's, else that of ``parentRun``, the key
    the OpenLineage integrations of Airflow before its provider, of Great Expectations and of
    Prefect sent the same facet under (the spec validates only ``parent``: a ``parentRun``'s
    id is taken only where it is a UUID, as the spec asks of a run id)."""
    found = _facet(facets, "parent").get("run")
    if isinstance(found, dict) and isinstance(found.get("runId"), str):
        return str(found["runId"])
    found = _facet(facets, "parentRun").get("run")
    if isinstance(found, dict) and isinstance(found.get("runId"), str) and _UUID.fullmatch(found["runId"]):
        return str(found["runId"])
    return None


def facet_texts(facets: Any) -> tuple[tuple[str, str], ...]:
    """Each facet of a facet map as (key, canonical JSON), by key; nothing when it is not a map."""
    if not isinstance(facets, dict) or not facets:
        return ()
    return tuple((key, canonical(facets[key])) for key in sorted(facets))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


_SEEN: Memo[SeenDataset] = Memo()


def seen_dataset(dataset: dict[str, Any], direction: str | None) -> SeenDataset:
    """A dataset with what its standard facets say (documentation, ownership, datasetType,
    symlinks and schema), its facets as they are, and its data-quality assertions. Producers name
    the same datasets with the same facets run after run, so the answer is kept by the dataset's
    JSON."""
    try:
        text = orjson.dumps(dataset, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # an integer past 64 bits
        return _seen_dataset(dataset, direction)
    key = (direction, text)
    return _SEEN.get(key) or _SEEN.put(key, len(text), _seen_dataset(dataset, direction))


def _seen_dataset(dataset: dict[str, Any], direction: str | None) -> SeenDataset:
    facets = dataset.get("facets")
    description = _text(_facet(facets, "documentation").get("description"))
    owners_facet = _facet(facets, "ownership").get("owners")
    owners = (
        tuple(o["name"] for o in owners_facet or () if isinstance(o, dict) and isinstance(o.get("name"), str))
        if isinstance(owners_facet, list)
        else ()
    )
    dataset_type = _text(_facet(facets, "datasetType").get("datasetType"))
    identifiers = _facet(facets, "symlinks").get("identifiers")
    symlinks = (
        tuple(
            (store_namespace(i["namespace"]), i["name"], i["type"] if isinstance(i.get("type"), str) else None)
            for i in identifiers
            if isinstance(i, dict) and isinstance(i.get("namespace"), str) and isinstance(i.get("name"), str)
        )
        if isinstance(identifiers, list)
        else ()
    )
    fields = _facet(facets, "schema").get("fields")
    columns = (
        tuple(
            Column(f["name"], _text(f.get("type")), _text(f.get("description")))
            for f in fields
            if isinstance(f, dict) and isinstance(f.get("name"), str)
        )
        if isinstance(fields, list)
        else ()
    )
    texts = facet_texts(facets)
    described = bool(description or owners or dataset_type or symlinks or columns)
    said = (description, owners, dataset_type, symlinks, [(c.name, c.type, c.description) for c in columns])
    return SeenDataset(
        direction=direction,
        namespace=store_namespace(dataset["namespace"]),
        name=dataset["name"],
        description=description,
        owners=owners,
        dataset_type=dataset_type,
        symlinks=symlinks,
        columns=columns,
        described=described,
        facets_digest=hashlib.sha1(orjson.dumps(said)).hexdigest() if described else None,
        facets=texts,
        facets_text_digest=hashlib.sha1(orjson.dumps(texts)).hexdigest() if texts else None,
        assertions=dataset_assertions(dataset),
    )


def read_event(
    event: dict[str, Any],
    kind: str,
    warnings: tuple[str, ...] = (),
    body: str | None = None,
    *,
    forward: str | None = None,
    token: str | None = None,
    writes: tuple[str, ...] | None = None,
    bare_inputs: frozenset[int] = frozenset(),
) -> IncomingEvent:
    """An accepted event (see :func:`bridge.receiver.policy.judge`) as the catalog keeps it;
    ``body`` is its canonical JSON, if at hand; ``forward`` its text as it came, when it is to be
    forwarded; ``token`` the name of the token that brought it; ``bare_inputs`` the indexes of
    the inputs whose facets are not applied (kept in the event's body, not read)."""
    body = body if body is not None else canonical(event)
    digest = hashlib.sha256(body.encode()).hexdigest()
    datasets: list[SeenDataset] = []
    run_id = parent_run_id = job_namespace = job_name = None
    run_facets: tuple[tuple[str, str], ...] = ()
    job_facets: tuple[tuple[str, str], ...] = ()
    skipped = False
    if kind == "DatasetEvent":
        datasets.append(seen_dataset(event["dataset"], None))
    else:
        job = event["job"]
        job_namespace, job_name = job["namespace"], job["name"]
        job_facets = facet_texts(job.get("facets"))
        # a run olbridge recorded SKIPPED names the outputs it was to write (so that Marquez keeps
        # the job's edges to them): it wrote none, and failed none, so none is read as its output
        skipped = kind == "RunEvent" and skipped_run(event["run"].get("facets"))
        for key, direction in (("inputs", "input"), ("outputs", "output")) if not skipped else (("inputs", "input"),):
            for index, dataset in enumerate(event.get(key) or ()):
                if direction == "input" and index in bare_inputs:  # named, its facets not applied
                    dataset = {"namespace": dataset["namespace"], "name": dataset["name"]}
                datasets.append(seen_dataset(dataset, direction))
    if kind == "RunEvent":
        run = event["run"]
        run_id = run["runId"]
        run_facets = facet_texts(run.get("facets"))
        parent_run_id = _parent_run_id(run.get("facets"))
    column_edges: tuple[ReceivedColumnEdge, ...] = ()
    if kind != "DatasetEvent" and not skipped:
        column_edges, more = read_column_lineage(event)
        warnings = warnings + more
    event_type = event.get("eventType") if isinstance(event.get("eventType"), str) else None
    return IncomingEvent(
        digest=digest,
        body=body,
        kind=kind,
        event_time=parse_time(event["eventTime"], "/eventTime", assume_utc=True),
        producer=event["producer"],
        event_type=event_type,
        job_namespace=job_namespace,
        job_name=job_name,
        run_id=run_id,
        parent_run_id=parent_run_id,
        datasets=tuple(datasets),
        warnings=warnings,
        column_edges=column_edges,
        run_facets=run_facets,
        job_facets=job_facets,
        forward=forward,
        token=token,
        writes=writes,
    )
