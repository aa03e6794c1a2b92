"""``assets list / show / set / delete / purge``."""

from __future__ import annotations

import json
from typing import Any

import click

from bridge.catalog import AssetQuery, MetadataFilter
from bridge.catalog.health import AssetHealth
from bridge.cli.context import AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.health import freshness_rule, judged_at
from bridge.cli.options import count, json_flag, moment
from bridge.cli.output import print_json, print_rows, say
from bridge.errors import NotInCatalog, ValidationError, ValidationProblems
from bridge.files import loads
from bridge.model import AssetDeclaration, check_namespace, utcnow
from bridge.model.asset_types import normalize_type

_where = click.option(
    "--where",
    "where",
    nargs=3,
    multiple=True,
    metavar="FIELD TYPE VALUE",
    help="Metadata filter; TYPE: EQUAL_TO, NOT_EQUAL_TO, IS_ONE_OF, IS_NOT_ONE_OF (VALUE a,b) or CONTAINS.",
)


def _filters(where: tuple[tuple[str, str, str], ...]) -> list[MetadataFilter]:
    return [MetadataFilter.create(f, op, v, where=f"--where {f}") for f, op, v in where]


def _types(types: tuple[str, ...]) -> tuple[str, ...]:
    """The ``--type`` options' types, each checked (an unknown one is the option's bad value)."""
    return tuple(normalize_type(t, where="--type") for t in types)


def _metadata(pairs: tuple[str, ...], blob: str | None, unset: tuple[str, ...] = ()) -> dict[str, Any]:
    """The metadata update: --metadata-json, then the --metadata pairs (values are strings, "null"
    too), then the --unset-metadata keys as nulls, which remove them. A key both set and unset is
    refused. The JSON is read by the rules of every JSON olbridge reads (no NaN, no lone
    surrogates, integers of at most 1,000 digits)."""
    out: dict[str, Any] = {}
    if blob is not None:
        try:
            parsed = loads(blob)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"not valid JSON: {exc.msg} (column {exc.colno})", rule="json", where="--metadata-json"
            ) from None
        if not isinstance(parsed, dict):
            raise ValidationError("must be a JSON object", rule="metadata.type", where="--metadata-json")
        out.update(parsed)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValidationError(f"expected KEY=VALUE, not {pair!r}", rule="metadata.pair", where="--metadata")
        out[key] = value
    for key in unset:
        if not key:
            raise ValidationError("expected a metadata key", rule="metadata.key", where="--unset-metadata")
        if key in out and out[key] is not None:
            raise ValidationError(
                f"{key!r} is both set and unset", rule="metadata.unset", where=f"--unset-metadata {key}"
            )
        out[key] = None
    return out


# the fields of a declaration an option of ``assets set`` gives
_OPTION_OF = {
    "type": "--type",
    "namespace": "--namespace",
    "displayName": "--display-name",
    "description": "--description",
}


def _as_option(error: ValidationError, pairs: tuple[str, ...]) -> ValidationError:
    """A problem of the declaration ``assets set`` makes of its options, named by the option that
    gave the value (``metadata.owner``: ``--metadata owner`` or ``--metadata-json owner``)."""
    field, dot, key = error.where.partition(".")
    if field == "metadata":
        key = key if dot else (error.value if isinstance(error.value, str) else "")
        given = {pair.partition("=")[0] for pair in pairs}
        option = "--metadata" if key in given else "--metadata-json"
        where = f"{option} {key}" if key else option
    elif field in _OPTION_OF and not dot:
        where = _OPTION_OF[field]
    elif field == "id" and not dot:  # the argument
        where = "ASSET_ID"
    else:
        return error
    return ValidationError(error.message, rule=error.rule, value=error.value, where=where)


@click.group()
def assets() -> None:
    """List, show, set, delete and purge assets."""


@assets.command(
    "list",
    epilog=examples(
        "olbridge assets list --type Table --namespace company.data",
        "olbridge assets list --json --where dbtTestStatus EQUAL_TO fail",
        "olbridge assets list --deleted   # deleted assets too",
        "olbridge assets list --limit 100 --after dbt.main.orders   # a page of 100, by id",
    ),
)
@click.option("--type", "types", multiple=True, help="Only these types (short or Kestra class names).")
@click.option("--namespace", help="Only this namespace (never matches a Global asset).")
@_where
@click.option("--deleted", is_flag=True, help="Include soft-deleted assets.")
@click.option("--limit", type=count(1), help="At most N assets (a page: stderr says the --after of the next).")
@click.option("--after", metavar="ID", help="The assets whose ids sort after ID (the next page).")
@json_flag("Print a JSON array.")
@pass_app
def assets_list(
    app: AppContext,
    types: tuple[str, ...],
    namespace: str | None,
    where: tuple[tuple[str, str, str], ...],
    deleted: bool,
    limit: int | None,
    after: str | None,
    as_json: bool,
) -> None:
    """List assets, by id, each with its health (judged now: every asset's, without a filter or
    --limit, costs what `olbridge health` costs)."""
    query = AssetQuery.create(
        types=_types(types),
        namespace=check_namespace(namespace, "--namespace"),
        metadata=_filters(where),
        include_deleted=deleted,
        after=after,
        limit=limit,
    )
    found = app.catalog().list_assets(query)
    shown = [a.id for a in found]
    judged = {h.asset_id: h for h in app.catalog().health(judged_at(None), app.config.freshness, ids=shown)}
    more = f"; --after {found[-1].id} shows the next" if limit is not None and len(found) == limit else ""
    if as_json:
        print_json([_with_health(a.to_json(), judged.get(a.id)) for a in found])
        if more:
            say(f"{len(found)} asset(s){more}")
        return
    rows = (
        (
            a.id,
            a.type,
            a.namespace or "(global)",
            a.origin.value,
            judged[a.id].health.value if a.id in judged else "-",
            "at risk" if a.id in judged and judged[a.id].at_risk else "",
            "deleted" if a.is_deleted else "",
        )
        for a in found
    )
    print_rows(("id", "type", "namespace", "origin", "health", "risk", "deleted"), rows)
    say(f"{len(found)} asset(s){more}")


