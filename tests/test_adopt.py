"""A received placeholder taken over by olbridge's own asset of the same dataset: whichever came
first, an event naming a dataset or olbridge's own run naming it under another spelling (Spark's
``s3://lake`` + ``raw/orders`` for olbridge's ``s3a://lake/raw/orders``; dbt-ol's
``postgres://pg:5432`` + ``shop.marts.orders`` for ``postgresql://pg/shop.marts.orders``), the
catalog holds one asset and one lineage, as Marquez does from olbridge's events."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest

from bridge.catalog import Catalog
from bridge.catalog.postgres.engine import ADOPTION_LOCK
from bridge.catalog.query import AssetQuery, ExternalUsage
from bridge.errors import RunEndedError
from bridge.mapping import Resolver
from bridge.model import TaskState
from bridge.model.health import FreshnessRule
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import decl, invoke, ol_dataset, ol_run_event, run
from tests.postgres import PostgresServer
from tests.test_cli import line
from tests.test_receiver_columns import IDENTITY, dataset, field

pytestmark = pytest.mark.both_engines

OWN = "s3a://lake/raw/orders"  # olbridge's own id; exported as s3://lake + raw/orders
RECEIVED = "s3://lake/raw/orders"  # the id the rules name Spark's dataset back as


def spark_event(run_id: str = "0194a1b2-0000-7000-8000-000000000001", time: str = "2025-03-01T09:00:00Z") -> Any:
    lineage = {"fields": {"id": {"inputFields": [field("s3://lake", "raw/orders", "id", IDENTITY)]}}}
    return ol_run_event(
        "COMPLETE",
        run_id=run_id,
        job=("spark", "orders_daily"),
        inputs=[dataset("s3://lake", "raw/orders", ["id", "amount"])],
        outputs=[dataset("s3://lake", "mart/daily", ["id"], columnLineage=lineage)],
        time=time,
    )


def ids(catalog: Catalog) -> list[str]:
    return sorted(a.id for a in catalog.list_assets())


def test_an_own_output_written_after_the_event_takes_its_placeholder_over(
    catalog_target: str, resolver: Resolver
) -> None:
    with Catalog(catalog_target) as catalog:
        assert [o.ok for o in catalog_intake(catalog, resolver).take([spark_event()])] == [True]
        assert ids(catalog) == ["s3://lake/mart/daily", RECEIVED]
        catalog.record_task_run(run("load", outputs=(decl(OWN, type="File"),), start=at(10)))

        assert ids(catalog) == ["s3://lake/mart/daily", OWN]  # one asset for the dataset
        asset = catalog.get_asset(OWN)
        assert asset is not None and asset.type == "File" and asset.origin.value != "external"
        assert [c.name for c in asset.columns] == ["id", "amount"] or asset.columns == ()
        down = catalog.lineage(OWN, direction="downstream", depth=1)
        assert {a.id for a in down.assets} == {OWN, "s3://lake/mart/daily"}
        found = catalog.column_lineage("s3://lake/mart/daily", "id", direction="upstream", depth=1)
        assert {(e.upstream, e.upstream_column) for e in found.edges} == {(OWN, "id")}
        # the dataset's received name finds it, and a later event naming it joins it
        assert catalog.find_asset_id("s3://lake/raw/orders", resolver) == OWN
        later = spark_event("0194a1b2-0000-7000-8000-000000000002", "2025-03-02T09:00:00Z")
        assert [o.ok for o in catalog_intake(catalog, resolver).take([later])] == [True]
        assert ids(catalog) == ["s3://lake/mart/daily", OWN]
        assert {a.id for a in catalog.lineage("s3://lake/mart/daily", direction="upstream", depth=1).assets} == {
            OWN,
            "s3://lake/mart/daily",
        }
        # the received runs name it among their inputs
        runs = catalog.external_sources()
        assert len(runs) == 2 and all(OWN in r.inputs and RECEIVED not in r.inputs for r in runs)
        # and the health it is judged by is its own
        assert catalog.usages_of(OWN)


def test_an_own_input_read_after_the_event_takes_its_placeholder_over(catalog_target: str, resolver: Resolver) -> None:
    dbt_ol = ol_run_event(
        "COMPLETE",
        job=("dbt", "shop.marts.orders"),
        inputs=[ol_dataset("postgres://pg:5432", "shop.staging.orders")],
        outputs=[ol_dataset("postgres://pg:5432", "shop.marts.orders")],
    )
    with Catalog(catalog_target) as catalog:
        assert [o.ok for o in catalog_intake(catalog, resolver).take([dbt_ol])] == [True]
        before = ids(catalog)
        assert len(before) == 2
        own = "postgresql://pg/shop.marts.orders"
        catalog.record_task_run(
            run("report", inputs=(decl(own),), outputs=(decl("s3a://lake/report", type="File"),), start=at(10))
        )
        up = catalog.lineage("s3a://lake/report", direction="upstream", depth=5)
        assert {a.id for a in up.assets} == {"s3a://lake/report", own, *(i for i in before if "staging" in i)}
        assert own in ids(catalog) and len(ids(catalog)) == 3


def test_an_event_after_an_own_input_binds_to_it(catalog_target: str, resolver: Resolver) -> None:
    """The other order: the placeholder olbridge's own run made of its input is the dataset's
    asset, as olbridge's own asset is (it was taken for none, a placeholder)."""
    own = "postgresql://pg/shop.marts.orders"
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(
            run("report", inputs=(decl(own),), outputs=(decl("s3a://lake/report", type="File"),), start=at(10))
        )
        written = [ol_dataset("postgres://pg:5432", "shop.marts.orders")]
        dbt_ol = ol_run_event("COMPLETE", job=("dbt", "m"), outputs=written)
        assert [o.ok for o in catalog_intake(catalog, resolver).take([dbt_ol])] == [True]
        assert ids(catalog) == [own, "s3a://lake/report"]
        assert catalog.find_asset_id("postgres://pg:5432/shop.marts.orders", resolver) == own


