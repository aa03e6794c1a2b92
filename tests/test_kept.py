"""What producers said is kept: a dataset's symlink identifiers as identifiers of its asset (found
by any of them, exported back beside olbridge's own), and the latest of each facet of a dataset
(custom ones too), shown and exported with its placeholder; the round trip import -> export keeps
every producer symlink and facet of the corpus, and exporting twice gives the same bytes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.catalog.engine import masked
from bridge.delivery.history import iter_events, iter_lines
from bridge.errors import ValidationError
from bridge.mapping import Resolver
from bridge.model import Identifier, Origin, parse_time
from bridge.openlineage.convert import EVENT_FACETS, Converter
from bridge.openlineage.validate import check_facet
from bridge.receiver.imports import catalog_intake
from tests.helpers import decl, invoke, ol_dataset, ol_run_event, run, table_contents

CORPUS = Path(__file__).resolve().parent / "producers"


def corpus() -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(CORPUS.glob("*.json"))]


def datasets_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    return [*([event["dataset"]] if "dataset" in event else []), *event.get("inputs", []), *event.get("outputs", [])]


def said(events: list[dict[str, Any]]) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[tuple[str, str], set[Any]]]:
    """What the events said of each dataset: the latest of each facet (by event time), and every
    symlink identifier given."""
    facets: dict[tuple[str, str], dict[str, tuple[Any, Any]]] = {}
    identifiers: dict[tuple[str, str], set[Any]] = {}
    for event in events:
        moment = parse_time(event["eventTime"], "eventTime", assume_utc=True)
        for dataset in datasets_of(event):
            key = (dataset["namespace"], dataset["name"])
            for name, facet in (dataset.get("facets") or {}).items():
                kept = facets.setdefault(key, {}).get(name)
                if kept is None or moment > kept[0]:
                    facets[key][name] = (moment, facet)
            given = ((dataset.get("facets") or {}).get("symlinks") or {}).get("identifiers") or []
            identifiers.setdefault(key, set()).update((i["namespace"], i["name"], i.get("type")) for i in given)
    return {k: {n: f for n, (_, f) in v.items()} for k, v in facets.items()}, identifiers


pytestmark = pytest.mark.both_engines


@pytest.fixture
def imported(catalog_target: str, resolver: Resolver) -> str:
    """The producer corpus imported, and one run of ours that reads every placeholder (so that
    each is exported)."""
    path = catalog_target
    with Catalog(path) as catalog:
        outcomes = catalog_intake(catalog, resolver).take(corpus())
        assert all(o.ok for o in outcomes), [o.message for o in outcomes if not o.ok]
        placeholders = [a.id for a in catalog.list_assets() if a.origin is Origin.EXTERNAL]
        catalog.record_task_run(
            run("report", inputs=tuple(decl(i) for i in placeholders), outputs=(decl("mart.report", type="Table"),))
        )
    return path


def test_the_round_trip_keeps_every_producer_symlink_and_facet(imported: str, resolver: Resolver) -> None:
    facets, identifiers = said(corpus())
    assert sum(len(v) for v in identifiers.values()) >= 6  # the corpus's producer symlinks
    converter = Converter(resolver)
    with Catalog(imported) as catalog:
        (start, _end) = [e for e in iter_events(catalog, converter) if e["job"]["name"] == "flow.report"]
    exported = {(d["namespace"], d["name"]): d["facets"] for d in start["inputs"]}
    assert set(facets) <= set(exported) and set(identifiers) <= set(exported)  # under the names they came with
    kept_identifiers = 0
    for dataset, given in facets.items():
        out = exported[dataset]
        for name, facet in given.items():
            if name in EVENT_FACETS:  # what the producer's run did, not what the dataset is
                assert name not in out, (dataset, name)
            elif list(check_facet(facet, "DatasetFacet", "")):  # refused by the spec (Spark's dataSource
                assert out.get(name) != facet, (dataset, name)  # uri "bigquery"): olbridge's own, if any
            elif name != "symlinks":
                assert out[name] == facet, (dataset, name)  # as the producer sent it, the latest of each
        assert "olbridge_asset" in out
        ids = {(i["namespace"], i["name"], i.get("type")) for i in (out.get("symlinks") or {}).get("identifiers", [])}
        assert identifiers.get(dataset, set()) <= ids, dataset  # every producer identifier, beside olbridge's own
        kept_identifiers += len(identifiers.get(dataset, set()))
    assert kept_identifiers == sum(len(v) for v in identifiers.values())


def test_exporting_twice_gives_the_same_bytes(imported: str, resolver: Resolver) -> None:
    first = invoke(imported, "export")
    second = invoke(imported, "export")
    assert first[0] == second[0] == 0 and first[1] and first[1] == second[1]  # stderr: progress with its rate
    with Catalog(imported) as catalog:
        assert first[1].splitlines() == list(iter_lines(catalog, Converter(resolver)))


def test_an_asset_is_found_by_any_name_it_came_under(imported: str) -> None:
    # Databricks' dbfs table: no naming rule gives it an id, so it has a hashed one
    with Catalog(imported) as catalog:
        (silver,) = [a for a in catalog.list_assets() if a.metadata.get("olNamespace") == "dbfs"]
        assert silver.id.startswith("ol:")
        assert catalog.asset(silver.id).identifiers == (
            Identifier("/user/hive/warehouse/silver.db", "silver.orders", "TABLE"),
        )
    for name in (
        silver.id,
        "dbfs//user/hive/warehouse/silver.db/orders",  # <olNamespace>/<olName>
        "/user/hive/warehouse/silver.db/silver.orders",  # its symlink's <namespace>/<name>
    ):
        code, out, err = invoke(imported, "assets", "show", name)
        assert code == 0, err
        shown = json.loads(out)
        assert shown["id"] == silver.id
        assert shown["identifiers"] == [
            {"namespace": "/user/hive/warehouse/silver.db", "name": "silver.orders", "type": "TABLE"}
        ]
        assert set(shown["facets"]) >= {"dataSource", "schema", "symlinks"}
        code, out, err = invoke(imported, "lineage", name, "--format", "json")
        assert code == 0, err
        assert json.loads(out)["root"] == silver.id
    hive = "hdfs://namenode:8020//warehouse/tablespace/managed/hive/sales.db/orders"  # a name that starts with /
    code, out, _ = invoke(imported, "assets", "show", hive)
    assert code == 0 and json.loads(out)["id"] == "hive://metastore.internal:9083/sales.orders"
    code, _, err = invoke(imported, "assets", "show", "hdfs://namenode:8020//nowhere")
    assert (code, err) == (
        1,
        "Error: no asset with id 'hdfs://namenode:8020//nowhere', nor one received under that name or symlink "
        f"(catalog {masked(str(imported))})\n",  # the catalog looked in: perhaps not the one meant
    )


def test_a_symlink_two_datasets_give_names_both(catalog: Catalog, resolver: Resolver) -> None:
    shared = {"identifiers": [{"namespace": "hive://m", "name": "shop.orders", "type": "TABLE"}]}
    event = ol_run_event(
        inputs=[ol_dataset("s3://a", "orders", symlinks=shared), ol_dataset("s3://b", "orders", symlinks=shared)]
    )
    catalog_intake(catalog, resolver).take([event])
    assert catalog.find_asset_id("s3://a/orders") == "s3://a/orders"
    with pytest.raises(
        ValidationError, match=r"'hive://m/shop.orders' names several assets: s3://a/orders, s3://b/orders"
    ):
        catalog.find_asset_id("hive://m/shop.orders")


LATE_LINKS = [{"namespace": "hive://m", "name": "t", "type": "VIEW"}, {"namespace": "gs://x", "name": "y"}]


def facets_event(minute: int, **facets: Any) -> dict[str, Any]:
    return ol_run_event(
        "RUNNING",
        run_id=f"0194a1b2-0000-7000-8000-{minute:012d}",
        inputs=[ol_dataset("s3://b", "k", **facets)],
        time=f"2025-03-01T08:{minute:02d}:00Z",
    )


def test_the_latest_of_each_dataset_facet_and_every_identifier_whatever_the_order(
    resolver: Resolver, new_catalog: Callable[[], Catalog], engine: str
) -> None:
    """An earlier event's facet that a later one does not repeat is kept; one it repeats is
    replaced; an event that repeats the latest's facets changes nothing; identifiers accumulate,
    with the latest type: the same in any order, in one group or one a group."""
    events = [
        facets_event(
            0,
            documentation={"description": "early"},
            acme_quality={"score": 1},
            symlinks={"identifiers": [{"namespace": "hive://m", "name": "t", "type": "TABLE"}]},
        ),
        facets_event(2, acme_quality={"score": 2}, acme_owner={"team": "a"}),
        facets_event(
            5,
            documentation={"description": "late"},
            symlinks={"identifiers": LATE_LINKS},
        ),
        facets_event(7, documentation={"description": "late"}),  # the latest says less
        facets_event(9, documentation={"description": "late"}),  # and again, the same
    ]  # fmt: skip
    states = []
    orders = list(itertools.permutations(events))
    if engine != "sqlite":  # a database each: every seventh order of the 120
        orders = orders[::7]
    for order in orders:
        for grouped in (True, False):
            with new_catalog() as catalog:
                intake = catalog_intake(catalog, resolver)
                for group in [list(order)] if grouped else [[e] for e in order]:
                    assert [o.status for o in intake.take(group)] == ["accepted"] * len(group)
                asset = catalog.asset("s3://b/k")
                contents = {t: sorted(rows, key=repr) for t, rows in table_contents(catalog).items()}
                del contents["received_events"]  # its keys follow the order the events came in
                states.append((asset.received_facets, asset.identifiers, asset.description, contents))
    assert all(state == states[0] for state in states)
    facets, identifiers, description, _ = states[0]
    assert {key: {k: v for k, v in facet.items() if not k.startswith("_")} for key, facet in facets.items()} == {
        "documentation": {"description": "late"},
        "acme_quality": {"score": 2},
        "acme_owner": {"team": "a"},
        "symlinks": {"identifiers": LATE_LINKS},
    }
    assert description == "late"
    assert identifiers == (Identifier("gs://x", "y", None), Identifier("hive://m", "t", "VIEW"))


def test_an_event_that_repeats_the_latest_facets_writes_no_facet_row(resolver: Resolver) -> None:
    """The merge is the same on both engines; SQLite's statement trace shows what was written."""
    catalog = Catalog(":memory:")
    intake = catalog_intake(catalog, resolver)
    intake.take([facets_event(0, documentation={"description": "d"}, schema={"fields": [{"name": "id"}]})])
    statements: list[str] = []
    catalog._conn.set_trace_callback(statements.append)
    intake.take([facets_event(1, documentation={"description": "d"}, schema={"fields": [{"name": "id"}]})])
    catalog._conn.set_trace_callback(None)
    assert statements and not [s for s in statements if "external_facets" in s]
    intake.take([facets_event(2, documentation={"description": "new"}, schema={"fields": [{"name": "id"}]})])
    assert catalog.asset("s3://b/k").received_facets["documentation"]["description"] == "new"
    catalog.close()