@assets.command(
    "show",
    epilog=examples(
        "olbridge assets show dbt.main.my_second_dbt_model",
        "olbridge assets show hub.events --usages 200   # its latest 200 uses",
    ),
)
@click.argument("asset_id")
@click.option(
    "--usages",
    "limit",
    type=count(0),
    default=20,
    show_default=True,
    help="How many of its latest uses by task runs to list (and of the received jobs that use it).",
)
@pass_app
def assets_show(app: AppContext, asset_id: str, limit: int) -> None:
    """Show one asset as JSON, with its OpenLineage name and its latest usages (newest first),
    how many there are and how many are left out; a placeholder with the symlink identifiers and
    the latest of each facet its producers sent.

    ASSET_ID is its id, or a name it was received under: <olNamespace>/<olName>, or a symlink
    identifier's <namespace>/<name>."""
    asset_id = app.catalog().find_asset_id(asset_id, app.resolver())
    asset = app.catalog().asset(asset_id)
    record = asset.to_json()
    named = app.resolver().dataset_for(asset.id, asset.type, asset.metadata)
    record["openlineage"] = {"namespace": named.namespace, "name": named.name, "rule": named.rule}
    record.update(app.catalog().latest_usages(asset_id, limit).to_json())
    judged = app.catalog().health(judged_at(None), app.config.freshness, ids=[asset_id])
    print_json(_with_health(record, judged[0] if judged else None))


def _with_health(record: dict[str, Any], judged: AssetHealth | None) -> dict[str, Any]:
    """An asset's record with its health, its reasons, the freshness rule it answers to (and
    where that rule comes from) and its at-risk flag; a deleted asset has none."""
    if judged is None:
        return {**record, "health": None}
    found = judged.to_json()
    return {**record, **{k: found[k] for k in ("health", "reasons", "freshness", "atRisk", "cause", "pathToCause")}}


