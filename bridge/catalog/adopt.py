"""A received placeholder taken over by one of olbridge's own assets named as its dataset.

An event that names a dataset binds it to an asset: one of olbridge's own that the rules name so,
if there is one (``s3a://lake/raw/orders``, exported as ``s3://lake`` + ``raw/orders``, for Spark's
event naming that), else an External placeholder. Where the event came first, the placeholder
was made before olbridge's own asset, under the id the rules name the dataset back as (``s3://lake/
raw/orders``); olbridge's own asset, made later under another spelling of the same dataset, would
stay apart from it, and the received lineage with the placeholder. So an own write that makes an
asset first looks for a placeholder of the dataset the asset is exported as, and takes it over:
the placeholder's rows (its binding, received usages, lineage, column edges, facets, identifiers,
checks, freshness rule, history) move to the asset's id, which makes the catalog what it would be
had the asset been there before the event. A placeholder olbridge's own runs name (read or wrote
under its id) is a spelling a user chose, and is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from bridge.catalog import sql
from bridge.catalog.engine import Cursor
from bridge.catalog.external_rows import RECEIVED_KEYS, hashed_id, json_text
from bridge.catalog.health_state import MARK, keep_purged
from bridge.catalog.rows import asset_from_row, asset_row, from_snapshot, snapshot
from bridge.mapping.resolver import Resolver
from bridge.model import EXTERNAL, Asset, Origin
from bridge.model.metadata import merge_metadata

_BOUND = "SELECT asset_id FROM external_datasets WHERE ol_namespace = ? AND ol_name = ?"
# the received datasets' assets that give the dataset as one of their names (a symlink)
_SYMLINKED = (
    "SELECT DISTINCT i.asset_id FROM external_identifiers AS i JOIN external_datasets AS d ON d.asset_id = i.asset_id "
    "WHERE i.namespace = ? AND i.name = ?"
)
_RECEIVED_PLACEHOLDER = "SELECT 1 FROM assets WHERE id = ? AND origin = 'external' AND deleted_at IS NULL"
# olbridge's own runs that name the placeholder's id: a spelling of their own, not taken over
_OWN_REFERENCES = (
    "SELECT 1 FROM usages WHERE asset_id = ? UNION ALL SELECT 1 FROM unwritten_outputs WHERE asset_id = ? "
    "UNION ALL SELECT 1 FROM lineage WHERE upstream_id = ? UNION ALL SELECT 1 FROM lineage WHERE downstream_id = ? "
    "UNION ALL SELECT 1 FROM kept_writers WHERE asset_id = ? LIMIT 1"
)
# rows moved whole (deleted, then written again under the new id), so that SQLite's search, kept
# by triggers on insert and delete, follows them (the asset's own row likewise); (table, column)
_MOVED_WHOLE = (("external_datasets", "asset_id"), ("external_identifiers", "asset_id"))
_EDGE = ("upstream_id", "downstream_id")
_COLUMN_EDGE = (
    "downstream_id",
    "downstream_column",
    "upstream_id",
    "upstream_column",
    "transformations",
    "coalesce({t}.task_run_pk, 0)",
    "coalesce({t}.source, '')",
)
# columns updated in place, each with the rest of its table's key: a row the new id has already
# (left by an asset of that id purged without its lineage) is kept, the placeholder's goes
_UPDATED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("external_usages", "asset_id", ("job_namespace", "job_name", "direction")),
    *(("external_lineage", end, (*_EDGE, "job_namespace", "job_name")) for end in _EDGE),
    *(("column_lineage", end, _COLUMN_EDGE) for end in _EDGE),
    *(("kept_edges", end, _EDGE) for end in _EDGE),
    ("asset_checks", "asset_id", ("reported_at",)),
    ("kept_writes", "asset_id", ("fact",)),
    ("freshness_rules", "asset_id", ()),
    ("asset_changes", "asset_id", ("seq",)),
    ("health_marks", "asset_id", ("seq",)),
)
# the runs (and jobs) received that name the placeholder among their inputs or outputs: those of
# the jobs its received usages name, and those named under several jobs
_JOBS_NAMING = "SELECT DISTINCT job_namespace, job_name FROM external_usages WHERE asset_id = ?"
_NAMING = "(inputs LIKE ? ESCAPE '!' OR outputs LIKE ? ESCAPE '!')"
_SOURCES_OF_JOB = (
    f"SELECT source, inputs, outputs FROM external_sources WHERE job_namespace = ? AND job_name = ? AND {_NAMING}"
)
_SOURCES_OF_JOBS = f"SELECT source, inputs, outputs FROM external_sources WHERE jobs IS NOT NULL AND {_NAMING}"
_SHARED_NAMES = (
    "DELETE FROM external_identifiers WHERE asset_id = ? AND EXISTS (SELECT 1 FROM external_identifiers AS o "
    "WHERE o.asset_id = ? AND o.namespace = external_identifiers.namespace AND o.name = external_identifiers.name)"
)
_CHANGES_OF = "SELECT seq, snapshot FROM asset_changes WHERE asset_id = ?"
_SET_SNAPSHOT = "UPDATE asset_changes SET snapshot = ? WHERE seq = ?"
_OUTBOX_KEY = "UPDATE outbox SET run_key = ? WHERE run_key = ?"
_SET_SOURCE_USAGES = "UPDATE external_sources SET inputs = ?, outputs = ? WHERE source = ?"


@attrs.frozen
class Naming:
    """What an own write takes a placeholder over by: the rules olbridge's events name assets by,
    and the engine's statement that waits for the receivers' groups in flight (None: SQLite's
    one writer at a time)."""

    rules: Resolver
    lock: str | None = None
    # the received placeholders moved apart before the write, each in a short transaction of its
    # own (:meth:`Catalog.take_over_first`), by the id declared: the write says so in its result
    moved: Mapping[str, Apart] = attrs.field(factory=dict)


def adopted(cur: Cursor, naming: Naming, asset_id: str, asset_type: str | None, metadata: Mapping[str, Any]) -> bool:
    """Take over, under the id ``asset_id`` (which no asset has yet), the received placeholder of
    the dataset the rules export that asset as, if there is one (:func:`placeholder_for`): whether
    one was. Where receivers write beside this, it first waits for their groups in flight, which
    may have read the placeholder's binding, and holds new ones back until its transaction
    commits (:attr:`Naming.lock`), then looks again. An own write takes its placeholders over
    first, each in a short transaction of its own (:meth:`Catalog.take_over_first`): this finds
    one only where one was bound meanwhile."""
    placeholder = placeholder_for(cur, naming.rules, asset_id, asset_type, metadata)
    if placeholder is not None and naming.lock is not None:
        cur.execute(naming.lock)
        placeholder = placeholder_for(cur, naming.rules, asset_id, asset_type, metadata)
    if placeholder is None or cur.execute(sql.GET_ASSET, (asset_id,)).fetchone() is not None:
        return False
    take_over(cur, placeholder, asset_id)
    return True


@attrs.frozen
class Adoption:
    """A received placeholder an asset of the catalog takes over (:func:`adoptions`)."""

    placeholder: str
    asset_id: str

    def to_json(self) -> dict[str, str]:
        return {"placeholder": self.placeholder, "assetId": self.asset_id}


# the assets a takeover may be by: olbridge's own, and the placeholders its runs made of their
# inputs (a received placeholder is bound to the dataset it was received under)
_ADOPTERS = (
    "SELECT a.id, a.type, a.metadata FROM assets AS a WHERE a.deleted_at IS NULL "
    "AND NOT EXISTS (SELECT 1 FROM external_datasets AS d WHERE d.asset_id = a.id) ORDER BY a.id"
)


def adoptions(cur: Cursor, rules: Resolver) -> list[Adoption]:
    """The received placeholders the catalog's assets would take over had they been made after
    the events (catalogs that received the events first, before takeovers were made: the lineage
    split in two): each asset bound to no dataset whose dataset by the rules a placeholder is
    bound to (:func:`placeholder_for`). Reads every such asset."""
    found: list[Adoption] = []
    taken: set[str] = set()
    for asset_id, asset_type, metadata in cur.execute(_ADOPTERS).fetchall():
        placeholder = placeholder_for(cur, rules, asset_id, asset_type, orjson.loads(metadata))
        if placeholder is not None and placeholder not in taken:
            taken.add(placeholder)
            found.append(Adoption(placeholder, asset_id))
    return found


def placeholder_for(
    cur: Cursor, rules: Resolver, asset_id: str, asset_type: str | None, metadata: Mapping[str, Any]
) -> str | None:
    """The received placeholder that the asset ``asset_id`` (not in the catalog yet, or one bound
    to no dataset) is to take over: the one bound to the dataset the rules export the asset as,
    or whose symlinks name it, when it has another id, is live and no own run names it. None:
    nothing to take over."""
    named = rules.dataset_for(asset_id, asset_type or EXTERNAL, metadata)
    bound = cur.execute(_BOUND, (named.namespace, named.name)).fetchone()
    if bound is None:  # another name of a received dataset (its symlink): that dataset's
        found = cur.execute(_SYMLINKED, (named.namespace, named.name)).fetchall()
        bound = found[0] if len(found) == 1 else None
    if bound is None or bound[0] == asset_id:
        return None
    placeholder = str(bound[0])
    if cur.execute(_RECEIVED_PLACEHOLDER, (placeholder,)).fetchone() is None:
        return None
    if cur.execute(_OWN_REFERENCES, (placeholder,) * 5).fetchone() is not None:
        return None
    return placeholder


_BINDINGS_OF = "SELECT ol_namespace, ol_name FROM external_datasets WHERE asset_id = ?"


@attrs.frozen
class Apart:
    """A received placeholder moved off an id an own write declares another dataset under
    (:func:`kept_apart`): its dataset, and the id it is kept under now."""

    dataset: tuple[str, str]
    asset_id: str


def apart_from(
    cur: Cursor, rules: Resolver, current: Asset, asset_type: str | None, metadata: Mapping[str, Any]
) -> tuple[str, str] | None:
    """The received dataset of the placeholder ``current`` that an own write declaring its id
    with ``metadata`` is not (:func:`kept_apart`); None: none, the write is the placeholder's."""
    if current.origin is not Origin.EXTERNAL or not metadata:
        return None
    datasets = {(str(ns), str(name)) for ns, name in cur.execute(_BINDINGS_OF, (current.id,)).fetchall()}
    if not datasets:
        return None
    kind = asset_type or current.type
    base = {k: v for k, v in current.metadata.items() if k not in RECEIVED_KEYS}
    before = rules.dataset_for(current.id, kind, base)
    after = rules.dataset_for(current.id, kind, merge_metadata(base, metadata))
    if (before.namespace, before.name) not in datasets or (after.namespace, after.name) in datasets:
        return None
    if cur.execute(_OWN_REFERENCES, (current.id,) * 5).fetchone() is not None:
        return None  # olbridge's own runs name it under this id: theirs, as it is
    pinned = (str(current.metadata.get("olNamespace")), str(current.metadata.get("olName")))
    return pinned if pinned in datasets else min(datasets)


