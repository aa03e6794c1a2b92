"""A layered (Sugiyama-style) layout of a scoped lineage graph, computed here and drawn as SVG by
the templates: layers by longest path over the graph's strongly connected components (networkx
condenses the cycles a lineage may hold), nodes ordered in each layer by the mean position of
their neighbours in the layer before and after (a few sweeps, to cut crossings), kept together by
group. Pure: a :class:`~bridge.catalog.browse.GraphSlice` in, coordinates out."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection, Mapping
from typing import Any

import attrs
import networkx as nx

from bridge.catalog.browse import UP, GraphNode, GraphSlice

NODE_W, NODE_H = 210, 38
GAP_X, GAP_Y = 70, 16
MARGIN = 12
LABEL_CHARS = 28
SWEEPS = 4
PALETTE = 8  # group colours: CSS classes g0 .. g7


@attrs.frozen
class PlacedNode:
    id: str
    label: str
    x: int
    y: int
    group: str
    colour: int
    kind: str  # "asset" | "cluster"
    node: GraphNode | None = None
    hidden: int = 0  # a cluster's count
    direction: str = ""  # a cluster's side
    anchor: str = ""  # a cluster's asset
    marks: tuple[str, ...] = ()  # root, expanded, new, read, written, deleted, FAIL, WARN, at-risk


@attrs.frozen
class PlacedEdge:
    upstream: str
    downstream: str
    path: str
    new: bool = False


@attrs.frozen
class Layout:
    width: int
    height: int
    nodes: tuple[PlacedNode, ...]
    edges: tuple[PlacedEdge, ...]
    groups: tuple[tuple[str, int], ...]  # group name, colour

    def to_json(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "height": self.height,
            "nodes": [
                {
                    "id": n.id,
                    "kind": n.kind,
                    "x": n.x,
                    "y": n.y,
                    "group": n.group,
                    "marks": list(n.marks),
                    **(
                        {"anchor": n.anchor, "direction": n.direction, "hidden": n.hidden}
                        if n.kind == "cluster"
                        else {}
                    ),
                }
                for n in self.nodes
            ],
            "edges": [{"upstream": e.upstream, "downstream": e.downstream, "new": e.new} for e in self.edges],
        }


def group_of(by: str) -> Callable[[GraphNode], str]:
    """A node's group for ``by`` (namespace, type, origin, flow, producer; anything else: none)."""
    if by == "namespace":
        return lambda n: n.namespace or "Global"
    if by == "type":
        return lambda n: n.type
    if by == "origin":
        return lambda n: n.origin
    if by == "flow":
        return lambda n: n.flow or "(written by no flow)"
    if by == "producer":
        return lambda n: n.producer or "(written by no producer)"
    return lambda n: ""