def test_a_placeholder_an_own_run_names_is_left_as_it_is(catalog_target: str, resolver: Resolver) -> None:
    """An own run that read the placeholder by its id made it a spelling of its own: an asset of
    the same dataset under another spelling stays apart (which of the two the dataset is, the
    user says)."""
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([spark_event()])
        catalog.record_task_run(run("peek", inputs=(decl(RECEIVED),), start=at(5)))
        catalog.record_task_run(run("load", outputs=(decl(OWN, type="File"),), start=at(10)))
        assert ids(catalog) == ["s3://lake/mart/daily", RECEIVED, OWN]


def test_a_refused_write_takes_nothing_over(catalog_target: str, resolver: Resolver, engine: str) -> None:
    """Runs recorded together land together or not at all: one refused, the takeover another of
    them made is undone with it on SQLite. On PostgreSQL a takeover is made first, in a short
    transaction of its own (receivers wait for it): the placeholder stays under the asset's id,
    and nothing else of the write lands."""
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([spark_event()])
        catalog.record_task_run(run("other", start=at(1), end=at(2)))
        again = run("other", start=at(1), end=at(3))  # an ended run recorded again: refused
        with pytest.raises(RunEndedError):
            catalog.record_task_runs([run("load", outputs=(decl(OWN, type="File"),), start=at(10)), again])
        assert ids(catalog) == ["s3://lake/mart/daily", RECEIVED if engine == "sqlite" else OWN]
        assert catalog.count_task_runs() == 1
        asset = catalog.get_asset(ids(catalog)[1])
        assert asset is not None and asset.type == "External"


