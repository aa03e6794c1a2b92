"""``metaflow declare`` and ``metaflow promote``."""

from __future__ import annotations

from pathlib import Path

import click

from bridge.adapters.metaflow.assets import define_all, make_scope, promote
from bridge.cli.context import NAMED, AppContext, given_path, pass_app
from bridge.cli.output import print_json, say
from bridge.model import utcnow


@click.group()
def metaflow() -> None:
    """Metaflow: assets recorded by the helpers of bridge.adapters.metaflow, scoped to project branches."""


@metaflow.command("declare")
@click.argument("folder", type=given_path(file_okay=False, exists=True, path_type=Path), default=Path("."))
@click.option("--project", required=True, type=NAMED, help="The project (the @project name, else the flow's name).")
@click.option(
    "--branch", required=True, type=NAMED, help="The branch, e.g. main (a deployment's git branch) or user.alice."
)
@pass_app
def metaflow_declare(app: AppContext, folder: Path, project: str, branch: str) -> None:
    """Set every asset defined in FOLDER/data/*/ and FOLDER/models/*/asset_config.toml as a catalog
    asset of the branch (as a deployment does); with any bad file nothing is set."""
    scope = make_scope(project, branch)
    assets = define_all(lambda: app.catalog(create=True), folder, scope, now=utcnow())
    say(f"{len(assets)} asset definition(s) set in namespace {scope.namespace}")
    print_json([a.to_json() for a in assets])


@metaflow.command("promote")
@click.argument("asset_id")
@click.option("--project", required=True, type=NAMED, help="The project (the @project name, else the flow's name).")
@click.option("--from", "from_branch", required=True, type=NAMED, help="The branch to copy from, e.g. user.alice.")
@click.option("--to", "to_branch", required=True, type=NAMED, help="The branch to copy to, e.g. main.")
@click.option(
    "--kind", type=click.Choice(["data", "model"]), default="data", show_default=True, help="The asset's kind."
)
@pass_app
def metaflow_promote(app: AppContext, asset_id: str, project: str, from_branch: str, to_branch: str, kind: str) -> None:
    """Copy an asset's latest instance (its pointers, annotations and tags) to another branch."""
    asset = promote(app.catalog(), asset_id, from_branch, to_branch, project=project, kind=kind, now=utcnow())
    say(f"promoted {kind} asset {asset_id!r} from {from_branch} to {to_branch}: {asset.id}")
    print_json(asset.to_json())
