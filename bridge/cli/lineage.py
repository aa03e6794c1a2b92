"""``lineage ID``."""

from __future__ import annotations

from typing import Any

import click

from bridge.cli.output import print_json, say
from bridge.render import graph_json, graph_mermaid, graph_text, mermaid_limits


def register(cli: click.Group) -> None:
    @cli.command()
    @click.argument("asset_id")
    @click.option(
        "--direction", type=click.Choice(["upstream", "downstream", "both"]), default="both", show_default=True
    )
    @click.option("--depth", type=click.IntRange(1, 100), default=5, show_default=True, help="How many hops to follow.")
    @click.option("--format", "fmt", type=click.Choice(["text", "json", "mermaid"]), default="text", show_default=True)
    @click.pass_obj
    def lineage(app: Any, asset_id: str, direction: str, depth: int, fmt: str) -> None:
        """Show an asset's upstream and downstream lineage.

        --format mermaid prints a Mermaid flowchart: a node per asset (its id and type) and an
        arrow per linked pair, labelled with every task that links them, one a line.
        """
        graph = app.catalog().lineage(asset_id, direction=direction, depth=depth)
        if fmt == "json":
            print_json(graph_json(graph))
        elif fmt == "mermaid":
            diagram = graph_mermaid(graph)
            click.echo(diagram)
            for limit in mermaid_limits(diagram):
                say(f"warning: the diagram has {limit}; narrow it with --depth or --direction")
        else:
            click.echo(graph_text(graph))
