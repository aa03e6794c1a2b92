"""The rows the receiver writes, worked out in memory (no SQL): a placeholder after a group, a
producer's text as its metadata holds it, a run's or job's row from an event and two of them merged, a
forwarded event's run key, and the JSON texts of them (:mod:`bridge.catalog.external` writes them).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import orjson

from bridge.catalog.rows import dumps
from bridge.model import EXTERNAL, Asset, Origin, format_time, parse_time
from bridge.model.received import TERMINAL, IncomingEvent, SeenDataset


def json_text(value: list[Any]) -> str:
    return orjson.dumps(value).decode()


def hashed_id(namespace: str, name: str) -> str:
    return "ol:" + hashlib.sha256(f"{namespace}\n{name}".encode()).hexdigest()[:16]


# what the receiver keeps in a placeholder's metadata of the dataset it names (the name it was
# received under, which olbridge's events then give it, its sightings, and its facets' owner and
# dataset type): not an own asset's
RECEIVED_KEYS = frozenset({"olNamespace", "olName", "firstSeen", "lastSeen", "producer", "owner", "datasetType"})


def placeholder(
    current: Asset | None,
    asset_id: str,
    dataset: tuple[str, str],
    base: dict[str, Any],
    times: tuple[str, str],
    producer: str | None,
    facets: SeenDataset | None,
) -> Asset:
    """The placeholder after a group: its first and last sightings, the producer of the latest
    event that named it (when that one is in the group) and the facets of the latest event that
    described it (likewise)."""
    first, last = times
    metadata: dict[str, Any] = dict(current.metadata) if current is not None else dict(base)
    if current is None or "olNamespace" in current.metadata:  # the name it came under, pinned
        metadata.update(olNamespace=dataset[0], olName=dataset[1])
    # (a placeholder olbridge's run made of an input, or one an asset took over, is named by the
    # rules: as the dataset, or as the symlink it was bound by)
    metadata.update(firstSeen=first, lastSeen=last)
    if producer is not None:
        metadata["producer"] = producer
    description = current.description if current is not None else None
    columns = current.columns if current is not None else ()
    if facets is not None:
        description, columns = facets.description, facets.columns
        for key, value in (("owner", ", ".join(facets.owners)), ("datasetType", facets.dataset_type or "")):
            if value:
                metadata[key] = value
            else:
                metadata.pop(key, None)
        metadata.pop("symlinks", None)  # kept as identifiers now (external_identifiers), every one given
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


def canonical_time(text: str, where: str) -> str:
    """A time in :func:`format_time`'s form, which sorts as the time does: as it is when it has that
    form's shape (``2025-01-31T12:00:00.000000Z``: the catalog writes every time so), else parsed
    and formatted."""
    if len(text) == 27 and text[19] == "." and text[26] == "Z":
        return text
    return format_time(parse_time(text, where))


_STR = {str}


def strings_only(value: Any) -> bool:
    """Whether ``value`` is a map whose every value is a string (the types gathered in C: no
    Python step a value)."""
    return isinstance(value, dict) and set(map(type, value.values())) <= _STR


def read_metadata(text: str) -> dict[str, Any]:
    """A placeholder's stored metadata: read by orjson where it is a map of strings, as olbridge
    writes a placeholder's (a few times faster than the standard library, which reads the rest:
    orjson would read an integer past 64 bits as a float)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:  # a lone surrogate, say, which the standard library reads
        value = None
    return value if strings_only(value) else dict(json.loads(text))


def metadata_text(metadata: dict[str, Any]) -> str:
    """:func:`~bridge.catalog.rows.dumps` of a placeholder's metadata: by orjson where it is a map
    of strings, whose sorted compact text is the standard library's to the byte (escapes, and
    characters past ASCII as they are), else by the standard library."""
    if strings_only(metadata):
        try:
            return orjson.dumps(metadata, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError:  # a lone surrogate, which only the standard library writes
            pass
    return dumps(metadata)


def string_text(value: str) -> str:
    """A string's JSON text as :func:`metadata_text` writes it inside a placeholder's metadata."""
    return metadata_text({"s": value})[5:-1]


def forward_key(event: IncomingEvent) -> str:
    """The outbox's run key of a forwarded event: the events of one run (or job, or dataset) go
    out in the order they came."""
    if event.source is not None:
        return f"received:{event.source}"
    dataset = event.datasets[0]
    return f"received:dataset:{dataset.namespace}/{dataset.name}"


def merged_source(kept: tuple[Any, ...], row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Two source rows of one run (or job) as one, as UPSERT_SOURCE merges the second into the
    first (a parent once known stays, the state of the higher state rank, the earliest start and
    first sighting, the latest sighting), so that a group writes a run's row once."""
    source, job_ns, job_name, run_id, parent, state, rank, started, ended, first, last, producer = kept
    if row[6] > rank:
        state, rank, ended, producer = row[5], row[6], row[8], row[11]
    if row[7] is not None:
        started = row[7] if started is None else min(started, row[7])
    return (
        source,
        job_ns,
        job_name,
        run_id,
        parent if parent is not None else row[4],
        state,
        rank,
        started,
        ended,
        min(first, row[9]),
        max(last, row[10]),
        producer,
    )


def source_row(event: IncomingEvent, moment: str) -> tuple[Any, ...]:
    kind = (event.event_type or "").upper()
    if event.kind == "RunEvent":
        state, rank = (kind or None), event.state_rank
        started = moment if kind == "START" else None
        ended = moment if kind in TERMINAL else None
    else:
        state, rank, started, ended = None, event.rank, None, None
    return (
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
    )


__all__ = [
    "canonical_time",
    "forward_key",
    "hashed_id",
    "json_text",
    "merged_source",
    "metadata_text",
    "placeholder",
    "read_metadata",
    "source_row",
    "string_text",
    "strings_only",
]
