"""``olbridge runs list / show``: olbridge's own runs and external ones, with their job, state,
times (an external start inferred when its START never came), inputs and outputs, producer,
facets (the latest of each) and warnings; a runId named under two jobs is reported."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.catalog.engine import masked
from bridge.catalog.runs import RunFilter, Runs
from bridge.delivery.history import iter_events
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import PRODUCER, decl, invoke, ol_dataset, ol_run_event, run, table_contents

R1 = "0194a1b2-0000-7000-8000-000000000001"
R2 = "0194a1b2-0000-7000-8000-000000000002"
R3 = "0194a1b2-0000-7000-8000-000000000003"


def facet(**fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": "https://example.com/facet.json", **fields}


def external_events() -> list[dict[str, Any]]:
    """R1: START and COMPLETE, with run and job facets that change between them; R2: only a
    COMPLETE (its START never came); R3: RUNNING, with a runId that is not a UUID... and a
    warning."""
    start = ol_run_event(
        "START",
        run_id=R1,
        job=("spark-prod", "etl.load"),
        inputs=[ol_dataset("s3://landing", "orders.parquet")],
        time="2025-03-01T08:00:00Z",
    )
    start["run"]["facets"] = {"spark_version": facet(version="3.5.0"), "acme_cost": facet(dollars=1)}
    start["job"]["facets"] = {"jobType": facet(processingType="BATCH", integration="SPARK", jobType="JOB")}
    complete = ol_run_event(
        "COMPLETE",
        run_id=R1,
        job=("spark-prod", "etl.load"),
        inputs=[ol_dataset("s3://landing", "orders.parquet")],
        outputs=[ol_dataset("postgres://warehouse:5432", "shop.public.orders")],
        time="2025-03-01T08:05:00Z",
    )
    complete["run"]["facets"] = {"acme_cost": facet(dollars=3)}
    only_end = ol_run_event("FAIL", run_id=R2, job=("airflow", "dag.report"), time="2025-03-01T09:00:00Z")
    running = ol_run_event("RUNNING", run_id="nightly-1", job=("airflow", "dag.nightly"), time="2025-03-01T10:00:00Z")
    return [start, complete, only_end, running]


pytestmark = pytest.mark.both_engines


@pytest.fixture
def catalog_path(catalog_target: str, resolver: Resolver) -> str:
    """A catalog of the test's engine with two runs of ours and four external events."""
    path = catalog_target
    with Catalog(path) as catalog:
        catalog.record_task_run(
            run("load", inputs=(decl("raw.orders"),), outputs=(decl("mart.orders", type="Table"),), start=at(30))
        )
        catalog.record_task_run(run("report", state="RUNNING", start=at(200), execution="e2"))
        outcomes = catalog_intake(catalog, resolver).take(external_events())
        assert [o.status for o in outcomes] == ["accepted"] * 4
    return path


def runs_json(path: str, *args: str) -> list[dict[str, Any]]:
    code, out, err = invoke(path, "runs", "list", "--json", *args)
    assert code == 0, err
    found: list[dict[str, Any]] = json.loads(out)
    return found


def test_runs_list_shows_own_and_external_runs_newest_first(catalog_path: str, converter: Converter) -> None:
    found = runs_json(catalog_path)[::-1]  # oldest first, as the catalog's runs.list gives them
    with Catalog(catalog_path) as catalog:
        own_ids = list(dict.fromkeys(e["run"]["runId"] for e in iter_events(catalog, converter) if "run" in e))
    assert [(r["runId"], r["origin"], r["state"]) for r in found] == [
        (R1, "external", "COMPLETE"),
        (own_ids[0], "olbridge", "COMPLETE"),
        (R2, "external", "FAIL"),
        ("nightly-1", "external", "RUNNING"),
        (own_ids[1], "olbridge", "RUNNING"),
    ]
    r1, load, r2, nightly, report = found
    assert r1["job"] == {"namespace": "spark-prod", "name": "etl.load"}
    assert (r1["started"], r1["startInferred"], r1["ended"]) == (
        "2025-03-01T08:00:00.000000Z",
        False,
        "2025-03-01T08:05:00.000000Z",
    )
    assert (r1["inputs"], r1["outputs"]) == (["s3://landing/orders.parquet"], ["shop.public.orders"])
    assert r1["producer"] == PRODUCER
    # a START that never came: the start is the first event's time, marked inferred
    assert (r2["started"], r2["startInferred"], r2["ended"]) == (
        "2025-03-01T09:00:00.000000Z",
        True,
        "2025-03-01T09:00:00.000000Z",
    )
    assert nightly["warnings"] == ["/run/runId: must be a UUID, not 'nightly-1'"]
    assert load["job"] == {"namespace": "company.data", "name": "flow.load"}
    assert (load["inputs"], load["outputs"], load["startInferred"]) == (["raw.orders"], ["mart.orders"], False)
    assert load["taskRun"]["taskState"] == "SUCCESS" and load["facets"]["job"]["jobType"]["integration"] == "OLBRIDGE"
    assert (report["state"], report["ended"], report["taskRun"]["taskState"]) == ("RUNNING", None, "RUNNING")


