"""``serve``: the receiver."""

from __future__ import annotations

from pathlib import Path

import click

from bridge.cli.context import AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.output import say
from bridge.cli.retention import start_schedule, stop_schedule
from bridge.cli.secrets import FILE, secret
from bridge.config import NamedToken, load_tokens
from bridge.receiver.intake import Limits
from bridge.receiver.server import ServeOptions
from bridge.receiver.server import serve as serve_receiver

DEFAULTS = Limits()


@click.command(
    "serve",
    epilog=examples(
        "olbridge serve --port 5050 --token-file token.txt   # one shared token, from a file",
        "olbridge serve --tokens tokens.toml --forward        # named tokens; forward what it takes",
        "olbridge serve --workers 2 --access-log json         # a JSON line a request on stderr",
    ),
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=5050, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free).")
@click.option(
    "--token",
    envvar="OLBRIDGE_TOKEN",
    help="Require 'Authorization: Bearer TOKEN' [env OLBRIDGE_TOKEN]. Prefer the variable or --token-file: "
    "the command line shows in ps.",
)
@click.option(
    "--token-file",
    type=FILE,
    envvar="OLBRIDGE_TOKEN_FILE",
    help="Read the token from this file: one line, trimmed [env OLBRIDGE_TOKEN_FILE].",
)
@click.option(
    "--tokens",
    "tokens_file",
    type=FILE,
    envvar="OLBRIDGE_TOKENS_FILE",
    help="Named tokens, each allowed its job namespaces: a TOML file with one table per token name holding "
    "'token' and 'namespaces' (patterns such as 'spark-*'); instead of --token [env OLBRIDGE_TOKENS_FILE; "
    "default: the config's [serve] tokens].",
)
@click.option(
    "--forward/--no-forward",
    default=None,
    help="Queue every accepted event in the outbox as it came, for olbridge stream to deliver [default: the "
    "config's [serve] forward, else no].",
)
@click.option(
    "--strict", is_flag=True, help="Refuse everything the OpenLineage spec refuses (default: what Marquez takes)."
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="HTTP worker processes sharing the port, each an event loop on a core of its own; one more process "
    "writes the catalog, on either engine. Raise it when the workers' CPU is the limit (large batches, many "
    "cores).",
)
@click.option(
    "--durability",
    type=click.Choice(["full", "normal"]),
    default="full",
    show_default=True,
    help="How sure each commit is: 'full' survives a power loss, 'normal' only a crash of olbridge (SQLite's "
    "synchronous, PostgreSQL's synchronous_commit).",
)
@click.option(
    "--read-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0.1, 3600),
    help="Seconds a client has to send a request's head (from its first byte), and again its body; past "
    "them the connection closes (a late body is answered 408, retriable). Stalled or trickling clients "
    "hold connections no longer.",
)
@click.option(
    "--access-log",
    type=click.Choice(["text", "json", "off"]),
    is_flag=False,
    flag_value="text",
    default=None,
    help="A line a request on stderr once it is answered: method, path, status, events, the named token's name "
    "(never the token) and the time taken; as text (--access-log alone) or one JSON object a line [default: "
    "the config's [serve] access_log, else off].",
)
@click.option("--max-body", default=DEFAULTS.max_body, show_default=True, type=click.IntRange(1), help="Bytes.")
@click.option("--max-batch", default=DEFAULTS.max_batch, show_default=True, type=click.IntRange(1), help="Events.")
@click.option(
    "--max-datasets", default=DEFAULTS.max_datasets, show_default=True, type=click.IntRange(1), help="Per event."
)
@pass_app
def serve(
    app: AppContext,
    host: str,
    port: int,
    token: str | None,
    token_file: Path | None,
    tokens_file: Path | None,
    forward: bool | None,
    strict: bool,
    workers: int,
    durability: str,
    read_timeout: float,
    access_log: str | None,
    max_body: int,
    max_batch: int,
    max_datasets: int,
) -> None:
    """Receive OpenLineage events over HTTP (POST /api/v1/lineage and /api/v1/lineage/batch).

    External datasets become External placeholder assets; external runs and jobs are kept with
    their inputs and outputs. Also GET /healthz, /readyz and /metrics. Stops on SIGTERM or Ctrl-C.

    With --forward, every accepted event is also queued in the outbox, in the transaction that
    records it and exactly as it came; olbridge stream delivers it to your backend. With
    --tokens, each producer's token may write only its job namespaces (403 otherwise).
    """
    token = secret(
        token,
        token_file,
        option="--token",
        file_option="--token-file",
        env="OLBRIDGE_TOKEN",
        file_env="OLBRIDGE_TOKEN_FILE",
    )
    settings = app.config.serve
    named: tuple[NamedToken, ...] = ()
    if tokens_file is not None:
        named = load_tokens(tokens_file)
    elif settings.tokens_file is not None:
        named = load_tokens(settings.tokens_file)
    elif settings.tokens is not None:
        named = settings.tokens
    if token and named:
        raise click.UsageError("give one shared token (--token) or named tokens (--tokens, [serve] tokens)")
    forward = settings.forward if forward is None else forward
    access_log = settings.access_log if access_log is None else None if access_log == "off" else access_log
    limits = Limits(max_body=max_body, max_batch=max_batch, max_datasets=max_datasets)
    options = ServeOptions(
        host=host,
        port=port,
        token=token,
        strict=strict,
        durability=durability,
        limits=limits,
        workers=workers,
        forward=forward,
        tokens=named,
        read_timeout=read_timeout,
        access_log=access_log,
    )
    # create or migrate the catalog, and make sure it can be written, before any process forks:
    # a catalog that cannot be is one error here rather than a writer failing again and again
    app.catalog(create=True).check_writable()
    app.close()
    auth = f"{len(named)} named token(s)" if named else "bearer token" if token else "no auth"
    if forward:
        auth += "; forwarding accepted events through the outbox (olbridge stream delivers them)"
    if access_log:
        auth += f"; access log on stderr ({access_log})"
    retention = app.config.retention
    if retention.every is not None:
        auth += f"; retention every {retention.every:g}s, one receiver at a time"
    schedule = start_schedule(app.catalog_path, retention)
    try:
        serve_receiver(
            app.catalog_path,
            app.resolver(),
            options,
            on_ready=lambda url: say(f"olbridge receiver on {url} ({auth}, catalog {app.catalog_name}); Ctrl-C stops"),
            say=say,
        )
    finally:
        stop_schedule(schedule)
    say("Stopped.")
