"""Reads for people looking at the catalog (``olbridge ui``): pages of assets found by keyset, a
tree of id prefixes, an asset's nearest neighbours with capped counts, a scoped lineage graph
that stops at a node budget, and the runs that read or wrote an asset (the moments an asset's
lineage changed: :mod:`bridge.catalog.lineage_steps`). Every read is bounded (``LIMIT``, counts
capped) and walks an index: the assets' primary key, the lineage tables' keys and
``lineage_downstream``, ``usages_asset``.

A :class:`Scope` (the namespaces a ``--tokens`` token may write) limits what is seen: an asset in
another namespace is never returned; Global assets (no namespace) always are.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog import history, rows, sql, sql_received
from bridge.catalog.engine import Connection
from bridge.catalog.namespaces import namespaces_seen, newest_of
from bridge.catalog.runs import (
    EXTERNAL,
    OWN,
    RunFilter,
    RunKey,
    Runs,
    RunView,
    external_key,
    own_conditions,
    own_key,
    own_newest,
)
from bridge.catalog.store import Catalog
from bridge.errors import ValidationError
from bridge.model import Asset, format_time, parse_time
from bridge.model.received import namespace_matches, run_day, run_sources

# above every character: a prefix's ids lie in [prefix, prefix + TOP) (byte order on both engines)
TOP = "\U0010ffff"
COUNT_CAP = 10_000  # counts past this are shown as "10,000+"
SCAN_CHUNK = 500
SCAN_BUDGET = 20_000  # rows a metadata filter may pass over for one page
SEARCH_INDEXED = 3  # a search with this many characters in a row that are no wildcard may be answered by the index
SEARCH_PROBE = 2_000  # assets read in id order to tell a common search text (a page of it there) from a rare one
SEARCH_COUNTED = 10_000  # assets read, at most, to count a common search text
SEARCH_MATCHES = 20_000  # a search text more of the search's terms hold is read in id order
SEARCH_BUDGET = 10_000  # assets a search read in id order checks for one page
# a prefix tree's next segment: a URI scheme with its "://", else up to and with the next separator
# (one: with a run of them, ``a//`` would be a sibling of the ``a/`` that holds it, and ``a/..``
# of ``a/``)
SEGMENT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://|[^/.:]*[/.:]")


@attrs.frozen
class Scope:
    """The namespaces one may see (``*`` and ``?`` patterns, as a token's); Global assets always."""

    patterns: tuple[str, ...]

    def allows(self, namespace: str | None) -> bool:
        return namespace is None or any(namespace_matches(namespace, p) for p in self.patterns)

    def clause(self, column: str, *, global_: bool = True) -> tuple[str, list[str]]:
        """A SQL condition that lets through what :meth:`allows` does, exactly (case and all, on
        both engines: counts and ``EXISTS`` take it as it is); with ``global_``, NULL too."""
        globs = [f"{column}{sql.NAMESPACE_GLOB}" for _ in self.patterns]
        params = [p.replace("[", "[[]") for p in self.patterns]  # a "[" is itself, as in allows
        return f"({' OR '.join([*([f'{column} IS NULL'] if global_ else []), *globs, '1 = 0'])})", params


def _like(pattern: str) -> str:
    out = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return out.replace("*", "%").replace("?", "_")


def allows(scope: Scope | None, namespace: str | None) -> bool:
    return scope is None or scope.allows(namespace)


GLOBAL = ""  # the namespace filter that asks for Global assets


@attrs.frozen
class AssetFilter:
    """Which assets a page lists. ``namespace`` ``""`` (GLOBAL): the Global ones."""

    search: str = ""
    types: tuple[str, ...] = ()
    namespace: str | None = None
    origin: str | None = None
    prefix: str = ""
    metadata: tuple[tuple[str, str], ...] = ()  # key = value, exact

    def matches_metadata(self, asset: Asset) -> bool:
        return all(key in asset.metadata and _text(asset.metadata[key]) == value for key, value in self.metadata)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@attrs.frozen
class ListedAsset:
    asset: Asset
    last_written: datetime | None  # the latest write by one of olbridge's runs (None: never)


@attrs.frozen
class AssetPage:
    assets: tuple[ListedAsset, ...]
    after: str | None  # the next page starts after this id (None: no more)
    count: int | None  # how many match, capped at COUNT_CAP (None: not counted, see _count)


def _where(f: AssetFilter, scope: Scope | None, *, search: str = "") -> tuple[list[str], list[Any]]:
    """The conditions of the filters (``search``: how the search text is looked for, "index" or
    "scan"; none without it)."""
    where, params = ["deleted_at IS NULL"], []
    if f.prefix:
        where.append("id >= ? AND id < ?")
        params += [f.prefix, f.prefix + TOP]
    if f.types:
        where.append(f"type IN ({', '.join('?' * len(f.types))})")
        params += list(f.types)
    if f.namespace == GLOBAL:
        where.append("namespace IS NULL")
    elif f.namespace is not None:
        where.append("namespace = ?")
        params.append(f.namespace)
    if f.origin:
        where.append("origin = ?")
        params.append(f.origin)
    if search == "index":  # by the catalog's search index
        where.append(sql.SEARCH_ASSETS)
        params.append(_pattern(f.search))
    elif search == "scan":
        clause, more = _holds("assets", f.search)
        where.append(clause)
        params += more
    if scope is not None:
        clause, more = scope.clause("namespace")
        where.append(clause)
        params += more
    return where, params


def fold(text: str) -> str:
    """``text`` as the search compares it, character for character: an ASCII letter in lower case,
    any other character that has another case in its case folding when that is one character
    outside ASCII (``É`` as ``é``), else as it is (``ß``, ``İ``, the Kelvin sign: only themselves).
    Python does it, the same on both engines, whatever their collation."""
    if text.isascii():
        return text.lower()
    return "".join(map(_fold, text))


@functools.cache
def _fold(char: str) -> str:
    if char.isascii():
        return char.lower()
    folded = char.casefold()
    return folded if len(folded) == 1 and not folded.isascii() else char


def _pattern(text: str) -> str:
    """The LIKE pattern (lower case, no escape) of the terms that may hold ``text`` as :func:`fold`
    compares, whichever case the engine folds in SQL (SQLite's ``lower()`` and LIKE, and
    PostgreSQL's under the "C" collation, fold ASCII only): ASCII letters in lower case, and any
    character outside ASCII that has another case, ``%``, ``_`` and ``\\``, each any one character.
    What it lets through is checked again (:func:`_holding`)."""
    wild = "%_\\"
    return "%" + "".join("_" if char in wild or _cased(char) else char.lower() for char in text) + "%"


def _cased(char: str) -> bool:
    return not char.isascii() and (char.lower() != char or char.upper() != char or char.casefold() != char)


def _indexable(text: str) -> bool:
    """Whether the search index narrows ``text``'s pattern: some SEARCH_INDEXED characters in a
    row that are no wildcard (a trigram)."""
    return any(len(run) >= SEARCH_INDEXED for run in re.split("[%_]", _pattern(text)))


def _holds(table: str, text: str) -> tuple[str, list[str]]:
    """An asset row (of ``table``, a name or an alias of assets) whose id, received name or
    symlink may hold ``text`` (:func:`_pattern`): the search's condition checked row by row (its
    received names and symlinks found by their asset's index), the rows it lets through then
    checked by :func:`_holding`."""
    like = _pattern(text)
    clause = (
        f"(lower({table}.id) LIKE ? OR EXISTS (SELECT 1 FROM external_datasets d WHERE d.asset_id = "
        f"{table}.id AND lower(d.ol_namespace || '/' || d.ol_name) LIKE ?) OR EXISTS (SELECT 1 FROM "
        f"external_identifiers i WHERE i.asset_id = {table}.id AND lower(i.namespace || '/' || i.name) LIKE ?))"
    )
    return clause, [like, like, like]


_NAMES = (  # an asset's received names and symlinks, as the search reads them
    "SELECT asset_id, ol_namespace || '/' || ol_name FROM external_datasets WHERE asset_id IN ({})",
    "SELECT asset_id, namespace || '/' || name FROM external_identifiers WHERE asset_id IN ({})",
)


def _holding(conn: Connection, ids: Sequence[str], text: str) -> set[str]:
    """Those of ``ids`` (assets the search's SQL let through) whose id, received name or symlink
    holds ``text`` as :func:`fold` compares: the ids checked here, the names of the others read
    by their asset's index."""
    wanted = fold(text)
    out = {i for i in ids if wanted in fold(i)}
    rest = [i for i in ids if i not in out]
    for start in range(0, len(rest), SCAN_CHUNK):
        part = rest[start : start + SCAN_CHUNK]
        for statement in _NAMES:
            found = conn.execute(statement.format(", ".join("?" * len(part))), part)
            out.update(asset_id for asset_id, term in found if wanted in fold(term))
    return out


def _indexed(conn: Connection, text: str) -> set[str]:
    """The assets whose id, received name or symlink holds ``text`` as :func:`fold` compares, by
    the search index: the terms it lets through (at most SEARCH_MATCHES, as :func:`_search_by`
    found), each checked."""
    wanted = fold(text)
    return {i for i, term in conn.execute(sql.SEARCH_TERMS, [_pattern(text)]) if wanted in fold(term)}


def _search_by(conn: Connection, f: AssetFilter, scope: Scope | None, after: str | None, limit: int) -> str:
    """How to look for the search text: "index" (which reads every asset holding it) when few
    hold it, at most SEARCH_MATCHES; else "scan", the assets in id order, each checked, at most
    SCAN_BUDGET of them a page (a text too short for the index; a common one, which the next
    SEARCH_PROBE assets hold a page of, or which lies further on)."""
    if not f.search:
        return ""
    if not _indexable(f.search):
        return "scan"
    where, params = _where(f, scope)
    if after is not None:
        where, params = [*where, "id > ?"], [*params, after]
    clause, more = _holds("a", f.search)
    statement = (
        f"SELECT count(*), sum(CASE WHEN {clause} THEN 1 ELSE 0 END) FROM "
        f"(SELECT id FROM assets WHERE {' AND '.join(where)} ORDER BY id LIMIT ?) a"
    )
    read, held = conn.execute(statement, [*more, *params, SEARCH_PROBE]).fetchone()
    if read < SEARCH_PROBE or int(held or 0) > limit:
        return "scan"
    terms = int(conn.execute(sql.COUNT_SEARCH_TERMS, [_pattern(f.search), SEARCH_MATCHES + 1]).fetchone()[0])
    return "index" if terms <= SEARCH_MATCHES else "scan"


def _count(conn: Connection, f: AssetFilter, scope: Scope | None, search: str, indexed: set[str] | None) -> int | None:
    """How many assets ``f`` selects, up to COUNT_CAP + 1; None when not counted (a metadata
    filter; a common search text that the first SEARCH_COUNTED assets hold too rarely to reach
    the cap, whose count would read every asset). ``indexed``: the assets that hold the search
    text, when the index found them."""
    if f.metadata:
        return None
    if not search:
        where, params = _where(f, scope)
        statement = f"SELECT count(*) FROM (SELECT 1 FROM assets WHERE {' AND '.join(where)} LIMIT ?) t"
        return int(conn.execute(statement, [*params, COUNT_CAP + 1]).fetchone()[0])
    if indexed is not None:  # the assets the index let through (no more than its terms), those that hold it
        where, params = _where(f, scope, search=search)
        listed = conn.execute(f"SELECT id FROM assets WHERE {' AND '.join(where)}", params)
        return min(sum(1 for (i,) in listed if i in indexed), COUNT_CAP + 1)
    where, params = _where(f, scope)
    clause, more = _holds("a", f.search)
    statement = (
        f"SELECT a.id, CASE WHEN {clause} THEN 1 ELSE 0 END FROM "
        f"(SELECT id FROM assets WHERE {' AND '.join(where)} ORDER BY id LIMIT ?) a"
    )
    read = conn.execute(statement, [*more, *params, SEARCH_COUNTED]).fetchall()
    held = len(_holding(conn, [i for i, holds in read if holds], f.search))
    if held > COUNT_CAP:
        return COUNT_CAP + 1
    return held if len(read) < SEARCH_COUNTED else None


def list_assets(
    catalog: Catalog,
    f: AssetFilter,
    *,
    after: str | None = None,
    limit: int = 50,
    scope: Scope | None = None,
    prefix: str = "",
) -> AssetPage:
    """A page of the assets ``f`` selects, by id, after the id ``after``; each with its last write
    by a run ``scope`` sees (``prefix``: the job namespace's before a flow's namespace). A
    namespace ``scope`` does not see is not read: its page is that of a namespace with none."""
    if f.namespace not in (None, GLOBAL) and not allows(scope, f.namespace):
        return AssetPage((), None, None if f.metadata else 0)
    conn = catalog._conn
    search = _search_by(conn, f, scope, after, limit)
    # a search read in id order is checked row by row, each row of a chunk said to hold it or not
    where, params = _where(f, scope, search="" if search == "scan" else search)
    held, held_params = _holds("a", f.search) if search == "scan" else ("1 = 1", [])
    # what the SQL lets through, checked in Python: those the index found, or each chunk's
    indexed = _indexed(conn, f.search) if search == "index" else None
    found: list[Asset] = []
    cursor, scanned, more = after, 0, False
    chunk = limit + 1 if not (f.metadata or search == "scan") else SCAN_CHUNK
    while True:
        keyset = [*where, "id > ?"] if cursor is not None else where
        statement = (
            f"SELECT a.*, CASE WHEN {held} THEN 1 ELSE 0 END FROM (SELECT {sql.ASSET_COLUMNS} FROM assets "
            f"WHERE {' AND '.join(keyset)} ORDER BY id LIMIT ?) a ORDER BY a.id"
        )
        values = [*held_params, *params, *([cursor] if cursor is not None else []), chunk]
        page = conn.execute(statement, values).fetchall()
        scanned += len(page)
        holding = indexed if search != "scan" else _holding(conn, [row[0] for row in page if row[-1]], f.search)
        for *row, holds in page:
            cursor = row[0]  # the id
            if not holds or (holding is not None and row[0] not in holding):
                continue
            asset = rows.asset_from_row(row)
            if allows(scope, asset.namespace) and f.matches_metadata(asset):
                found.append(asset)
                if len(found) > limit:
                    break
        if len(found) > limit:
            more = True
            break
        if len(page) < chunk:
            break
        if scanned >= (SEARCH_BUDGET if search == "scan" else SCAN_BUDGET):  # a page cut short: the next goes on
            more = True
            break
    shown = found[:limit]
    next_after = (shown[-1].id if len(found) > limit else cursor) if more else None
    count = _count(conn, f, scope, search, indexed)
    written = last_written(conn, [a.id for a in shown], scope, prefix)
    return AssetPage(tuple(ListedAsset(a, written.get(a.id)) for a in shown), next_after, count)


def last_written(
    conn: Connection, ids: Sequence[str], scope: Scope | None = None, prefix: str = ""
) -> dict[str, datetime]:
    """Each asset's latest write by one of olbridge's runs, of those ``scope`` sees (a run's job
    namespace: ``prefix`` and its flow's namespace), as its page's Runs tab lists them."""
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    if scope is None:
        statement = (
            f"SELECT asset_id, max(used_at) FROM usages WHERE direction = 'output' AND asset_id IN ({marks}) "
            "GROUP BY asset_id"
        )
        return {i: parse_time(t, "catalog") for i, t in conn.execute(statement, list(ids)) if t}
    statement = (
        "SELECT u.asset_id, t.flow_namespace, max(u.used_at) FROM usages u JOIN task_runs t ON t.pk = u.task_run_pk "
        f"WHERE u.direction = 'output' AND u.asset_id IN ({marks}) GROUP BY u.asset_id, t.flow_namespace"
    )
    latest: dict[str, str] = {}
    for asset_id, namespace, used in conn.execute(statement, list(ids)):
        if used and scope.allows(prefix + namespace) and used > latest.get(asset_id, ""):
            latest[asset_id] = used
    return {i: parse_time(t, "catalog") for i, t in latest.items()}


@attrs.frozen
class PrefixNode:
    prefix: str
    leaf: bool  # an asset's whole id, not a prefix of others


def prefix_children(
    catalog: Catalog, prefix: str = "", *, limit: int = 50, scope: Scope | None = None
) -> list[PrefixNode]:
    """The next level of the tree of id prefixes under ``prefix``: its first ``limit`` children
    (:func:`prefix_page`)."""
    return prefix_page(catalog, prefix, limit=limit, scope=scope)[0]


def prefix_page(
    catalog: Catalog, prefix: str = "", *, resume: str | None = None, limit: int = 50, scope: Scope | None = None
) -> tuple[list[PrefixNode], str | None]:
    """At most ``limit`` children of the next level of the tree of id prefixes under ``prefix``
    (``s3://``, ``bucket/``, ``db.``, ``schema.``), from where ``resume`` says (the token the page
    before gave), found by skipping through the primary key: one probe a child (with a scope, the
    next asset it sees: the assets of other namespaces passed over in the probe); and the token
    of the next page (None: no more). A token is ``+<id>`` (after that asset) or ``*<prefix>``
    (after every id under that prefix); one that is neither, or of another prefix, is a
    ValidationError."""
    conn = catalog._conn
    out: list[PrefixNode] = []
    low, after = prefix, False  # after: ids above ``low`` (else from it on)
    if resume is not None:
        kind, rest = resume[:1], resume[1:]
        if kind not in ("+", "*") or not rest.startswith(prefix) or (rest == prefix and kind == "*"):
            raise ValidationError(
                "tree is +<id> or *<prefix> under the prefix, as the tree's next link gives it",
                rule="ui.tree",
                value=resume,
            )
        low, after = (rest, True) if kind == "+" else (rest + TOP, False)
    seen, seen_params = scope.clause("namespace") if scope is not None else ("1 = 1", [])
    statement = (
        f"SELECT id FROM assets WHERE id {{}} ? AND id < ? AND deleted_at IS NULL AND {seen} ORDER BY id LIMIT 1"
    )
    tokens: list[str] = []
    while len(out) <= limit:
        row = conn.execute(statement.format(">" if after else ">="), [low, prefix + TOP, *seen_params]).fetchone()
        if row is None:
            break
        asset_id = str(row[0])
        low, after = asset_id, True
        rest = asset_id[len(prefix) :]
        match = SEGMENT.match(rest)
        if match is None or (match.end() == len(rest) and not rest.endswith(("/", ".", ":"))):
            out.append(PrefixNode(asset_id, True))
            tokens.append("+" + asset_id)
        else:
            child = prefix + rest[: match.end()]
            out.append(PrefixNode(child, False))
            tokens.append("*" + child)
            low, after = child + TOP, False
    if len(out) > limit:
        return out[:limit], tokens[limit - 1]
    return out, None


# --- lineage -------------------------------------------------------------------------------

UP, DOWN = "upstream", "downstream"
# (the edge's column naming the asset, the one naming its neighbour) by direction; each table of
# lineage read on its own, in its index's order (an asset, then its neighbours by id), so that a
# page or a capped count reads no more edges than it needs, whatever the asset's size
_NEIGHBOUR_COLUMNS = {UP: ("downstream_id", "upstream_id"), DOWN: ("upstream_id", "downstream_id")}
_LINEAGE_TABLES = ("lineage", "external_lineage")


def _neighbour_ids(
    conn: Connection,
    table: str,
    asset_id: str,
    direction: str,
    search: str,
    scope: Scope | None,
    after: str | None,
    limit: int,
) -> list[str]:
    """The first ``limit`` distinct neighbours of ``asset_id`` in one lineage table, by id, after
    ``after``: those that are assets (of ``scope``), whose id holds ``search`` (ASCII letters in
    any case, as both engines' ``lower`` folds them)."""
    me, other = _NEIGHBOUR_COLUMNS[direction]
    statement = f"SELECT DISTINCT l.{other} FROM {table} l WHERE l.{me} = ?"
    params: list[Any] = [asset_id]
    if after is not None:
        statement += f" AND l.{other} > ?"
        params.append(after)
    if search:
        statement += f" AND lower(l.{other}) LIKE ? ESCAPE '\\'"
        params.append("%" + _like("".join(c.lower() if c.isascii() else c for c in search)) + "%")
    exists = f"SELECT 1 FROM assets a WHERE a.id = l.{other}"
    if scope is not None:
        clause, more = scope.clause("a.namespace")
        exists += f" AND {clause}"
        params += more
    statement += f" AND EXISTS ({exists}) ORDER BY l.{other} LIMIT ?"
    return [row[0] for row in conn.execute(statement, [*params, limit])]


@attrs.frozen
class Neighbours:
    ids: tuple[str, ...]
    count: int  # all of them (visible ones), capped at ``cap``


def neighbours(
    catalog: Catalog,
    asset_id: str,
    direction: str,
    *,
    limit: int = 50,
    search: str = "",
    after: str | None = None,
    scope: Scope | None = None,
    cap: int = COUNT_CAP,
) -> Neighbours:
    """An asset's direct upstream or downstream assets (of ``scope``), by id: the first ``limit``
    (after ``after``, whose ids contain ``search``), and how many there are (at most ``cap``)."""
    conn = catalog._conn

    def batch(wanted: int, since: str | None) -> list[str]:  # the first of both tables, merged
        found: set[str] = set()
        for table in _LINEAGE_TABLES:
            found.update(_neighbour_ids(conn, table, asset_id, direction, search, scope, since, wanted))
        return sorted(found)[:wanted]

    def first(wanted: int, since: str | None) -> list[str]:
        out: list[str] = []
        while len(out) < wanted:
            need = wanted - len(out)
            ids = batch(need, since)
            # the scope's SQL lets through at least what it allows (LIKE may ignore case): checked
            out += [i for i, ns in _namespaces(conn, ids).items() if allows(scope, ns)] if scope else ids
            if len(ids) < need:
                break
            since = ids[-1]
        return out

    count = len(first(cap, None))
    return Neighbours(tuple(first(limit, after)), count)


def _namespaces(conn: Connection, ids: Sequence[str]) -> dict[str, str | None]:
    """The namespace of each of ``ids`` (assets all), in their order."""
    statement = "SELECT id, namespace FROM assets WHERE id IN ({values})"
    found: dict[str, str | None] = dict(sql.in_chunks(conn, statement, ids))
    return {i: found.get(i) for i in ids}


@attrs.frozen
class GraphNode:
    id: str
    type: str
    namespace: str | None
    origin: str
    deleted: bool
    flow: str | None = None  # what wrote it last, when asked (see :func:`writers`)
    producer: str | None = None  # the producer of what wrote it last, when asked (see :func:`producers`)


@attrs.frozen
class Cluster:
    """Neighbours of ``anchor`` not drawn: ``hidden`` of them (capped), ``direction`` of it."""

    anchor: str
    direction: str
    hidden: int


@attrs.frozen
class GraphSlice:
    root: str
    nodes: tuple[GraphNode, ...]
    edges: tuple[tuple[str, str], ...]  # (upstream, downstream)
    clusters: tuple[Cluster, ...]
    truncated: bool  # the node budget was reached: not all is drawn


def graph_slice(
    catalog: Catalog,
    root: str,
    *,
    direction: str = "both",
    depth: int = 1,
    expanded: Iterable[str] = (),
    per_node: int = 12,
    max_nodes: int = 300,
    scope: Scope | None = None,
) -> GraphSlice:
    """The lineage around ``root`` to ``depth`` hops (and one hop more around each ``expanded``
    node), at most ``per_node`` neighbours of a node a side (the others a :class:`Cluster`), and
    at most ``max_nodes`` nodes in all."""
    walks = [w for w in (UP, DOWN) if direction in (w, "both")]
    seen: dict[str, None] = {root: None}
    edges: dict[tuple[str, str], None] = {}
    clusters: list[Cluster] = []
    truncated = False
    extra = set(expanded)

    def visit(node: str, walk: str) -> list[str]:
        nonlocal truncated
        found = neighbours(catalog, node, walk, limit=per_node, scope=scope, cap=per_node + COUNT_CAP)
        reached = []
        for other in found.ids:
            if other not in seen and len(seen) >= max_nodes:
                truncated = True
                break
            edges[(other, node) if walk == UP else (node, other)] = None
            if other not in seen:
                seen[other] = None
                reached.append(other)
        if found.count > len(found.ids):
            clusters.append(Cluster(node, walk, found.count - len(found.ids)))
        return reached

    for walk in walks:
        frontier = [root]
        for _ in range(depth):
            frontier = [n for node in frontier for n in visit(node, walk)]
    for node in sorted(extra & set(seen)):
        for walk in walks:
            if not any(c.anchor == node and c.direction == walk for c in clusters):
                visit(node, walk)
    return GraphSlice(root, tuple(nodes_of(catalog, list(seen))), tuple(edges), tuple(clusters), truncated)


def nodes_of(catalog: Catalog, ids: Sequence[str]) -> list[GraphNode]:
    statement = "SELECT id, type, namespace, origin, deleted_at FROM assets WHERE id IN ({values})"
    found = {
        i: GraphNode(i, kind, ns, origin, deleted is not None)
        for i, kind, ns, origin, deleted in sql.in_chunks(catalog._conn, statement, ids)
    }
    return [found[i] for i in ids if i in found]


def writers(catalog: Catalog, ids: Sequence[str], *, scope: Scope | None = None) -> dict[str, str]:
    """What last wrote each asset: the flow (``<namespace>/<flow id>``) of olbridge's latest run
    that wrote it, else a received job (``<namespace>/<name>``) that writes it (the first by
    name); one of a namespace ``scope`` does not see is :data:`ANOTHER_NAMESPACE`."""
    found: dict[str, tuple[str, str]] = {}  # id: (label, namespace)
    for asset_id, ns, name in sql.in_chunks(catalog._conn, _EXTERNAL_WRITERS, ids):
        label = f"{ns}/{name}"
        if asset_id not in found or label < found[asset_id][0]:
            found[asset_id] = (label, ns)
    # an asset's own writers come in one chunk, in time order: the latest last
    found.update((i, (f"{ns}/{flow}", ns)) for i, ns, flow, _ in sql.in_chunks(catalog._conn, _OWN_WRITERS, ids))
    return {i: label if allows(scope, ns) else ANOTHER_NAMESPACE for i, (label, ns) in found.items()}


ANOTHER_NAMESPACE = "another namespace"  # a writer or producer a token does not see, as a page names it
_EXTERNAL_WRITERS = """
    SELECT asset_id, job_namespace, job_name FROM external_usages
    WHERE direction = 'output' AND asset_id IN ({values})
"""
# each task that wrote each asset, with its latest write (kept as runs are written: a row a
# writer, not a row a write of the asset's history), latest last
_OWN_WRITERS = """
    SELECT asset_id, flow_namespace, flow_id, last_write FROM kept_writers
    WHERE last_write IS NOT NULL AND asset_id IN ({values}) ORDER BY last_write, flow_namespace, flow_id
"""


# each received job's latest run that ended (by end, then source: external_sources_job read
# backwards), and its JobEvent's row, each with its producer and last sighting; a job neither of
# which there is of, its runs that have not ended (a job's runs, in the table's key: every one read)
_LATEST_RUN_PRODUCER = """
    SELECT producer, last_seen FROM external_sources
    WHERE job_namespace = ? AND job_name = ? AND ended_at IS NOT NULL AND run_id IS NOT NULL
    ORDER BY ended_at DESC, source DESC LIMIT 1
"""
_JOB_PRODUCER = "SELECT producer, last_seen FROM external_sources WHERE source = ? AND run_day = ? AND run_id IS NULL"
_RUNNING_PRODUCERS = """
    SELECT producer, last_seen FROM external_sources
    WHERE job_namespace = ? AND job_name = ? AND ended_at IS NULL AND run_id IS NOT NULL
"""
# each asset's latest own write, by usages_asset (its outputs in time order: the last)
_OWN_WRITES = """
    WITH wanted (id) AS (VALUES {values})
    SELECT w.id, (
        SELECT u.used_at FROM usages u WHERE u.asset_id = w.id AND u.direction = 'output'
        ORDER BY u.used_at DESC LIMIT 1
    ) FROM wanted w
"""


def producers(catalog: Catalog, ids: Sequence[str], own: str, *, scope: Scope | None = None) -> dict[str, str]:
    """The producer (OpenLineage's ``producer``) of what last wrote each asset: ``own`` (olbridge's)
    when the latest write was one of olbridge's runs, else that of the latest seen of the latest
    run that ended (by its end) of each received job that writes it, and of the job's JobEvent (a
    job with neither: of its runs not ended); :data:`ANOTHER_NAMESPACE`, a job of a namespace
    ``scope`` does not see; an asset nothing wrote has none. A job's producer is read once, a
    row or two however many runs it kept."""
    conn = catalog._conn
    jobs: dict[tuple[str, str], tuple[str, str] | None] = {}  # each job's (last seen, producer)
    found: dict[str, tuple[str, str]] = {}  # id: (when, producer)
    for asset_id, ns, name in sql.in_chunks(conn, _EXTERNAL_WRITERS, ids):
        if (ns, name) not in jobs:
            jobs[ns, name] = _job_producer(conn, ns, name)
        latest = jobs[ns, name]
        if latest is not None and (asset_id not in found or latest[0] > found[asset_id][0]):
            found[asset_id] = (latest[0], latest[1] if allows(scope, ns) else ANOTHER_NAMESPACE)
    for asset_id, written in sql.in_chunks(conn, _OWN_WRITES, ids, mark="(?)"):
        if written and (asset_id not in found or written >= found[asset_id][0]):
            found[asset_id] = (written, own)
    return {asset_id: producer for asset_id, (_, producer) in found.items()}


def _job_producer(conn: Connection, namespace: str, name: str) -> tuple[str, str] | None:
    """A received job's producer and when it was seen: its latest run that ended, or its
    JobEvent, the later seen (a job with neither: its runs not ended, the latest seen)."""
    source = f"job:{namespace}/{name}"
    rows = [
        *conn.execute(_LATEST_RUN_PRODUCER, (namespace, name)),
        *conn.execute(_JOB_PRODUCER, (source, run_day(source))),
    ]
    if not rows:
        rows = conn.execute(_RUNNING_PRODUCERS, (namespace, name)).fetchall()
    return max(((seen, producer) for producer, seen in rows), default=None)


# --- runs ----------------------------------------------------------------------------------


@attrs.frozen
class AssetRun:
    direction: str  # "input" | "output" | "unwritten" (an own run that was to write it, and did not)
    run: RunView


# an asset's newest uses in one direction before a (time, run) key, by usages_asset (asset,
# direction, time, run): a page of its index, however many runs have used the asset
_OWN_USES = """
    SELECT u.task_run_pk, u.used_at FROM usages u
    WHERE u.asset_id = ? AND u.direction = ? AND (u.used_at, u.task_run_pk) < (?, ?)
    ORDER BY u.used_at DESC, u.task_run_pk DESC LIMIT ?
"""
# the own runs that were to write an asset and did not (failed, skipped, ...), newest first by
# start: unwritten_outputs_asset (asset, run) finds them, a few an asset (failures, skips)
_OWN_UNWRITTEN = """
    SELECT o.task_run_pk FROM unwritten_outputs o JOIN task_runs t ON t.pk = o.task_run_pk
    WHERE o.asset_id = ? ORDER BY t.started_at DESC, t.pk DESC LIMIT ?
"""
# the received jobs that used an asset, each with the end of its latest run that ended (NULL: none
# ended), and whether one of its runs has not ended, by external_sources_job (job, end): two looks
# a job (a JobEvent's row is no run)
_EXTERNAL_JOBS = """
    SELECT u.job_namespace, u.job_name, u.direction, (
        SELECT s.ended_at FROM external_sources s
        WHERE s.job_namespace = u.job_namespace AND s.job_name = u.job_name AND s.ended_at IS NOT NULL
          AND s.run_id IS NOT NULL
        ORDER BY s.ended_at DESC LIMIT 1
    ), EXISTS (
        SELECT 1 FROM external_sources s
        WHERE s.job_namespace = u.job_namespace AND s.job_name = u.job_name AND s.ended_at IS NULL
          AND s.run_id IS NOT NULL
    ) FROM external_usages u WHERE u.asset_id = ?
"""
JOBS_AT_MOST = 20  # received jobs whose runs an asset's list reads: the latest used
JOBS_LOOKED_AT = 1000  # received jobs of an asset whose latest run is looked up to find them, at most


def asset_runs(
    runs: Runs, asset_id: str, *, limit: int = 50, scope: Scope | None = None, direction: str | None = None
) -> list[AssetRun]:
    """The latest runs that read or wrote an asset (``direction``: ``input`` or ``output`` only),
    olbridge's and external ones, newest first (and, past ``limit``, its newest write and newest
    run that was to write it and did not, where later reads left them out): each direction's
    newest own uses, the own runs that were to write it and did not (``unwritten``: a failure its
    health names, with all the rest), and the newest runs of each received job that used it (of
    the :data:`JOBS_AT_MOST` latest used: :func:`_latest_used`), each read a page at a time by
    its index, so that the list costs what it shows, not the asset's history. Each run is the
    token's to see (``scope``), and without its facets (a list shows none)."""
    conn = runs.catalog._conn
    directions = ("input", "output") if direction is None else (direction,)
    found = [run for way in directions for run in _own_uses(runs, asset_id, way, limit, scope)]
    if direction is None:  # past those of namespaces the token does not see, 20 pages at most
        pks = [pk for (pk,) in conn.execute(_OWN_UNWRITTEN, [asset_id, limit if scope is None else limit * 20])]
        stored = runs.catalog.task_runs_by_pk(pks)
        views = [runs._own(stored[pk], facets=False) for pk in pks if pk in stored]
        found += [AssetRun("unwritten", view) for view in views if allows(scope, view.job_namespace)][:limit]
    # the jobs of the token's namespaces only, before the bound (others' jobs took its places)
    statement, params = _EXTERNAL_JOBS, [asset_id]
    if direction is not None:
        statement, params = statement + " AND u.direction = ?", [*params, direction]
    if scope is not None:
        seen, patterns = scope.clause("u.job_namespace", global_=False)
        statement, params = f"{statement} AND {seen}", [*params, *patterns]
    order = " ORDER BY u.job_namespace, u.job_name, u.direction"
    jobs = conn.execute(f"{statement}{order} LIMIT ?", [*params, JOBS_LOOKED_AT]).fetchall()
    for job_ns, job_name, way, _ended, _running in _latest_used(jobs)[:JOBS_AT_MOST]:
        job = RunFilter(job=job_name, namespace=job_ns, origin=EXTERNAL)
        newest, _ = _external_newest(runs, job, None, limit, scope, passing=False)
        found += [AssetRun(way, view) for _, view in newest]
    found.sort(key=lambda r: r.run.sort_key, reverse=True)
    shown = found[:limit]
    if direction is None:
        # the newest run that wrote it, and the newest that was to and did not, stay however many
        # reads came after them: the last run its health names is among them
        for way in ("output", "unwritten"):
            latest = next((r for r in found if r.direction == way), None)
            if latest is not None and latest not in shown:
                shown.append(latest)
        shown.sort(key=lambda r: r.run.sort_key, reverse=True)
    return shown


def _latest_used(jobs: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """An asset's received jobs (:data:`_EXTERNAL_JOBS`'s rows), the latest used first: those with a
    run not ended (they run now), then by their latest run's end, the latest first, then those
    with no run kept (a JobEvent's alone, or runs retention deleted); then by name."""
    ordered = sorted(jobs, key=lambda job: (job[0], job[1], job[2]))
    ordered.sort(key=lambda job: str(job[3] or ""), reverse=True)
    ordered.sort(key=lambda job: 0 if job[4] else 1 if job[3] is not None else 2)
    return ordered


def _own_uses(runs: Runs, asset_id: str, direction: str, limit: int, scope: Scope | None) -> list[AssetRun]:
    """The runs of an asset's newest ``limit`` own uses in one direction that ``scope`` lets
    through, newest first: a page of :data:`_OWN_USES` at a time (then larger ones, with a scope
    that may pass over runs of other namespaces), at most :data:`SCAN_BUDGET` uses passed over."""
    found: list[AssetRun] = []
    key: tuple[str, int] = (TOP, 1 << 62)
    chunk, scanned = limit, 0
    while len(found) < limit and scanned < SCAN_BUDGET:
        page = runs.catalog._conn.execute(_OWN_USES, [asset_id, direction, *key, chunk]).fetchall()
        scanned += len(page)
        stored = runs.catalog.task_runs_by_pk([pk for pk, _ in page])
        for pk, _ in page:
            if pk in stored and allows(scope, (view := runs._own(stored[pk], facets=False)).job_namespace):
                found.append(AssetRun(direction, view))
        if len(page) < chunk:
            break
        key, chunk = (page[-1][1], page[-1][0]), min(chunk * 2, SCAN_CHUNK)
    return found[:limit]


@attrs.frozen
class RunPage:
    runs: tuple[RunView, ...]
    next: str | None  # where the next page starts (``before`` of :func:`recent_runs`); None: no more


LAST_PK = (1 << 63) - 1  # the largest key a run may have


def run_key(text: str) -> RunKey:
    """A page's ``next`` (``<start>|<origin>|<pk or source>``) read back; ValueError: not one."""
    start, origin, tie = [*text.split("|", 2), "", ""][:3]
    if origin == OWN and tie.isascii() and tie.isdigit() and len(tie) <= 19 and int(tie) <= LAST_PK:
        return start, origin, f"{int(tie):020d}"
    if origin == EXTERNAL and tie:
        return start, origin, tie
    raise ValueError(text)


def _key_text(key: RunKey) -> str:
    start, origin, tie = key
    return f"{start}|{origin}|{int(tie) if origin == OWN else tie}"


def recent_runs(
    runs: Runs, filters: RunFilter, *, before: str | None = None, limit: int = 50, scope: Scope | None = None
) -> RunPage:
    """A page of runs, newest first (by start, then olbridge's before external ones, then by
    their keys), olbridge's and external ones. ``before`` (a page's ``next``) is the place of the
    last run shown, ``<start>|<origin>|<pk or source>``: the page holds the runs after it, so a
    run written meanwhile never shows twice nor pushes another off the pages. Each side is read
    newest first by its start index, a page at a time, passing over at most SCAN_BUDGET runs its
    filters leave out: the list of a catalog of millions of runs costs what its page does (a
    page whose side passed over that many ends where it stopped, its ``next`` there).

    A token's page never ends at a run it does not see: where the last run a side passed over is
    another namespace's, the side reads on, by the namespace indexes, to the first run past it of
    a namespace the token sees (shown if the filters select it) and ends there, or, where there
    is none, ends with no more. So ``next`` is always the place of a run the token sees: it names
    no other namespace's run (its run id), nor dates it (its start), nor gives its key (a number
    the catalog counts up, so how many runs there were); and each page goes on past the runs the
    one before passed over, however many of another namespace's lie together. (A coarser place,
    their start alone, still dated them; and where more of them than a page passes over shared
    one start, the next page could go on only from one of them, by its run id.) A namespace
    ``scope`` does not see is not read: its page is that of a namespace with no runs."""
    if filters.namespace is not None and not allows(scope, filters.namespace):
        return RunPage((), None)
    after = run_key(before) if before else None
    wanted = limit + 1
    found: list[tuple[RunKey, RunView]] = []
    reached: list[RunKey] = []  # where a side stopped passing over runs: nothing older of it was read
    for origin, newest in ((OWN, _own_newest), (EXTERNAL, _external_newest)):
        if filters.origin in (None, origin):
            side, stopped = newest(runs, filters, after, wanted, scope)
            found += side
            reached += [stopped] if stopped is not None else []
    found.sort(key=lambda item: item[0], reverse=True)
    if reached:
        cutoff = max(reached)
        found = [(key, view) for key, view in found if key >= cutoff]
        if len(found) <= limit:
            return RunPage(tuple(view for _, view in found), _key_text(cutoff))
    shown = found[:limit]
    following = _key_text(shown[-1][0]) if len(found) > limit and shown else None
    return RunPage(tuple(view for _, view in shown), following)


_START = "coalesce(started_at, first_seen)"


def _external_newest(
    runs: Runs,
    filters: RunFilter,
    after: RunKey | None,
    wanted: int,
    scope: Scope | None,
    *,
    passing: bool = True,
) -> tuple[list[tuple[RunKey, RunView]], RunKey | None]:
    """External runs newest first, after the place ``after``: the first ``wanted`` the filters
    select, read by the start index (a namespace's by the namespace's); with a filter the index
    cannot take (a job, a state, a token's namespaces), of the first SCAN_BUDGET runs after
    ``after`` only, and then the place of the last of those where there were that many (else
    None), or, where that run is one ``scope`` does not see, of the first run past it that it
    sees (:func:`_external_past_unseen`). Without ``passing``, the filters go to the database as
    they are (one job's runs, read by the jobs' index)."""
    where, params = ["run_id IS NOT NULL"], []
    if after is not None and after[1] == EXTERNAL:
        where.append(f"({_START}, source) < (?, ?)")
        params += [after[0], after[2]]
    elif after is not None:  # olbridge's runs of a start come first: every external run of it is after
        where.append(f"{_START} <= ?")
        params.append(after[0])
    for value, condition in [
        (format_time(filters.since) if filters.since else None, f"{_START} >= ?"),
        (format_time(filters.until) if filters.until else None, f"{_START} < ?"),
        (filters.namespace, "job_namespace = ?"),  # by external_sources_namespace_started
    ]:
        if value is not None:
            where.append(condition)
            params.append(value)
    sifted, sift_params = [], []
    for value, condition in [
        (filters.job, "job_name = ?"),
        (filters.state, "state = ?"),
    ]:
        if value is not None:
            sifted.append(condition)
            sift_params.append(value)
    if scope is not None:
        clause, more = scope.clause("job_namespace", global_=False)
        sifted.append(clause)
        sift_params += more
    order = f"ORDER BY {_START} DESC, source DESC"
    passed = f"SELECT * FROM external_sources WHERE {' AND '.join(where)} {order} LIMIT {SCAN_BUDGET}"
    if not sifted or not passing:
        statement = f"SELECT {sql_received.EXTERNAL_RUN_COLUMNS} FROM external_sources "
        statement += f"WHERE {' AND '.join([*where, *sifted])} {order} LIMIT ?"
        views = runs._external(statement, [*params, *sift_params, wanted], facets=False)
        return [(external_key(v), v) for v in views if allows(scope, v.job_namespace)], None
    statement = (
        f"SELECT {sql_received.EXTERNAL_RUN_COLUMNS} FROM ({passed}) AS s WHERE {' AND '.join(sifted)} {order} LIMIT ?"
    )
    views = runs._external(statement, [*params, *sift_params, wanted], facets=False)
    out = [(external_key(v), v) for v in views if allows(scope, v.job_namespace)]
    if len(out) >= wanted:
        return out, None
    last = runs.catalog._conn.execute(
        f"SELECT {_START}, source, job_namespace, count(*) OVER () FROM ({passed}) AS s "
        f"ORDER BY {_START}, source LIMIT 1",
        params,
    ).fetchone()
    if last is None or last[3] < SCAN_BUDGET:
        return out, None
    if scope is None or scope.allows(last[2]):
        return out, (str(last[0] or ""), EXTERNAL, str(last[1]))
    return _external_past_unseen(runs, filters, (str(last[0] or ""), str(last[1])), out, scope, sifted, sift_params)


def _external_past_unseen(
    runs: Runs,
    filters: RunFilter,
    stopped: tuple[str, str],
    out: list[tuple[RunKey, RunView]],
    scope: Scope,
    sifted: list[str],
    sift_params: list[Any],
) -> tuple[list[tuple[RunKey, RunView]], RunKey | None]:
    """External runs read up to ``stopped`` (a start and source), the place of a run ``scope``
    does not see, ended instead at the first run past it that ``scope`` sees, with it where the
    filters (``sifted``) select it: read by external_sources_namespace_started, a probe for each
    job namespace the token sees, whatever lies between (not given away: the place of a run it
    sees is). None: it sees none past there (since ``filters.since``), no more."""
    conn = runs.catalog._conn
    if filters.namespace is not None:
        namespaces = [filters.namespace] if scope.allows(filters.namespace) else []
    else:
        namespaces = namespaces_seen(conn, "external_sources", "job_namespace", scope.patterns, scope.allows)
    since = [format_time(filters.since)] if filters.since else []
    statement = (
        f"SELECT {_START}, source FROM external_sources WHERE run_id IS NOT NULL AND job_namespace = ? "
        f"AND ({_START}, source) < (?, ?){f' AND {_START} >= ?' if since else ''} "
        f"ORDER BY {_START} DESC, source DESC LIMIT 1"
    )
    first = newest_of(conn, statement, namespaces, [*stopped, *since])
    if first is None:
        return out, None
    start, source = str(first[0]), str(first[1])
    statement = (
        f"SELECT {sql_received.EXTERNAL_RUN_COLUMNS} FROM external_sources "
        f"WHERE {' AND '.join(['run_id IS NOT NULL', 'source = ?', *sifted])}"
    )
    views = runs._external(statement, [source, *sift_params], facets=False)
    return out + [(external_key(v), v) for v in views], (start, EXTERNAL, source)


def _own_newest(
    runs: Runs, filters: RunFilter, after: RunKey | None, wanted: int, scope: Scope | None
) -> tuple[list[tuple[RunKey, RunView]], RunKey | None]:
    """Own runs newest first, after the place ``after``, that the filters select: the first
    ``wanted`` of them, read a page at a time by the ``task_runs_started`` index (at most
    SCAN_BUDGET rows passed over); and, when the budget ended the scan first, the place of the
    last run it passed over, or, where that is a run ``scope`` does not see, of the first run past
    it that it sees (:func:`_own_past_unseen`) (else None)."""
    conditions = own_conditions(runs.converter.options.job_namespace_prefix, filters)
    if conditions is None:
        return [], None
    where, params = conditions
    statement = own_newest(["(t.started_at, t.pk) < (?, ?)", *where])
    out: list[tuple[RunKey, RunView]] = []
    # olbridge's runs of a start come before external ones: after an external run, none of its start
    key: tuple[str, int] = (TOP, 1 << 62)
    if after is not None:
        key = (after[0], int(after[2])) if after[1] == OWN else (after[0], 0)
    scanned, seen = 0, True
    sifted = scope is not None  # in Python: a token's namespaces, as the view names them
    # a page's worth first (most runs pass the usual filters), then more at a time up to SCAN_CHUNK
    chunk = min(wanted, SCAN_CHUNK) if sifted else wanted
    while len(out) < wanted and scanned < SCAN_BUDGET:
        page = runs.catalog._conn.execute(statement, [*key, *params, chunk]).fetchall()
        scanned += len(page)
        for row, run in zip(page, history.with_usages(runs.catalog._conn, page), strict=True):
            view = runs._own(run, facets=False)
            seen = allows(scope, view.job_namespace)
            if seen:
                out.append((own_key(view, row[0]), view))
        if len(page) < chunk:
            return out, None
        chunk = min(chunk * 2, SCAN_CHUNK) if sifted else chunk
        key = (page[-1][7], page[-1][0])
    if len(out) >= wanted:
        return out, None
    if seen or scope is None:
        return out, (str(key[0]), OWN, f"{key[1]:020d}")
    return _own_past_unseen(runs, filters, (str(key[0]), int(key[1])), out, scope, conditions)


def _own_past_unseen(
    runs: Runs,
    filters: RunFilter,
    stopped: tuple[str, int],
    out: list[tuple[RunKey, RunView]],
    scope: Scope,
    conditions: tuple[list[str], list[Any]],
) -> tuple[list[tuple[RunKey, RunView]], RunKey | None]:
    """Own runs read up to ``stopped`` (a start and key), the place of a run ``scope`` does not
    see, ended instead at the first run past it that ``scope`` sees, with it where the filters
    (``conditions``) select it: read by task_runs_namespace_started, a probe for each flow
    namespace the token sees, whatever lies between (not given away: the place of a run it sees
    is). None: it sees none past there (since ``filters.since``), no more."""
    conn, prefix = runs.catalog._conn, runs.converter.options.job_namespace_prefix
    if filters.namespace is not None:
        namespace = filters.namespace
        namespaces = [namespace[len(prefix) :]] if namespace.startswith(prefix) and scope.allows(namespace) else []
    else:
        namespaces = namespaces_seen(conn, "task_runs", "flow_namespace", scope.patterns, scope.allows, prefix=prefix)
    since = [format_time(filters.since)] if filters.since else []
    statement = (
        "SELECT started_at, pk FROM task_runs WHERE flow_namespace = ? AND (started_at, pk) < (?, ?)"
        f"{' AND started_at >= ?' if since else ''} ORDER BY started_at DESC, pk DESC LIMIT 1"
    )
    first = newest_of(conn, statement, namespaces, [*stopped, *since])
    if first is None:
        return out, None
    start, pk = str(first[0]), int(first[1])
    where, params = conditions
    page = conn.execute(own_newest(["t.pk = ?", *where]), [pk, *params, 1]).fetchall()
    for row, run in zip(page, history.with_usages(conn, page), strict=True):
        view = runs._own(run, facets=False)
        out.append((own_key(view, row[0]), view))
    return out, (start, OWN, f"{pk:020d}")


@attrs.frozen
class RawEvent:
    event_time: str
    event_type: str | None
    body: str


def raw_events(catalog: Catalog, run_id: str, *, limit: int = 100) -> list[RawEvent]:
    """The events received for an external run, as they came, in event time order."""
    statement = (
        "SELECT event_time, event_type, body FROM received_events WHERE source = ? ORDER BY event_time, pk LIMIT ?"
    )
    for source in run_sources(run_id):  # as Runs.get finds the run
        rows = catalog._conn.execute(statement, [source, limit]).fetchall()
        if rows:
            return [RawEvent(*row) for row in rows]
    return []


__all__ = [
    "COUNT_CAP",
    "DOWN",
    "GLOBAL",
    "UP",
    "AssetFilter",
    "AssetPage",
    "AssetRun",
    "Cluster",
    "GraphNode",
    "GraphSlice",
    "ListedAsset",
    "Neighbours",
    "PrefixNode",
    "RawEvent",
    "RunKey",
    "RunPage",
    "Scope",
    "allows",
    "asset_runs",
    "graph_slice",
    "list_assets",
    "neighbours",
    "nodes_of",
    "prefix_children",
    "prefix_page",
    "producers",
    "raw_events",
    "recent_runs",
    "run_key",
    "writers",
]
