"""``olbridge lineage ID --as-of T``: the graph as the catalog knew it at T, from the edges of the
runs (olbridge's own and external ones) that had ended by then and the jobs JobEvents had
declared."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.drawing.asset_graph import graph_json
from bridge.mapping import Resolver
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import JOB_EVENT_URL, PRODUCER, decl, invoke, ol_dataset, ol_run_event, run

EXPORT = "s3://exports/orders.csv"
PARTIAL = "s3://exports/partial.csv"
TOPIC = "kafka://broker:9092/orders"


def when(minutes: float) -> str:
    return at(minutes).strftime("%Y-%m-%dT%H:%M:%SZ")


pytestmark = pytest.mark.both_engines


@pytest.fixture
def catalog_path(catalog_target: str, resolver: Resolver) -> str:
    """raw.orders -(load, ours, 08:00-08:10)-> stg.orders -(build, ours, 08:20-08:30)-> mart.orders
    -(external run, 08:40-08:50)-> the export -(a JobEvent at 09:00)-> a topic; and an external
    run from mart.orders still RUNNING (since 08:45)."""
    path = catalog_target
    mart = ol_dataset("olbridge", "mart.orders")  # olbridge's own asset, as its events name it
    with Catalog(path) as catalog:
        catalog.record_task_run(
            run(
                "load",
                inputs=(decl("raw.orders"),),
                outputs=(decl("stg.orders", type="Table"),),
                start=at(0),
                end=at(10),
            )
        )
        catalog.record_task_run(
            run(
                "build",
                inputs=(decl("stg.orders"),),
                outputs=(decl("mart.orders", type="Table"),),
                start=at(20),
                end=at(30),
            )
        )
        external = [
            ol_run_event("START", run_id="0194a1b2-0000-7000-8000-0000000000e1", job=("spark", "export"), inputs=[mart],
                         outputs=[ol_dataset("s3://exports", "orders.csv")], time=when(40)),
            ol_run_event("COMPLETE", run_id="0194a1b2-0000-7000-8000-0000000000e1", job=("spark", "export"),
                         inputs=[mart], outputs=[ol_dataset("s3://exports", "orders.csv")], time=when(50)),
            ol_run_event("RUNNING", run_id="0194a1b2-0000-7000-8000-0000000000e2", job=("spark", "partial"),
                         inputs=[mart], outputs=[ol_dataset("s3://exports", "partial.csv")], time=when(45)),
            {
                "eventTime": when(60),
                "producer": PRODUCER,
                "schemaURL": JOB_EVENT_URL,
                "job": {"namespace": "airflow", "name": "publish"},
                "inputs": [ol_dataset("s3://exports", "orders.csv")],
                "outputs": [ol_dataset("kafka://broker:9092", "orders")],
            },
        ]  # fmt: skip
        assert all(o.ok for o in catalog_intake(catalog, resolver).take(external))
    return path


def edges(path: str, root: str, *args: str) -> list[tuple[Any, ...]]:
    code, out, err = invoke(path, "lineage", root, "--format", "json", *args)
    assert code == 0, err
    return [(e["upstream"], e["downstream"], e["depth"], tuple(e["tasks"])) for e in json.loads(out)["edges"]]


LOAD = ("raw.orders", "stg.orders", 1, ("company.data/flow.load",))
BUILD = ("stg.orders", "mart.orders", 2, ("company.data/flow.build",))
SHIP = ("mart.orders", EXPORT, 3, ("spark/export (external)",))
PUBLISH = (EXPORT, TOPIC, 4, ("airflow/publish (external)",))


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (5, []),  # the load had not ended
        (10, [LOAD]),  # ended at 08:10: known from then on
        (35, [LOAD, BUILD]),
        (45, [LOAD, BUILD]),  # the external run started at 08:40, ended at 08:50
        (55, [LOAD, BUILD, SHIP]),
        (60, [LOAD, BUILD, SHIP, PUBLISH]),  # the JobEvent's time
    ],
)
def test_the_graph_as_the_catalog_knew_it(catalog_path: str, moment: int, expected: list[tuple[Any, ...]]) -> None:
    assert edges(catalog_path, "raw.orders", "--direction", "downstream", "--as-of", when(moment)) == expected


def test_now_the_graph_has_the_run_still_going_and_as_of_now_does_not(catalog_path: str) -> None:
    now = edges(catalog_path, "mart.orders", "--direction", "downstream")
    assert (("mart.orders", PARTIAL, 1, ("spark/partial (external)",))) in now
    later = edges(catalog_path, "mart.orders", "--direction", "downstream", "--as-of", "2030-01-01")
    assert later == [e for e in now if e[1] != PARTIAL]


def test_upstream_and_both_directions(catalog_path: str) -> None:
    assert edges(catalog_path, TOPIC, "--direction", "upstream", "--as-of", when(55)) == []
    up = edges(catalog_path, TOPIC, "--direction", "upstream", "--as-of", when(60), "--depth", "2")
    assert up == [
        (EXPORT, TOPIC, 1, ("airflow/publish (external)",)),
        ("mart.orders", EXPORT, 2, ("spark/export (external)",)),
    ]
    both = edges(catalog_path, "stg.orders", "--as-of", when(35))
    assert both == [("raw.orders", "stg.orders", 1, LOAD[3]), ("stg.orders", "mart.orders", 1, BUILD[3])]


def test_as_of_after_everything_ended_draws_the_graph_of_now(catalog: Catalog) -> None:
    """Where every run has ended, the walk over the edges known at a later time is the catalog's
    walk: the same edges, depths, order and tasks (a cycle and a diamond included)."""
    for n, (inputs, outputs) in enumerate(
        [(("a",), ("b", "c")), (("b",), ("d",)), (("c",), ("d",)), (("d",), ("a",)), (("a", "d"), ("e",))]
    ):
        catalog.record_task_run(
            run(
                f"t{n}",
                inputs=tuple(decl(i) for i in inputs),
                outputs=tuple(decl(o, type="Table") for o in outputs),
            )
        )
    for root in "abcde":
        for direction in ("upstream", "downstream", "both"):
            for depth in (1, 2, 5):
                now = catalog.lineage(root, direction=direction, depth=depth)
                then = catalog.lineage(root, direction=direction, depth=depth, as_of=at(1000))
                assert graph_json(then)["edges"] == graph_json(now)["edges"], (root, direction, depth)
                assert graph_json(then)["asOf"] == "2025-03-02T00:40:00.000000Z" and "asOf" not in graph_json(now)


def test_the_text_says_when_and_bad_times_are_errors(catalog_path: str) -> None:
    code, out, _ = invoke(catalog_path, "lineage", "raw.orders", "--as-of", when(10))
    assert code == 0 and out.splitlines()[0] == "raw.orders (External)  as of 2025-03-01T08:10:00.000000Z"
    code, out, _ = invoke(
        catalog_path, "lineage", "raw.orders", "--as-of", "2025-03-01T09:10:00+01:00", "--format", "json"
    )
    assert json.loads(out)["asOf"] == "2025-03-01T08:10:00.000000Z"
    code, _, err = invoke(catalog_path, "lineage", "raw.orders", "--as-of", "yesterday")
    assert code == 2 and err.startswith("Error: ") and "--as-of" in err  # a bad value
    code, _, err = invoke(catalog_path, "lineage", "mart.orders", "--column", "id", "--as-of", when(10))
    assert code == 2 and "--as-of draws an asset's lineage" in err
    # the flags are checked before the asset is looked up: a usage error, not "not found"
    code, _, err = invoke(catalog_path, "lineage", "no.such.asset", "--column", "id", "--as-of", when(10))
    assert code == 2 and "--as-of draws an asset's lineage" in err and "not found" not in err
