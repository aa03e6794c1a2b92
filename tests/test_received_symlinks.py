"""Another name of a received dataset: Spark writes a table at its location (``hdfs://`` + the
path) and gives its Hive table as a symlink; Hive then reads the table by that name (with its
location as a symlink back). Marquez takes a symlink's name as the dataset's (its lineage leads to
the main dataset), and so does the receiver: the name is bound to no asset of its own but to the
dataset's, whichever order the events come in, in one group or in several."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.catalog.query import ExternalUsage
from bridge.mapping import Resolver
from bridge.model.received import writable
from bridge.receiver.imports import catalog_intake
from bridge.receiver.intake import run_steps
from tests.conftest import at
from tests.helpers import decl, ol_dataset, ol_run_event, run

pytestmark = pytest.mark.both_engines

HDFS = ("hdfs://namenode:8020", "/warehouse/sales.db/orders_enriched")
HIVE = ("hive://metastore:9083", "sales.orders_enriched")


def symlinked(namespace: str, name: str, other: tuple[str, str], kind: str) -> dict[str, Any]:
    identifiers = [{"namespace": other[0], "name": other[1], "type": kind}]
    return ol_dataset(namespace, name, symlinks={"identifiers": identifiers})


def spark(with_symlink: bool = True) -> dict[str, Any]:
    written = symlinked(*HDFS, HIVE, "TABLE") if with_symlink else ol_dataset(*HDFS)
    return ol_run_event(
        "COMPLETE",
        run_id="0194a1b2-0000-7000-8000-000000000001",
        job=("spark", "enrich"),
        inputs=[ol_dataset("s3://lake", "raw/orders")],
        outputs=[written],
        time="2025-03-01T09:00:00Z",
    )


def hive(with_symlink: bool = False) -> dict[str, Any]:
    read = symlinked(*HIVE, HDFS, "LOCATION") if with_symlink else ol_dataset(*HIVE)
    return ol_run_event(
        "COMPLETE",
        run_id="0194a1b2-0000-7000-8000-000000000002",
        job=("hive", "by_region"),
        inputs=[read],
        outputs=[ol_dataset("hive://metastore:9083", "sales.by_region")],
        time="2025-03-01T10:00:00Z",
    )


def take(catalog: Catalog, resolver: Resolver, *events: dict[str, Any]) -> None:
    assert [o.ok for o in catalog_intake(catalog, resolver).take(list(events))] == [True] * len(events)


def joined(catalog: Catalog, resolver: Resolver) -> str:
    """The one asset of the two names, after checking the lineage runs through it."""
    ids = sorted(a.id for a in catalog.list_assets())
    assert len(ids) == 3, ids  # s3's, the table's, by_region's: the table's two names are one asset
    table = catalog.find_asset_id(f"{HIVE[0]}/{HIVE[1]}", resolver)
    assert catalog.find_asset_id(f"{HDFS[0]}/{HDFS[1]}", resolver) == table  # as received: namespace/name
    down = catalog.lineage("s3://lake/raw/orders", direction="downstream", depth=3)
    assert {a.id for a in down.assets} == {
        "s3://lake/raw/orders",
        table,
        catalog.find_asset_id("hive://metastore:9083/sales.by_region", resolver),
    }
    return table


@pytest.mark.parametrize("hive_symlink", [False, True])
def test_a_symlink_s_name_read_later_is_the_dataset(
    catalog_target: str, resolver: Resolver, hive_symlink: bool
) -> None:
    with Catalog(catalog_target) as catalog:
        take(catalog, resolver, spark())
        take(catalog, resolver, hive(hive_symlink))
        joined(catalog, resolver)


def test_a_dataset_whose_symlink_names_one_bound_before_is_that_one(catalog_target: str, resolver: Resolver) -> None:
    with Catalog(catalog_target) as catalog:
        take(catalog, resolver, hive())  # Hive first, by the table's name alone
        take(catalog, resolver, spark())  # Spark's location, its symlink naming the table
        assert joined(catalog, resolver) == "hive://metastore:9083/sales.orders_enriched"


@pytest.mark.parametrize("order", ["spark first", "hive first"])
def test_both_names_in_one_group_are_one_dataset(catalog_target: str, resolver: Resolver, order: str) -> None:
    with Catalog(catalog_target) as catalog:
        events = [spark(), hive()] if order == "spark first" else [hive(), spark()]
        take(catalog, resolver, *events)
        assert joined(catalog, resolver) == f"{HDFS[0]}{HDFS[1]}"  # the least name, whichever came first


def test_a_name_two_datasets_give_is_its_own(catalog_target: str, resolver: Resolver) -> None:
    """A symlink two bound datasets name is no one's other name: a dataset of its own."""
    other = ol_run_event(
        "COMPLETE",
        run_id="0194a1b2-0000-7000-8000-000000000003",
        job=("spark", "copy"),
        outputs=[symlinked("hdfs://namenode:8020", "/backup/orders_enriched", HIVE, "TABLE")],
        time="2025-03-01T09:30:00Z",
    )
    with Catalog(catalog_target) as catalog:
        take(catalog, resolver, spark())
        take(catalog, resolver, other)
        take(catalog, resolver, hive())
        assert catalog.find_asset_id(f"{HIVE[0]}/{HIVE[1]}", resolver) == "hive://metastore:9083/sales.orders_enriched"
        assert len(catalog.list_assets()) == 5  # the backup, and the name its own


