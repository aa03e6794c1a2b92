"""``serve``: the receiver."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import click
from click.core import ParameterSource

from bridge.cli.context import AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.options import HOST, seconds
from bridge.cli.output import say
from bridge.cli.retention import prepare_partitions, start_schedule
from bridge.cli.secrets import FILE, secret, warn_if_readable
from bridge.config import NamedToken, load_tokens
from bridge.delivery import health_watch
from bridge.delivery.helpers import Helper
from bridge.errors import ConfigError
from bridge.jsontext import MAX_DEPTH
from bridge.receiver.intake import Limits
from bridge.receiver.metrics import HealthCounts
from bridge.receiver.server import ServeOptions, allow_files, listen_on
from bridge.receiver.server import serve as serve_receiver

DEFAULTS = Limits()
# each limit: its [serve] key (the option is the same, with dashes), its field of Limits, its most and what it counts
LIMITS: tuple[tuple[str, str, int | None, str], ...] = (
    ("max_body", "max_body", None, "Bytes of a request's body, as sent (413 past them)."),
    ("max_gunzipped", "max_decompressed", None, "Bytes of a gzip body once decompressed, every member (413)."),
    ("max_batch", "max_batch", None, "Events in one batch (413)."),
    ("max_datasets", "max_datasets", None, "Datasets of one event: inputs, outputs, column lineage's others (400)."),
    ("max_column_edges", "max_column_edges", None, "Input fields of one event's column lineage, each an edge (400)."),
    (
        "max_values",
        "max_values",
        None,
        "JSON values in one event: objects, arrays, strings, numbers, booleans, nulls (400).",
    ),
    ("max_depth", "max_depth", MAX_DEPTH, "Nesting of objects and arrays in one event (400)."),
    ("max_request_line", "max_request_line", None, "Bytes of a request's target (414)."),
    ("max_header", "max_header", None, "Bytes of one header, name and value (431)."),
    ("max_headers", "max_headers", None, "Bytes of a request's line and headers together (431)."),
    ("max_in_flight", "max_in_flight", None, "Bytes of bodies a worker holds at once, gunzipped (503, retriable)."),
    (
        "max_connections",
        "max_connections",
        None,
        "Connections a worker holds open; past them it closes the one waiting longest without a request, "
        "else answers 503 (retriable).",
    ),
)


def limit_options(command: Callable[..., None]) -> Callable[..., None]:
    """The limits' options, ``--max-body`` ... (given, else the config's [serve] key, else the default)."""
    for key, field, most, text in reversed(LIMITS):
        default = getattr(DEFAULTS, field)
        command = click.option(
            f"--{key.replace('_', '-')}",
            key,
            type=click.IntRange(1, most),
            help=f"{text} [default: the config's [serve] {key}, else {default}]",
        )(command)
    return command


def deadline_option(name: str, default: float, text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """An option of seconds a client has for something (0.1 s to an hour)."""
    return click.option(name, default=default, show_default=True, type=seconds(0.1, 3600), help=text)


def chosen_limits(given: dict[str, int | None], settings: Mapping[str, int]) -> Limits:
    """The limits: each option given, else its [serve] key, else its default."""
    values = {}
    for key, field, most, _ in LIMITS:
        value = given.get(key)
        if value is None:
            value = settings.get(key)
            if value is not None and most is not None and value > most:
                raise ConfigError(f"[serve] {key}: {value} is more than {most}, the most it can be")
        if value is not None:
            values[field] = value
    return Limits(**values)


@click.command(
    "serve",
    epilog=examples(
        "olbridge serve --port 5050 --token-file token.txt   # one shared token, from a file",
        "olbridge serve --tokens tokens.toml --forward        # named tokens; forward what it takes",
        "olbridge serve --workers 2 --access-log json         # a JSON line a request on stderr",
    ),
)
@click.option("--host", default="127.0.0.1", show_default=True, type=HOST, help="Address to listen on.")
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
    help="Named tokens, each allowed the namespaces it writes (its jobs' and its outputs' datasets'): a TOML "
    "file with one table per token name holding 'token' and 'namespaces' (patterns such as 'spark-*', "
    "'s3://team-bucket*'); instead of --token [env OLBRIDGE_TOKENS_FILE; "
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
@deadline_option(
    "--read-timeout",
    60.0,
    "Seconds a client has to send a request's head (from its first byte), and again its body; past them the "
    "connection closes (a late body is answered 408, retriable). Stalled or trickling clients hold connections "
    "no longer.",
)
@deadline_option(
    "--first-byte-timeout",
    10.0,
    "Seconds a new connection has to send its first byte; past them it is closed (a connection kept alive after "
    "an answer waits 75 s). Idle connections hold a worker's file descriptors no longer.",
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
@limit_options
@pass_app
def serve(
    app: AppContext,
    /,
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
    first_byte_timeout: float,
    access_log: str | None,
    **limits: int | None,
) -> None:
    """Receive OpenLineage events over HTTP (POST /api/v1/lineage and /api/v1/lineage/batch).

    External datasets become External placeholder assets; external runs and jobs are kept with
    their inputs and outputs. Also GET /healthz, /readyz and /metrics. Stops on SIGTERM or Ctrl-C.

    With --forward, every accepted event is also queued in the outbox, in the transaction that
    records it and as it came (but for the facets a token may not write of its inputs);
    olbridge stream delivers it to your backend. With
    --tokens, each producer's token may write only its namespaces: its jobs' and the datasets
    its events write (403 otherwise).
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
        warn_if_readable(tokens_file, "the tokens file")
    elif settings.tokens_file is not None:
        named = load_tokens(settings.tokens_file)
        warn_if_readable(settings.tokens_file, "the tokens file")
    elif settings.tokens is not None:
        named = settings.tokens
    if token and named:
        ctx = click.get_current_context()

        def said(name: str, option: str, env: str) -> str:
            return option if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE else env

        shared = (
            said("token_file", "--token-file", "OLBRIDGE_TOKEN_FILE")
            if token_file
            else said("token", "--token", "OLBRIDGE_TOKEN")
        )
        listed = (
            said("tokens_file", "--tokens", "OLBRIDGE_TOKENS_FILE") if tokens_file is not None else "[serve] tokens"
        )
        raise click.UsageError(
            f"give one shared token or named tokens, not both: {shared} and {listed} were given "
            "(one shared: --token, --token-file, OLBRIDGE_TOKEN, OLBRIDGE_TOKEN_FILE; named: --tokens, "
            "OLBRIDGE_TOKENS_FILE, [serve] tokens)"
        )
    forward = settings.forward if forward is None else forward
    access_log = settings.access_log if access_log is None else None if access_log == "off" else access_log
    options = ServeOptions(
        host=host,
        port=port,
        token=token,
        strict=strict,
        durability=durability,
        limits=chosen_limits(limits, settings.limits),
        workers=workers,
        forward=forward,
        tokens=named,
        read_timeout=read_timeout,
        first_byte_timeout=first_byte_timeout,
        access_log=access_log,
    )
    # the open files and the port tried first: too few files or a port in use is an error before a
    # catalog is made (a mistyped --catalog and a busy port left an empty catalog behind); the
    # port not held meanwhile, which would take connections nobody answers while a catalog is made
    # or upgraded
    allow_files(options.limits.max_connections)
    listen_on(host, port).close()
    # create or migrate the catalog, and make sure it can be written, before any process forks:
    # a catalog that cannot be is one error here rather than a writer failing again and again
    catalog = app.catalog(create=True)
    catalog.check_writable()
    prepare_partitions(catalog)  # PostgreSQL: received events' partitions for the days ahead
    app.close()
    auth = f"{len(named)} named token(s)" if named else "bearer token" if token else "no auth"
    if forward:
        auth += "; forwarding accepted events through the outbox (olbridge stream delivers them)"
    if access_log:
        auth += f"; access log on stderr ({access_log})"
    retention = app.config.retention
    if retention.every is not None:
        auth += f"; retention every {retention.every:g}s, one receiver at a time"
    elif retention.configured:  # windows, and nothing to run them: said, not left to be found out
        say(
            "note: [retention] sets how long history is kept, but no `every`: serve runs no pass "
            '(set every = "15m", say, or run olbridge retention from a scheduler)'
        )
    watch = health_watch.settings_of(app.config)
    if watch is not None:
        auth += f"; health watch with {len(watch.alerts)} alert(s) (olbridge stream sends them), one process at a time"
    counts = HealthCounts() if watch is not None else None
    helpers: list[Helper] = []
    try:
        schedule = start_schedule(app.catalog_path, retention)
        helpers += [schedule] if schedule is not None else []
        if watch is not None and counts is not None:
            helpers.append(health_watch.start_process(app.catalog_path, watch, say, counts.set))

        def exited(pid: int, code: int, stopping: bool) -> None:  # a child the receiver's supervisor does not run
            for helper in helpers:
                if helper.pid == pid and not helper.reaped:
                    helper.exited(code, again=not stopping)
            for helper in helpers:  # one that died too, which starting another may have reaped
                helper.check(again=not stopping)

        serve_receiver(
            app.catalog_path,
            app.resolver(),
            options,
            on_ready=lambda url: say(f"olbridge receiver on {url} ({auth}, catalog {app.catalog_name}); Ctrl-C stops"),
            say=say,
            health=counts,
            others=exited,
        )
    finally:
        for helper in helpers:
            helper.stop()
    say("Stopped.")
