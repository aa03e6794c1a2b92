"""``lineage ID``."""

from __future__ import annotations

import click

from bridge.catalog import ColumnLineageGraph
from bridge.cli.context import NAMED, AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.options import moment
from bridge.cli.output import echo_lines, print_json, safe, say
from bridge.drawing.asset_graph import graph_json, graph_lines, graph_mermaid, mermaid_limits
from bridge.drawing.column_graph import column_graph_json, column_graph_lines, column_graph_mermaid


def show_columns(graph: ColumnLineageGraph, fmt: str) -> None:
    for asset_id, count in graph.whole_output:
        say(
            f"note: {count} input column(s) shape the whole of {safe(asset_id)} (join keys, filters): "
            "not walked column by column here; olbridge export carries them"
        )
    if fmt == "json":
        print_json(column_graph_json(graph))
    elif fmt == "mermaid":
        click.echo(column_graph_mermaid(graph))
    else:
        echo_lines(column_graph_lines(graph))


@click.command(
    "lineage",
    epilog=examples(
        "olbridge lineage dbt.main.my_first_dbt_model --direction downstream --depth 3",
        "olbridge lineage dbt.main.my_first_dbt_model --format mermaid   # a flowchart for Markdown",
        "olbridge lineage mart.orders --as-of 2025-03-01T08:00:00Z       # as the catalog knew it then",
        "olbridge lineage reports.second_model_report --column label --direction upstream",
    ),
)
@click.argument("asset_id")
@click.option("--direction", type=click.Choice(["upstream", "downstream", "both"]), default="both", show_default=True)
@click.option("--depth", type=click.IntRange(1, 100), default=5, show_default=True, help="How many hops to follow.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "mermaid"]), default="text", show_default=True)
@click.option(
    "--column",
    type=NAMED,
    help="A column of the asset: where it comes from (upstream) and what it feeds (downstream), column by column.",
)
@click.option(
    "--as-of",
    "as_of",
    metavar="TIME",
    help="The graph as the catalog knew it at TIME (ISO 8601; no offset: UTC): the edges of runs that had "
    "ended by then, olbridge's and external ones, and of the jobs JobEvents had declared.",
)
@pass_app
def lineage(
    app: AppContext, asset_id: str, direction: str, depth: int, fmt: str, column: str | None, as_of: str | None
) -> None:
    """Show an asset's upstream and downstream lineage (or a column's, with --column).

    The text tree draws each asset's subtree once; where an asset is reached again its line ends
    "(shown above)" (or "(shown below)"). A line names its edge's first three tasks, then how many
    more (--format json has them all).

    --format mermaid prints a Mermaid flowchart: a node per asset (its id and type) and an
    arrow per linked pair, labelled with the tasks that link them (the first three), one a line.

    ASSET_ID is its id, or a name it was received under: <olNamespace>/<olName>, or a symlink
    identifier's <namespace>/<name>.
    """
    if column is not None and as_of is not None:
        raise click.UsageError("--as-of draws an asset's lineage; it does not go with --column")
    when = moment(as_of, "--as-of")
    asset_id = app.catalog().find_asset_id(asset_id, app.resolver())
    if column is not None:
        show_columns(app.catalog().column_lineage(asset_id, column, direction=direction, depth=depth), fmt)
        return
    graph = app.catalog().lineage(asset_id, direction=direction, depth=depth, as_of=when)
    if fmt == "json":
        print_json(graph_json(graph))
    elif fmt == "mermaid":
        diagram = graph_mermaid(graph)
        click.echo(diagram)
        for limit in mermaid_limits(diagram):
            say(f"warning: the diagram has {limit}; narrow it with --depth or --direction")
    else:
        echo_lines(graph_lines(graph))