def test_a_limited_list_is_the_full_list_cut_and_renders_only_the_runs_it_keeps(
    catalog_path: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runs list --limit N`` gives the first N of the full list, facets and all, and reads and
    renders the facets of those N only (it rendered every run of the catalog before cutting)."""
    with Catalog(catalog_path) as catalog:
        runs = Runs(catalog, Converter(resolver))
        everything = runs.list()
        assert len(everything) == 5
        assert everything[0].run_facets and all(v.job_facets for v in everything if v.task_run is not None)
        rendered: list[str] = []
        real = Converter.run_facets

        def counted(self: Converter, run: Any) -> Any:
            rendered.append(run.key.task_id)
            return real(self, run)

        monkeypatch.setattr(Converter, "run_facets", counted)
        for limit in range(1, 6):
            rendered.clear()
            assert runs.list(limit=limit) == everything[:limit]
            kept_own = [view.job_name.split(".")[-1] for view in everything[:limit] if view.task_run is not None]
            assert rendered == kept_own  # the own runs kept, and no other, had their facets rendered
        assert runs.list(RunFilter(origin="external"), limit=2) == [v for v in everything if v.task_run is None][:2]


def test_an_external_run_keeps_the_latest_of_each_facet_whatever_the_order(
    resolver: Resolver, new_catalog: Callable[[], Catalog]
) -> None:
    found = []
    for order in itertools.permutations(external_events()[:2]):
        with new_catalog() as catalog:
            catalog_intake(catalog, resolver).take(list(order))
            (view,) = Runs(catalog, Converter(resolver)).external(RunFilter(job="etl.load"))
            found.append(view)
            contents = {t: sorted(rows, key=repr) for t, rows in table_contents(catalog).items()}
            del contents["received_events"]  # its keys follow the order the events came in
            found.append(contents)
    assert found[0] == found[2] and found[1] == found[3]
    view = found[0]
    assert view.run_facets == {"acme_cost": facet(dollars=3), "spark_version": facet(version="3.5.0")}  # custom too
    assert view.job_facets == {"jobType": facet(processingType="BATCH", integration="SPARK", jobType="JOB")}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--external",), ["nightly-1", R2, R1]),
        (("--own", "--state", "running"), ["own:1"]),
        (("--state", "success"), ["own:0", R1]),  # a task state, as record takes it: the runs that COMPLETE
        (("--state", "Failed"), [R2]),
        (("--namespace", "airflow"), ["nightly-1", R2]),
        (("--namespace", "company.data"), ["own:1", "own:0"]),
        (("--job", "etl.load"), [R1]),
        (("--job", "flow.load"), ["own:0"]),
        (("--state", "COMPLETE"), ["own:0", R1]),
        (("--since", "2025-03-01T08:30:00Z", "--until", "2025-03-01T10:00:00Z"), [R2, "own:0"]),
        (("--limit", "2"), ["own:1", "nightly-1"]),  # the newest two
        (("--limit", "2", "--offset", "2"), [R2, "own:0"]),
        (("--offset", "4"), [R1]),
    ],
)
def test_runs_list_filters(catalog_path: str, args: tuple[str, ...], expected: list[str]) -> None:
    everything = runs_json(catalog_path)[::-1]
    own = [r["runId"] for r in everything if r["origin"] == "olbridge"]  # own:0 the older one
    named = [own[int(e[4:])] if e.startswith("own:") else e for e in expected]
    assert [r["runId"] for r in runs_json(catalog_path, *args)] == named


def test_runs_list_text(catalog_path: str) -> None:
    code, out, _ = invoke(catalog_path, "runs", "list", "--external")
    assert code == 0
    header, *newest_first = out.splitlines()
    lines = newest_first[::-1]
    assert header.split("\t") == ["runId", "origin", "state", "started", "ended", "job", "lineage", "notes"]
    assert lines[0].split("\t")[:6] == [
        R1,
        "external",
        "COMPLETE",
        "2025-03-01T08:00:00.000000Z",
        "2025-03-01T08:05:00.000000Z",
        "spark-prod/etl.load",
    ]
    assert "2025-03-01T09:00:00.000000Z (inferred)" in lines[1]


def test_runs_show_finds_own_and_external_runs_by_their_run_id(catalog_path: str) -> None:
    code, out, _ = invoke(catalog_path, "runs", "show", R1, "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown == runs_json(catalog_path, "--job", "etl.load")[0]
    own = runs_json(catalog_path, "--own")
    for listed in own:
        code, out, _ = invoke(catalog_path, "runs", "show", listed["runId"], "--json")
        assert code == 0 and json.loads(out) == listed
    code, out, _ = invoke(catalog_path, "runs", "show", R2)
    assert code == 0
    assert "started:  2025-03-01T09:00:00.000000Z (inferred" in out
    for unknown in ("0194a1b2-0000-7000-8000-00000000ffff", "no-such-run", own[0]["runId"].upper()):
        code, _, err = invoke(catalog_path, "runs", "show", unknown)
        shows = f"(olbridge runs list shows them) (catalog {masked(str(catalog_path))})"
        assert (code, err) == (1, f"Error: no run with id {unknown!r} {shows}\n")


def test_a_run_is_found_by_its_id_among_many_started_at_the_same_moment(catalog_target: str) -> None:
    """An own run's id holds its start's millisecond: every run started then is looked at (read
    whole, each with its uses, before: a minute for a million runs of one moment, a made-up id as
    long); each is found, and a made-up id of that moment is none."""
    import uuid

    from bridge.openlineage.convert import task_run_id

    with Catalog(catalog_target) as catalog:
        catalog.record_task_runs(
            [run(f"t{i}", execution=f"e{i}", outputs=(decl(f"o.t{i}", type="Table"),), start=at(0)) for i in range(300)]
        )
        runs = Runs(catalog, Converter(Resolver.load()))
        stored = {r.key.execution_id: r for r in catalog.iter_task_runs()}
        for execution in ("e0", "e150", "e299"):
            wanted = task_run_id(stored[execution].key, stored[execution].started_at)
            found = runs.get(wanted)
            assert found is not None and found.run_id == wanted and found.task_run is not None
            assert found.task_run["executionId"] == execution and found.outputs == (f"o.t{execution[1:]}",)
        same_moment = uuid.UUID(int=(uuid.UUID(wanted).int & ~((1 << 80) - 1)) | 0x7000_8000_0000_0000_0001)
        assert runs.get(str(same_moment)) is None


def test_a_run_id_under_two_jobs_is_reported_not_merged_silently(
    resolver: Resolver, new_catalog: Callable[[], Catalog]
) -> None:
    first = ol_run_event("START", run_id=R3, job=("spark-prod", "etl.a"), time="2025-03-01T08:00:00Z")
    second = ol_run_event("COMPLETE", run_id=R3, job=("spark-prod", "etl.b"), time="2025-03-01T08:05:00Z")
    kept = []
    for order in ([first, second], [second, first]):
        with new_catalog() as catalog:
            outcomes = catalog_intake(catalog, resolver).take(order)
            said = [w for o in outcomes for w in o.warnings]
            assert len(said) == 1 and f"run {R3} was named under job" in said[0]
            (view,) = Runs(catalog, Converter(resolver)).list()
            kept.append(view)
            # the warning is kept with the event that brought it, and with the run
            stored = [json.loads(w) for (w,) in catalog._conn.execute("SELECT warnings FROM received_events")]
            assert sorted(map(len, stored)) == [0, 1]
            assert view.warnings == tuple(said)
    # either order: the run's job is its earliest event's, and both jobs are listed
    for view in kept:
        assert (view.job_namespace, view.job_name) == ("spark-prod", "etl.a")
        assert view.jobs == (("spark-prod", "etl.a"), ("spark-prod", "etl.b"))
        assert view.to_json()["conflictingJobs"] == [
            {"namespace": "spark-prod", "name": "etl.a"},
            {"namespace": "spark-prod", "name": "etl.b"},
        ]


def test_runs_need_a_catalog_and_say_bad_filters(tmp_path: Path, catalog_path: str) -> None:
    code, _, err = invoke(tmp_path / "none.db", "runs", "list")
    assert code == 1 and err.startswith("Error: no catalog at")
    code, _, err = invoke(catalog_path, "runs", "list", "--since", "yesterday")
    assert code == 2 and "--since" in err
    code, _, err = invoke(catalog_path, "runs", "list", "--state", "DONE")
    assert code == 2 and "'DONE' is not a state" in err
