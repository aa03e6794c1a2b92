"""Column lineage graphs (``lineage ID --column COL``) as text, JSON and Mermaid.

A column is shown as ``<asset id>.<column>``; each edge with its transformations and the runs
that made it, as :mod:`bridge.drawing.asset_graph` shows an asset's.
"""

from __future__ import annotations

from typing import Any

from bridge.catalog import ColumnLineageEdge, ColumnLineageGraph
from bridge.drawing.mermaid import label_text, node_id
from bridge.drawing.tree import tree_lines, via
from bridge.model import Transformation


def _column_node(asset_id: str, column: str) -> str:
    return "c" + node_id(f"{asset_id}#{column}")  # apart from the assets' subgraph ids


def _how(transformations: tuple[Transformation, ...]) -> str:
    """``AGGREGATION``, ``FILTER (indirect)``, ``TRANSFORMATION masked`` ...: each kind once."""
    words = []
    for t in transformations:
        word = t.subtype or t.type
        if t.type == "INDIRECT" and t.subtype:
            word += " (indirect)"
        if t.masking:
            word += " masked"
        words.append(word)
    return ", ".join(dict.fromkeys(words))


def column_graph_json(graph: ColumnLineageGraph) -> dict[str, Any]:
    return {
        "root": {"asset": graph.root, "column": graph.column},
        "direction": graph.direction,
        "depth": graph.depth,
        "assets": [
            {"id": a.id, "type": a.type, "namespace": a.namespace, "origin": a.origin.value} for a in graph.assets
        ],
        "edges": [
            {
                "upstream": {"asset": e.upstream, "column": e.upstream_column},
                "downstream": {"asset": e.downstream, "column": e.downstream_column},
                "depth": e.depth,
                "transformations": [t.to_json() for t in e.transformations],
                "tasks": list(e.tasks),
            }
            for e in graph.edges
        ],
    }


def column_graph_text(graph: ColumnLineageGraph) -> str:
    """An indented tree per direction: ``<- upstream column`` and ``-> downstream column``, each
    column's subtree once and each edge's first few tasks, as :func:`bridge.drawing.asset_graph.graph_text`."""
    return "\n".join(column_graph_lines(graph))


def column_graph_lines(graph: ColumnLineageGraph) -> list[str]:
    """:func:`column_graph_text`'s lines, each a column (for a caller that shows each line escaped)."""
    lines = [f"{graph.root}.{graph.column}"]
    for direction, arrow in (("upstream", "<-"), ("downstream", "->")):
        if graph.direction not in (direction, "both"):
            continue
        found: dict[tuple[str, str], list[tuple[tuple[str, str], ColumnLineageEdge]]] = {}
        for e in graph.edges:
            up, down = (e.upstream, e.upstream_column), (e.downstream, e.downstream_column)
            if direction == "upstream":
                found.setdefault(down, []).append((up, e))
            else:
                found.setdefault(up, []).append((down, e))
        children = {
            node: [(child, _line(child, edge)) for child, edge in sorted(pairs, key=lambda item: item[0])]
            for node, pairs in found.items()
        }
        lines += tree_lines((graph.root, graph.column), children, graph.depth, arrow)
    return lines


def _line(column: tuple[str, str], edge: ColumnLineageEdge) -> str:
    how = _how(edge.transformations)
    return f"{column[0]}.{column[1]}{f'  {how}' if how else ''}{via(edge.tasks)}"


def column_graph_mermaid(graph: ColumnLineageGraph) -> str:
    """One subgraph per asset with its columns as nodes; edges labelled with their transformations.
    Labels, titles included, are quoted and written with :func:`label_text`, and every statement
    ends with ';', as :func:`bridge.drawing.asset_graph.graph_mermaid` writes them."""
    columns: dict[str, list[str]] = {graph.root: [graph.column]}
    for e in graph.edges:
        columns.setdefault(e.upstream, []).append(e.upstream_column)
        columns.setdefault(e.downstream, []).append(e.downstream_column)
    types = {a.id: a.type for a in graph.assets}
    lines = ["graph LR"]
    for asset_id, names in columns.items():
        title = f"{label_text(asset_id)}<br/>{label_text(types.get(asset_id, '?'))}"
        lines.append(f'    subgraph {node_id(asset_id)}["{title}"];')
        for name in dict.fromkeys(names):
            lines.append(f'        {_column_node(asset_id, name)}["{label_text(name)}"];')
        lines.append("    end;")
    for e in graph.edges:
        how = _how(e.transformations)
        label = f'|"{label_text(how)}"|' if how else ""
        up, down = _column_node(e.upstream, e.upstream_column), _column_node(e.downstream, e.downstream_column)
        lines.append(f"    {up} -->{label} {down};")
    return "\n".join(lines)