def test_the_commands_take_over_by_the_config_s_rules(tmp_path: Path, catalog_target: str) -> None:
    """``olbridge record`` names its assets by the config's rules, as ``export`` does: a rule of
    the user's names the Table ``orders`` as a warehouse's dataset an event named before."""
    (tmp_path / "rules.toml").write_text(
        '[[rule]]\nname = "wh"\npriority = 10\n[rule.match]\nid_form = "name"\nsystems = ["wh"]\n'
        '[rule.dataset]\nnamespace = "warehouse://main"\nname = "{id}"\n'
    )
    config = tmp_path / "olbridge.toml"
    config.write_text('mappings = ["rules.toml"]\n')
    event = ol_run_event("COMPLETE", job=("etl", "load"), outputs=[ol_dataset("warehouse://main", "orders")])
    (tmp_path / "events.ndjson").write_text(json.dumps(event) + "\n")
    record = line(
        startDate="2025-03-02T00:00:00Z",
        endDate="2025-03-02T00:01:00Z",
        inputs=[{"id": "orders", "type": "Table", "metadata": {"system": "wh"}}],
        outputs=[{"id": "daily", "type": "Table"}],
    )
    (tmp_path / "runs.jsonl").write_text(record + "\n")
    base = ("--config", str(config))
    assert invoke(catalog_target, *base, "import", str(tmp_path / "events.ndjson"))[0] == 0
    code, _, err = invoke(catalog_target, *base, "record", "--file", str(tmp_path / "runs.jsonl"))
    assert code == 0, err
    code, out, _ = invoke(catalog_target, *base, "assets", "list", "--json")
    assert sorted(a["id"] for a in json.loads(out)) == ["daily", "orders"]
    code, out, _ = invoke(catalog_target, *base, "assets", "show", "orders")
    shown = json.loads(out)
    assert shown["openlineage"]["namespace"] == "warehouse://main"
    assert [u["jobName"] for u in shown["usages"] if u.get("external")] == ["load"]


def test_an_output_a_failed_run_makes_takes_its_placeholder_over(catalog_target: str, resolver: Resolver) -> None:
    """A failed run makes its new typed outputs (never written, FAIL): that too takes over."""
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([spark_event()])
        catalog.record_task_run(run("load", outputs=(decl(OWN, type="File"),), start=at(10), state="FAILED"))
        assert ids(catalog) == ["s3://lake/mart/daily", OWN]
        assert {a.id for a in catalog.lineage(OWN, direction="downstream", depth=1).assets} == {
            OWN,
            "s3://lake/mart/daily",
        }


def record_own(url: str, done: threading.Event) -> None:
    """olbridge's own run writing ``OWN`` (in a thread: a takeover), ``done`` set once it is."""
    with Catalog(url) as catalog:
        catalog.record_task_run(run("load", outputs=(decl(OWN, type="File"),), start=at(10)))
    done.set()


def test_a_takeover_waits_for_a_receiver_s_group_in_flight(
    postgres: PostgresServer, catalog_template: str, resolver: Resolver
) -> None:
    """Where receivers write beside it, a group that read the placeholder's binding before the
    takeover would write its usages under the placeholder's id after it: a takeover waits for the
    groups in flight (which hold the lock shared from before they read their bindings)."""
    name = postgres.create_database(template=catalog_template)
    try:
        with Catalog(postgres.url(name)) as catalog:
            catalog_intake(catalog, resolver).take([spark_event()])
        group = psycopg.connect(postgres.dsn(name))  # a receiver's group, its bindings read
        group.execute(f"SELECT pg_advisory_xact_lock_shared({ADOPTION_LOCK})")
        done = threading.Event()
        writer = threading.Thread(target=record_own, args=(postgres.url(name), done), daemon=True)
        writer.start()
        assert not done.wait(1.0)  # waiting for the group
        group.commit()
        group.close()
        assert done.wait(30)
        writer.join(5)
        with Catalog(postgres.url(name)) as catalog:
            assert ids(catalog) == ["s3://lake/mart/daily", OWN]
    finally:
        postgres.drop_database(name)


