"""``dbt import``."""

from __future__ import annotations

from pathlib import Path

import click

from bridge.adapters.dbt import ingest_dbt
from bridge.cli.context import NAMED, AppContext, given_path, pass_app
from bridge.cli.examples import examples
from bridge.cli.output import print_json, say, say_warnings
from bridge.errors import BadValueError, ValidationError
from bridge.model import check_namespace


@click.group()
def dbt() -> None:
    """dbt: record a project's models, seeds and snapshots from its artifacts."""


@dbt.command(
    "import",
    epilog=examples(
        "olbridge dbt import --project-dir my_dbt_project",
        "olbridge dbt import --project-dir . --target-path target --profiles-dir .",
        "olbridge dbt import --project-dir . --catalog-json docs-target/catalog.json   # from dbt docs generate",
    ),
)
@click.option(
    "--project-dir",
    type=given_path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The dbt project folder.",
)
@click.option(
    "--target-path",
    type=given_path(file_okay=False, path_type=Path),
    help="The target folder (default: <project>/target).",
)
@click.option(
    "--profiles-dir",
    type=given_path(file_okay=False, path_type=Path),
    help="Where profiles.yml is (default: as dbt looks).",
)
@click.option("--target", type=NAMED, help="The profile target (default: the profile's).")
@click.option(
    "--namespace", default="dbt", show_default=True, help="The flow namespace the dbt runs are recorded under."
)
@click.option("--flow-id", type=NAMED, help="The flow id (default: the dbt project's name).")
@click.option(
    "--catalog-json",
    type=given_path(dir_okay=False, path_type=Path),
    help="dbt's catalog.json, for columns and types (default: the target folder's, when there).",
)
@pass_app
def dbt_import(
    app: AppContext,
    project_dir: Path,
    target_path: Path | None,
    profiles_dir: Path | None,
    target: str | None,
    namespace: str,
    flow_id: str | None,
    catalog_json: Path | None,
) -> None:
    """Read manifest.json and run_results.json and record every model, seed and snapshot that ran,
    with columns from catalog.json and each model's column lineage from its compiled SQL.

    `dbt docs generate` writes catalog.json, and also replaces run_results.json with its own:
    run it with --target-path elsewhere and give its catalog.json here, or run it before the
    build."""
    try:  # a bad value: exit 2, before any file is read
        check_namespace(namespace, "--namespace")
    except ValidationError as exc:
        raise BadValueError(str(exc)) from None
    summary = ingest_dbt(
        lambda: app.catalog(create=True),
        project_dir,
        target_path=target_path,
        profiles_dir=profiles_dir,
        target=target,
        namespace=namespace,
        flow_id=flow_id,
        catalog_json=catalog_json,
        naming=app.resolver(),
    )
    data = summary.to_json()
    counts = {state: sum(r.status == state for r in summary.results) for state in ("created", "updated", "unchanged")}
    said = ", ".join(f"{n} {state}" for state, n in counts.items())
    say(f"dbt invocation {summary.invocation_id}: {len(summary.results)} task run(s): {said}")
    say_warnings([*summary.notes, *(f"column lineage: {note}" for note in summary.column_notes)])
    print_json(data)
