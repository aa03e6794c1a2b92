"""What a named token may change (``serve --tokens``): every dataset an event would write, and
the inputs whose facets it may not apply. Pure.

An event writes its job's namespace (a DatasetEvent: its dataset's), each output's namespace and
the namespaces of each output's ``symlinks`` identifiers (the output's column lineage is an edge
into the output: the same namespace); the outputs of a run olbridge recorded SKIPPED (its
``olbridge_taskRun`` facet says so, on the events olbridge sends of it) are named, not
written, and the receiver takes nothing of them, unless it forwards the event as it came. It
reads its inputs: naming a dataset of another namespace as an input is allowed, but the facets
it carries for that dataset (its description, owners, schema, symlinks) are not applied (nor
forwarded: a forwarded event goes on without them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from bridge.model.received import store_namespace
from bridge.openlineage.facets import skipped
from bridge.openlineage.validate import event_kind, kind_said

MayWrite = Callable[[str], bool]


def _symlinks(dataset: dict[str, Any], where: str) -> Iterator[tuple[str, str]]:
    facets = dataset.get("facets")
    symlinks = facets.get("symlinks") if isinstance(facets, dict) else None
    identifiers = symlinks.get("identifiers") if isinstance(symlinks, dict) else None
    if not isinstance(identifiers, list):
        return
    for index, identifier in enumerate(identifiers):
        if isinstance(identifier, dict) and isinstance(identifier.get("namespace"), str):
            yield f"{where}/facets/symlinks/identifiers/{index}/namespace", identifier["namespace"]


def _dataset_places(dataset: Any, where: str) -> Iterator[tuple[str, str]]:
    """The namespaces a dataset of an event names (its own, its symlinks'), each with its pointer."""
    if not isinstance(dataset, dict):
        return
    if isinstance(dataset.get("namespace"), str):
        yield f"{where}/namespace", dataset["namespace"]
    yield from _symlinks(dataset, where)


# the events of a run olbridge recorded SKIPPED: its START and its ABORT (bridge/openlineage), and
# a RUNNING its stream sent of it (a run recorded running, then skipped before it went)
_SKIPPED_EVENT_TYPES = ("START", "RUNNING", "ABORT")


def written(event: Any, *, forwarded: bool = False) -> Iterator[tuple[str, str]]:
    """Every namespace the event writes, each with its JSON pointer, the job's (or a
    DatasetEvent's dataset's) first; nothing when it is not an object (the verdict refuses it).
    A skipped run's outputs are left out only as olbridge sends them (a START, RUNNING or ABORT), and
    not where the event is ``forwarded`` as it came (``serve --forward``): the backend it goes on
    to reads its outputs, whatever its facets say."""
    if not isinstance(event, dict):
        return
    if event_kind(event) == "DatasetEvent":
        yield from _dataset_places(event.get("dataset"), "/dataset")
        if kind_said(event) is not None:
            return
        # read as one by its shape alone (no schemaURL says which): another reader may take it for
        # a RunEvent or a JobEvent (Marquez reads a RunEvent), whose job and outputs it writes
    job = event.get("job")
    if isinstance(job, dict) and isinstance(job.get("namespace"), str):
        yield "/job/namespace", job["namespace"]
    run = event.get("run")
    # a RunEvent's skipped run names its outputs, writes none (bridge/receiver/events.py); a JobEvent
    # has no run: a run it carries is ignored, and its outputs are written
    if (
        not forwarded
        and event_kind(event) == "RunEvent"
        and event.get("eventType") in _SKIPPED_EVENT_TYPES
        and isinstance(run, dict)
        and skipped(run.get("facets"))
    ):
        return
    outputs = event.get("outputs")
    if isinstance(outputs, list):
        for index, output in enumerate(outputs):
            yield from _dataset_places(output, f"/outputs/{index}")


def allowed(may_write: MayWrite, namespace: str) -> bool:
    """Whether a token may write a namespace as an event names it, or as olbridge reads it (S3 by
    Hadoop's schemes as ``s3://``: :func:`bridge.model.received.store_namespace`): a token of
    ``s3://lake*`` writes ``s3a://lake`` too, one of ``s3a://lake*`` as before."""
    return may_write(namespace) or may_write(store_namespace(namespace))


def forbidden(event: Any, may_write: MayWrite, *, forwarded: bool = False) -> tuple[str, str] | None:
    """The first namespace the event writes that ``may_write`` refuses (:func:`allowed`), with its
    pointer; None when it may write them all."""
    places = written(event, forwarded=forwarded)
    return next(((where, ns) for where, ns in places if not allowed(may_write, ns)), None)


def read_only_inputs(event: Any, may_write: MayWrite) -> list[tuple[int, str]]:
    """The inputs of a RunEvent or JobEvent whose facets are not to be applied: those with facets
    (dataset facets, or input facets: a ``dataQualityAssertions`` there checks the dataset) that
    name a namespace ``may_write`` refuses (their own or a symlink's), each with its index and
    that namespace."""
    # (a DatasetEvent read by its shape alone has inputs another reader may read: judged too)
    inputs = event.get("inputs") if isinstance(event, dict) and kind_said(event) != "DatasetEvent" else None
    if not isinstance(inputs, list):
        return []
    found = []
    for index, dataset in enumerate(inputs):
        if not isinstance(dataset, dict) or not (dataset.get("facets") or dataset.get("inputFacets")):
            continue
        refused = next((ns for _, ns in _dataset_places(dataset, "") if not allowed(may_write, ns)), None)
        if refused is not None:
            found.append((index, refused))
    return found