@pytest.mark.parametrize("declared", ["before", "after"])
def test_olbridge_s_asset_named_as_a_symlink_is_the_dataset(
    catalog_target: str, resolver: Resolver, declared: str
) -> None:
    """olbridge's own run reads the Hive table by its id; Spark writes the table at its location
    with the Hive table as a symlink: one asset, whether olbridge's came first (the event binds to
    it) or after (it takes the placeholder over)."""
    own = f"{HIVE[0]}/{HIVE[1]}"
    with Catalog(catalog_target) as catalog:
        report = run("report", inputs=(decl(own),), outputs=(decl("s3a://lake/report", type="File"),), start=at(10))
        if declared == "before":
            catalog.record_task_run(report)
        take(catalog, resolver, spark())
        if declared == "after":
            catalog.record_task_run(report)
        assert sorted(a.id for a in catalog.list_assets()) == sorted([own, "s3://lake/raw/orders", "s3a://lake/report"])
        down = catalog.lineage("s3://lake/raw/orders", direction="downstream", depth=3)
        assert {a.id for a in down.assets} == {"s3://lake/raw/orders", own, "s3a://lake/report"}


def take_as(catalog: Catalog, resolver: Resolver, patterns: tuple[str, ...], *events: dict[str, Any]) -> list[Any]:
    """The events taken under a token that may write the namespaces ``patterns``."""
    intake = catalog_intake(catalog, resolver)
    assert intake.write is not None
    steps = intake.taking(list(events), token="t", may_write=lambda ns: writable(patterns, ns), writes=patterns)
    return run_steps(steps, write=intake.write)


def test_a_token_writes_no_other_namespace_s_dataset_through_another_name(
    catalog_target: str, resolver: Resolver
) -> None:
    """A token of Hive's namespace writing the table by its Hive name, which is another name of
    Spark's dataset at its location (another namespace), is refused, as writing that dataset by its
    own name is; reading it, its checks are not taken (named, not described). The refusal points
    at the output (it pointed at the runId, and at a DatasetEvent's ``/job``, which it has not);
    facets an input carries under that name are not applied, and a warning says so (none did)."""
    hive_token = ("hive://metastore:9083", "hive")
    with Catalog(catalog_target) as catalog:
        take(catalog, resolver, spark())
        table = catalog.find_asset_id(f"{HDFS[0]}/{HDFS[1]}", resolver)
        writes = ol_run_event(
            "COMPLETE",
            run_id="0194a1b2-0000-7000-8000-000000000004",
            job=("hive", "overwrite"),
            inputs=[ol_dataset(HIVE[0], "sales.customers")],
            outputs=[ol_dataset(HIVE[0], "sales.summary"), ol_dataset(*HIVE)],
            time="2025-03-01T11:00:00Z",
        )
        outcome = take_as(catalog, resolver, hive_token, writes)
        assert [o.status for o in outcome] == ["refused"] and "another name" in outcome[0].message, outcome
        assert [p.pointer for p in outcome[0].problems] == ["/outputs/1"], outcome
        dataset_event = {
            "eventTime": "2025-03-01T11:30:00Z",
            "producer": "https://github.com/example/producer/tree/1.0",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
            "dataset": ol_dataset(*HIVE),
        }
        outcome = take_as(catalog, resolver, hive_token, dataset_event)
        assert [(o.status, [p.pointer for p in o.problems]) for o in outcome] == [("refused", ["/dataset"])], outcome
        failing = {"assertions": [{"assertion": "not_null", "success": False, "column": "id"}]}
        reads = ol_run_event(
            "FAIL",
            run_id="0194a1b2-0000-7000-8000-000000000005",
            job=("hive", "check"),
            inputs=[ol_dataset(*HIVE, dataQualityAssertions=failing)],
            time="2025-03-01T12:00:00Z",
        )
        taken = take_as(catalog, resolver, hive_token, reads)
        assert [o.ok for o in taken] == [True]
        assert [w for w in taken[0].warnings if "were not applied" in w] == [
            "/inputs/0: token 't' may not write dataset hive://metastore:9083 sales.orders_enriched, another name "
            "of a dataset in a namespace not this token's: the facets the event carries for this input were not "
            "applied"
        ], taken
        documented = {
            "_producer": "https://github.com/example/producer/tree/1.0",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DocumentationDatasetFacet.json",
            "description": "said by another namespace",
        }
        described = ol_run_event(
            "COMPLETE",
            run_id="0194a1b2-0000-7000-8000-000000000006",
            job=("hive", "describe"),
            inputs=[ol_dataset(*HIVE, documentation=documented)],
            time="2025-03-01T13:00:00Z",
        )
        taken = take_as(catalog, resolver, hive_token, described)
        assert [o.ok for o in taken] == [True] and any("were not applied" in w for w in taken[0].warnings), taken
        asset = catalog.get_asset(table)
        assert asset is not None and asset.description != "said by another namespace"
        assert catalog.health(at(100), ids=[table])[0].health != "FAIL"
        readers = sorted(u.job_name for u in catalog.usages_of(table) if isinstance(u, ExternalUsage))
        assert readers == ["check", "describe", "enrich"]