@pytest.mark.parametrize("later", ["2025-03-01T12:00:00Z", "2025-03-05T09:00:00Z"], ids=["batch", "partition"])
def test_a_takeover_waits_for_retention_folding_the_placeholder_s_runs(
    postgres: PostgresServer, catalog_template: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch, later: str
) -> None:
    """Retention keeps what health reads of the received runs it deletes (their edges, their
    writes) under the ids the runs name: a takeover committed while it folds would leave the
    kept edge under the placeholder's old id. A transaction that folds (a batch of a day's runs,
    or a whole day's partition dropped: the job's later run stays, on the same day or another)
    holds the takeovers' lock shared, as a receiver's group does: the takeover waits, then moves
    the kept edge too."""
    from bridge.catalog import retention, writes_kept

    name = postgres.create_database(template=catalog_template)
    folded, release = threading.Event(), threading.Event()
    real = writes_kept.fold_received

    def held(cur: Any, sources: Any) -> None:
        real(cur, sources)
        folded.set()
        assert release.wait(30)

    monkeypatch.setattr(writes_kept, "fold_received", held)
    try:
        with Catalog(postgres.url(name)) as catalog:
            later_run = spark_event("0194a1b2-0000-7000-8000-000000000002", later)
            catalog_intake(catalog, resolver).take([spark_event(), later_run])
        done = threading.Event()

        def expire() -> None:
            with Catalog(postgres.url(name)) as catalog:
                windows = retention.Windows(external_runs=86400.0)
                gone = retention.expire(catalog.db, windows, at(60 * 24 * 400).timestamp(), pause=0)
                assert gone["externalRuns"] == 1

        expiring = threading.Thread(target=expire, daemon=True)
        expiring.start()
        assert folded.wait(30)
        writer = threading.Thread(target=record_own, args=(postgres.url(name), done), daemon=True)
        writer.start()
        waited = not done.wait(1.0)  # the takeover waits for the batch
        release.set()
        expiring.join(30)
        assert done.wait(30)
        writer.join(5)
        with psycopg.connect(postgres.dsn(name)) as conn:
            kept = conn.execute("SELECT upstream_id, downstream_id FROM kept_edges ORDER BY 1").fetchall()
        assert kept == [(OWN, "s3://lake/mart/daily")] and waited
    finally:
        release.set()
        postgres.drop_database(name)


def test_rows_an_id_kept_from_before_a_purge_stay_once(catalog_target: str, resolver: Resolver) -> None:
    """An asset purged without its lineage leaves its received usages and edges under its id;
    made again, it takes over the placeholder that an event bound meanwhile: the rows both hold
    (the same job reading it) are kept once, and the write is taken."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("load", outputs=(decl(OWN, type="File"),), start=at(0)))
        catalog_intake(catalog, resolver).take([spark_event()])  # bound to OWN
        catalog.purge(AssetQuery(ids=(OWN,)))
        later = spark_event("0194a1b2-0000-7000-8000-000000000002", "2025-03-02T09:00:00Z")
        catalog_intake(catalog, resolver).take([later])  # a placeholder, the same job's usage
        assert RECEIVED in ids(catalog)
        catalog.record_task_run(run("load", execution="e2", outputs=(decl(OWN, type="File"),), start=at(10)))
        assert ids(catalog) == ["s3://lake/mart/daily", OWN]
        readers = [u for u in catalog.usages_of(OWN) if isinstance(u, ExternalUsage)]
        assert [(u.direction, u.job_name) for u in readers] == [("input", "orders_daily")]
        down = catalog.lineage(OWN, direction="downstream", depth=1)
        assert {a.id for a in down.assets} == {OWN, "s3://lake/mart/daily"}


def test_the_asset_taken_over_is_named_by_the_rules_not_as_received(catalog_target: str, resolver: Resolver) -> None:
    """What the receiver keeps of a dataset in its placeholder (the name it came under, pinned,
    and its sightings) is not the own asset's: a Table declared as the Hive table that Spark gave
    as its location's symlink is exported as the Hive table, and its rules move it after."""
    spark_written = ol_dataset(
        "hdfs://namenode:8020",
        "/warehouse/orders",
        symlinks={"identifiers": [{"namespace": "hive://metastore:9083", "name": "sales.orders", "type": "TABLE"}]},
    )
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([ol_run_event("COMPLETE", job=("spark", "w"), outputs=[spark_written])])
        own = "hive://metastore:9083/sales.orders"
        catalog.set_asset(decl(own, type="Table"), now=at(10))
        asset = catalog.get_asset(own)
        assert asset is not None and not {"olNamespace", "olName", "firstSeen", "lastSeen", "producer"} & set(
            asset.metadata
        )
        named = resolver.dataset_for(asset.id, asset.type, asset.metadata)
        assert (named.namespace, named.name) == ("hive://metastore:9083", "sales.orders")
        assert [a.id for a in catalog.list_assets()] == [own]


def test_a_failed_run_s_output_taken_over_is_the_run_s(catalog_target: str, resolver: Resolver) -> None:
    """As its success would have made it: its type and description, not a placeholder's."""
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([spark_event()])
        written = decl(OWN, type="File", description="raw orders")
        catalog.record_task_run(run("load", outputs=(written,), start=at(10), state="FAILED"))
        asset = catalog.get_asset(OWN)
        assert asset is not None and (asset.type, asset.origin.value) == ("File", "declared")
        assert asset.description == "raw orders"


