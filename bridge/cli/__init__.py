"""The ``olbridge`` command: a thin click layer over the library.

Data goes to stdout (JSON where a script wants it, its keys in camelCase), messages to stderr.
Every BridgeError becomes ``Error: ...`` on stderr and exit status 1, in one place
(:class:`~bridge.cli.context.BridgeGroup`), and so does a SQLite error about the catalog's file,
disk or lock.

Each module of this package holds module-level click commands (``bridge.cli.assets.assets_list``),
which take the run's :class:`~bridge.cli.context.AppContext` through ``pass_app``; this one adds
them to the root group.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
from click.core import ParameterSource

# the modules, not their commands: a command named as its module (bridge.cli.dbt.dbt) would hide
# the module from `import bridge.cli.dbt` and monkeypatch
from bridge.cli import (
    assets,
    basics,
    catalog,
    dbt,
    export,
    health,
    imports,
    kestra,
    lineage,
    metaflow,
    prefect,
    retention,
    runs,
    serve,
    stream,
    ui,
)
from bridge.cli.context import CONTEXT_SETTINGS, AppContext, BridgeGroup, CatalogParam, warn_of_a_password
from bridge.config import load_config
from bridge.version import __version__

__all__ = ["AppContext", "BridgeGroup", "cli", "main"]


@click.group(cls=BridgeGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="olbridge")
@click.option(
    "--catalog",
    "catalog_path",
    type=CatalogParam(),
    metavar="PATH|URL",
    default=None,
    help="The catalog: a SQLite file, or a PostgreSQL database (postgresql://user@host:5432/db; its password "
    "from PGPASSWORD or ~/.pgpass) [env OLBRIDGE_CATALOG; default: the config's, else ./olbridge.db].",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="OLBRIDGE_CONFIG",
    default=None,
    help="Config file (TOML) [env OLBRIDGE_CONFIG; default: ./olbridge.toml if present].",
)
@click.pass_context
def cli(ctx: click.Context, catalog_path: str | Path | None, config_path: Path | None) -> None:
    """olbridge: an OpenLineage bridge for data-asset catalogs.

    Record the assets your tasks read and write (or import them from dbt, Kestra, Prefect and
    Metaflow), stream and backfill them as OpenLineage events to Marquez or any backend, and
    receive external events back as External placeholder assets.
    """
    config = load_config(config_path, os.environ)  # a ConfigError is BridgeGroup's to report
    if catalog_path is not None and ctx.get_parameter_source("catalog_path") is ParameterSource.COMMANDLINE:
        warn_of_a_password(catalog_path)
    app = AppContext(config=config, catalog_path=catalog_path or config.catalog)
    ctx.obj = app
    ctx.call_on_close(app.close)


cli.add_command(basics.init)
cli.add_command(basics.migrate)
cli.add_command(basics.record)
cli.add_command(basics.demo)
cli.add_command(catalog.catalog)
cli.add_command(assets.assets)
cli.add_command(runs.runs)
cli.add_command(export.export)
cli.add_command(export.validate)
cli.add_command(dbt.dbt)
cli.add_command(kestra.kestra)
cli.add_command(prefect.prefect)
cli.add_command(metaflow.metaflow)
cli.add_command(lineage.lineage)
cli.add_command(health.health)
cli.add_command(serve.serve)
cli.add_command(imports.import_)
cli.add_command(stream.stream)
cli.add_command(stream.backfill)
cli.add_command(stream.outbox)
cli.add_command(stream.status)
cli.add_command(ui.ui)
cli.add_command(retention.retention)


def main() -> None:
    cli()
