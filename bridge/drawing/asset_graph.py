"""An asset's lineage graph (``olbridge lineage ID``) as text, JSON and a Mermaid flowchart: a node
per asset, an edge per linked pair with the tasks that link them."""

from __future__ import annotations

from typing import Any

from bridge.catalog import LineageGraph
from bridge.drawing.mermaid import label_text, node_id
from bridge.drawing.tree import first_tasks, tree_lines, via
from bridge.model import format_time


def graph_json(graph: LineageGraph) -> dict[str, Any]:
    as_of = {"asOf": format_time(graph.as_of)} if graph.as_of is not None else {}
    return {
        "root": graph.root,
        "direction": graph.direction,
        "depth": graph.depth,
        **as_of,
        "assets": [
            {"id": a.id, "type": a.type, "namespace": a.namespace, "origin": a.origin.value} for a in graph.assets
        ],
        "edges": [
            {"upstream": e.upstream, "downstream": e.downstream, "depth": e.depth, "tasks": list(e.tasks)}
            for e in graph.edges
        ],
    }


def graph_text(graph: LineageGraph) -> str:
    """An indented tree per direction: ``<- upstream`` and ``-> downstream``, each asset's subtree
    once (elsewhere its line says where it is shown) and each edge's first few tasks
    (:mod:`bridge.drawing.tree`)."""
    return "\n".join(graph_lines(graph))


def graph_lines(graph: LineageGraph) -> list[str]:
    """:func:`graph_text`'s lines, each a node (for a caller that shows each line escaped)."""
    types = {a.id: a.type for a in graph.assets}
    as_of = f"  as of {format_time(graph.as_of)}" if graph.as_of is not None else ""
    lines = [f"{graph.root} ({types.get(graph.root, '?')}){as_of}"]
    for direction, arrow in (("upstream", "<-"), ("downstream", "->")):
        if graph.direction not in (direction, "both"):
            continue
        found: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        for e in graph.edges:
            if direction == "upstream":
                found.setdefault(e.downstream, []).append((e.upstream, e.tasks))
            else:
                found.setdefault(e.upstream, []).append((e.downstream, e.tasks))
        children = {
            node: [(child, f"{child} ({types.get(child, '?')}){via(tasks)}") for child, tasks in sorted(pairs)]
            for node, pairs in found.items()
        }
        lines += tree_lines(graph.root, children, graph.depth, arrow)
    return lines


def graph_mermaid(graph: LineageGraph) -> str:
    """A Mermaid flowchart: a node per asset labelled with its id and type, and one arrow per pair
    of linked assets labelled with the tasks that link them, one a line: the first
    :data:`~bridge.drawing.tree.VIA_SHOWN`, then ``and N more``. Every statement ends
    with ';': Mermaid drops the last ';' of a line where "style"/"classDef" is followed by ':' and
    '#', and that ';' is then the statement's own, never an entity code's."""
    types = {a.id: a.type for a in graph.assets}
    pairs: dict[tuple[str, str], dict[str, None]] = {}
    for e in graph.edges:
        pairs.setdefault((e.upstream, e.downstream), {}).update(dict.fromkeys(e.tasks))
    nodes = dict.fromkeys([*types, *(end for pair in pairs for end in pair)])
    lines = ["graph LR"]
    for node in nodes:
        label = f"{label_text(node)}<br/>{label_text(types.get(node, '?'))}"
        lines.append(f'    {node_id(node)}["{label}"];')
    for (up, down), tasks in pairs.items():
        label = f'|"{"<br/>".join(label_text(t) for t in first_tasks(list(tasks)))}"|' if tasks else ""
        lines.append(f"    {node_id(up)} -->{label} {node_id(down)};")
    return "\n".join(lines)


# Mermaid's default limits: a diagram of more edges fails to parse, a longer one renders as an error
# message. Both are settings of the page that renders, which a diagram cannot change.
MERMAID_MAX_EDGES = 500
MERMAID_MAX_TEXT = 50_000


def mermaid_limits(text: str) -> list[str]:
    """What in a diagram from :func:`graph_mermaid` is past Mermaid's default limits."""
    found = []
    edges = sum(" -->" in line for line in text.splitlines())  # labels hold no '>': it is escaped
    if edges > MERMAID_MAX_EDGES:
        found.append(f"{edges} edges, more than Mermaid draws by default ({MERMAID_MAX_EDGES}, its maxEdges setting)")
    size = len(text.encode("utf-16-le")) // 2  # as JavaScript counts a string's length
    if size > MERMAID_MAX_TEXT:
        found.append(
            f"{size} characters, more than Mermaid renders by default ({MERMAID_MAX_TEXT}, its maxTextSize setting)"
        )
    return found