def test_the_placeholder_s_history_is_named_anew(catalog_target: str, resolver: Resolver) -> None:
    with Catalog(catalog_target) as catalog:
        catalog_intake(catalog, resolver).take([spark_event()])
        catalog.set_asset(decl(RECEIVED, metadata={"team": "lake"}), now=at(5))  # a change of the placeholder
        catalog.record_task_run(run("load", outputs=(decl(OWN, type="File"),), start=at(10)))
        assert [c.asset.id for c in catalog.latest_changes(OWN, 10)] == [OWN]
        assert catalog.latest_changes(RECEIVED, 10) == []


def test_assets_adopt_joins_a_split_made_before(catalog_target: str, resolver: Resolver) -> None:
    """A split that no write mended (made before takeovers were, or by an asset named anew after
    the event, here by pinning its dataset): ``assets adopt --dry-run`` says it, ``assets adopt``
    joins it, and again finds nothing."""
    dbt_ol = ol_run_event("COMPLETE", job=("dbt", "orders"), outputs=[ol_dataset("postgres://pg:5432", "shop.orders")])
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("report", inputs=(decl("orders"),), start=at(10)))
        catalog_intake(catalog, resolver).take([dbt_ol])
        placeholder = catalog.find_asset_id("postgres://pg:5432/shop.orders", resolver)
        assert placeholder != "orders"
    pin = ("--metadata", "olNamespace=postgres://pg:5432", "--metadata", "olName=shop.orders")
    assert invoke(catalog_target, "assets", "set", "orders", *pin)[0] == 0
    code, out, _ = invoke(catalog_target, "assets", "adopt", "--dry-run")
    assert code == 0 and json.loads(out) == {"wouldAdopt": [{"placeholder": placeholder, "assetId": "orders"}]}
    code, out, _ = invoke(catalog_target, "assets", "adopt")
    assert code == 0 and json.loads(out) == {"adopted": [{"placeholder": placeholder, "assetId": "orders"}]}
    with Catalog(catalog_target) as catalog:
        assert ids(catalog) == ["orders"]
        assert [u.job_name for u in catalog.usages_of("orders") if isinstance(u, ExternalUsage)] == ["orders"]
        assert catalog.find_asset_id("postgres://pg:5432/shop.orders", resolver) == "orders"
    assert json.loads(invoke(catalog_target, "assets", "adopt")[1]) == {"adopted": []}


def test_an_own_asset_declared_as_another_dataset_keeps_the_received_one_apart(
    catalog_targets: Callable[[], str], resolver: Resolver
) -> None:
    """A placeholder under the id an own write declares, of another dataset than the one the
    write's metadata names (Airflow's table on pg-old; olbridge's asset of the same id on
    pg-new): two datasets, never one asset. The receiver keeps the second apart when the asset
    came first; an own write after the event moves the placeholder apart, with a warning, so the
    catalog is the same in either order and the asset is exported as its metadata says."""
    table = "shop.public.orders"
    old, new = "postgres://pg-old:5432", "postgres://pg-new:5432"
    meta = {"system": "postgres", "host": "pg-new", "port": "5432"}
    airflow = ol_run_event("COMPLETE", job=("airflow", "load_orders"), outputs=[ol_dataset(old, table)])
    later = ol_run_event(
        "COMPLETE",
        run_id="0194a1b2-0000-7000-8000-0000000000aa",
        job=("airflow", "read_orders"),
        inputs=[ol_dataset(new, table)],
    )

    def state(catalog: Catalog) -> tuple[Any, ...]:
        asset = catalog.get_asset(table)
        assert asset is not None
        named = resolver.dataset_for(asset.id, asset.type, asset.metadata)
        return (
            ids(catalog),
            asset.origin.value,
            (named.namespace, named.name),
            catalog.find_asset_id(f"{old}/{table}", resolver),
            catalog.find_asset_id(f"{new}/{table}", resolver),
        )

    outcomes = []
    for event_first in (True, False):
        with Catalog(catalog_targets()) as catalog:
            own = run("load", outputs=(decl(table, type="Table", metadata=meta),), start=at(10))
            if event_first:
                assert [o.ok for o in catalog_intake(catalog, resolver).take([airflow])] == [True]
                result = catalog.record_task_run(own)
                assert any(old in w and "kept apart as 'ol:" in w for w in result.warnings), result.warnings
            else:
                catalog.record_task_run(own)
                assert [o.ok for o in catalog_intake(catalog, resolver).take([airflow])] == [True]
            assert [o.ok for o in catalog_intake(catalog, resolver).take([later])] == [True]
            outcomes.append(state(catalog))
            # the asset's lineage is pg-new's: the later reader, not the load of pg-old
            down = catalog.lineage(table, direction="downstream", depth=1)
            assert len(down.assets) == 1 and catalog.usages_of(table)
    assert outcomes[0] == outcomes[1], outcomes
    assets, origin, named, by_old, by_new = outcomes[0]
    assert origin != "external" and named == (new, table)
    assert by_new == table and by_old is not None and by_old.startswith("ol:") and by_old in assets


