"""The catalog's assets read: one by its id (a placeholder with what producers said of it), the
one a name stands for, those an :class:`~bridge.catalog.query.AssetQuery` matches, their count.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

from bridge.catalog import rows, sql, sql_received
from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.query import AssetQuery
from bridge.errors import NotInCatalog, ValidationError
from bridge.mapping.resolver import Resolver
from bridge.model import Asset, Identifier, Origin, format_time
from bridge.model.received import store_namespace


def read_asset(conn: Connection | Cursor, asset_id: str) -> Asset | None:
    """An asset's record; an External placeholder's with what producers said of it (the
    latest of each dataset facet, every symlink identifier): :func:`read_assets` of one."""
    return read_assets(conn, (asset_id,)).get(asset_id)


def read_assets(conn: Connection | Cursor, asset_ids: Iterable[str]) -> dict[str, Asset]:
    """The records of the assets of ``asset_ids`` that are there, each with, for an External
    placeholder, the latest of each dataset facet producers said of it and every symlink
    identifier; read a few hundred at a time (a statement for each kind of row, not for each
    asset: rendering a stream's round names hundreds)."""
    found = {asset.id: asset for asset in map(rows.asset_from_row, sql.in_chunks(conn, sql.GET_ASSETS, set(asset_ids)))}
    placeholders = sorted(i for i, asset in found.items() if asset.origin is Origin.EXTERNAL)
    if not placeholders:
        return found
    facets: dict[str, dict[str, Any]] = {}
    owners = [f"asset:{asset_id}" for asset_id in placeholders]
    for start in range(0, len(owners), sql.IN_AT_MOST):
        chunk = owners[start : start + sql.IN_AT_MOST]
        for owner, key, text in conn.execute(sql_received.facets_of(len(chunk)), chunk):
            facets.setdefault(owner.removeprefix("asset:"), {})[key] = json.loads(text)
    identifiers: dict[str, list[Identifier]] = {}
    for asset_id, *row in sql.in_chunks(conn, sql_received.IDENTIFIERS_OF_ASSETS, placeholders):
        identifiers.setdefault(asset_id, []).append(Identifier(*row))
    for asset_id in facets.keys() | identifiers.keys():
        found[asset_id] = attrs.evolve(
            found[asset_id],
            received_facets=facets.get(asset_id, {}),
            identifiers=tuple(identifiers.get(asset_id, ())),
        )
    return found


def named_in_openlineage(conn: Connection | Cursor, resolver: Resolver, text: str) -> list[str]:
    """The assets ``text`` names as an OpenLineage dataset, ``<namespace>/<name>`` (split at any
    ``/``: either may hold one), as olbridge's naming rules name them in its events: the id the
    rules read back from it, where that asset is there and is named so (someone coming from
    Marquez finds an asset of olbridge's own by the name Marquez shows; the names a received one
    came under are kept, and found by them). Each spelling the rules read back is a candidate
    (``s3a://lake/x`` is named ``s3://lake`` ``x``), named forward to see that it is so named. A
    text longer than :data:`OPENLINEAGE_NAME_AT_MOST` or with more than :data:`SPLITS_AT_MOST`
    slashes names none: a search typed live looks it up at every keystroke."""
    if len(text) > OPENLINEAGE_NAME_AT_MOST or text.count("/") > SPLITS_AT_MOST:
        return []
    candidates: dict[str, set[tuple[str, str]]] = {}  # each id, and the splits that may name it
    start = text.find("/")
    while start != -1:
        namespace, name = text[:start], text[start + 1 :]
        start = text.find("/", start + 1)
        # S3 by Hadoop's schemes (s3a://) as the receiver reads it (s3://) too
        for spelled in dict.fromkeys([namespace, store_namespace(namespace)]) if namespace and name else ():
            for asset_id in [resolver.asset_for(spelled, name).id, *resolver.ids_named(spelled, name)]:
                candidates.setdefault(asset_id, set()).add((spelled, name))
    found: list[str] = []
    for asset_id, said in candidates.items():
        row = conn.execute(sql.GET_ASSET, (asset_id,)).fetchone()
        if row is None:
            continue
        asset = rows.asset_from_row(row)
        named = resolver.dataset_for(asset.id, asset.type, asset.metadata)
        if (named.namespace, named.name) in said:
            found.append(asset.id)
    return found


OPENLINEAGE_NAME_AT_MOST = 2048  # characters of a namespace/name looked up (ids are at most 512)
SPLITS_AT_MOST = 32  # slashes it may hold


def find_asset_id(conn: Connection | Cursor, text: str, resolver: Resolver | None = None) -> str:
    """The id of the asset ``text`` names: its id, or a dataset name it was received under
    (``<olNamespace>/<olName>``, or a symlink identifier's ``<namespace>/<name>``), or with
    ``resolver`` the OpenLineage name olbridge's events give it (:func:`named_in_openlineage`).
    A NotFoundError when none does; a ValidationError naming them when several do."""
    if conn.execute(sql.GET_ASSET, (text,)).fetchone():
        return text
    found: dict[str, None] = {}
    start = text.find("/")
    while start != -1:
        namespace, name = text[:start], text[start + 1 :]
        for spelled in dict.fromkeys([namespace, store_namespace(namespace)]) if namespace and name else ():
            params = (spelled, name, spelled, name)  # received as the receiver reads it: s3a:// as s3://
            found.update((asset_id, None) for (asset_id,) in conn.execute(sql_received.ASSETS_NAMED, params))
        start = text.find("/", start + 1)
    existing = [asset_id for asset_id in found if conn.execute(sql.GET_ASSET, (asset_id,)).fetchone()]
    if not existing and resolver is not None:
        existing = named_in_openlineage(conn, resolver, text)
    if not existing:
        raise NotInCatalog(f"no asset with id {text!r}, nor one received under that name or symlink")
    if len(existing) > 1:
        raise ValidationError(
            f"{text!r} names several assets: {', '.join(sorted(existing))}; give one by its id",
            rule="asset.ambiguous",
            value=text,
        )
    return existing[0]


def list_assets(conn: Connection | Cursor, query: AssetQuery) -> list[Asset]:
    """The assets the query selects, by id, read a row at a time: the metadata filters are tested
    on each as it comes, and the read ends once ``query.limit`` are found (without metadata
    filters, the database reads no more)."""
    limited = query.limit is not None and not query.metadata
    statement = sql.select_assets(
        types=len(query.types),
        namespace=query.namespace is not None,
        include_deleted=query.include_deleted,
        ids=len(query.ids),
        updated_before=query.updated_before is not None,
        after=query.after is not None,
        limit=limited,
    )
    params: list[Any] = [*query.ids, *query.types]
    if query.namespace is not None:
        params.append(query.namespace)
    if query.updated_before is not None:
        params.append(format_time(query.updated_before))
    if query.after is not None:
        params.append(query.after)
    if limited:
        params.append(query.limit)
    found: list[Asset] = []
    for row in conn.execute(statement, params):
        asset = rows.asset_from_row(row)
        if all(f.matches(asset.metadata) for f in query.metadata):
            found.append(asset)
            if query.limit is not None and len(found) >= query.limit:
                break
    return found


def count_assets(conn: Connection | Cursor) -> int:
    return int(conn.execute(sql.COUNT_ASSETS).fetchone()[0])


__all__ = ["count_assets", "find_asset_id", "list_assets", "read_asset"]
