"""Lineage graphs as text, JSON and Mermaid."""

from __future__ import annotations

import re
from typing import Any

from bridge.catalog import LineageGraph


def graph_json(graph: LineageGraph) -> dict[str, Any]:
    return {
        "root": graph.root,
        "direction": graph.direction,
        "depth": graph.depth,
        "assets": [
            {"id": a.id, "type": a.type, "namespace": a.namespace, "origin": a.origin.value} for a in graph.assets
        ],
        "edges": [
            {"upstream": e.upstream, "downstream": e.downstream, "depth": e.depth, "tasks": list(e.tasks)}
            for e in graph.edges
        ],
    }


def graph_text(graph: LineageGraph) -> str:
    """An indented tree per direction: ``<- upstream`` and ``-> downstream``."""
    types = {a.id: a.type for a in graph.assets}
    lines = [f"{graph.root} ({types.get(graph.root, '?')})"]
    for direction, arrow in (("upstream", "<-"), ("downstream", "->")):
        if graph.direction not in (direction, "both"):
            continue
        children: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for e in graph.edges:
            if direction == "upstream":
                children.setdefault(e.downstream, []).append((e.upstream, e.tasks))
            else:
                children.setdefault(e.upstream, []).append((e.downstream, e.tasks))

        def walk(
            node: str,
            level: int,
            seen: frozenset[str],
            children: dict[str, list[tuple[str, tuple[str, ...]]]] = children,
            arrow: str = arrow,
        ) -> None:
            for child, tasks in sorted(children.get(node, [])):
                via = f"  via {', '.join(tasks)}" if tasks else ""
                lines.append(f"{'  ' * level}{arrow} {child} ({types.get(child, '?')}){via}")
                if child not in seen and level < graph.depth:
                    walk(child, level + 1, seen | {child})

        walk(graph.root, 1, frozenset({graph.root}))
    return "\n".join(lines)


def _node_id(asset_id: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", asset_id)


def graph_mermaid(graph: LineageGraph) -> str:
    lines = ["graph LR"]
    for asset in graph.assets:
        label = asset.id.replace('"', "'")
        lines.append(f'    {_node_id(asset.id)}["{label}<br/>{asset.type}"]')
    seen = set()
    for e in graph.edges:
        pair = (e.upstream, e.downstream)
        if pair in seen:
            continue
        seen.add(pair)
        label = f"|{e.tasks[0]}|" if e.tasks else ""
        lines.append(f"    {_node_id(e.upstream)} -->{label} {_node_id(e.downstream)}")
    return "\n".join(lines)
