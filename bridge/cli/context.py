"""What every command runs with: the application context (the config, the catalog opened once, the
naming rules), the decorator that hands it to a command typed, and the root group's error handling.

A command takes the context as its first argument::

    @click.command()
    @pass_app
    def show(app: AppContext, asset_id: str) -> None: ...
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import attrs
import click

from bridge.catalog import Catalog
from bridge.catalog.store import storage_error
from bridge.config import Config
from bridge.errors import BridgeError, CatalogError
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter, ConvertOptions

# The root group's; every group and command below it inherits them from its parent context.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


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


pass_app = click.make_pass_decorator(AppContext)
"""Pass the run's :class:`AppContext` as a command's first argument (``app: AppContext``)."""


class BridgeGroup(click.Group):
    """A group that turns library errors into click errors, once for every command below it (the
    root group's own callback included): a BridgeError, and a SQLite error that says the catalog's
    file, disk or lock is in the way (a read-only or damaged file, a full disk, a lock held too
    long). Any other exception is a fault and keeps its traceback."""

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