def kept_apart(
    cur: Cursor, naming: Naming, current: Asset, asset_type: str | None, metadata: Mapping[str, Any]
) -> Apart | None:
    """Move the received placeholder ``current`` to the id the receiver gives a dataset whose id
    is taken (``ol:`` and a hash of its name) when an own write declares its id with metadata
    that names another dataset (``host = "pg-new"`` where the placeholder is the table of
    ``postgres://pg-old:5432``): the receiver keeps such a dataset apart when the asset came
    first, so the catalog is the same whichever came first, and the asset is named as its
    metadata says, not as the placeholder's dataset. Only a placeholder the rules name as its
    dataset by its own metadata, and no own run names, is moved; one named so only by the name
    it was received under (an ``ol:`` or URI id, pinned) stays the asset declared under its id,
    as before. What a user set on the id (a freshness rule) stays with it. Where receivers write
    beside this (PostgreSQL), it waits for their groups in flight and holds new ones back until
    its transaction commits (:attr:`Naming.lock`), then looks again: an own write moves its
    placeholders apart first, each in a short transaction of its own
    (:meth:`Catalog.take_over_first`). None: nothing moved."""
    dataset = apart_from(cur, naming.rules, current, asset_type, metadata)
    if dataset is not None and naming.lock is not None:
        cur.execute(naming.lock)
        found = cur.execute(sql.GET_ASSET, (current.id,)).fetchone()
        again = asset_from_row(found) if found is not None else None
        dataset = apart_from(cur, naming.rules, again, asset_type, metadata) if again is not None else None
    if dataset is None:
        return None
    moved_to = hashed_id(*dataset)
    take_over(cur, current.id, moved_to, received=True)
    return Apart(dataset, moved_to)


