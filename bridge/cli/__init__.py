"""The ``olbridge`` command: a thin click layer over the library.

Data goes to stdout (JSON where a script wants it, its keys in camelCase), messages to stderr.
Every BridgeError becomes ``Error: ...`` on stderr and exit status 1, in one place
(:class:`~bridge.cli.context.BridgeGroup`), and so does a SQLite error about the catalog's file,
disk or lock.

Each module of this package holds module-level click commands (``bridge.cli.assets.assets_list``),
which take the run's :class:`~bridge.cli.context.AppContext` through ``pass_app``; this one names
them to the root group, which imports a command's module when the command is run or listed.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import click
from click.core import ParameterSource

from bridge.cli.context import (
    CONTEXT_SETTINGS,
    HELP_ASKED,
    AppContext,
    BridgeGroup,
    CatalogParam,
    given_path,
    operational,
    terminate_as_interrupt,
    warn_of_a_password,
)
from bridge.cli.lazy import LazyCommands
from bridge.config import load_config
from bridge.version import __version__

__all__ = ["AppContext", "BridgeGroup", "cli", "main"]


# each command's module (bridge.cli.<module>) imported only when the command runs or is listed:
# `olbridge export` starts without the web UI's, the receiver's or the adapters' imports
COMMANDS = {
    "init": "basics:init",
    "migrate": "basics:migrate",
    "record": "basics:record",
    "demo": "basics:demo",
    "catalog": "catalog:catalog",
    "assets": "assets:assets",
    "runs": "runs:runs",
    "export": "export:export",
    "validate": "export:validate",
    "dbt": "dbt:dbt",
    "kestra": "kestra:kestra",
    "prefect": "prefect:prefect",
    "metaflow": "metaflow:metaflow",
    "lineage": "lineage:lineage",
    "health": "health:health",
    "serve": "serve:serve",
    "import": "imports:import_",
    "stream": "stream:stream",
    "backfill": "stream:backfill",
    "outbox": "stream:outbox",
    "status": "stream:status",
    "ui": "ui:ui",
    "retention": "retention:retention",
}


@click.group(
    cls=BridgeGroup,
    context_settings=CONTEXT_SETTINGS,
    commands=LazyCommands({name: f"bridge.cli.{where}" for name, where in COMMANDS.items()}),
)
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
    type=given_path(dir_okay=False, path_type=Path),
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
    if catalog_path is not None and ctx.get_parameter_source("catalog_path") is ParameterSource.COMMANDLINE:
        warn_of_a_password(catalog_path)
    app = AppContext(lambda: load_config(config_path, os.environ, catalog_given=catalog_path is not None), catalog_path)
    # the config is read and checked before any command runs (a ConfigError is BridgeGroup's to
    # report); a command's --help is shown whatever it holds (read at first use if the command runs)
    # (its mapping files read and checked too, before anything is written)
    if not ctx.meta.get(HELP_ASKED) and app.config.mappings:
        app.resolver()
    ctx.obj = app
    ctx.call_on_close(app.close)


class _Closed(io.RawIOBase):
    """A standard stream the process was started without (``>&-``, ``<&-``): what is written to or
    read from it is an error that says so, where it would be lost or read as nothing."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.stream = name

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OSError(errno.EBADF, f"{self.stream} is closed")

    def write(self, data: Any) -> int:
        if not len(data):
            return 0
        raise OSError(errno.EBADF, f"{self.stream} is closed")


def _nowhere() -> TextIO:
    """A stderr for a process started without one: the null device, on descriptor 2 itself, so
    that no file the command opens (a catalog) takes that number, where a write meant for stderr
    would land."""
    fd = os.open(os.devnull, os.O_WRONLY)
    if fd != 2:
        try:
            os.fstat(2)
        except OSError:  # free: stdin or stdout was closed too, and took the lower number
            os.dup2(fd, 2)
            os.close(fd)
            fd = 2
    return open(fd, "w", encoding="utf-8")  # stderr, for the whole process


def main() -> None:
    for name in ("stdin", "stdout"):
        if getattr(sys, name) is None:  # its descriptor was closed when the process started
            setattr(sys, name, io.TextIOWrapper(_Closed(name), encoding="utf-8", write_through=True))
    if sys.stderr is None:  # closed too (``2>&-``): the messages go nowhere, the exit status still says how it went
        sys.stderr = _nowhere()
    terminate_as_interrupt()
    try:
        cli()
    except OSError as exc:  # before any command ran (the root's --help, --version): a full disk under stdout
        click.echo(f"Error: {operational(exc)}", err=True)
        sys.exit(1)