def test_the_placeholder_keeps_no_symlinks_metadata_and_its_own_assets_take_no_producer_facets(
    catalog: Catalog, resolver: Resolver, converter: Converter
) -> None:
    catalog.record_task_run(run("load", outputs=(decl("mart.orders", type="Table", description="Ours"),)))
    event = ol_run_event(
        inputs=[ol_dataset("olbridge", "mart.orders", documentation={"description": "Theirs"}, acme={"x": 1})]
    )
    catalog_intake(catalog, resolver).take([event])
    own = catalog.asset("mart.orders")
    assert own.origin is not Origin.EXTERNAL and own.received_facets == {} and own.description == "Ours"
    exported = [d for e in iter_events(catalog, converter) for d in e.get("outputs", [])]
    assert exported and all(d["facets"]["documentation"]["description"] == "Ours" for d in exported)
    assert all("acme" not in d["facets"] for d in exported)


def test_a_placeholder_never_overwrites_an_asset_of_the_catalogs_own(catalog: Catalog) -> None:
    """A group that chose a placeholder's id before another process made the catalog's own asset
    of that id writes its placeholder after: the own asset stays as it is (on PostgreSQL through
    the bulk form of the statement, as the receiver writes three rows and more)."""
    from bridge.catalog import sql
    from bridge.catalog.rows import asset_row
    from bridge.model import Asset

    now = parse_time("2025-03-01T08:00:00Z", "now")
    owns = [catalog.set_asset(decl(f"warehouse.t{n}", type="Table", description="ours"), now=now) for n in range(3)]
    rows = [asset_row(Asset(own.id, "Table", None, Origin.EXTERNAL, now, now, description="theirs")) for own in owns]
    catalog.db.write(lambda cur: catalog.engine.write_all(cur, [(sql.UPSERT_PLACEHOLDER, rows)]))
    assert [(a.origin, a.description) for a in map(catalog.asset, [own.id for own in owns])] == [
        (Origin.DECLARED, "ours")
    ] * 3


