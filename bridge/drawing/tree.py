"""A lineage graph drawn as an indented tree (``lineage`` as text), each node's subtree once.

Unfolded whole, a tree of a graph holds every path through it: a few hundred nodes that fan out
and join again make millions of lines. Here each node's subtree is drawn once, where the node is
first reached at its least depth (so that as much of it shows as the depth allows); wherever else
the node is reached, its line says where its subtree is: ``(shown above)`` or, where it is reached
deeper first, ``(shown below)``. A tree has a line per edge, so its size follows the graph's nodes
and edges. A node with nothing under it is drawn wherever it is reached, with no mark.

The tasks of an edge are cut to the first :data:`VIA_SHOWN`, then ``and N more``, here and in the
Mermaid flowchart's labels (the JSON format has them all).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

Node = TypeVar("Node", bound=Hashable)

VIA_SHOWN = 3  # the tasks of an edge a line names; the others are counted

SHOWN_ABOVE = "(shown above)"
SHOWN_BELOW = "(shown below)"


def first_tasks(tasks: Sequence[str], shown: int = VIA_SHOWN) -> list[str]:
    """The first ``shown`` tasks, then ``and N more`` where there are more."""
    more = [f"and {len(tasks) - shown} more"] if len(tasks) > shown else []
    return [*tasks[:shown], *more]


def via(tasks: Sequence[str], shown: int = VIA_SHOWN) -> str:
    """``  via a, b, c and 4 more``: the first ``shown`` tasks and how many more ("" for none)."""
    if not tasks:
        return ""
    more = f" and {len(tasks) - shown} more" if len(tasks) > shown else ""
    return f"  via {', '.join(tasks[:shown])}{more}"


def tree_lines(root: Node, children: Mapping[Node, Sequence[tuple[Node, str]]], depth: int, arrow: str) -> list[str]:
    """The lines under ``root`` (not its own): each child of a node, in the order ``children``
    gives them with the text to show, as ``<indent><arrow> <text>``, to ``depth`` levels, each
    node's children once (see the module's docstring)."""
    least = _least_depths(root, children, depth)
    drawn: set[Node] = {root}
    lines: list[str] = []
    # an explicit stack (a path 100 deep is allowed): each entry a node's children and where in
    # them the walk is
    stack: list[tuple[Sequence[tuple[Node, str]], int]] = [(children.get(root, ()), 0)]
    while stack:
        siblings, at = stack[-1]
        if at == len(siblings):
            stack.pop()
            continue
        stack[-1] = (siblings, at + 1)
        level = len(stack)
        child, text = siblings[at]
        line = f"{'  ' * level}{arrow} {text}"
        if least.get(child, depth) < depth and children.get(child):  # it has a subtree to draw
            if child not in drawn and level == least[child]:
                drawn.add(child)
                lines.append(line)
                stack.append((children[child], 0))
                continue
            line += f"  {SHOWN_ABOVE if child in drawn else SHOWN_BELOW}"
        lines.append(line)
    return lines


def _least_depths(root: Node, children: Mapping[Node, Sequence[tuple[Node, str]]], depth: int) -> dict[Node, int]:
    """The least depth at which each node is reached from ``root`` (0), to ``depth``."""
    least = {root: 0}
    frontier, level = [root], 0
    while frontier and level < depth:
        level += 1
        reached = []
        for node in frontier:
            for child, _ in children.get(node, ()):
                if child not in least:
                    least[child] = level
                    reached.append(child)
        frontier = reached
    return least
