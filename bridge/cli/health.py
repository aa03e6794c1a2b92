"""``olbridge health``: each asset's health (FAIL, WARN, PASS, UNKNOWN) and at-risk flag, as of now
or any time; and the ``assets set`` freshness options."""

from __future__ import annotations

from datetime import datetime, timedelta

import click
import orjson

from bridge.catalog.health import AssetHealth, collector_held
from bridge.cli.context import AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.options import json_flag, moment
from bridge.cli.output import json_safe, safe, say
from bridge.errors import BadValueError, ValidationError
from bridge.model import check_namespace, utcnow
from bridge.model.health import FreshnessRule, Health, parse_duration


def judged_at(as_of: str | None) -> datetime:
    """The time to judge at: ``--as-of``, else now; a time that is no time, or one so far back or
    ahead that a window (of up to a hundred years) or a cron's next tick would pass the first or
    last year a date holds, is a bad value (exit 2)."""
    when = moment(as_of, "--as-of")
    if when is not None and not FIRST_YEAR <= when.year <= LAST_YEAR:
        raise BadValueError(f"--as-of: {as_of!r} is not between the years {FIRST_YEAR} and {LAST_YEAR}")
    return when or utcnow()


FIRST_YEAR, LAST_YEAR = 1000, 9000


def freshness_rule(
    max: str | None, warn: str | None, cron: str | None, lag: str | None, timezone: str | None
) -> FreshnessRule | None:
    """The rule the ``assets set`` freshness options give (None: none given); options that do not
    go together, or a value no rule takes, are a bad value (exit 2, not the exit 1 of a FAIL)."""
    if max is None and cron is None:
        if warn is not None or lag is not None or timezone is not None:
            raise BadValueError(
                "--freshness-warn goes with --freshness; --freshness-lag and --freshness-timezone go with "
                "--freshness-cron"
            )
        return None

    def duration(text: str | None, option: str) -> timedelta | None:
        return parse_duration(text, option) if text is not None else None

    try:
        return FreshnessRule.create(
            max=duration(max, "--freshness"),
            warn=duration(warn, "--freshness-warn"),
            cron=cron,
            lag=duration(lag, "--freshness-lag"),
            timezone=timezone,
            where="--freshness",
        )
    except ValidationError as exc:  # said of the option that gave the value
        raise BadValueError(f"{_OPTION_OF.get(exc.rule, exc.where)}: {exc.message}") from None


# the option of each rule a freshness rule's value breaks (the others are said of --freshness)
_OPTION_OF = {
    "freshness.cron": "--freshness-cron",
    "freshness.timezone": "--freshness-timezone",
    "freshness.warn": "--freshness-warn",
    "freshness.lag": "--freshness-lag",
}


def _states(text: str | None) -> set[Health] | None:
    """``--state``'s healths; one that is none, or a list naming none, is a bad value (exit 2: exit
    1 says an asset is FAIL)."""
    if text is None:
        return None
    try:
        return set(Health.parse_list(text, "--state"))
    except ValidationError as exc:
        raise BadValueError(str(exc)) from None


def line(found: AssetHealth) -> str:
    path = [safe(step) for step in found.path]
    risk = f"\tat risk from {path[0]} ({' -> '.join(path)})" if found.at_risk else ""
    return f"{safe(found.asset_id)}\t{found.health.value}\t{'; '.join(safe(r) for r in found.verdict.reasons)}{risk}"


@click.command(
    "health",
    epilog=examples(
        "olbridge health                                   # every asset, now",
        "olbridge health --state FAIL,WARN --json          # exit 1 when any shown is FAIL",
        "olbridge health --namespace team-a --as-of 2026-03-01T12:00:00Z",
    ),
)
@click.option("--namespace", help="Only assets of this namespace.")
@click.option("--state", "states", metavar="FAIL,WARN,...", help="Only assets in these states (comma-separated).")
@click.option("--at-risk", "only_at_risk", is_flag=True, help="Only assets at risk (downstream of a FAIL or WARN).")
@click.option("--as-of", "as_of", metavar="TIME", help="Judge as of this time (ISO 8601; default now).")
@json_flag("Print a JSON array: id, health, reasons, freshness, atRisk, cause, pathToCause.")
@pass_app
def health(
    app: AppContext, namespace: str | None, states: str | None, only_at_risk: bool, as_of: str | None, as_json: bool
) -> None:
    """Each asset's health, the worst of its freshness, its checks and its last run, with the
    reasons; and whether it is at risk, downstream of a FAIL or WARN asset (with the path).

    Exits 1 when any asset shown is FAIL, so a cron job or a CI step can use it."""
    wanted = _states(states)
    if namespace is not None:
        try:
            check_namespace(namespace, "--namespace")
        except ValidationError as exc:  # a bad value: exit 2, as --state's (exit 1 says an asset is FAIL)
            raise BadValueError(str(exc)) from None
    found = [
        h
        for h in app.catalog().health(judged_at(as_of), app.config.freshness, namespace=namespace)
        if (wanted is None or h.health in wanted) and (not only_at_risk or h.at_risk)
    ]
    if as_json:  # orjson: the same text as print_json's, where a million assets take seconds, not a minute
        with collector_held():  # a dictionary or two an asset, freed once written
            text = orjson.dumps([h.to_json() for h in found], option=orjson.OPT_INDENT_2)
        click.echo(text if text.isascii() and b"\x7f" not in text else json_safe(text.decode()))
    else:
        for h in found:
            click.echo(line(h))
    failed = sum(1 for h in found if h.health is Health.FAIL)
    say(f"{len(found)} asset(s), {failed} FAIL, {sum(1 for h in found if h.at_risk)} at risk")
    if failed:
        raise SystemExit(1)
