"""``serve`` (the receiver) and ``import`` (files and Marquez)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from bridge.cli.output import print_json, say
from bridge.cli.secrets import FILE, secret
from bridge.config import NamedToken, load_tokens
from bridge.model import parse_window, utcnow
from bridge.receiver.imports import ImportSummary, MarquezEvents, catalog_intake, import_files, import_marquez
from bridge.receiver.intake import Limits
from bridge.receiver.server import ServeOptions
from bridge.receiver.server import serve as serve_receiver

DEFAULTS = Limits()


def _report(summary: ImportSummary, as_json: bool) -> None:
    if as_json:
        print_json(summary.to_json())
    for where, why in summary.refused[:50]:
        say(f"refused {where}: {why}")
    if len(summary.refused) > 50:
        say(f"... and {len(summary.refused) - 50} more refused")
    say(
        f"Imported {summary.read} events: {summary.accepted} accepted ({summary.warned} with warnings), "
        f"{summary.duplicates} duplicates, {len(summary.refused)} refused, {summary.placeholders} new placeholders"
        + (f"; position {summary.position}" if summary.position else "")
    )


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return 0  # import_files says what is wrong with it


def register(cli: click.Group) -> None:
    @cli.command()
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
        "--threads", default=8, show_default=True, type=click.IntRange(1, 256), help="Request threads a worker."
    )
    @click.option(
        "--workers",
        default=2,
        show_default=True,
        type=click.IntRange(1, 64),
        help="HTTP worker processes sharing the port (e.g. one a core); one more process writes the catalog.",
    )
    @click.option(
        "--durability",
        type=click.Choice(["full", "normal"]),
        default="full",
        show_default=True,
        help="SQLite sync level of each commit: 'full' survives power loss, 'normal' only a crash of olbridge.",
    )
    @click.option("--max-body", default=DEFAULTS.max_body, show_default=True, type=click.IntRange(1), help="Bytes.")
    @click.option("--max-batch", default=DEFAULTS.max_batch, show_default=True, type=click.IntRange(1), help="Events.")
    @click.option(
        "--max-datasets", default=DEFAULTS.max_datasets, show_default=True, type=click.IntRange(1), help="Per event."
    )
    @click.pass_obj
    def serve(
        app: Any,
        host: str,
        port: int,
        token: str | None,
        token_file: Path | None,
        tokens_file: Path | None,
        forward: bool | None,
        strict: bool,
        threads: int,
        workers: int,
        durability: str,
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
        limits = Limits(max_body=max_body, max_batch=max_batch, max_datasets=max_datasets)
        options = ServeOptions(
            host=host,
            port=port,
            token=token,
            strict=strict,
            threads=threads,
            durability=durability,
            limits=limits,
            workers=workers,
            forward=forward,
            tokens=named,
        )
        # create or migrate the catalog, and make sure it can be written, before any process forks:
        # a catalog that cannot be is one error here rather than a writer failing again and again
        app.catalog(create=True).check_writable()
        app.close()
        auth = f"{len(named)} named token(s)" if named else "bearer token" if token else "no auth"
        if forward:
            auth += "; forwarding accepted events through the outbox (olbridge stream delivers them)"
        serve_receiver(
            app.catalog_path,
            app.resolver(),
            options,
            on_ready=lambda url: say(f"olbridge receiver on {url} ({auth}, catalog {app.catalog_path}); Ctrl-C stops"),
            say=say,
        )
        say("Stopped.")

    @cli.command(name="import")
    @click.argument("files", nargs=-1, type=click.Path(path_type=Path, dir_okay=False))
    @click.option("--from-marquez", "marquez_url", metavar="URL", help="Import a Marquez instance's RunEvents.")
    @click.option("--since", help="Marquez: start at this time instead of where the last import stopped.")
    @click.option("--until", help="Marquez: stop before this time.")
    @click.option("--restart", is_flag=True, help="Marquez: ignore where the last import stopped.")
    @click.option("--page-size", default=200, show_default=True, type=click.IntRange(1, 10_000), help="Marquez page.")
    @click.option("--strict", is_flag=True, help="Refuse everything the OpenLineage spec refuses.")
    @click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
    @click.pass_obj
    def import_(
        app: Any,
        files: tuple[Path, ...],
        marquez_url: str | None,
        since: str | None,
        until: str | None,
        restart: bool,
        page_size: int,
        strict: bool,
        as_json: bool,
    ) -> None:
        """Import external OpenLineage events from FILES (NDJSON, JSON arrays, single events) or
        from a Marquez instance (--from-marquez URL, resumable).

        A bad line or a refused event is reported with where it was and does not stop the rest;
        the exit status is 1 when any was refused (duplicates are not refusals).
        """
        if bool(files) == bool(marquez_url):
            raise click.UsageError("give FILE... or --from-marquez URL (one of them)")
        if files and (since or until or restart):
            raise click.UsageError("--since, --until and --restart are for --from-marquez")
        start, end = parse_window(since, until)
        catalog, resolver = app.catalog(create=True), app.resolver()
        intake = catalog_intake(catalog, resolver, strict=strict)
        source = MarquezEvents(marquez_url, page_size=page_size) if marquez_url else None
        began, done = time.monotonic(), [0]

        def rate(_: object) -> str:
            elapsed = time.monotonic() - began
            return f"{done[0]:,} events, {done[0] / elapsed:,.0f}/s" if elapsed > 0 and done[0] else ""

        # the bar's length: the files' non-blank lines (one event a line in NDJSON), or what Marquez
        # says it holds once its first page is in
        length = sum(_lines(path) for path in files) if files else 0
        with click.progressbar(
            length=length, label="Importing", file=sys.stderr, show_eta=bool(files), item_show_func=rate
        ) as bar:

            def progress(count: int) -> None:
                done[0] += count
                bar.update(count, done[0])

            if source is None:
                summary = import_files(files, intake, progress=progress)
            else:

                def marquez_progress(count: int) -> None:
                    if source.total and not bar.length:
                        bar.length = source.total
                    progress(count)

                summary = import_marquez(
                    source,
                    intake,
                    catalog,
                    since=start,
                    until=end,
                    resume=not restart,
                    now=utcnow,
                    progress=marquez_progress,
                )
        _report(summary, as_json)
        if summary.refused:
            raise SystemExit(1)