def test_one_converter_shows_what_an_older_event_added_and_its_events_validate(
    catalog: Catalog, resolver: Resolver
) -> None:
    """A stream worker keeps one converter for its life: an older event that adds a facet or a
    symlink (the placeholder's version does not move) shows in the next conversion as in a new
    converter's; an identifier given without a type still makes a valid symlinks facet (typed
    TABLE, as olbridge's own of a placeholder no producer typed)."""
    from bridge.openlineage.validate import validate_event

    intake = catalog_intake(catalog, resolver)
    converter = Converter(resolver)
    assert intake.take([facets_event(5, documentation={"description": "late"})])[0].ok
    before = converter.dataset(catalog.asset("s3://b/k"))
    assert "acme_quality" not in before["facets"]
    untyped = {"identifiers": [{"namespace": "hive://m", "name": "t"}]}
    assert intake.take([facets_event(1, acme_quality={"score": 1}, symlinks=untyped)])[0].ok
    asset = catalog.asset("s3://b/k")
    assert asset.updated_at == parse_time("2025-03-01T08:05:00Z", "t")  # the same version
    after = converter.dataset(asset)
    assert after == Converter(resolver).dataset(asset)
    assert after["facets"]["acme_quality"]["score"] == 1
    (given,) = [i for i in after["facets"]["symlinks"]["identifiers"] if i["namespace"] == "hive://m"]
    assert given["type"] == "TABLE" and "datasetType" not in after["facets"]
    event = {**ol_run_event("COMPLETE"), "inputs": [after]}
    assert [p for p in validate_event(event) if "symlinks" in p.pointer] == []