def take_over(cur: Cursor, placeholder: str, asset_id: str, *, received: bool = False) -> None:
    """Move every row of the received placeholder ``placeholder`` to the id ``asset_id``: its
    asset row, where no asset has that id yet (an External placeholder still, which the own write
    then makes its own; without what the receiver keeps of a dataset it names, the name it was
    received under first of all, so that the rules name the asset; where one has, that one stays
    and the placeholder's goes), binding, received usages and lineage, facets, identifiers,
    checks, rule, kept facts, health and history (its snapshots and queued changes named anew),
    and its id in the received runs' inputs and outputs. A row of a key the asset has already is
    the asset's. With ``received``, the placeholder keeps what the receiver keeps of its dataset
    (moved apart: :func:`kept_apart`)."""
    jobs = cur.execute(_JOBS_NAMING, (placeholder,)).fetchall()  # before the usages move
    row = cur.execute(sql.GET_ASSET, (placeholder,)).fetchone()
    asset = asset_from_row(row)
    metadata = dict(asset.metadata) if received else {k: v for k, v in asset.metadata.items() if k not in RECEIVED_KEYS}
    # its kept health, FAIL or WARN, stays (the rest goes), for the watch to close what its alert
    # opened with a RECOVERED, as for an asset purged: the asset under its id is no more
    still_open = keep_purged(cur, [placeholder], reason=f"taken over by {asset_id}")
    cur.execute("DELETE FROM assets WHERE id = ?", (placeholder,))
    if cur.execute(sql.GET_ASSET, (asset_id,)).fetchone() is None:
        cur.execute(sql.UPSERT_ASSET, asset_row(attrs.evolve(asset, id=asset_id, metadata=metadata)))
    cur.execute(_SHARED_NAMES, (placeholder, asset_id))  # the names both give: the asset's
    for table, column in _MOVED_WHOLE:
        _move_whole(cur, table, column, placeholder, asset_id)
    for table, column, key in _UPDATED:
        if not (received and table == "freshness_rules"):  # a rule set on the id stays with it
            _move_column(cur, table, column, key, placeholder, asset_id)
    _move_column(cur, "external_facets", "owner", ("facet_key",), f"asset:{placeholder}", f"asset:{asset_id}")
    cur.executemany(MARK, [(asset_id,) for asset_id in still_open])  # its marks went to the new id
    for seq, text in cur.execute(_CHANGES_OF, (asset_id,)).fetchall():
        cur.execute(_SET_SNAPSHOT, (snapshot(attrs.evolve(from_snapshot(text), id=asset_id)), seq))
    cur.execute(_OUTBOX_KEY, (f"asset:{asset_id}", f"asset:{placeholder}"))
    quoted = orjson.dumps(placeholder).decode()
    pattern = "%" + quoted.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"
    found = [*(cur.execute(_SOURCES_OF_JOB, (*job, pattern, pattern)).fetchall() for job in jobs)]
    found.append(cur.execute(_SOURCES_OF_JOBS, (pattern, pattern)).fetchall())
    for source, inputs, outputs in {tuple(r) for rows in found for r in rows}:
        renamed = [_renamed(text, placeholder, asset_id) for text in (inputs, outputs)]
        cur.execute(_SET_SOURCE_USAGES, (*renamed, source))


