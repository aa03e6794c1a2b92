"""What each page shows, as data: one function a page, taking the request's query and returning
the JSON twin (camelCase keys) that the page's template draws. Reads go through the catalog's
query API (:mod:`bridge.catalog.browse`, :class:`~bridge.catalog.Catalog`); no SQL here."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog import Catalog
from bridge.catalog import browse as b
from bridge.catalog import health as health_queries
from bridge.catalog.health import AssetHealth
from bridge.catalog.lineage_steps import LineageSteps, lineage_steps
from bridge.catalog.runs import EXTERNAL, OWN, STATES, RunFilter, Runs, RunView
from bridge.catalog.writes import failed_outputs
from bridge.errors import NotFoundError, ValidationError
from bridge.mapping import Resolver
from bridge.model import Assertion, Asset, format_time, parse_time, utcnow
from bridge.model.asset_types import SHORT_TYPES, normalize_type
from bridge.model.health import FreshnessRule, Health, Selector, masked
from bridge.model.ids import check_namespace
from bridge.web.layout import layout

Query = Mapping[str, str]
PAGE = 50
TABS = ("overview", "dependencies", "runs", "columns", "history")
DIRECTIONS = {"up": "upstream", "down": "downstream", "both": "both"}
GROUPS = ("", "namespace", "type", "origin", "flow", "producer")
MAX_DEPTH = 6


def _time(moment: datetime | None) -> str | None:
    return format_time(moment) if moment is not None else None


def _choice(query: Query, name: str, allowed: tuple[str, ...] | dict[str, str], default: str) -> str:
    value = query.get(name, default) or default
    if value not in allowed:
        raise ValidationError(f"{name} must be one of {', '.join(allowed)}", rule=f"ui.{name}", value=value)
    return value


def _int(query: Query, name: str, default: int, low: int, high: int) -> int:
    text = query.get(name, "") or str(default)
    try:
        value = int(text)
    except ValueError:
        raise ValidationError(f"{name} must be a whole number", rule=f"ui.{name}", value=text) from None
    return min(max(value, low), high)


def visible_asset(catalog: Catalog, asset_id: str, scope: b.Scope | None) -> Asset:
    asset = catalog.get_asset(asset_id)
    if asset is None or not b.allows(scope, asset.namespace):
        raise NotFoundError(f"no asset with id {asset_id!r}")
    return asset


# the received facets a token that sees some namespaces is not shown: a dataset's column lineage
# names its input datasets, of any namespace (the Columns tab shows the edges it may see)
UNSCOPED_FACETS = frozenset({"columnLineage"})


def shown(asset: Asset, scope: b.Scope | None) -> Asset:
    """``asset`` as ``scope`` may see it: without :data:`UNSCOPED_FACETS`."""
    if scope is None or UNSCOPED_FACETS.isdisjoint(asset.received_facets):
        return asset
    facets = {key: facet for key, facet in asset.received_facets.items() if key not in UNSCOPED_FACETS}
    return attrs.evolve(asset, received_facets=facets)


def checks(assertions: Sequence[Assertion]) -> str | None:
    """``failing`` when one of an asset's latest data-quality assertions (its checks: dbt's
    tests, a run's, a received event's ``dataQualityAssertions``) failed, ``passing`` when all
    passed, None when it has none."""
    if not assertions:
        return None
    return "passing" if all(a.success for a in assertions) else "failing"


HEALTH_UPSTREAM = 200  # assets a page judges for its at-risk flags, with those upstream, at most


def judged(
    catalog: Catalog, selectors: Sequence[Selector], ids: Iterable[str], scope: b.Scope | None
) -> tuple[dict[str, dict[str, Any]], bool]:
    """The health of the assets of ``ids`` now, by id, each judged from its own facts and those
    upstream of it, as ``assets show`` judges one; and whether their at-risk flags were worked
    out. A page stays fast whatever the catalog: where they and the assets upstream of them are
    more than :data:`HEALTH_UPSTREAM`, they are judged without at-risk flags (None); where even
    their own facts cannot be read alone (a received run named under several jobs), not at all
    (an empty answer)."""
    wanted = list(ids)
    if not wanted:
        return {}, True
    now = utcnow()
    found = catalog.health_of_few(now, selectors, wanted, at_most=HEALTH_UPSTREAM)
    flagged = found is not None
    if found is None:
        found = catalog.health_of_few(now, selectors, wanted, paths=False)
    if found is None and _small(catalog):  # a received run named under several jobs: the whole catalog's facts
        flagged, found = True, catalog.health(now, selectors, ids=wanted)
    return verdicts(catalog, found or [], scope, flagged), flagged


def health_marks(
    catalog: Catalog, selectors: Sequence[Selector], ids: Iterable[str], scope: b.Scope | None
) -> tuple[dict[str, tuple[str, ...]], bool]:
    """The health marks of a graph's assets now, by id (:func:`judged`): ``FAIL`` or ``WARN``,
    and ``at-risk``; an asset PASS or UNKNOWN and not at risk has none. And whether the at-risk
    flags were worked out (as a page's: :data:`HEALTH_UPSTREAM`)."""
    found, flagged = judged(catalog, selectors, ids, scope)
    marks = {
        asset_id: (*((h["health"],) if h["health"] in STATES_SHOWN else ()), *(("at-risk",) if h["atRisk"] else ()))
        for asset_id, h in found.items()
    }
    return {asset_id: m for asset_id, m in marks.items() if m}, flagged


def _small(catalog: Catalog) -> bool:
    """Whether the catalog holds few enough assets (:data:`HEALTH_PAGE_AT_MOST`) that a page may
    judge them all."""
    held = b.list_assets(catalog, b.AssetFilter(), limit=1).count
    return held is not None and held <= HEALTH_PAGE_AT_MOST


def verdicts(
    catalog: Catalog, found: Sequence[AssetHealth], scope: b.Scope | None, flagged: bool = True
) -> dict[str, dict[str, Any]]:
    """Each asset's health for a page, by id: its health, reasons, and the path from the cause of
    its at-risk flag (``atRisk`` None: not worked out), which names only the assets ``scope`` sees
    (None in the place of another's; each asset on the paths read once), and reasons that name
    only the jobs of its namespaces (:func:`~bridge.model.health.masked`)."""
    hidden: set[str] = set()
    if scope is not None:
        on_paths = {asset_id for h in found for asset_id in h.path}
        hidden = {asset_id for asset_id in on_paths if not _sees(catalog, asset_id, scope)}
    return {
        h.asset_id: {
            "health": h.health.value,
            "reasons": [masked(r, scope.allows) for r in h.verdict.reasons] if scope else list(h.verdict.reasons),
            "atRisk": h.at_risk if flagged else None,
            "pathToCause": [None if asset_id in hidden else asset_id for asset_id in h.path],
            # the freshness rule it is judged by, and where it comes from (as assets show says)
            "freshness": _freshness(h.verdict.rule),
        }
        for h in found
    }


# the built-in types by their names in any case: `table` finds the Tables (a custom dotted type is
# matched as written)
_SHORT_TYPES = {t.lower(): t for t in SHORT_TYPES}


def _type_named(text: str) -> str:
    """A type asked for: a short name in any case, else as the command line reads one (a bad one a
    400, not an empty list)."""
    return normalize_type(_SHORT_TYPES.get(text.lower(), text))


def _freshness(rule: FreshnessRule | None) -> dict[str, Any] | None:
    return None if rule is None else {**rule.to_json(), "says": rule.describe()}


def _sees(catalog: Catalog, asset_id: str, scope: b.Scope) -> bool:
    asset = catalog.get_asset(asset_id)
    return asset is not None and b.allows(scope, asset.namespace)


def asset_row(
    item: b.ListedAsset, health: dict[str, Any] | None = None, assertions: Sequence[Assertion] = ()
) -> dict[str, Any]:
    a = item.asset
    return {
        "health": health,
        "checks": checks(assertions),
        "id": a.id,
        "type": a.type,
        "namespace": a.namespace,
        "origin": a.origin.value,
        "updated": _time(a.updated_at),
        "lastWritten": _time(item.last_written),
    }


# --- /assets -------------------------------------------------------------------------------


# a page's ``meta`` filters, given as a repeated parameter, joined into one query value: by a NUL,
# which no value holds (an address with one is refused), so that a filter's value may hold any
# other text (``&&`` too: they were joined by it, and a value holding it was split in two)
REPEATED = "\x00"


def metadata_filters(query: Query) -> list[str]:
    """The ``meta`` filters of a query (each ``key=value``), in their order."""
    return [pair for pair in query.get("meta", "").split(REPEATED) if pair.strip()]


def asset_filter(query: Query) -> b.AssetFilter:
    metadata = []
    for pair in metadata_filters(query):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValidationError("a metadata filter is key=value", rule="ui.meta", value=pair)
        metadata.append((key.strip(), value.strip()))
    namespace = query.get("namespace")
    origin = query.get("origin") or None
    if origin is not None and origin not in ("declared", "auto", "external"):
        raise ValidationError("origin is declared, auto or external", rule="ui.origin", value=origin)
    return b.AssetFilter(
        search=query.get("q", "").strip(),
        types=tuple(_type_named(t) for t in [query.get("type", "").strip()] if t),
        namespace=(b.GLOBAL if namespace == "Global" else check_namespace(namespace.strip() or None))
        if namespace
        else None,
        origin=origin,
        prefix=query.get("prefix", ""),
        metadata=tuple(metadata),
    )


def assets_page(
    catalog: Catalog,
    query: Query,
    scope: b.Scope | None,
    selectors: Sequence[Selector] = (),
    resolver: Resolver | None = None,
    prefix: str = "",
) -> dict[str, Any]:
    f = asset_filter(query)
    after = query.get("after") or None
    page = b.list_assets(catalog, f, after=after, limit=PAGE, scope=scope, prefix=prefix)
    tree, tree_next = b.prefix_page(catalog, f.prefix, resume=query.get("tree") or None, scope=scope)
    ids = [item.asset.id for item in page.assets]
    health, flagged = judged(catalog, selectors, ids, scope)
    latest = catalog.latest_checks(ids, utcnow())
    named = (
        [i for i in catalog.named_in_openlineage(f.search, resolver) if scope is None or _sees(catalog, i, scope)]
        if resolver is not None and f.search
        else []
    )
    return {
        "riskFlagged": flagged,
        # judged at all: not where a received run's events named several jobs and the catalog is
        # past what a page judges whole (each asset's health null then)
        "healthJudged": bool(health) or not ids,
        "namedInOpenLineage": named,
        "filters": {
            **{k: query.get(k, "") for k in ("q", "type", "namespace", "origin", "prefix")},
            "meta": metadata_filters(query),  # a list: each key=value
        },
        "assets": [asset_row(item, health.get(item.asset.id), latest.get(item.asset.id, ())) for item in page.assets],
        "count": page.count,
        "countCapped": page.count is not None and page.count > b.COUNT_CAP,
        "after": after,
        "next": page.after,
        "tree": [{"prefix": n.prefix, "leaf": n.leaf} for n in tree],
        "treeNext": tree_next,  # the tree's next link's ``tree`` (None: the level ends here)
    }


# --- /health ------------------------------------------------------------------------------

STATES_SHOWN = ("FAIL", "WARN")  # the health page's states unless ``state`` says others
# assets the health page judges at a request without a namespace, at most (the catalog's, counted
# as the assets page counts them, whoever asks: beyond, every asset judged would take seconds a
# request; olbridge health does it)
HEALTH_PAGE_AT_MOST = b.COUNT_CAP


def health_page(
    catalog: Catalog, query: Query, scope: b.Scope | None, selectors: Sequence[Selector] = ()
) -> dict[str, Any]:
    """Every asset's health now (those of ``namespace``: judged alone, as ``olbridge health
    --namespace`` judges them), counted by health; those of the states asked for (``state``,
    comma-separated; FAIL and WARN when not given; given naming none, a bad value), at risk or not (``risk=1``: only
    those at risk), 50 a page by id (``after``). A token's page counts and shows its namespaces'
    assets alone. Without a namespace, on a catalog of more than :data:`HEALTH_PAGE_AT_MOST`
    assets, nothing is judged (``tooMany``): the page asks for a namespace; unless a health watch
    keeps each asset's health, when the page counts and lists them as it keeps them (``kept``,
    :func:`_kept_health_page`; but for ``risk=1``, which it keeps no flags for). A namespace's assets
    are judged from their own facts and those upstream of them (20,000 in all at most; past
    that, without at-risk flags: ``riskFlagged`` false), never from the whole catalog's; a
    namespace the token does not see is not read: its page is that of a namespace with no
    assets."""
    states = [h.value for h in Health.parse_list(query.get("state", ",".join(STATES_SHOWN)), "state")]
    namespace = check_namespace(query.get("namespace", "").strip() or None)  # a bad one: a 400, as the CLI's 2
    only_at_risk = query.get("risk", "") == "1"
    after = query.get("after") or None
    filters = {"state": ",".join(states), "namespace": namespace or "", "risk": "1" if only_at_risk else ""}
    now, flagged = utcnow(), True
    if namespace is None:  # every asset judged: not at a request past a size (the catalog's, whoever asks)
        if not _small(catalog):
            if only_at_risk or not catalog.health_watch_live():
                return _too_many(filters, HEALTH_PAGE_AT_MOST)
            return _kept_health_page(catalog, filters, states, after, scope, selectors)
        judged_now = catalog.health(now, selectors)
    elif not b.allows(scope, namespace):  # not judged: past what a request judges, ``tooMany`` told its size
        judged_now = []
    else:  # the namespace's assets from their own facts and those upstream; else without flags
        few = catalog.health_of_few(now, selectors, namespace=namespace)
        if few is None:
            flagged, few = False, catalog.health_of_few(now, selectors, namespace=namespace, paths=False)
        if few is None and _small(catalog):  # a received run named under several jobs: the whole catalog's facts
            flagged, few = True, catalog.health(now, selectors, namespace=namespace)
        if few is None:
            return _too_many(filters, health_queries.SOME_AT_MOST)
        judged_now = few
    found = [h for h in judged_now if b.allows(scope, h.namespace)]
    counts = {h.value: 0 for h in sorted(Health, key=lambda h: -h.rank)}  # the worst first, as shown
    for h in found:
        counts[h.health.value] += 1
    shown = [
        h
        for h in found
        if h.health.value in states and (not only_at_risk or h.at_risk) and (after is None or h.asset_id > after)
    ]
    page = shown[:PAGE]
    shown_health = verdicts(catalog, page, scope, flagged)
    return {
        "filters": filters,
        "tooMany": None,
        "kept": False,
        "riskFlagged": flagged,
        "counts": counts,
        "atRisk": sum(1 for h in found if h.at_risk) if flagged else None,
        "assets": [
            {"id": h.asset_id, "type": h.type, "namespace": h.namespace, **shown_health[h.asset_id]} for h in page
        ],
        "after": after,
        "next": page[-1].asset_id if len(shown) > PAGE else None,
    }


def _kept_health_page(
    catalog: Catalog,
    filters: dict[str, str],
    states: Sequence[str],
    after: str | None,
    scope: b.Scope | None,
    selectors: Sequence[Selector],
) -> dict[str, Any]:
    """The health page of a catalog past what a request judges whole, while a health watch keeps
    each asset's health: counted, and its assets of ``states`` found, as the watch keeps them
    (current within its ``poll``); the page's assets judged now from their own facts, with their
    at-risk flags (each as it now is, which may differ from what was kept a moment before), never
    from the whole catalog's: past 20,000 with those upstream of them, without the flags; where
    their own facts cannot answer (a received run named under several jobs), as the watch keeps
    them. No count of the assets at risk, which the watch does not keep (``atRisk`` None)."""
    rows, following = catalog.kept_health_page(states, after, PAGE, scope)
    ids = [asset_id for asset_id, _, _ in rows]
    now = utcnow()
    few = catalog.health_of_few(now, selectors, ids) if ids else []
    flagged = few is not None
    if few is None:
        few = catalog.health_of_few(now, selectors, ids, paths=False)
    shown = verdicts(catalog, few or [], scope, flagged)
    if len(shown) < len(ids):  # not judged now: as the watch keeps them, with no at-risk flag
        for asset_id, k in catalog.kept_health_of([i for i in ids if i not in shown]).items():
            shown[asset_id] = {
                "health": k.health.value,
                "reasons": [masked(r, scope.allows) for r in k.reasons] if scope else list(k.reasons),
                "atRisk": None,
                "pathToCause": [],
                "freshness": None,
            }
    counts = catalog.kept_health_counts(scope)
    return {
        "filters": filters,
        "tooMany": None,
        "kept": True,
        "riskFlagged": flagged,
        "counts": {h.value: counts[h.value] for h in sorted(Health, key=lambda h: -h.rank)},
        "atRisk": None,
        "assets": [
            {"id": asset_id, "type": type_, "namespace": namespace, **shown[asset_id]}
            for asset_id, namespace, type_ in rows
            if asset_id in shown
        ],
        "after": after,
        "next": following,
    }


def _too_many(filters: dict[str, str], bound: int) -> dict[str, Any]:
    """The health page that judged nothing: more than ``bound`` assets to judge at a request."""
    return {
        "filters": filters,
        "tooMany": bound,
        "kept": False,
        "riskFlagged": None,
        "counts": None,
        "atRisk": None,
        "assets": [],
        "after": None,
        "next": None,
    }


# --- /assets/<id> --------------------------------------------------------------------------


def asset_page(
    catalog: Catalog,
    runs: Runs,
    asset_id: str,
    query: Query,
    scope: b.Scope | None,
    selectors: Sequence[Selector] = (),
) -> dict[str, Any]:
    asset = shown(visible_asset(catalog, asset_id, scope), scope)
    tab = _choice(query, "tab", TABS, "overview")
    latest = catalog.latest_checks([asset.id], utcnow()).get(asset.id, ())
    out: dict[str, Any] = {
        "asset": asset.to_json(),
        "tab": tab,
        "checks": checks(latest),
    }
    health, out["riskFlagged"] = judged(catalog, selectors, [asset.id], scope)
    out["health"] = health.get(asset.id)
    out["assertions"] = [
        {"assertion": x.assertion, "success": x.success, "column": x.column, "severity": x.severity} for x in latest
    ]
    if tab == "overview":
        out.update(overview(catalog, runs, asset, scope))
    elif tab == "dependencies":
        out["graph"] = dependencies(catalog, runs, asset.id, query, scope, selectors)
    elif tab == "runs":
        out["runs"] = [
            {"direction": r.direction, **run_summary(r.run)} for r in b.asset_runs(runs, asset.id, scope=scope)
        ]
    elif tab == "columns":
        out["columns"] = columns(catalog, asset, scope)
    else:
        out["history"] = history(catalog, runs, asset, query, scope)
    return out


def overview(catalog: Catalog, runs: Runs, asset: Asset, scope: b.Scope | None) -> dict[str, Any]:
    near = {
        key: b.neighbours(catalog, asset.id, walk, limit=20, scope=scope)
        for key, walk in (("upstream", b.UP), ("downstream", b.DOWN))
    }
    writes = b.asset_runs(runs, asset.id, limit=1, scope=scope, direction="output")
    last = writes[0].run if writes else None
    return {
        "identifiers": [i.to_json() for i in asset.identifiers],
        "facets": dict(asset.received_facets),
        "upstream": {"ids": list(near["upstream"].ids), "count": near["upstream"].count},
        "downstream": {"ids": list(near["downstream"].ids), "count": near["downstream"].count},
        "lastWritten": (
            {"at": last.ended or last.started, "runId": last.run_id, "job": f"{last.job_namespace}/{last.job_name}"}
            if last
            else None
        ),
    }


def graph_options(query: Query) -> dict[str, Any]:
    expand = [i for i in query.get("expand", "").split("\n") if i]
    return {
        "direction": _choice(query, "direction", DIRECTIONS, "both"),
        "depth": _int(query, "depth", 1, 1, MAX_DEPTH),
        "group": _choice(query, "group", GROUPS, ""),
        "expand": expand[:50],
        "run": query.get("run", ""),
    }


def dependencies(
    catalog: Catalog,
    runs: Runs,
    root: str,
    query: Query,
    scope: b.Scope | None,
    selectors: Sequence[Selector] = (),
) -> dict[str, Any]:
    options = graph_options(query)
    read: tuple[str, ...] = ()
    written: tuple[str, ...] = ()
    if options["run"]:
        run = runs.get(options["run"])
        if run is not None and b.allows(scope, run.job_namespace):
            read, written = run.inputs, run.outputs
    graph = b.graph_slice(
        catalog,
        root,
        direction=DIRECTIONS[options["direction"]],
        depth=options["depth"],
        expanded=[*options["expand"], *read, *written],
        scope=scope,
    )
    if options["group"] == "flow":
        flows = b.writers(catalog, [n.id for n in graph.nodes], scope=scope)
        graph = attrs.evolve(graph, nodes=tuple(attrs.evolve(n, flow=flows.get(n.id)) for n in graph.nodes))
    elif options["group"] == "producer":
        made = b.producers(catalog, [n.id for n in graph.nodes], own=runs.converter.options.producer, scope=scope)
        graph = attrs.evolve(graph, nodes=tuple(attrs.evolve(n, producer=made.get(n.id)) for n in graph.nodes))
    marks, flagged = health_marks(catalog, selectors, [n.id for n in graph.nodes], scope)
    drawn = layout(
        graph, group_by=options["group"], expanded=options["expand"], read=read, written=written, health=marks
    )
    return {
        "options": options,
        "layout": drawn,
        "riskFlagged": flagged,
        "truncated": graph.truncated,
        "nodeCount": len(graph.nodes),
        **drawn.to_json(),
        "clusters": [{"anchor": c.anchor, "direction": c.direction, "hidden": c.hidden} for c in graph.clusters],
    }


def columns(catalog: Catalog, asset: Asset, scope: b.Scope | None) -> list[dict[str, Any]]:
    out = []
    for column in asset.columns[:200]:
        graph = catalog.column_lineage(asset.id, column.name, direction="both", depth=1)
        namespaces = {a.id: a.namespace for a in graph.assets}
        edges = []
        for e in graph.edges:
            other = e.upstream if e.downstream == asset.id and e.downstream_column == column.name else e.downstream
            side = "upstream" if other == e.upstream else "downstream"
            # an edge to an asset no longer in the catalog (purged without its lineage) has no
            # namespace to show it by: not one a token sees (it is not a Global asset)
            if scope is not None and (other not in namespaces or not scope.allows(namespaces[other])):
                continue
            edges.append(
                {
                    "side": side,
                    "asset": other,
                    "column": e.upstream_column if side == "upstream" else e.downstream_column,
                    "transformations": [t.to_json() for t in e.transformations],
                }
            )
        out.append({"name": column.name, "type": column.type, "description": column.description, "edges": edges})
    return out


def history(catalog: Catalog, runs: Runs, asset: Asset, query: Query, scope: b.Scope | None) -> dict[str, Any]:
    # a change made while the asset was another namespace's is that namespace's to see
    changes = [c for c in catalog.latest_changes(asset.id, 200) if b.allows(scope, c.asset.namespace)]
    entries: list[dict[str, Any]] = [
        {"at": format_time(c.changed_at), "kind": c.kind, "seq": c.seq, "snapshot": shown(c.asset, scope).to_json()}
        for c in changes
    ]
    for r in b.asset_runs(runs, asset.id, limit=100, scope=scope, direction="output"):
        entries.append({"at": r.run.ended or r.run.started, "kind": "write", "runId": r.run.run_id})
    entries.sort(key=lambda e: e["at"] or "", reverse=True)
    diff = None
    snapshots = {str(c.seq): shown(c.asset, scope).to_json() for c in changes}
    a, b_ = query.get("a", ""), query.get("b", "")
    if a in snapshots and b_ in snapshots:
        diff = compare(snapshots[a], snapshots[b_])
    return {"entries": entries, "a": a, "b": b_, "diff": diff}


def compare(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What differs between two snapshots of an asset: metadata keys, columns, facets, fields."""
    out = []
    for part in ("metadata", "receivedFacets"):
        old, new = before.get(part) or {}, after.get(part) or {}
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                out.append({"what": f"{part}.{key}", "before": old.get(key), "after": new.get(key)})
    for key in ("type", "namespace", "displayName", "description", "columns", "deleted"):
        if before.get(key) != after.get(key):
            out.append({"what": key, "before": before.get(key), "after": after.get(key)})
    return out


def neighbours_page(catalog: Catalog, query: Query, scope: b.Scope | None) -> dict[str, Any]:
    if not query.get("asset"):
        raise ValidationError("asset is required: the asset whose neighbours to list", rule="ui.asset", value="")
    asset = visible_asset(catalog, query["asset"], scope)
    direction = DIRECTIONS[_choice(query, "direction", ("up", "down"), "up")]
    search = query.get("q", "").strip()
    after = query.get("after") or None
    found = b.neighbours(catalog, asset.id, direction, limit=PAGE + 1, search=search, after=after, scope=scope)
    ids = list(found.ids)
    return {
        "asset": asset.id,
        "direction": direction,
        "q": search,
        "count": found.count,
        "ids": ids[:PAGE],
        "next": ids[PAGE - 1] if len(ids) > PAGE else None,
    }


# --- /lineage ------------------------------------------------------------------------------


def lineage_page(
    catalog: Catalog, query: Query, scope: b.Scope | None, selectors: Sequence[Selector] = ()
) -> dict[str, Any]:
    asset_id = query.get("asset", "")
    depth = _int(query, "depth", 2, 1, MAX_DEPTH)
    options: dict[str, Any] = {"direction": _choice(query, "direction", DIRECTIONS, "both"), "depth": depth}
    if not asset_id:
        return {"asset": None, "options": options, "moments": [], "step": None}
    asset = visible_asset(catalog, asset_id, scope)
    steps = lineage_steps(catalog, asset.id, direction=DIRECTIONS[options["direction"]], depth=depth)
    moments = steps.moments()
    if scope is not None:  # the moments at which what the scope sees changed, no others
        moments = _moments_seen(catalog, asset.id, steps, moments, scope)
    out: dict[str, Any] = {"asset": asset.id, "options": options, "moments": [format_time(m) for m in moments]}
    if not moments:  # none, or none the scope sees within the nodes read (then said: truncated)
        out.update(step=None, truncated=steps.truncated)
        return out
    step = _int(query, "step", len(moments) - 1, 0, len(moments) - 1)
    edges = steps.edges_at(moments[step])
    before = set(steps.edges_at(moments[step - 1] if step > 0 else None))
    ids = list(dict.fromkeys([asset.id, *(n for e in edges for n in e)]))
    nodes = tuple(n for n in b.nodes_of(catalog, ids) if b.allows(scope, n.namespace))
    shown = {n.id for n in nodes}
    edges = [e for e in edges if e[0] in shown and e[1] in shown]
    if scope is not None:  # what joins the asset only through assets the scope does not see is not shown
        edges = _shown_edges(asset.id, edges, shown)
        shown = {asset.id, *(n for e in edges for n in e)}
        nodes = tuple(n for n in nodes if n.id in shown)
        before = {e for e in before if e[0] in shown and e[1] in shown}
    graph = b.GraphSlice(asset.id, nodes, tuple(edges), (), steps.truncated)
    new_edges = [e for e in edges if e not in before]
    known = {n for e in before for n in e} | {asset.id}
    new_nodes = [n.id for n in nodes if n.id not in known]
    marks, flagged = health_marks(catalog, selectors, [n.id for n in nodes], scope)
    drawn = layout(graph, new_nodes=new_nodes, new_edges=new_edges, health=marks)
    out.update(
        step=step,
        riskFlagged=flagged,
        at=format_time(moments[step]),
        layout=drawn,
        truncated=graph.truncated,
        newEdges=[{"upstream": u, "downstream": d} for u, d in new_edges],
        newAssets=new_nodes,
        **drawn.to_json(),
    )
    return out


def _moments_seen(
    catalog: Catalog, root: str, steps: LineageSteps, moments: Sequence[datetime], scope: b.Scope
) -> list[datetime]:
    """Those of ``moments`` at which the links a page of ``scope`` shows (both ends seen, joined
    to ``root`` through seen assets) changed: another namespace's change is no step of its."""
    every = {n for m in moments for e in steps.edges_at(m) for n in e}
    seen = {n.id for n in b.nodes_of(catalog, sorted(every | {root})) if b.allows(scope, n.namespace)}
    kept: list[datetime] = []
    last: frozenset[tuple[str, str]] = frozenset()
    for moment in moments:
        shown = frozenset(_shown_edges(root, steps.edges_at(moment), seen))
        if shown != last:
            kept.append(moment)
            last = shown
    return kept


def _shown_edges(root: str, edges: Sequence[tuple[str, str]], seen: set[str]) -> list[tuple[str, str]]:
    """Those of ``edges`` a scope shows: both ends ``seen``, and joined to ``root`` through them."""
    edges = [e for e in edges if e[0] in seen and e[1] in seen]
    joined = _joined(root, edges)
    return [e for e in edges if e[0] in joined]


def _joined(root: str, edges: Sequence[tuple[str, str]]) -> set[str]:
    """The assets ``edges`` join to ``root``, either way."""
    near: dict[str, list[str]] = {}
    for up, down in edges:
        near.setdefault(up, []).append(down)
        near.setdefault(down, []).append(up)
    found, frontier = {root}, [root]
    while frontier:
        for other in near.get(frontier.pop(), ()):
            if other not in found:
                found.add(other)
                frontier.append(other)
    return found


# --- /runs ---------------------------------------------------------------------------------


def run_summary(view: RunView) -> dict[str, Any]:
    duration = None
    if view.started and view.ended:
        start, end = parse_time(view.started, "run"), parse_time(view.ended, "run")
        duration = round((end - start).total_seconds(), 3)
    return {
        "runId": view.run_id,
        "origin": view.origin,
        "job": {"namespace": view.job_namespace, "name": view.job_name},
        "state": view.state,
        "started": view.started,
        "startInferred": view.start_inferred,
        "ended": view.ended,
        "durationSeconds": duration,
        "producer": view.producer,
    }


def _moment(query: Query, name: str) -> datetime | None:
    text = query.get(name, "").strip()
    return parse_time(text, name, assume_utc=True) if text else None


def _before(query: Query) -> str | None:
    """The runs page's ``before``: ``<start>|<origin>|<pk or source>``, the place of the last
    run a page showed, as its next link gives it (the start empty for runs that have none)."""
    before = query.get("before") or None
    if before is None:
        return None
    try:
        start, _, _ = b.run_key(before)
        if len(before) > 1_000:
            raise ValueError(before)
    except ValueError:
        raise ValidationError(
            "before is <start>|<origin>|<key>, as a next link gives it", rule="ui.before", value=before
        ) from None
    if start:
        try:
            parse_time(start, "before", assume_utc=True)
        except ValidationError:
            raise ValidationError(
                "before is <start>|<origin>|<key>, as a next link gives it: its start is not a time",
                rule="ui.before",
                value=before,
            ) from None
    return before


def runs_page(runs: Runs, query: Query, scope: b.Scope | None) -> dict[str, Any]:
    state = (query.get("state") or "").strip().upper() or None  # in any case, as /health's
    if state is not None and state not in STATES:
        raise ValidationError(f"state is one of {', '.join(STATES)}", rule="ui.state", value=query["state"])
    origin = query.get("origin") or None
    if origin is not None and origin not in (OWN, EXTERNAL):
        raise ValidationError(f"origin is {OWN} or {EXTERNAL}", rule="ui.origin", value=origin)
    filters = RunFilter(
        job=query.get("job") or None,
        namespace=query.get("namespace") or None,
        state=state,
        since=_moment(query, "since"),
        until=_moment(query, "until"),
        origin=origin,
    )
    if filters.since is not None and filters.until is not None and filters.since > filters.until:
        raise ValidationError("since is after until", rule="ui.since", value=query.get("since", ""))
    before = _before(query)
    page = b.recent_runs(runs, filters, before=before, limit=PAGE, scope=scope)
    return {
        "filters": {
            **{k: query.get(k, "") for k in ("job", "namespace", "origin", "since", "until")},
            "state": state or "",
        },
        "runs": [run_summary(v) for v in page.runs],
        "before": before,
        "next": page.next,
        "states": list(STATES),
    }


def run_page(catalog: Catalog, runs: Runs, run_id: str, scope: b.Scope | None) -> dict[str, Any]:
    view = runs.get(run_id)
    if view is None or not b.allows(scope, view.job_namespace):
        raise NotFoundError(f"no run with id {run_id!r}")
    named = [*view.inputs, *view.outputs, *view.unwritten]  # what a failed or skipped run was to write, too
    visible = {n.id for n in b.nodes_of(catalog, named) if b.allows(scope, n.namespace)}
    # the outputs the run's warnings say it could not write (another namespace's asset, say)
    failed = failed_outputs(view.warnings) if view.origin == OWN and scope is not None else []
    # (one the catalog no longer holds, purged since, is as unseen: its warning names its namespace)
    seen_failed = {n.id for n in b.nodes_of(catalog, failed) if b.allows(scope, n.namespace)}
    failed_unseen = any(i not in seen_failed for i in failed)
    data = view.to_json()
    data["inputs"] = [i for i in view.inputs if i in visible]
    data["outputs"] = [o for o in view.outputs if o in visible]
    data["unwrittenOutputs"] = [o for o in view.unwritten if o in visible]
    data["summary"] = run_summary(view)
    parent = runs.get(view.parent_run_id) if view.parent_run_id else None
    # a link to the parent run only where it is one the catalog holds (and the scope sees)
    data["parentKnown"] = parent is not None and b.allows(scope, parent.job_namespace)
    # an own run's parent is its execution, of its flow, in the namespace of its job: seen as the
    # job is, though the catalog holds no run of it to link to
    parent_seen = data["parentKnown"] or view.origin == OWN
    events = b.raw_events(catalog, view.run_id)
    data["rawEvents"] = [{"eventTime": e.event_time, "eventType": e.event_type, "body": e.body} for e in events]
    data["hidden"] = False
    if scope is not None:
        jobs = [(ns, name) for ns, name in view.jobs if scope.allows(ns)]
        if len(jobs) < len(view.jobs):
            data["conflictingJobs"] = [{"namespace": ns, "name": name} for ns, name in jobs]
        if view.parent_run_id and not parent_seen:
            data["parentRunId"] = None
            data["facets"]["run"] = {k: v for k, v in data["facets"]["run"].items() if k != "parent"}
        named_elsewhere = any("is not an input of this event" in w for w in view.warnings)  # column lineage alone
        parent_unseen = bool(view.parent_run_id) and not parent_seen
        io_unseen = len(visible) < len(set(named))
        if io_unseen or len(jobs) < len(view.jobs) or parent_unseen or named_elsewhere or failed_unseen:
            # what came with the run names what the scope does not see: its events as they came,
            # their facets and the warnings taking them gave are not shown
            data.update(rawEvents=[], facets={"run": {}, "job": {}}, warnings=[], hidden=True)
    anchor = next(iter([*data["outputs"], *data["inputs"], *data["unwrittenOutputs"]]), None)
    data["graphAsset"] = anchor
    return data


# --- /status -------------------------------------------------------------------------------


def status_page(catalog: Catalog, scope: b.Scope | None = None) -> dict[str, Any]:
    """The outbox and the stream workers; for a token that sees only some namespaces, the last
    delivery error without where it went or what the backend answered (which may name any
    namespace's events)."""
    errors = catalog.outbox.errors()
    now = time.time()
    last = errors[0].as_json() if errors else None
    workers = [w.as_json(now) for w in catalog.workers.list()]
    if scope is not None:
        if last is not None:
            last = {key: value for key, value in last.items() if key not in ("target", "detail")}
        workers = [{key: value for key, value in w.items() if key != "target"} for w in workers]
    return {
        **catalog.outbox.status().as_json(),
        "lastError": last,
        "workers": workers,
    }
