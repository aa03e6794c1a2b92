"""The ``olbridge`` command: a thin click layer over the library.

Data goes to stdout (JSON where a script wants it, its keys in camelCase), messages to stderr.
Every BridgeError becomes ``Error: ...`` on stderr and exit status 1, in one place
(:class:`BridgeGroup`), and so does a SQLite error about the catalog's file, disk or lock.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import attrs
import click

from bridge.catalog import Catalog
from bridge.catalog.store import storage_error
from bridge.config import Config, load_config
from bridge.errors import BridgeError, CatalogError
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter, ConvertOptions
from bridge.version import __version__

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class BridgeGroup(click.Group):
    """A group that turns library errors into click errors, once for every command below it: a
    BridgeError, and a SQLite error that says the catalog's file, disk or lock is in the way (a
    read-only or damaged file, a full disk, a lock held too long). Any other exception is a fault
    and keeps its traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BridgeError as exc:
            raise click.ClickException(str(exc)) from exc
        except sqlite3.Error as exc:
            app = ctx.obj if isinstance(ctx.obj, AppContext) else None
            error = storage_error(exc, app.catalog_path if app else "")
            if error is None:
                raise
            raise click.ClickException(str(error)) from exc


@attrs.define
class AppContext:
    config: Config
    catalog_path: Path
    _catalog: Catalog | None = None
    _resolver: Resolver | None = None

    def catalog(self, *, create: bool = False) -> Catalog:
        """The catalog, opened once. Only commands that record something pass ``create=True``
        (``init`` and the writers); the others refuse a catalog that does not exist rather than
        make an empty one at a mistyped path."""
        if self._catalog is None:
            path = self.catalog_path
            if not create and str(path) != ":memory:" and not path.exists():
                raise CatalogError(f"no catalog at {path}; create one with olbridge init")
            self._catalog = Catalog(path)
        return self._catalog

    def resolver(self) -> Resolver:
        if self._resolver is None:
            self._resolver = Resolver.load(self.config.mappings, self.config.default_namespace)
        return self._resolver

    def converter(self) -> Converter:
        options = ConvertOptions(producer=self.config.producer, job_namespace_prefix=self.config.job_namespace_prefix)
        return Converter(self.resolver(), options)

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None


@click.group(cls=BridgeGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="olbridge")
@click.option(
    "--catalog",
    "catalog_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="OLBRIDGE_CATALOG",
    default=None,
    help="SQLite catalog file [env OLBRIDGE_CATALOG; default: the config's, else ./olbridge.db].",
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
def cli(ctx: click.Context, catalog_path: Path | None, config_path: Path | None) -> None:
    """olbridge: an OpenLineage bridge for data-asset catalogs.

    Record the assets your tasks read and write (or import them from dbt, Kestra, Prefect and
    Metaflow), stream and backfill them as OpenLineage events to Marquez or any backend, and
    receive external events back as External placeholder assets.
    """
    try:
        config = load_config(config_path, os.environ)
    except BridgeError as exc:
        raise click.ClickException(str(exc)) from exc
    app = AppContext(config=config, catalog_path=catalog_path or config.catalog)
    ctx.obj = app
    ctx.call_on_close(app.close)


def register() -> None:
    from bridge.cli import assets, basics, dbt, export, kestra, lineage, metaflow, prefect, receive, stream

    for module in (basics, assets, dbt, export, lineage, receive, stream, kestra, metaflow, prefect):
        module.register(cli)


register()


def main() -> None:
    cli()