def _renamed(text: str, old: str, new: str) -> str:
    """A received run's JSON list of asset ids (sorted) with ``old`` named ``new``."""
    ids: list[str] = orjson.loads(text)
    return json_text(sorted({new if asset_id == old else asset_id for asset_id in ids}))


def _move_column(cur: Cursor, table: str, column: str, key: tuple[str, ...], old: str, new: str) -> None:
    """Rows of ``table`` from ``old`` to ``new`` in ``column``; those whose key (``column`` and the
    rest of ``key``: columns, or expressions of ``{t}``) ``new`` has already are dropped."""
    rest = [part if "{t}" in part else "{t}." + part for part in key if part != column]
    same = "".join(f" AND {part.format(t='o')} = {part.format(t=table)}" for part in rest)
    cur.execute(
        f"UPDATE {table} SET {column} = ? WHERE {column} = ? "
        f"AND NOT EXISTS (SELECT 1 FROM {table} AS o WHERE o.{column} = ?{same})",
        (new, old, new),
    )
    cur.execute(f"DELETE FROM {table} WHERE {column} = ?", (old,))


def _move_whole(cur: Cursor, table: str, column: str, old: str, new: str) -> None:
    from bridge.catalog import schema  # only here: sqlalchemy is slow to import, and every command imports this

    columns = [c.name for c in schema.metadata.tables[table].columns]
    rows = cur.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {column} = ?", (old,)).fetchall()
    if not rows:
        return
    cur.execute(f"DELETE FROM {table} WHERE {column} = ?", (old,))
    where = columns.index(column)
    marks = ", ".join("?" * len(columns))
    for row in rows:
        values = [new if i == where else value for i, value in enumerate(row)]
        cur.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", values)


__all__ = [
    "Adoption",
    "Apart",
    "Naming",
    "adopted",
    "adoptions",
    "apart_from",
    "kept_apart",
    "placeholder_for",
    "take_over",
]