def short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def layout(
    graph: GraphSlice,
    *,
    group_by: str = "",
    expanded: Collection[str] = (),
    new_nodes: Collection[str] = (),
    new_edges: Collection[tuple[str, str]] = (),
    read: Collection[str] = (),
    written: Collection[str] = (),
    health: Mapping[str, tuple[str, ...]] | None = None,
) -> Layout:
    """The graph's nodes placed in layers, each with its marks (``health``: the health marks of
    each asset that has any: FAIL, WARN, at-risk)."""
    grouping = group_of(group_by)
    g: nx.DiGraph = nx.DiGraph()
    by_id = {n.id: n for n in graph.nodes}
    g.add_nodes_from(by_id)
    g.add_edges_from(e for e in graph.edges if e[0] in by_id and e[1] in by_id)
    clusters = {}
    for c in graph.clusters:
        key = f"cluster:{c.direction}:{c.anchor}"
        while key in by_id:  # an asset may be named so: the cluster's key is another
            key = "~" + key
        clusters[key] = c
        g.add_edge(key, c.anchor) if c.direction == UP else g.add_edge(c.anchor, key)
    layer = _layers(g)
    order = _order(g, layer, lambda i: grouping(by_id[i]) if i in by_id else "~")
    colours: dict[str, int] = {}
    for n in graph.nodes:
        colours.setdefault(grouping(n), zlib.crc32(grouping(n).encode()) % PALETTE)
    placed: dict[str, PlacedNode] = {}
    for lvl, ids in order.items():
        for index, i in enumerate(ids):
            x = MARGIN + lvl * (NODE_W + GAP_X)
            y = MARGIN + index * (NODE_H + GAP_Y)
            if i in clusters:
                c = clusters[i]
                placed[i] = PlacedNode(
                    i,
                    f"{c.hidden:,} more",
                    x,
                    y,
                    "",
                    0,
                    "cluster",
                    hidden=c.hidden,
                    direction=c.direction,
                    anchor=c.anchor,
                )
                continue
            node = by_id[i]
            marks = tuple(
                mark
                for mark, on in (
                    ("root", i == graph.root),
                    ("expanded", i in expanded),
                    ("new", i in new_nodes),
                    ("read", i in read),
                    ("written", i in written),
                    ("deleted", node.deleted),
                )
                if on
            ) + (health.get(i, ()) if health else ())
            group = grouping(node)
            placed[i] = PlacedNode(i, short(i), x, y, group, colours[group], "asset", node=node, marks=marks)
    edges = []
    for up, down in g.edges:
        a, b = placed[up], placed[down]
        x1, y1, x2, y2 = a.x + NODE_W, a.y + NODE_H // 2, b.x, b.y + NODE_H // 2
        if x2 <= x1:  # an edge back (a cycle): around below
            mid = max(a.y, b.y) + NODE_H + GAP_Y // 2
            path = f"M{x1},{y1} C{x1 + 40},{mid} {x2 - 40},{mid} {x2},{y2}"
        else:
            bend = (x2 - x1) // 2
            path = f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}"
        edges.append(PlacedEdge(up, down, path, (up, down) in new_edges))
    width = MARGIN * 2 + (max(layer.values(), default=0) + 1) * (NODE_W + GAP_X) - GAP_X
    height = MARGIN * 2 + max((len(v) for v in order.values()), default=1) * (NODE_H + GAP_Y) - GAP_Y
    groups = tuple(sorted(colours.items())) if group_by else ()
    return Layout(width, height, tuple(placed.values()), tuple(edges), groups)


def _layers(g: nx.DiGraph) -> dict[str, int]:
    """Each node's layer: the longest path to it from a source, over the graph's components."""
    condensed = nx.condensation(g)
    members = condensed.graph["mapping"]
    depth: dict[int, int] = {}
    for c in nx.topological_sort(condensed):
        depth[c] = max((depth[p] + 1 for p in condensed.predecessors(c)), default=0)
    return {node: depth[members[node]] for node in g.nodes}


def _order(g: nx.DiGraph, layer: dict[str, int], group: Callable[[str], str]) -> dict[int, list[str]]:
    levels: dict[int, list[str]] = {}
    for node in sorted(g.nodes, key=lambda n: (group(n), n)):
        levels.setdefault(layer[node], []).append(node)
    top = max(levels, default=0)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        for lvl in range(1, top + 1) if down else range(top - 1, -1, -1):
            if lvl not in levels:
                continue
            near = layer_index(levels.get(lvl - 1 if down else lvl + 1, []))
            current = layer_index(levels[lvl])

            def centre(
                node: str, near: dict[str, int] = near, current: dict[str, int] = current, down: bool = down
            ) -> float:
                others = g.predecessors(node) if down else g.successors(node)
                spots = [near[o] for o in others if o in near]
                return sum(spots) / len(spots) if spots else float(current[node])

            levels[lvl].sort(key=lambda n: (group(n), centre(n)))
    return dict(sorted(levels.items()))


def layer_index(ids: list[str]) -> dict[str, int]:
    return {node: i for i, node in enumerate(ids)}


__all__ = ["Layout", "PlacedEdge", "PlacedNode", "group_of", "layout", "short"]
