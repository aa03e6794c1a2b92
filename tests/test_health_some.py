"""A few assets judged from their own facts (read through indexes: what ``assets show``, a page of
``assets list`` and the health watch's marked assets ask for) get exactly what judging the whole
catalog gives them: their health, reasons, rule and path to the cause, as of any time, on both
engines, over catalogs made at random of olbridge's own runs and received events."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from bridge.catalog import Catalog, retention, writes_kept
from bridge.catalog import health as health_queries
from bridge.errors import ValidationError
from bridge.mapping import Resolver
from bridge.model import Assertion
from bridge.model.health import FreshnessRule, Match, Selector
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import decl, ol_dataset, ol_run_event, run

pytestmark = pytest.mark.both_engines

NAMESPACE = "postgres://db:5432"  # the received datasets' and, by the resolver, the own assets' ids
NAMES = [f"shop.t{n}" for n in range(12)]
IDS = [f"{NAMESPACE}/{name}" for name in NAMES]
SELECTORS = (
    Selector(Match(id_prefix=f"{NAMESPACE}/shop.t1"), FreshnessRule.create(max=timedelta(hours=3))),
    Selector(Match(type="Table"), FreshnessRule.create(max=timedelta(hours=8), warn=timedelta(hours=2))),
)


def build(catalog: Catalog, resolver: Resolver, chosen: random.Random, *, expire: bool) -> list[int]:
    """Own runs and received events at distinct minutes, at random (with ``expire``, the runs
    retention takes then gone); the minutes used."""
    minutes = chosen.sample(range(0, 24 * 60, 7), 45)
    for n, minute in enumerate(minutes[:25]):
        ins = tuple(decl(i) for i in chosen.sample(IDS, chosen.randint(0, 2)))
        outs = tuple(
            decl(
                o,
                type="Table",
                namespace=f"team-{IDS.index(o) % 3}",  # a team's assets, and the others upstream of them
                assertions=[Assertion("not_null", chosen.random() < 0.7, column="id")]
                if chosen.random() < 0.3
                else None,
            )
            for o in chosen.sample(IDS, chosen.randint(1, 2))
        )
        state = "FAILED" if chosen.random() < 0.25 else "SUCCESS"
        if state == "SUCCESS" and n % 7 == 3:  # a skip: no run of its task for health
            state = "SKIPPED"
        catalog.record_task_run(
            run(f"task{n % 5}", execution=f"e{n}", inputs=ins, outputs=outs, state=state, start=at(minute))
        )
    events: list[dict[str, Any]] = []
    for n, minute in enumerate(minutes[25:]):
        inputs = [ol_dataset(NAMESPACE, name) for name in chosen.sample(NAMES, chosen.randint(0, 2))]
        if inputs and chosen.random() < 0.4:
            inputs[0]["inputFacets"] = {
                "dataQualityAssertions": {
                    "_producer": "https://github.com/example/producer/tree/1.0",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
                    "assertions": [{"assertion": "unique", "success": chosen.random() < 0.6}],
                }
            }
        outputs = [ol_dataset(NAMESPACE, name) for name in chosen.sample(NAMES, chosen.randint(1, 2))]
        event_type = chosen.choice(["COMPLETE", "COMPLETE", "FAIL", "ABORT", "START"])
        time = at(minute).strftime("%Y-%m-%dT%H:%M:%SZ")
        run_id = f"0194a1b2-0000-7000-8000-{n:012d}"
        job = ("airflow", f"dag.job{n % 4}")
        events.append(ol_run_event(event_type, run_id=run_id, job=job, inputs=inputs, outputs=outputs, time=time))
    assert all(o.ok for o in catalog_intake(catalog, resolver).take(events))
    with catalog.transaction() as cur:
        for asset_id in chosen.sample(IDS, 3):
            rule = FreshnessRule.create(max=timedelta(hours=chosen.randint(1, 6)), warn=timedelta(minutes=30))
            health_queries.set_rule(cur, asset_id, rule, now=at(0))
    if expire:  # runs gone by retention, health's facts of them kept (writes_kept)
        with catalog.transaction() as cur:
            cur.execute("DELETE FROM outbox")  # delivered
        windows = retention.Windows(external_runs=3600.0, task_runs=3600.0)
        gone = retention.expire(catalog.db, windows, at(24 * 60).timestamp(), pause=0)
        assert gone["externalRuns"] and gone["taskRuns"], gone
    return sorted(minutes)


@pytest.mark.parametrize("seed", range(6))
def test_a_few_assets_judged_alone_get_what_the_whole_catalog_gives_them(
    catalog_target: str, resolver: Resolver, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = random.Random(seed)
    with Catalog(catalog_target) as catalog:
        minutes = build(catalog, resolver, chosen, expire=seed % 2 == 1)
        conn = catalog._conn
        moments = [at(m) for m in (minutes[0] - 1, *chosen.sample(minutes, 5), minutes[-1] + 1, minutes[-1] + 600)]
        seen: set[str] = set()  # what the catalogs made at random held: each seed holds every case
        for moment in moments:
            whole = {h.asset_id: h for h in health_queries.assess(conn, SELECTORS, moment)}
            for h in whole.values():
                seen.add(h.health.value)
                seen.update(["at risk"] if h.at_risk else [])
                seen.update(
                    ["received run"]
                    if any(" at " in r and r.startswith("last run airflow/") for r in h.verdict.reasons)
                    else []
                )
                seen.update(["check"] if any(r.startswith("check ") for r in h.verdict.reasons) else [])
            with monkeypatch.context() as patched:  # every run read, not what the writes keep
                patched.setattr(health_queries, "_own", lambda c, m: (*health_queries._own_from_runs(c, m), False))
                assert health_queries.assess(conn, SELECTORS, moment) == list(whole.values()), moment
            with monkeypatch.context() as patched:  # judged alone: the whole catalog's facts are not read
                patched.setattr(health_queries, "_whole", None)
                for wanted in [[i] for i in IDS] + [chosen.sample(IDS, chosen.randint(2, 5)) for _ in range(4)]:
                    alone = health_queries.assess(conn, SELECTORS, moment, ids=wanted)
                    assert alone == [whole[i] for i in sorted(wanted) if i in whole], (moment, wanted)
                    no_paths = health_queries.assess(conn, SELECTORS, moment, ids=wanted, paths=False)
                    assert [(h.asset_id, h.verdict, h.path) for h in no_paths] == [
                        (h.asset_id, h.verdict, ()) for h in alone
                    ]
                # a namespace's assets, found by its index, judged as a few are
                for namespace in {h.namespace for h in whole.values() if h.namespace} | {"none-such"}:
                    theirs = health_queries.assess(conn, SELECTORS, moment, namespace=namespace)
                    assert theirs == [h for h in whole.values() if h.namespace == namespace], (moment, namespace)
                    if theirs and any(h.at_risk for h in theirs):
                        seen.add("a namespace at risk")
    assert seen >= {"FAIL", "PASS", "at risk", "received run", "check", "a namespace at risk"}, seen


@pytest.mark.parametrize("seed", range(3))
def test_what_the_writes_keep_of_the_runs_is_what_the_runs_give(
    catalog_target: str, resolver: Resolver, seed: int
) -> None:
    """Each task's latest run and each asset's writers, kept by the writes of runs at random
    minutes (later and earlier ones, failed ones, runs of one task side by side), are what the
    statements that make them from the runs give (a migrated catalog's)."""
    with Catalog(catalog_target) as catalog:
        build(catalog, resolver, random.Random(seed), expire=False)
        kept = kept_rows(catalog)
        assert all(kept.values()), kept
        assert made_from_the_runs(catalog) == kept


def test_a_run_written_again_leaves_what_the_runs_give(catalog: Catalog) -> None:
    """A run not ended may be written again: one written running, then ended earlier than another
    run of its task that ended meanwhile, or written again still running, leaves each task's
    latest run as the runs say it is, and the pass over the whole catalog agrees with the one
    over the asset alone. A run not ended that is given an end is refused (it was kept as ended
    by what reads an end as one: a failing asset's last run hidden) and changes nothing."""
    out = (decl("mart.x", type="Table"),)
    catalog.record_task_run(run("t", execution="first", outputs=out, start=at(0), end=at(300)))  # writes mart.x
    for n, (state, end) in enumerate((("RUNNING", None), ("FAILED", 540), ("SUCCESS", 480))):
        execution = "late" if n != 1 else "other"  # the first and the last: one run, written twice
        outputs = out if state != "RUNNING" else ()
        ended = at(end) if end is not None else None
        catalog.record_task_run(run("t", execution=execution, outputs=outputs, state=state, start=at(0), end=ended))
    before = kept_rows(catalog)
    with pytest.raises(ValidationError, match="state RUNNING has not ended, so it takes no end time"):
        catalog.record_task_run(run("u", execution="a", state="RUNNING", start=at(0), end=at(700)))
    assert kept_rows(catalog) == before and catalog.count_task_runs() == 3
    catalog.record_task_run(run("u", execution="a", state="RUNNING", start=at(0)))
    catalog.record_task_run(run("u", execution="a", state="RUNNING", start=at(0)))  # again
    conn = catalog._conn
    kept = kept_rows(catalog)
    assert made_from_the_runs(catalog) == kept
    assert [(r[2], r[5]) for r in kept["latest_task_runs"]] == [("t", "FAILED")]  # the other run, at 09:00
    for moment in (at(500), at(560), at(800)):
        whole = health_queries.assess(conn, SELECTORS, moment)
        assert health_queries.assess(conn, SELECTORS, moment, ids=["mart.x"]) == [
            h for h in whole if h.asset_id == "mart.x"
        ]


TABLES_KEPT = ("latest_task_runs", "kept_writers")


def kept_rows(catalog: Catalog) -> dict[str, list[tuple[Any, ...]]]:
    """What the writes kept of the runs, table by table."""
    return {table: sorted(map(tuple, catalog._conn.execute(f"SELECT * FROM {table}"))) for table in TABLES_KEPT}


def made_from_the_runs(catalog: Catalog) -> dict[str, list[tuple[Any, ...]]]:
    """The same tables made again from the runs by the migration's statements."""
    with catalog.transaction() as cur:
        for table in TABLES_KEPT:
            cur.execute(f"DELETE FROM {table}")
        cur.execute(writes_kept.FILL_LATEST_RUNS)
        cur.execute(writes_kept.FILL_WRITERS)
        cur.execute(writes_kept.FILL_UNWRITTEN_WRITERS)
    return kept_rows(catalog)
