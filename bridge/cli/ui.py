"""``ui``: the catalog in a browser (read-only)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import click

from bridge.catalog import Catalog
from bridge.cli.context import AppContext, pass_app
from bridge.cli.options import HOST
from bridge.cli.output import say
from bridge.cli.secrets import FILE
from bridge.config import NamedToken, load_tokens
from bridge.web import UiApp
from bridge.web import serve as serve_ui


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, type=HOST, help="Address to listen on.")
@click.option("--port", default=5070, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free).")
@click.option(
    "--tokens",
    "tokens_file",
    type=FILE,
    envvar="OLBRIDGE_TOKENS_FILE",
    help="The named tokens file serve reads: the UI then asks for a token and shows only the namespaces it may "
    "write, plus Global assets [env OLBRIDGE_TOKENS_FILE; default: the config's [serve] tokens].",
)
@pass_app
def ui(app: AppContext, host: str, port: int, tokens_file: Path | None) -> None:
    """Show the catalog in a browser: assets, their lineage, runs, history and status.

    Every page has a JSON twin: the same address with ?format=json. Read-only (GET). Without
    tokens anyone who reaches the port sees the whole catalog: it listens on loopback unless
    --host says otherwise. Stops on Ctrl-C.
    """
    file = tokens_file or app.config.serve.tokens_file  # the option, else the config's [serve] tokens
    named: tuple[NamedToken, ...] = load_tokens(file) if file is not None else app.config.serve.tokens or ()
    indexed = app.catalog().search_indexed()  # a catalog that is missing or cannot be read is one error here
    app.close()
    if not indexed:
        say(
            "warning: the catalog has no search index (PostgreSQL's pg_trgm extension was not there, or not this "
            "user's to create, when the catalog was made or migrated): the search box reads every asset "
            "(docs/ui.md, Search, says how to add the index)"
        )
    target = app.catalog_path
    web = UiApp(lambda: Catalog(target, create=False), app.converter(), named, app.config.freshness)
    if named:
        access = f"{len(named)} named token(s): each sees its namespaces and Global assets"
    elif _loopback(host):
        access = "no tokens: listening on loopback only"
    else:
        access = f"no tokens: anyone who reaches {host} sees the whole catalog"
    serve_ui(
        web,
        host,
        port,
        on_ready=lambda url: say(f"olbridge ui on {url} ({access}; catalog {app.catalog_name}); Ctrl-C stops"),
    )
    say("Stopped.")