@assets.command("set")
@click.argument("asset_id")
@click.option("--type", "type_", help="The asset type (needed for a new asset).")
@click.option("--namespace", help="The namespace (none: Global).")
@click.option("--display-name", help="A display name.")
@click.option("--description", help="A description.")
@click.option(
    "--metadata",
    "pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a metadata key; the value is kept as a string (owner=null stores the text 'null').",
)
@click.option("--unset-metadata", "unset", multiple=True, metavar="KEY", help="Remove a metadata key (repeatable).")
@click.option("--metadata-json", help='Metadata as a JSON object of scalars; a null removes its key ({"owner": null}).')
@click.option("--allow-type-change", is_flag=True, help="Allow changing the type of an existing asset.")
@click.option(
    "--freshness", "fresh_max", metavar="DURATION", help="Stale (FAIL) when not written for this long (6h, 1d)."
)
@click.option("--freshness-warn", "fresh_warn", metavar="DURATION", help="WARN this long before --freshness runs out.")
@click.option("--freshness-cron", "fresh_cron", metavar="CRON", help="A deadline: written by each tick ('0 9 * * *').")
@click.option(
    "--freshness-lag",
    "fresh_lag",
    metavar="DURATION",
    help="With --freshness-cron: written at most this long before the tick.",
)
@click.option(
    "--freshness-timezone", "fresh_zone", metavar="ZONE", help="With --freshness-cron: its time zone (default UTC)."
)
@click.option("--no-freshness", is_flag=True, help="Remove the asset's own freshness rule.")
@pass_app
def assets_set(
    app: AppContext,
    asset_id: str,
    type_: str | None,
    namespace: str | None,
    display_name: str | None,
    description: str | None,
    pairs: tuple[str, ...],
    unset: tuple[str, ...],
    metadata_json: str | None,
    allow_type_change: bool,
    fresh_max: str | None,
    fresh_warn: str | None,
    fresh_cron: str | None,
    fresh_lag: str | None,
    fresh_zone: str | None,
    no_freshness: bool,
) -> None:
    """Create or update an asset. Metadata merges into what the asset has: --metadata KEY=VALUE
    sets a key, --unset-metadata KEY removes one (as a null in --metadata-json does).

    --freshness 6h --freshness-warn 2h: FAIL when not written for 6 hours, WARN from 4 hours (2
    hours before). --freshness-cron '0 9 * * *' --freshness-lag 1h --freshness-timezone
    Europe/Paris: FAIL when not written between 08:00 and each day's 09:00 tick, Paris time."""
    rule = freshness_rule(fresh_max, fresh_warn, fresh_cron, fresh_lag, fresh_zone)
    if rule is not None and no_freshness:
        raise click.UsageError("--no-freshness removes the rule the other --freshness options set; give one")
    try:
        decl = AssetDeclaration.create(
            asset_id,
            type=type_,
            namespace=namespace,
            display_name=display_name,
            description=description,
            metadata=_metadata(pairs, metadata_json, unset),
        )
    except ValidationProblems as exc:
        raise ValidationProblems([_as_option(problem, pairs) for problem in exc.problems]) from None
    except ValidationError as exc:
        raise _as_option(exc, pairs) from None
    catalog = app.catalog(create=True)
    now = utcnow()
    if rule is not None or no_freshness:
        updates = any(x is not None for x in (type_, namespace, display_name, description, metadata_json)) or bool(
            pairs or unset
        )
        if updates or catalog.get_asset(asset_id) is None:
            catalog.set_asset(decl, now=now, allow_type_change=allow_type_change)
        catalog.set_freshness(asset_id, rule, now=now)
        asset = catalog.asset(asset_id)
        record = asset.to_json()
        record["freshness"] = rule.to_json() if rule else None
        print_json(record)
        return
    asset = catalog.set_asset(decl, now=now, allow_type_change=allow_type_change)
    print_json(asset.to_json())


@assets.command("delete")
@click.argument("asset_id")
@pass_app
def assets_delete(app: AppContext, asset_id: str) -> None:
    """Soft-delete an asset (exported as lifecycleStateChange DROP)."""
    print_json(app.catalog().delete_asset(asset_id, now=utcnow()).to_json())


@assets.command("adopt")
@click.option("--dry-run", is_flag=True, help="Show what would be taken over; change nothing.")
@pass_app
def assets_adopt(app: AppContext, dry_run: bool) -> None:
    """Join the lineage a catalog split before placeholders were taken over.

    An event that named a dataset before olbridge's own asset of it was made left a placeholder
    apart from the asset (the lineage in two). Since, the asset takes the placeholder over when
    it is made; this takes over those split before: each received placeholder of a dataset that
    one of the catalog's assets is named as by the config's rules. On PostgreSQL the receivers
    wait while it runs."""
    found = app.catalog().adopt_placeholders(dry_run=dry_run)
    print_json({"wouldAdopt" if dry_run else "adopted": [adoption.to_json() for adoption in found]})


@assets.command("purge")
@click.option("--namespace", help="Assets of this namespace.")
@click.option("--id", "ids", multiple=True, help="These asset ids.")
@click.option("--type", "types", multiple=True, help="Assets of these types.")
@_where
@click.option("--end-date", help="Assets last updated before this time (ISO 8601).")
@click.option("--with-usages", is_flag=True, help="Also purge their usage records.")
@click.option("--with-lineage", is_flag=True, help="Also purge their lineage records.")
@click.option("--dry-run", is_flag=True, help="Show what would be purged; change nothing.")
@pass_app
def assets_purge(
    app: AppContext,
    namespace: str | None,
    ids: tuple[str, ...],
    types: tuple[str, ...],
    where: tuple[tuple[str, str, str], ...],
    end_date: str | None,
    with_usages: bool,
    with_lineage: bool,
    dry_run: bool,
) -> None:
    """Hard-delete assets that match every filter given (at least one is needed). An --id that
    names no asset is an error, as for assets delete: nothing is purged."""
    before = moment(end_date, "--end-date")
    query = AssetQuery.create(
        types=_types(types),
        namespace=check_namespace(namespace, "--namespace"),
        metadata=_filters(where),
        ids=ids,
        include_deleted=True,
        updated_before=before,
    )
    missing = [asset_id for asset_id in query.ids if app.catalog().get_asset(asset_id) is None]
    if missing:  # (a mistyped id: said, not "0 purged" with exit 0)
        names = ", ".join(repr(asset_id) for asset_id in missing)
        raise NotInCatalog(f"no asset with id{'s' if len(missing) > 1 else ''} {names}; nothing was purged")
    if dry_run:
        if query.is_empty:
            raise ValidationError("purge needs at least one filter", rule="purge.filter")
        print_json({"wouldPurge": [a.id for a in app.catalog().list_assets(query)]})
        return
    print_json(app.catalog().purge(query, usages=with_usages, lineage=with_lineage).to_json())