def _pg_old_placeholder(catalog: Catalog, resolver: Resolver) -> None:
    airflow = ol_run_event(
        "COMPLETE", job=("airflow", "load_orders"), outputs=[ol_dataset("postgres://pg-old:5432", "shop.public.orders")]
    )
    assert [o.ok for o in catalog_intake(catalog, resolver).take([airflow])] == [True]


PG_NEW = {"system": "postgres", "host": "pg-new", "port": "5432"}


def test_what_cannot_make_the_asset_moves_nothing_apart(catalog_target: str, resolver: Resolver) -> None:
    """An output declared without its type cannot make an asset: the write of it is refused (a
    warning), and the placeholder under its id stays where it is, as before."""
    with Catalog(catalog_target) as catalog:
        _pg_old_placeholder(catalog, resolver)
        result = catalog.record_task_run(
            run("load", outputs=(decl("shop.public.orders", metadata=PG_NEW),), start=at(10))
        )
        assert not any("kept apart" in w for w in result.warnings), result.warnings
        assert ids(catalog) == ["shop.public.orders"]


def test_a_failed_runs_output_moves_its_placeholder_apart_and_says_so(catalog_target: str, resolver: Resolver) -> None:
    with Catalog(catalog_target) as catalog:
        _pg_old_placeholder(catalog, resolver)
        failed = run("load", outputs=(decl("shop.public.orders", type="Table", metadata=PG_NEW),), start=at(10))
        result = catalog.record_task_run(attrs.evolve(failed, state=TaskState.FAILED))
        assert any("kept apart as 'ol:" in w for w in result.warnings), result.warnings
        assert len(ids(catalog)) == 2 and "shop.public.orders" in ids(catalog)


def test_an_id_olbridges_runs_name_is_left_as_it_is(catalog_target: str, resolver: Resolver) -> None:
    """A placeholder an own run read under its id is a spelling of olbridge's: its lineage and
    column lineage are the run's, and nothing is moved apart from it (as no takeover is)."""
    table = "shop.public.orders"
    with Catalog(catalog_target) as catalog:
        _pg_old_placeholder(catalog, resolver)
        catalog.record_task_run(run("report", inputs=(decl(table),), outputs=(decl("rep.totals", type="Table"),)))
        result = catalog.record_task_run(
            run("load", outputs=(decl(table, type="Table", metadata=PG_NEW),), start=at(10))
        )
        assert not any("kept apart" in w for w in result.warnings) and ids(catalog) == ["rep.totals", table]


def test_a_rule_set_on_the_id_stays_with_it(catalog_target: str, resolver: Resolver) -> None:
    """A freshness rule a user set on the id (of the placeholder, then) stays with the id when the
    placeholder moves apart: had the asset come first, the rule would be the asset's."""
    table = "shop.public.orders"
    rule = FreshnessRule.create(max=timedelta(hours=6))
    with Catalog(catalog_target) as catalog:
        _pg_old_placeholder(catalog, resolver)
        catalog.set_freshness(table, rule, now=at(1))
        result = catalog.record_task_run(
            run("load", outputs=(decl(table, type="Table", metadata=PG_NEW),), start=at(10))
        )
        assert any("kept apart" in w for w in result.warnings), result.warnings
        moved = next(i for i in ids(catalog) if i.startswith("ol:"))
        assert catalog.freshness_of(table) == rule and catalog.freshness_of(moved) is None