def test_an_asset_under_the_name_s_own_id_is_its_own(catalog_target: str, resolver: Resolver) -> None:
    """A name whose own id is an asset bound to no dataset (a Table declared under it) is that
    asset's, though a bound dataset's symlink names it."""
    own = f"{HIVE[0]}/{HIVE[1]}"
    with Catalog(catalog_target) as catalog:
        take(catalog, resolver, spark())
        catalog.record_task_run(run("peek", inputs=(decl(f"{HDFS[0]}{HDFS[1]}"),), start=at(5)))
        catalog.set_asset(decl(own, type="Table"), now=at(6))
        take(catalog, resolver, hive())
        readers = [u.job_name for u in catalog.usages_of(own) if isinstance(u, ExternalUsage)]
        assert readers == ["by_region"]


def test_olbridge_s_input_named_as_a_symlink_stays_named_so(catalog_target: str, resolver: Resolver) -> None:
    """A placeholder olbridge's run made of an input, bound to a dataset whose symlink names it,
    is rebuilt as the dataset's facets change: it stays named as olbridge's run named it (the
    Hive table), not as the dataset it was bound by (its location)."""
    own = f"{HIVE[0]}/{HIVE[1]}"
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("report", inputs=(decl(own),), start=at(10)))
        take(catalog, resolver, spark())
        described = spark()
        described["run"]["runId"] = "0194a1b2-0000-7000-8000-000000000009"
        described["eventTime"] = "2025-03-02T09:00:00Z"
        described["outputs"][0]["facets"]["documentation"] = {
            "_producer": "https://github.com/example/producer/tree/1.0",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DocumentationDatasetFacet.json",
            "description": "orders, enriched",
        }
        take(catalog, resolver, described)
        asset = catalog.get_asset(own)
        assert asset is not None and asset.description == "orders, enriched"
        named = resolver.dataset_for(asset.id, asset.type, asset.metadata)
        assert (named.namespace, named.name) == HIVE


def test_assets_read_together_are_as_each_read_alone(catalog_target: str, resolver: Resolver) -> None:
    """``get_assets`` (what a stream's round renders its events with, a few statements for the
    round; ``get_asset`` is it of one id) gives each record whole, a placeholder's facets and
    other names with it, those of each placeholder its own, and leaves out the ids that are no
    asset."""
    facets = {"schema": {"fields": [{"name": "id", "type": "int"}]}, "documentation": {"description": "d"}}
    own = run("report", outputs=(decl("s3a://lake/report", type="File", metadata={"tier": "gold"}),), start=at(10))
    with Catalog(catalog_target) as catalog:
        take(catalog, resolver, spark(), hive(with_symlink=True))
        event = ol_run_event(
            "COMPLETE",
            run_id="0194a1b2-0000-7000-8000-000000000009",
            job=("spark", "describe"),
            outputs=[ol_dataset("s3://lake", "described", **facets)],
            time="2025-03-01T11:00:00Z",
        )
        take(catalog, resolver, event)
        catalog.record_task_run(own)
        ids = [a.id for a in catalog.list_assets()]
        alone = {asset_id: catalog.get_asset(asset_id) for asset_id in ids}
        assert catalog.get_assets([*ids, "no/such", ids[0]]) == alone
        together = catalog.get_assets(ids)
        described = catalog.find_asset_id("s3://lake/described", resolver)
        assert together[described].received_facets["documentation"]["description"] == "d"
        assert together[described].received_facets["schema"]["fields"] == [{"name": "id", "type": "int"}]
        table = catalog.find_asset_id(f"{HIVE[0]}/{HIVE[1]}", resolver)
        assert {(i.namespace, i.name) for i in together[table].identifiers} >= {HIVE, HDFS} - {
            (together[table].metadata.get("olNamespace"), together[table].metadata.get("olName"))
        }
        assert (
            together["s3a://lake/report"].metadata["tier"] == "gold" and not together["s3a://lake/report"].identifiers
        )
        assert together[described].identifiers == ()  # no other name: none of another's
        assert catalog.get_assets([]) == {}
