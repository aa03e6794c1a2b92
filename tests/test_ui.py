"""``olbridge ui`` without a browser: the JSON twins hold what the pages show, every catalog
string is escaped in HTML, attributes and SVG, a token sees its namespaces and Global assets only
(pages and twins alike), the pages refuse writes, and the command says how it is reachable."""

from __future__ import annotations

import io
import json
import os
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest

from bridge.catalog import Catalog, browse
from bridge.catalog.browse import ANOTHER_NAMESPACE as ANOTHER_WRITER
from bridge.catalog.browse import AssetFilter, list_assets, prefix_children, recent_runs
from bridge.catalog.health_state import LEASE_KIND
from bridge.catalog.outbox import DeliveryError
from bridge.catalog.query import AssetQuery, HistoryFilter
from bridge.catalog.retention import release_lease, take_lease
from bridge.catalog.runs import RunFilter, Runs
from bridge.config import parse_tokens
from bridge.delivery.health_watch import HealthWatch, WatchSettings
from bridge.demo import run_demo
from bridge.mapping import Resolver
from bridge.model import format_time
from bridge.model.health import ANOTHER_NAMESPACE, FreshnessRule, Match, Selector
from bridge.model.received import writable
from bridge.openlineage.convert import Converter, task_run_id
from bridge.receiver.imports import catalog_intake
from bridge.web import UiApp, pages
from bridge.web.app import json_twin, link
from bridge.web.layout import layout
from tests.backend import wait_for
from tests.conftest import at
from tests.helpers import JOB_EVENT_URL, PRODUCER, decl, invoke, ol_dataset, ol_run_event, run
from tests.postgres import PASSWORD_ROLE, PostgresServer
from tests.ui_catalog import EXTERNAL_RUN, HOSTILE, HUB_FANOUT, build

pytestmark = pytest.mark.both_engines
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

TOKENS = {
    "team-a": {"token": "secret-a", "namespaces": ["team-a*"]},
    "team-b": {"token": "secret-b", "namespaces": ["team-b*"]},
}


@pytest.fixture
def ui_catalog(catalog_target: str, resolver: Resolver) -> str:
    build(catalog_target, resolver)
    return catalog_target


def make_app(path: str, resolver: Resolver, *, tokens: bool = False) -> UiApp:
    named = parse_tokens(TOKENS, "test") if tokens else ()
    return UiApp(lambda: Catalog(path, create=False), Converter(resolver), named)


def call(
    app: UiApp,
    path: str,
    query: str = "",
    *,
    method: str = "GET",
    cookie: str = "",
    body: bytes = b"",
    authorization: str | None = None,
) -> tuple[str, dict[str, str], str]:
    found: dict[str, Any] = {}

    def start(status: str, headers: list[tuple[str, str]]) -> None:
        found["status"], found["headers"] = status, dict(headers)

    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path.encode().decode("latin-1"),
        "QUERY_STRING": query,
        "HTTP_COOKIE": cookie,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    if authorization is not None:
        environ["HTTP_AUTHORIZATION"] = authorization
    text = b"".join(app(environ, start)).decode()
    return found["status"], found["headers"], text


def twin(app: UiApp, path: str, query: str = "", **kw: Any) -> Any:
    status, headers, text = call(app, path, f"{query}&format=json" if query else "format=json", **kw)
    assert status.startswith("200"), text
    assert headers["Content-Type"] == "application/json"
    return json.loads(text)


def test_the_assets_twin_lists_filters_and_pages(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver)
    everything = twin(app, "/assets")
    ids = [a["id"] for a in everything["assets"]]
    assert ids == sorted(ids) and "raw.orders" in ids and "shared.calendar" in ids
    assert everything["count"] == len(ids) and everything["next"] is None
    assert [a["id"] for a in twin(app, "/assets", "q=payroll")["assets"]] == ["hr.payroll"]
    # found by a name it was received under
    found = twin(app, "/assets", "q=exports/orders.parquet")["assets"]
    assert len(found) == 1 and found[0]["origin"] == "external"
    global_ = twin(app, "/assets", "namespace=Global")["assets"]
    assert "shared.calendar" in {a["id"] for a in global_} and {a["namespace"] for a in global_} == {None}
    gold = twin(app, "/assets", "meta=tier%3Dgold")["assets"]
    assert {a["id"] for a in gold} == {"mart.orders", "hr.people"}  # raw.orders is platinum now
    assert twin(app, "/assets", "meta=tier%3Dgold")["count"] is None
    assert {a["type"] for a in twin(app, "/assets", "type=Table&namespace=team-b.hr")["assets"]} == {"Table"}
    assert twin(app, "/assets", "type=table")["assets"] == twin(app, "/assets", "type=Table")["assets"]  # any case
    checks = {a["id"]: a["checks"] for a in everything["assets"]}
    assert checks["mart.orders"] == "failing" and checks["raw.orders"] is None  # one of its tests failed
    # each asset's health, judged from its facts (the failed test fails it), as assets show judges it
    health = {a["id"]: a["health"] for a in everything["assets"]}
    assert health["mart.orders"]["health"] == "FAIL" and health["mart.orders"]["reasons"] == [
        "check not_null on id failed (team-a.sales/flow.load at 2025-03-01T08:11:00.000000Z)"
    ]
    # server paging by keyset: two pages of the hub's fan, nothing twice, nothing lost
    first = twin(app, "/assets", "prefix=hub.fan.")
    assert first["count"] == HUB_FANOUT and len(first["assets"]) == min(HUB_FANOUT, 50)
    tree = twin(app, "/assets")["tree"]
    assert {"prefix": "hub.", "leaf": False} in tree


def test_an_asset_read_more_often_than_written_shows_its_last_write_and_its_newest_runs(
    catalog_target: str, resolver: Resolver
) -> None:
    """An asset's last write is the newest run that wrote it however many runs read it since (it
    was looked for among its latest twenty uses, all reads here), and its runs tab lists the
    newest of its own uses and of a received job's runs, each read a page at a time by an index
    (on SQLite, the plan: no sort of every use the asset had)."""
    calendar = decl("dim.calendar", type="Table", namespace="team-a.sales")
    visits = ol_dataset("postgres://db:5432", "shop.public.visits")
    received = [f"0194a1b2-0000-7000-8000-{i:012d}" for i in range(60)]
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("load", outputs=(calendar,), start=at(0), namespace="team-a.sales"))
        for i in range(30):
            catalog.record_task_run(run(f"use{i:02d}", inputs=(calendar,), start=at(10 + i), namespace="team-a.sales"))
        events = [
            ol_run_event(
                "COMPLETE",
                run_id=run_id,
                job=("spark", "daily"),
                inputs=[visits],
                time=f"2025-02-{1 + i // 24:02d}T{i % 24:02d}:00:00Z",
            )
            for i, run_id in enumerate(received)
        ]
        outcomes = catalog_intake(catalog, resolver).take(events)
        assert {o.status for o in outcomes} == {"accepted"}, outcomes
        if catalog.db.engine.name == "sqlite":
            plan = " ".join(
                str(row[-1])
                for row in catalog._conn.execute(
                    f"EXPLAIN QUERY PLAN {browse._OWN_USES}", ("dim.calendar", "input", browse.TOP, 1 << 62, 50)
                )
            )
            assert "usages_asset" in plan and "TEMP B-TREE" not in plan, plan
    app = make_app(catalog_target, resolver)
    assert twin(app, "/assets/dim.calendar")["lastWritten"]["job"] == "team-a.sales/flow.load"
    listed = twin(app, "/assets/dim.calendar", "tab=runs")["runs"]
    assert [r["job"]["name"] for r in listed] == [f"flow.use{i:02d}" for i in reversed(range(30))] + ["flow.load"]
    assert [r["direction"] for r in listed] == ["input"] * 30 + ["output"]
    history = twin(app, "/assets/dim.calendar", "tab=history")["history"]["entries"]
    writes = [e for e in history if e["kind"] == "write"]
    assert [e["runId"] for e in writes] == [listed[-1]["runId"]]
    (placeholder,) = twin(app, "/assets", "q=shop.public.visits")["assets"]
    listed = twin(app, f"/assets/{quote(placeholder['id'], safe='')}", "tab=runs")["runs"]
    assert [r["runId"] for r in listed] == received[::-1][:50]  # the newest 50, newest first
    with Catalog(catalog_target) as catalog:  # written again, by another flow
        refresh = run("refresh", outputs=(calendar,), start=at(100), namespace="team-a.sales", flow="nightly")
        catalog.record_task_run(refresh)
    assert twin(app, "/assets/dim.calendar")["lastWritten"]["job"] == "team-a.sales/nightly.refresh"
    grouped = twin(app, "/assets/dim.calendar", "tab=dependencies&group=flow")["graph"]["nodes"]
    assert {n["id"]: n["group"] for n in grouped}["dim.calendar"] == "team-a.sales/nightly"  # the latest writer's
    with Catalog(catalog_target) as catalog:  # written last by a run of a namespace team-a's token does not see
        catalog.record_task_run(run("copy", outputs=(calendar,), start=at(200), namespace="team-b.hr"))
    scoped = make_app(catalog_target, resolver, tokens=True)
    _, headers, _ = call(scoped, "/login", method="POST", body=b"token=secret-a&next=/assets")
    cookie = headers["Set-Cookie"].split(";")[0]
    assert twin(scoped, "/assets/dim.calendar", cookie=cookie)["lastWritten"]["job"] == "team-a.sales/nightly.refresh"
    history = twin(scoped, "/assets/dim.calendar", "tab=history", cookie=cookie)["history"]["entries"]
    assert len([e for e in history if e["kind"] == "write"]) == 2  # load and refresh, not team-b's copy
    assert twin(app, "/assets/dim.calendar")["lastWritten"]["job"] == "team-b.hr/flow.copy"  # no token: every run
    # the list gives each asset's last write as its page does: by the runs the token sees
    own_page = twin(scoped, "/assets/dim.calendar", cookie=cookie)["lastWritten"]["at"]
    (mine,) = [
        a for a in twin(scoped, "/assets", "q=dim.calendar", cookie=cookie)["assets"] if a["id"] == "dim.calendar"
    ]
    (every,) = [a for a in twin(app, "/assets", "q=dim.calendar")["assets"] if a["id"] == "dim.calendar"]
    assert mine["lastWritten"] == own_page and every["lastWritten"] > own_page


def test_an_assets_history_shows_its_latest_200_changes(catalog_target: str, resolver: Resolver) -> None:
    """The history tab reads an asset's latest 200 changes (only they parsed), in time order: the
    same as the latest 200 of all its changes read in order."""
    with Catalog(catalog_target) as catalog:
        for n in range(205):
            catalog.set_asset(decl("dim.days", type="Table", metadata={"n": str(n)}), now=at(n))
        everything = [c.seq for c in catalog.iter_changes(HistoryFilter(asset="dim.days"))]
        assert [c.seq for c in catalog.latest_changes("dim.days", 200)] == everything[-200:]
    entries = twin(make_app(catalog_target, resolver), "/assets/dim.days", "tab=history")["history"]["entries"]
    assert [e["seq"] for e in entries] == everything[-200:][::-1]  # newest first on the page
    assert entries[0]["snapshot"]["metadata"] == {"n": "204"}


def test_a_metadata_filter_takes_any_value_and_its_links_repeat_it(catalog_target: str, resolver: Resolver) -> None:
    """Repeated ``meta`` filters were joined by ``&&`` and split on it again: a value holding
    ``&&`` (SQL, a shell command) was refused as no key=value, or split into two filters that
    matched nothing. Each filter is its own, whatever its value; the twin lists them, and the
    page's form and links give each as a parameter of its own."""
    with Catalog(catalog_target) as catalog:
        catalog.set_asset(decl("mart.a1", type="Table", metadata={"sql": "a&&b", "owner": "bob"}), now=at(1))
        catalog.set_asset(decl("mart.a2", type="Table", metadata={"expr": "x&&owner=bob"}), now=at(1))
        catalog.set_asset(decl("mart.a3", type="Table", metadata={"expr": "x", "owner": "bob"}), now=at(1))
    app = make_app(catalog_target, resolver)
    found = twin(app, "/assets", "meta=" + quote("sql=a&&b", safe=""))
    assert [a["id"] for a in found["assets"]] == ["mart.a1"] and found["filters"]["meta"] == ["sql=a&&b"]
    assert [a["id"] for a in twin(app, "/assets", "meta=" + quote("expr=x&&owner=bob", safe=""))["assets"]] == [
        "mart.a2"
    ]
    both = "meta=" + quote("owner=bob", safe="") + "&meta=" + quote("sql=a&&b", safe="")
    assert [a["id"] for a in twin(app, "/assets", both)["assets"]] == ["mart.a1"]
    assert twin(app, "/assets", both)["filters"]["meta"] == ["owner=bob", "sql=a&&b"]
    status, _, page = call(app, "/assets", both)
    assert status.startswith("200")
    assert 'name="meta" value="owner=bob"' in page and 'name="meta" value="sql=a&amp;&amp;b"' in page
    assert "meta=owner%3Dbob&amp;meta=sql%3Da%26%26b" in page  # the tree's links keep both
    assert twin(app, "/assets")["filters"]["meta"] == []


def test_keyset_pages_cover_the_list_once(ui_catalog: str) -> None:
    with Catalog(ui_catalog) as catalog:
        seen: list[str] = []
        after = None
        while True:
            page = list_assets(catalog, AssetFilter(), after=after, limit=7)
            seen += [a.asset.id for a in page.assets]
            if page.after is None:
                break
            after = page.after
        everything = [a.asset.id for a in list_assets(catalog, AssetFilter(), limit=1000).assets]
        assert seen == everything and len(seen) == len(set(seen))
        assert [n.prefix for n in prefix_children(catalog, "hub.")] == ["hub.events", "hub.fan."]


def test_an_assets_tabs_as_twins(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver)
    overview = twin(app, "/assets/mart.orders")
    assert overview["upstream"] == {"ids": ["raw.orders", "shared.calendar"], "count": 2}
    assert overview["downstream"] == {"ids": ["report.daily"], "count": 1}
    assert overview["lastWritten"]["job"].endswith("flow.load")
    graph = twin(app, "/assets/hub.events", "tab=dependencies")["graph"]
    assert len([n for n in graph["nodes"] if n["kind"] == "asset"]) == 13  # the hub and 12 of its fan
    (cluster,) = graph["clusters"]
    assert cluster == {"anchor": "hub.events", "direction": "downstream", "hidden": HUB_FANOUT - 12}
    deeper = twin(app, "/assets/mart.orders", "tab=dependencies&depth=2&direction=up")["graph"]
    assert {e["upstream"] for e in deeper["edges"]} == {"raw.orders", "shared.calendar"}
    assert all(e["downstream"] == "mart.orders" for e in deeper["edges"])
    grouped = twin(app, "/assets/mart.orders", "tab=dependencies&group=flow")["graph"]
    assert {n["id"]: n["group"] for n in grouped["nodes"]} == {
        "mart.orders": "team-a.sales/flow",
        "raw.orders": "(written by no flow)",
        "shared.calendar": "(written by no flow)",
        "report.daily": "team-a.sales/flow",
    }
    expanded = twin(app, "/assets/mart.orders", "tab=dependencies&expand=report.daily")["graph"]
    assert "expanded" in next(n for n in expanded["nodes"] if n["id"] == "report.daily")["marks"]
    runs = twin(app, "/assets/mart.orders", "tab=runs")["runs"]
    assert [(r["direction"], r["job"]["name"]) for r in runs] == [("input", "flow.report"), ("output", "flow.load")]
    history = twin(app, "/assets/raw.orders", "tab=history")["history"]
    (change,) = [e for e in history["entries"] if e["kind"] == "update"]
    assert change["snapshot"]["metadata"]["tier"] == "platinum"
    columns = twin(app, "/assets/raw.orders", "tab=columns")["columns"]
    assert [c["name"] for c in columns] == ["id", "amount"]
    neighbours = twin(app, "/neighbours", "asset=hub.events&direction=down&q=f02")
    assert neighbours["count"] == 10 and neighbours["ids"][0] == "hub.fan.f020"
    status, _, text = call(app, "/neighbours", "direction=down&format=json")  # no asset: a bad request
    assert status.startswith("400") and "asset is required" in text


def test_the_dependencies_group_by_producer(ui_catalog: str, resolver: Resolver) -> None:
    """What last wrote each node: olbridge's run (its producer), a received run (the producer
    its events name), or nothing; on the page as the legend and the group picker say."""
    app = make_app(ui_catalog, resolver)
    own = Converter(resolver).options.producer
    grouped = twin(app, "/assets/mart.orders", "tab=dependencies&group=producer")["graph"]
    assert {n["id"]: n["group"] for n in grouped["nodes"]} == {
        "mart.orders": own,
        "raw.orders": "(written by no producer)",
        "shared.calendar": "(written by no producer)",
        "report.daily": own,
    }
    (written,) = twin(app, "/assets", "q=exports/orders.parquet")["assets"]
    received = twin(app, f"/assets/{written['id']}", "tab=dependencies&group=producer")["graph"]
    groups = {n["id"]: n["group"] for n in received["nodes"]}
    assert groups[written["id"]] == PRODUCER and len(groups) == 2
    assert set(groups.values()) == {PRODUCER, "(written by no producer)"}
    status, _, page = call(app, "/assets/mart.orders", "tab=dependencies&group=producer")
    assert status.startswith("200") and '<option value="producer" selected>' in page
    assert f"</span>{own}</li>" in page and "</span>(written by no producer)</li>" in page


def test_lineage_steps_through_the_moments_it_changed(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver)
    last = twin(app, "/lineage", "asset=mart.orders")
    assert len(last["moments"]) == 2 and last["step"] == 1
    assert last["newEdges"] == [{"upstream": "mart.orders", "downstream": "report.daily"}]
    assert last["newAssets"] == ["report.daily"]
    first = twin(app, "/lineage", "asset=mart.orders&step=0")
    assert {(e["upstream"], e["downstream"]) for e in first["edges"]} == {
        ("raw.orders", "mart.orders"),
        ("shared.calendar", "mart.orders"),
    }
    assert "report.daily" not in {n["id"] for n in first["nodes"]}
    # the page's "Earlier" link leads to the first step, not back to the latest
    earlier = re.search(r'href="([^"]*)" rel="prev"', call(app, "/lineage", "asset=mart.orders")[2])
    assert earlier is not None and "step=0" in earlier.group(1)
    assert link("/x", {"a": 0, "b": False, "c": "", "d": None}) == "/x?a=0"


def test_a_tokens_lineage_cut_short_by_what_it_does_not_see_says_so(catalog_target: str, resolver: Resolver) -> None:
    """The lineage over time reads at most 300 assets, then shows those the token sees: where all
    of those read were another team's, the page said the asset had no lineage yet (while its
    Dependencies tab showed the token's own). It says the graph was cut short."""
    hub = decl("g.hub", type="Table")
    theirs = tuple(decl(f"b.x{i:03d}", type="Table", namespace="team-b.hr") for i in range(305))
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("fan", inputs=(hub,), outputs=theirs, start=at(5), namespace="team-b.hr"))
        mine = decl("z.a0", type="Table", namespace="team-a.sales")
        catalog.record_task_run(run("mine", inputs=(hub,), outputs=(mine,), start=at(6), namespace="team-a.sales"))
    app = make_app(catalog_target, resolver, tokens=True)
    _, headers, _ = call(app, "/login", method="POST", body=b"token=secret-a&next=/assets")
    cookie = headers["Set-Cookie"].split(";")[0]
    page = twin(app, "/lineage", "asset=g.hub&direction=down&depth=1", cookie=cookie)
    assert page["moments"] == [] and page["truncated"] is True
    text = call(app, "/lineage", "asset=g.hub&direction=down&depth=1", cookie=cookie)[2]
    assert "none of those read is one you see" in text and "has no lineage yet" not in text
    whole = twin(make_app(catalog_target, resolver), "/lineage", "asset=g.hub&direction=down&depth=1")
    assert whole["truncated"] is True and len(whole["moments"]) >= 1


def test_each_slider_step_is_what_lineage_as_of_prints(ui_catalog: str, resolver: Resolver) -> None:
    """The slider's steps, page by page, against ``olbridge lineage --as-of`` at each moment: the
    same links (all visible here), every step a change, and the last one today's graph."""
    app = make_app(ui_catalog, resolver)
    for asset, query in [
        ("mart.orders", "depth=2"),
        ("report.daily", "direction=up&depth=3"),
        ("hub.events", "direction=down&depth=1"),
        ("raw.orders", "direction=down&depth=3"),
    ]:
        path = f"asset={quote(asset, safe='')}&{query}"
        moments = twin(app, "/lineage", path)["moments"]
        assert moments
        direction = {"up": "upstream", "down": "downstream"}.get(query.partition("direction=")[2].split("&")[0], "both")
        depth = query.rpartition("depth=")[2]
        before: set[tuple[str, str]] = set()
        for step, moment in enumerate(moments):
            page = twin(app, "/lineage", f"{path}&step={step}")
            shown = {(e["upstream"], e["downstream"]) for e in page["edges"]}
            code, out, err = invoke(
                ui_catalog, "lineage", asset, "--as-of", moment, "--direction", direction, "--depth", depth,
                "--format", "json",
            )  # fmt: skip
            assert code == 0, err
            assert shown == {(e["upstream"], e["downstream"]) for e in json.loads(out)["edges"]}, (asset, moment)
            assert shown != before and {(e["upstream"], e["downstream"]) for e in page["newEdges"]} == shown - before
            before = shown


def test_runs_and_a_run_as_twins(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver)
    listed = twin(app, "/runs")["runs"]
    assert {r["origin"] for r in listed} == {"olbridge", "external"}
    external = twin(app, "/runs", "origin=external")["runs"]
    assert [r["runId"] for r in external] == [EXTERNAL_RUN]
    assert external[0]["startInferred"] is True
    # a state in any case, as /health takes it (it was a 400 in small letters)
    completed = twin(app, "/runs", "state=complete")
    assert completed["filters"]["state"] == "COMPLETE"
    assert completed["runs"] == twin(app, "/runs", "state=COMPLETE")["runs"] != []
    run = twin(app, f"/runs/{EXTERNAL_RUN}")
    assert run["job"]["name"] == HOSTILE and len(run["rawEvents"]) == 1
    assert run["summary"]["startInferred"] is True
    status = twin(app, "/status")
    code, out, _ = invoke(ui_catalog, "status", "--json")
    said = json.loads(out)
    assert code == 0 and status["pending"] == said["pending"] > 0
    assert {k: status[k] for k in ("dead", "oldestPending", "lastError", "workers")} == {
        k: said[k] for k in ("dead", "oldestPending", "lastError", "workers")
    }


def test_run_pages_go_from_the_newest_and_cover_the_list_once(ui_catalog: str, resolver: Resolver) -> None:
    with Catalog(ui_catalog) as catalog:
        runs = Runs(catalog, Converter(resolver))
        everything = runs.list(RunFilter())
        seen: list[str] = []
        before = None
        while True:
            page = recent_runs(runs, RunFilter(), before=before, limit=2)
            seen += [v.run_id for v in page.runs]
            if page.next is None:
                break
            before = page.next
        assert sorted(seen) == sorted(v.run_id for v in everything) and len(seen) == len(set(seen)) == 5
        starts = [v.started for v in everything]
        assert [next(v.started for v in everything if v.run_id == i) for i in seen] == sorted(starts, reverse=True)
        assert [
            v.job_name for v in recent_runs(runs, RunFilter(origin="olbridge", state="COMPLETE"), limit=9).runs
        ] == [
            "flow.fanout",
            "flow.report",
            "flow.pay",
            "flow.load",
        ]


def test_every_catalog_string_is_escaped(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver)
    pages = [
        ("/assets/raw.orders", ""),
        ("/assets/raw.orders", "tab=history"),
        ("/runs", ""),
        (f"/runs/{EXTERNAL_RUN}", ""),
        ("/assets/exports", "q=x"),
    ]
    run_page = call(app, f"/runs/{EXTERNAL_RUN}")[2]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in run_page
    for path, query in pages:
        _status, _, text = call(app, path, query)
        assert "<script>alert" not in text, path
    # in attributes and in the graph: a query echoed into the search box, and the graph's titles
    _, _, text = call(app, "/assets", "q=" + quote('"><script>alert(1)</script>'))
    assert '"><script>' not in text and "&#34;&gt;&lt;script&gt;" in text
    _, _, overview = call(app, "/assets/raw.orders")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in overview
    assert re.search(r"<script(?! src=\"/static/ui.js\")", overview) is None


def test_a_token_sees_its_namespaces_and_global_assets_only(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver, tokens=True)
    status, headers, _ = call(app, "/assets")
    assert status.startswith("303") and headers["Location"].startswith("/login")
    status, _, text = call(app, "/assets", "format=json")
    assert status.startswith("401") and json.loads(text)["status"] == 401
    # logging in sets the cookie
    status, headers, _ = call(app, "/login", method="POST", body=b"token=secret-a&next=/runs")
    assert status.startswith("303") and headers["Location"] == "/runs"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    a = cookie.split(";")[0]
    status, headers, text = call(app, "/login", method="POST", body=b"token=wrong")
    assert "Set-Cookie" not in headers and "That token is not known." in text
    seen = {x["id"]: x["namespace"] for x in twin(app, "/assets", cookie=a)["assets"]}
    assert "shared.calendar" in seen and "raw.orders" in seen
    assert all(ns is None or ns.startswith("team-a") for ns in seen.values())
    assert "hr.people" not in seen and "hr.payroll" not in seen
    assert "hr.payroll" not in call(app, "/assets", cookie=a)[2]
    assert call(app, "/assets/hr.payroll", cookie=a)[0].startswith("404")
    assert call(app, "/assets/hr.payroll", "format=json", cookie=a)[0].startswith("404")
    assert twin(app, "/assets", "q=hr.", cookie=a)["assets"] == []
    assert all(not n["prefix"].startswith("hr.") for n in twin(app, "/assets", cookie=a)["tree"])
    assert {r["job"]["namespace"] for r in twin(app, "/runs", cookie=a)["runs"]} <= {"team-a.sales", "team-a-spark"}
    b = "olbridge_ui=secret-b"
    seen_b = {x["id"]: x["namespace"] for x in twin(app, "/assets", cookie=b)["assets"]}
    assert {i for i, ns in seen_b.items() if ns is not None} == {"hr.people", "hr.payroll"}
    assert "shared.calendar" in seen_b
    graph = twin(app, "/assets/shared.calendar", "tab=dependencies", cookie=b)["graph"]
    assert {n["id"] for n in graph["nodes"]} == {"shared.calendar"}  # mart.orders is team-a's
    assert call(app, "/assets", "format=json", cookie="olbridge_ui=nope")[0].startswith("401")
    # a script's token that is not one of the view's is told so, not that it sent none
    status, _, text = call(app, "/assets", "format=json", authorization="Bearer wrong")
    assert status.startswith("401") and "the token sent is not one of this view's" in text, text
    assert "a token is needed" in call(app, "/assets", "format=json")[2]


def test_the_ui_is_read_only_and_says_bad_values(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver)
    assert call(app, "/assets", method="POST")[0].startswith("405")
    assert call(app, "/assets/no.such.asset")[0].startswith("404")
    status, _, text = call(app, "/assets/raw.orders", "tab=nope&format=json")
    assert status.startswith("400") and "tab must be one of" in json.loads(text)["error"]
    assert call(app, "/runs", "since=yesterday")[0].startswith("400")
    _, headers, _ = call(app, "/assets")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert call(app, "/static/ui.js")[0].startswith("200")
    assert call(app, "/static/../app.py")[0].startswith("404")
    assert json_twin({"layout": object(), "graph": {"layout": 1, "nodes": []}}) == {"graph": {"nodes": []}}
    # a NUL character, which PostgreSQL's text cannot hold (it answered 500), anywhere
    for path, query in (
        ("/assets", "q=%00"),
        ("/assets", "prefix=a%00&format=json"),
        ("/assets", "namespace=%00"),
        ("/assets/raw%00.orders", ""),
        ("/runs/a\x00", ""),
        ("/runs", "job=%00"),
        ("/neighbours", "asset=%00&direction=down"),
        ("/lineage", "asset=%00"),
        ("/health", "namespace=%00"),
        ("/assets/raw.orders", "tab=dependencies&run=%00"),
        ("/assets", "%00=1"),
    ):
        status, _, text = call(app, path.replace("%00", "\x00"), query)
        assert status.startswith("400") and "NUL character" in text, (path, query, status)


def test_requests_share_the_open_catalogs(ui_catalog: str, resolver: Resolver) -> None:
    opened: list[Catalog] = []

    def open_catalog() -> Catalog:
        opened.append(Catalog(ui_catalog, create=False))
        return opened[-1]

    app = UiApp(open_catalog, Converter(resolver))
    for path in ["/assets", "/assets/no.such.asset", "/runs", "/assets/raw.orders", "/status"]:
        call(app, path)
    assert len(opened) == 1  # one request at a time: one catalog, lent again after a 404 too
    with app.catalog() as first, app.catalog() as second:
        assert first is opened[0] and second is not first  # two at once: a second one
    app.close()


def test_ui_needs_a_catalog(tmp_path: Path) -> None:
    code, _, err = invoke(tmp_path / "missing.db", "ui", "--port", "0")
    assert code == 1 and "no catalog" in err


def test_the_benchmark_runs_at_the_tiniest_size(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Built and timed at once; and built once (kept), then timed apart."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("olbridge_benchmark_ui_tiny", BENCHMARKS / "ui.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    size = ["--assets", "60", "--runs", "100", "--hub", "20", "--repeat", "1"]
    module.main(size)
    out = capsys.readouterr().out
    assert "hub dependencies" in out and "runs filtered" in out and "received run" in out
    kept = str(tmp_path / "kept.db")
    module.main([*size, "--keep", kept, "--build-only"])
    out = capsys.readouterr().out
    assert out.startswith("built 60 assets") and "hub dependencies" not in out
    module.main([*size, "--keep", kept, "--reuse"])
    out = capsys.readouterr().out
    assert not out.startswith("built") and "hub lineage slider" in out
    with pytest.raises(SystemExit, match="was not built by this benchmark"):
        module.main([*size[:1], "70", *size[2:], "--keep", kept, "--reuse"])


def test_every_twin_has_camel_case_keys(ui_catalog: str, resolver: Resolver) -> None:
    from tests.test_cli_sweep import keys_not_camel

    app = make_app(ui_catalog, resolver)
    twins = {
        page: twin(app, unquote(page.partition("?")[0]), page.partition("?")[2])
        for page in [
            "/assets?q=o",
            "/assets/raw.orders?tab=overview",
            "/assets/s3%3A%2F%2Fbucket%2Fexports%2Forders.parquet?tab=overview",
            "/assets/mart.orders?tab=dependencies",
            "/assets/raw.orders?tab=runs",
            "/assets/raw.orders?tab=columns",
            "/assets/raw.orders?tab=history&a=1&b=2",
            "/neighbours?asset=hub.events&direction=down",
            "/lineage?asset=mart.orders",
            "/runs",
            f"/runs/{EXTERNAL_RUN}",
            "/status",
        ]
    }
    assert {page: keys_not_camel(found) for page, found in twins.items() if keys_not_camel(found)} == {}


def test_login_goes_back_only_to_this_server(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver, tokens=True)
    for target, expected in [("/runs?state=FAIL", "/runs?state=FAIL"), ("//elsewhere.example/x", "/assets")]:
        body = f"token=secret-a&next={quote(target, safe='')}".encode()
        status, headers, _ = call(app, "/login", method="POST", body=body)
        assert status.startswith("303") and headers["Location"] == expected
    assert call(app, "/login", "next=https%3A%2F%2Felsewhere.example%2F")[2].count("elsewhere") == 0


def test_login_never_sends_a_header_of_its_own_nor_leads_away(ui_catalog: str, resolver: Resolver) -> None:
    """A ``next`` with a line break would end the Location header and start another (a cookie of
    the caller's choosing); a tab is dropped from a URL by a browser, so ``/<TAB>/host`` leads to
    another host; a character outside ASCII cannot be sent in a header at all. Each leads to the
    assets instead, and the answer is whole."""
    app = make_app(ui_catalog, resolver, tokens=True)
    injected = "/\r\nSet-Cookie: olbridge_ui=secret-b; Path=/assets"
    for target in (injected, "/\t/elsewhere.example", "/\n/elsewhere.example", "/assets/caf\u00e9", "/ x"):
        body = f"token=secret-a&next={quote(target, safe='')}".encode()
        status, headers, _ = call(app, "/login", method="POST", body=body)
        assert status.startswith("303") and headers["Location"] == "/assets", target
        assert "secret-b" not in headers["Set-Cookie"]
        page = call(app, "/login", f"next={quote(target, safe='')}")[2]
        assert 'name="next" value="/assets"' in page, target
    # a page asked for without a token comes back to the login with its address encoded, and
    # the login leads back to it
    status, headers, _ = call(app, "/assets/caf\u00e9", "tab=runs")
    assert status.startswith("303")
    back = unquote(headers["Location"].split("next=", 1)[1])
    assert back == "/assets/caf%C3%A9?tab=runs"
    body = f"token=secret-a&next={quote(back, safe='')}".encode()
    assert call(app, "/login", method="POST", body=body)[1]["Location"] == back


def test_a_login_leads_back_to_the_address_as_the_browser_sent_it(ui_catalog: str, resolver: Resolver) -> None:
    """An id's slashes are sent as %2F; the server's PATH_INFO has them decoded, and the login
    led back to the path encoded again with its slashes as they are, so that the browser read an
    id's ``..`` as a step up: ``s3://bucket-a/x/../y`` came back as the page of ``s3://bucket-a/y``.
    The address a login leads back to is the one the browser sent."""
    import http.client
    import socket
    import threading
    from wsgiref.simple_server import make_server

    from bridge.web import server

    app = make_app(ui_catalog, resolver, tokens=True)
    made = make_server("127.0.0.1", 0, app, server_class=server._Server, handler_class=server._QuietHandler)
    thread = threading.Thread(target=made.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()

    def back_to(target: bytes) -> str:
        with socket.create_connection(made.server_address, timeout=10) as sock:
            sock.sendall(b"GET " + target + b" HTTP/1.0\r\n\r\n")
            answer = http.client.HTTPResponse(sock)
            answer.begin()
            assert answer.status == 303
            location = answer.getheader("Location", "")
        body = f"token=secret-a&{location.split('?', 1)[1]}".encode()  # the login's form sends next on
        status, headers, _ = call(app, "/login", method="POST", body=body)
        assert status.startswith("303")
        return headers["Location"]

    try:
        for sent in ("/assets/s3%3A%2F%2Fbucket-a%2Fx%2F..%2Fy?tab=runs", "/assets/s3%3A%2F%2Fbucket-a%2F..", "/runs"):
            assert back_to(sent.encode()) == sent
        assert back_to("/assets/caf\u00e9?tab=runs".encode()) == "/assets/caf%C3%A9?tab=runs"  # sent unencoded
    finally:
        made.shutdown()
        made.server_close()
        thread.join()


@pytest.mark.parametrize("length", ["-5", "-1", "many"])
def test_a_login_with_a_bad_content_length_is_refused(ui_catalog: str, resolver: Resolver, length: str) -> None:
    app = make_app(ui_catalog, resolver, tokens=True)
    found: dict[str, Any] = {}
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/login",
        "QUERY_STRING": "",
        "CONTENT_LENGTH": length,
        "wsgi.input": io.BytesIO(b"token=secret-a"),
    }
    text = b"".join(app(environ, lambda status, headers: found.update(status=status))).decode()
    assert found["status"].startswith("400") and "Content-Length" in text


def test_ui_says_who_can_see_it(ui_catalog: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tokens on an address other than loopback, the command says anyone who reaches it
    sees the whole catalog (the server itself stands in: nothing listens)."""
    told: list[str] = []

    def ready(app: UiApp, host: str, port: int, on_ready: Any) -> None:
        told.append(host)
        on_ready(f"http://{host}:8000/")

    monkeypatch.setattr("bridge.cli.ui.serve_ui", ready)
    code, _, err = invoke(ui_catalog, "ui", "--port", "0", "--host", "0.0.0.0")
    assert code == 0 and told == ["0.0.0.0"], err
    assert "no tokens: anyone who reaches 0.0.0.0 sees the whole catalog" in err, err
    code, _, err = invoke(ui_catalog, "ui", "--port", "0")
    assert code == 0 and "no tokens: listening on loopback only" in err, err


def test_ui_on_a_port_in_use_says_so(ui_catalog: str) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = invoke(ui_catalog, "ui", "--port", str(port))
    assert code != 0 and f"Error: cannot listen on 127.0.0.1:{port}: the address is in use" in err, err


def test_the_ui_server_closes_slow_connections_and_refuses_past_its_bounds(
    ui_catalog: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that never sends its request (or a login's body it promised), or sends it a
    byte at a time, held a thread for as long as its client kept it open, and any number of them
    could: each is closed once the request's time is up, whatever trickled in; past the bound on
    connections from one address, or in all, a new one is answered 503."""
    import socket
    import threading
    from wsgiref.simple_server import make_server

    from bridge.web import server

    monkeypatch.setattr(server._QuietHandler, "timeout", 1.0)
    monkeypatch.setattr(server, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(server, "PER_CLIENT", 3)
    app = make_app(ui_catalog, resolver)
    made = make_server("127.0.0.1", 0, app, server_class=server._Server, handler_class=server._QuietHandler)
    thread = threading.Thread(target=made.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    port = made.server_address[1]

    def connect(source: str) -> socket.socket:
        return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))

    def refused(source: str) -> bool:
        with connect(source) as extra:
            return extra.recv(200).startswith(b"HTTP/1.0 503 Service Unavailable")

    idle = [connect("127.0.0.1") for _ in range(2)]
    login = connect("127.0.0.1")
    login.sendall(b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Length: 4000\r\n\r\ntoken=")
    trickling = connect("127.0.0.2")
    held = [*idle, login, trickling]
    try:
        time.sleep(0.2)  # the four taken
        assert refused("127.0.0.1")  # a fourth from one address
        assert refused("127.0.0.2")  # a fifth in all
        began = time.monotonic()
        trickling.settimeout(0.2)
        closed = False
        for byte in b"GET /assets HTTP/1.0\r\nX-Slow: " + b"x" * 100:  # a byte every 0.1 s
            try:
                trickling.sendall(bytes([byte]))
                closed = trickling.recv(4096) == b""
            except TimeoutError:
                pass
            except OSError:
                closed = True
            if closed:
                break
            time.sleep(0.1)
        assert closed and time.monotonic() - began < 4  # at its deadline, bytes trickling in or not
        for sock in [*idle, login]:
            sock.settimeout(10)
            while sock.recv(4096):  # what the server says, then its close
                pass
        assert time.monotonic() - began < 5  # each closed at its deadline, not by its client

        def answered() -> bytes:
            with connect("127.0.0.1") as again:
                again.sendall(b"GET /assets HTTP/1.0\r\n\r\n")
                return again.recv(200)

        assert wait_for(lambda: answered().startswith(b"HTTP/1.0 200"), timeout=10)  # the slots are back
        assert server.BUSY.endswith(b"\r\n\r\ntoo many connections at once\n")
        assert f"Content-Length: {len(b'too many connections at once' + bytes([10]))}".encode() in server.BUSY
    finally:
        for sock in held:
            sock.close()
        made.shutdown()
        made.server_close()
        app.close()


@pytest.mark.parametrize("probe", [browse.SEARCH_PROBE, 1])
def test_search_finds_any_part_of_an_id_a_received_name_or_a_symlink(
    catalog_target: str, resolver: Resolver, probe: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In any case, with ``%``, ``_`` and quotes taken as text, whether the text is looked for by
    reading the assets in id order (short or common: here, every text) or by the search index (a
    rare one: here, with a probe of one asset); an asset purged is no longer found."""
    monkeypatch.setattr(browse, "SEARCH_PROBE", probe)
    with Catalog(catalog_target) as catalog:
        for asset_id in ("db1.sales.Orders_2024", "db1.sales.refunds", "odd_100_done", "ab"):
            catalog.set_asset(decl(asset_id, type="Table"), now=at(1))
        symlink = {"identifiers": [{"namespace": "hive://metastore", "name": 'lake."events"%tbl', "type": "TABLE"}]}
        event = ol_run_event(
            "COMPLETE", job=("spark", "etl"), outputs=[ol_dataset("s3://lake", "raw/events", symlinks=symlink)]
        )
        assert [o.status for o in catalog_intake(catalog, resolver).take([event])] == ["accepted"]

        def found(text: str) -> list[str]:
            way = browse._search_by(catalog._conn, AssetFilter(search=text), None, None, 50)
            assert way == ("scan" if probe > 1 or not browse._indexable(text) else "index")
            page = list_assets(catalog, AssetFilter(search=text))
            assert page.count == len(page.assets)
            return [a.asset.id for a in page.assets]

        assert found("orders_20") == ["db1.sales.Orders_2024"]  # the middle of an id, in another case
        assert found("SALES.") == ["db1.sales.Orders_2024", "db1.sales.refunds"]
        assert found("100_d") == ["odd_100_done"] and found("1_0") == [] and found("s%r") == []
        (received,) = found('metastore/lake."events"%')  # a symlink's namespace/name, quotes and all
        assert found("lake/raw/ev") == [received] and found("tbl") == [received]  # its OpenLineage name
        assert found("ab") == ["ab"] and found("FU") == ["db1.sales.refunds"]  # shorter: read in id order
        catalog.purge(AssetQuery.create(ids=["db1.sales.refunds", received]))
        assert found("sales.") == ["db1.sales.Orders_2024"] and found("metastore") == [] and found("tbl") == []


@pytest.mark.parametrize("probe", [browse.SEARCH_PROBE, 1])
def test_search_folds_the_case_of_letters_outside_ascii_the_same_on_every_path(
    catalog_target: str, resolver: Resolver, probe: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``É`` finds ``é`` and ``Ü`` finds ``ü`` (and each itself, typed as it is) in an id, a received
    name and a symlink, whether the assets are read in id order (every text here) or found by the
    search index (a rare text with three characters in a row that are ASCII or have no case, here
    with a probe of one asset), on both engines; a letter's accent still counts."""
    monkeypatch.setattr(browse, "SEARCH_PROBE", probe)
    with Catalog(catalog_target) as catalog:
        for asset_id in ("s3://wh/Données.Éléments", "s3://wh/Xléments", "s3://wh/données.elements"):
            catalog.set_asset(decl(asset_id, type="Table"), now=at(1))
        symlink = {"identifiers": [{"namespace": "hive://metastore", "name": "lake.Ärger_Øl", "type": "TABLE"}]}
        event = ol_run_event(
            "COMPLETE", job=("spark", "etl"), outputs=[ol_dataset("bigquery", "proj.Über.Tâble", symlinks=symlink)]
        )
        assert [o.status for o in catalog_intake(catalog, resolver).take([event])] == ["accepted"]
        (received,) = {a.id for a in catalog.list_assets()} - {
            "s3://wh/Données.Éléments",
            "s3://wh/Xléments",
            "s3://wh/données.elements",
        }

        def found(text: str, way: str) -> list[str]:
            assert browse._search_by(catalog._conn, AssetFilter(search=text), None, None, 50) == (
                "scan" if probe > 1 else way
            )
            page = list_assets(catalog, AssetFilter(search=text))
            assert page.count == len(page.assets)
            return [a.asset.id for a in page.assets]

        assert found("Éléments", "index") == ["s3://wh/Données.Éléments"]  # typed in the very case
        assert found("éLÉMENTS", "index") == ["s3://wh/Données.Éléments"]  # in another; not s3://wh/Xléments
        assert found("DONNÉES.élé", "index") == ["s3://wh/Données.Éléments"]
        assert found("éLÉ", "scan") == ["s3://wh/Données.Éléments"]  # no trigram outside a wildcard
        assert found("ONNées", "index") == ["s3://wh/Données.Éléments", "s3://wh/données.elements"]
        assert found("onnees", "index") == []  # no accent: another letter
        assert not received.startswith("bigquery")  # its id says nothing of its OpenLineage name
        assert found("BIGQUERY/proj.üBER", "index") == found("tÂBLE", "index") == [received]
        assert found("METASTORE/lake.äRGER_øL", "index") == [received]  # a symlink's namespace/name
        assert found("ärger", "index") == [received] and found("ÄR", "scan") == [received]


def test_a_common_search_text_is_read_in_id_order_and_counted_as_far_as_cheap(
    catalog_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text the first assets hold often enough is found by reading them in order; its count
    stops at the cap, or is not given when reaching it would read every asset."""
    with Catalog(catalog_target) as catalog:
        for i in range(30):
            catalog.set_asset(decl(f"t.common_{i:02d}" if i % 3 else f"t.other_{i:02d}", type="Table"), now=at(1))
        monkeypatch.setattr(browse, "SEARCH_PROBE", 12)  # 8 of the first 12 hold "common": a page of 5
        page = list_assets(catalog, AssetFilter(search="COMMON"), limit=5)
        assert [a.asset.id for a in page.assets] == [
            "t.common_01",
            "t.common_02",
            "t.common_04",
            "t.common_05",
            "t.common_07",
        ]
        assert page.count == 20 and page.after == "t.common_07"
        monkeypatch.setattr(browse, "SEARCH_COUNTED", 10)  # not all read: not counted
        assert list_assets(catalog, AssetFilter(search="common"), limit=5).count is None
        monkeypatch.setattr(browse, "COUNT_CAP", 5)  # past the cap within what is read
        assert list_assets(catalog, AssetFilter(search="common"), limit=5).count == 6
        rest = list_assets(catalog, AssetFilter(search="common"), after=page.after, limit=50)
        assert len(rest.assets) == 15 and rest.after is None
        # held by more terms than the index is read for, and not by the first assets: read in id
        # order too, at most SEARCH_BUDGET assets a page, a page cut short going on from where it stopped
        monkeypatch.setattr(browse, "SEARCH_MATCHES", 3)
        monkeypatch.setattr(browse, "SEARCH_BUDGET", 8)
        monkeypatch.setattr(browse, "SCAN_CHUNK", 4)
        assert browse._search_by(catalog._conn, AssetFilter(search="other"), None, None, 5) == "scan"
        pages, after = [], None
        while True:
            cut = list_assets(catalog, AssetFilter(search="other"), after=after, limit=5)
            pages.append([a.asset.id for a in cut.assets])
            if cut.after is None:
                break
            after = cut.after
        assert pages[0] == [] and [i for p in pages for i in p] == [f"t.other_{i:02d}" for i in range(0, 30, 3)]


def test_a_postgresql_catalog_without_pg_trgm_is_made_searches_and_says_so(postgres: PostgresServer) -> None:
    """A user that may not create the extension (no CREATE on the database) still makes the
    catalog; its search reads every asset, finds the same, and ``ui`` says it has no index."""
    import subprocess
    import sys

    name = postgres.create_database()
    with postgres.connect(name) as admin:
        admin.execute(f"GRANT CREATE ON SCHEMA public TO {PASSWORD_ROLE}")
        admin.commit()
    url = postgres.url(name, password=True)
    with Catalog(url) as catalog:
        assert not catalog.search_indexed()
        catalog.set_asset(decl("db1.sales.Orders_2024", type="Table"), now=at(1))
        assert [a.asset.id for a in list_assets(catalog, AssetFilter(search="sales.ord")).assets] == [
            "db1.sales.Orders_2024"
        ]
    argv = [sys.executable, "-m", "bridge", "ui", "--port", "0"]
    env = {**os.environ, "OLBRIDGE_CATALOG": url}
    process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stderr is not None
        warning, ready = process.stderr.readline(), process.stderr.readline()
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert warning.startswith("warning: the catalog has no search index") and "olbridge ui on" in ready


def test_an_assets_neighbours_are_read_page_after_page_as_one_query_over_all_lineage_gives_them(
    ui_catalog: str,
) -> None:
    """Each asset's neighbours (own and received lineage, read table by table in their indexes'
    order) are, page after page and counted, what one query over every edge gives: distinct,
    assets, in id order; with a scope only those it allows (Global ones too), with a search only
    the ids holding it (ASCII letters in any case)."""
    with Catalog(ui_catalog, create=False) as catalog:
        conn = catalog._conn
        ids = [a.id for a in catalog.list_assets()]
        scope = browse.Scope(("team-b*",))
        for asset_id in ids:
            for direction, (me, other) in (
                ("upstream", ("downstream_id", "upstream_id")),
                ("downstream", ("upstream_id", "downstream_id")),
            ):
                every = conn.execute(
                    f"SELECT DISTINCT l.{other}, a.namespace FROM all_lineage l JOIN assets a ON a.id = l.{other} "
                    f"WHERE l.{me} = ? ORDER BY 1",
                    [asset_id],
                ).fetchall()
                for chosen, search in ((None, ""), (scope, ""), (None, "F01"), (scope, "O")):
                    wanted = [i for i, ns in every if browse.allows(chosen, ns) and search.lower() in i.lower()]
                    pages, after = [], None
                    while True:
                        found = browse.neighbours(
                            catalog, asset_id, direction, limit=3, search=search, after=after, scope=chosen, cap=7
                        )
                        assert found.count == min(len(wanted), 7)
                        pages += found.ids
                        if len(found.ids) < 3:
                            break
                        after = found.ids[-1]
                    assert pages == wanted, (asset_id, direction, chosen, search)


def test_the_health_page_counts_lists_and_filters_each_assets_health(ui_catalog: str, resolver: Resolver) -> None:
    """/health: every asset's health now, counted by health, those FAIL and WARN listed unless
    ``state`` says others (with their reasons and the path from an at-risk flag's cause), by
    namespace and at risk; a token counts and sees its namespaces' assets alone, and a path through
    another's names none of its assets; the asset's own page has its health too."""
    mart = decl("mart.orders", type="Table", namespace="team-a.sales")
    summary = decl("hr.summary", type="Table", namespace="team-b.hr")
    with Catalog(ui_catalog) as catalog:  # team-b reads team-a's failing mart
        catalog.record_task_run(
            run("summary", inputs=(mart,), outputs=(summary,), start=at(120), namespace="team-b.hr")
        )
    app = make_app(ui_catalog, resolver)
    every = "state=FAIL,WARN,PASS,UNKNOWN"
    page = twin(app, "/health")
    assert page["filters"]["state"] == "FAIL,WARN"
    assert {a["health"] for a in page["assets"]} <= {"FAIL", "WARN"} and "mart.orders" in {
        a["id"] for a in page["assets"]
    }
    listed = twin(app, "/assets")
    assert sum(page["counts"].values()) == listed["count"]  # every asset judged once
    risky = {a["id"]: a for a in twin(app, "/health", f"{every}&risk=1")["assets"]}
    assert risky["report.daily"]["pathToCause"] == ["mart.orders", "report.daily"]
    assert risky["hr.summary"]["pathToCause"] == ["mart.orders", "hr.summary"] and page["atRisk"] == len(risky)
    # the graphs mark each asset's health now: FAIL or WARN, and at risk, with a legend
    graph = twin(app, "/assets/mart.orders", "tab=dependencies&direction=down")["graph"]
    marks = {n["id"]: n["marks"] for n in graph["nodes"]}
    assert "FAIL" in marks["mart.orders"] and "at-risk" in marks["report.daily"], marks
    assert graph["riskFlagged"] is True and not {"FAIL", "WARN"} & set(marks["report.daily"])
    lineage = twin(app, "/lineage", "asset=mart.orders&direction=down")
    assert "at-risk" in {n["id"]: n["marks"] for n in lineage["nodes"]}["hr.summary"]
    _, _, text = call(app, "/assets/mart.orders", "tab=dependencies&direction=down")
    assert 'aria-label="Health now"' in text and "Table · at risk</text>" in text
    theirs = twin(app, "/health", f"{every}&namespace=team-b.hr")
    assert {a["namespace"] for a in theirs["assets"]} == {"team-b.hr"}
    assert {a["id"] for a in theirs["assets"]} == {"hr.people", "hr.payroll", "hr.summary"}
    assert twin(app, "/assets/hr.summary")["health"]["pathToCause"] == ["mart.orders", "hr.summary"]
    # a reason that names the last run links to the asset's runs, where that run is listed
    _, _, text = call(app, "/assets/report.daily")
    assert re.search(r'<li>last run [^<]* · <a href="/assets/report\.daily\?tab=runs">its runs</a></li>', text), text

    scoped = make_app(ui_catalog, resolver, tokens=True)
    _, headers, _ = call(scoped, "/login", method="POST", body=b"token=secret-b&next=/health")
    cookie = headers["Set-Cookie"].split(";")[0]
    seen = twin(scoped, "/health", f"{every}&risk=1", cookie=cookie)
    assert [a["id"] for a in seen["assets"]] == ["hr.summary"]
    assert seen["assets"][0]["pathToCause"] == [None, "hr.summary"]  # team-a's mart is not named
    counted = twin(scoped, "/health", every, cookie=cookie)
    assert sum(counted["counts"].values()) == twin(scoped, "/assets", cookie=cookie)["count"]
    _, _, text = call(scoped, "/health", f"{every}&risk=1", cookie=cookie)
    assert "an asset of another namespace" in text and "mart.orders" not in text

    # the config's [[freshness]] selectors judge the assets they take
    ruled = UiApp(
        lambda: Catalog(ui_catalog, create=False),
        Converter(resolver),
        (),
        [Selector(Match(namespace="team-b.hr"), FreshnessRule.create(max=timedelta(hours=1)))],
    )
    payroll = twin(ruled, "/assets/hr.payroll")["health"]
    assert payroll["health"] == "FAIL" and payroll["reasons"][0].startswith("stale: last written"), payroll
    assert twin(app, "/assets/hr.payroll")["health"]["health"] == "PASS"  # no rule: its last run succeeded
    # a catalog past what a request judges whole: a namespace is asked for, and judges
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(pages, "HEALTH_PAGE_AT_MOST", 3)
        refused = twin(app, "/health", every)
        assert refused["tooMany"] == 3 and refused["assets"] == [] and refused["counts"] is None
        assert len(twin(app, "/health", f"{every}&namespace=team-b.hr")["assets"]) == 3
        _, _, text = call(app, "/health")
        assert "Give a namespace above" in text
        # the bound is the catalog's, not what a token sees: judging every asset costs the same
        patched.setattr(pages, "HEALTH_PAGE_AT_MOST", twin(scoped, "/assets", cookie=cookie)["count"])
        assert twin(scoped, "/health", every, cookie=cookie)["tooMany"] == pages.HEALTH_PAGE_AT_MOST
        # a namespace's assets, never from the whole catalog's facts: past the bound with those
        # upstream, without at-risk flags
        from bridge.catalog import health as health_queries

        patched.setattr(health_queries, "_whole", None)
        patched.setattr(health_queries, "SOME_AT_MOST", 3)  # team-b.hr's three, not with the mart upstream
        unflagged = twin(app, "/health", f"{every}&namespace=team-b.hr")
        assert unflagged["riskFlagged"] is False and unflagged["atRisk"] is None
        assert {a["id"]: a["atRisk"] for a in unflagged["assets"]} == dict.fromkeys(
            ["hr.payroll", "hr.people", "hr.summary"]
        )
        patched.setattr(health_queries, "SOME_AT_MOST", 2)  # fewer than the namespace's own: none judged
        assert twin(app, "/health", f"{every}&namespace=team-b.hr")["tooMany"] == 2
        _, _, text = call(app, "/health", f"{every}&namespace=team-b.hr")
        assert "Judging this namespace reads more than a page may: more than 2 assets" in text
    status, _, text = call(app, "/health", "state=BROKEN&format=json")
    assert status.startswith("400") and "unknown health 'BROKEN'" in text
    for states in ("", "%2C", "+"):  # a list naming no health showed no asset
        status, _, text = call(app, "/health", f"state={states}&format=json")
        assert status.startswith("400") and "state: " in text and "names no health" in text, (states, text)
    # a value no id, name or filter is as long as: a 400 naming it (a search past SQLite's LIKE limit was a 500)
    for page, parameter in (("/assets", "q"), ("/neighbours", "q"), ("/assets", "prefix"), ("/health", "namespace")):
        status, _, text = call(app, page, f"asset=mart.orders&{parameter}={'a' * 50_010}&format=json")
        assert status.startswith("400") and f"{parameter}: at most 4,096 characters" in text, (page, status, text)
    status, _, text = call(app, "/assets", f"q={'a' * 4096}&format=json")
    assert status.startswith("200"), text
    # each value alone: a graph's many expanded ids are many values of one parameter
    expanded = "&".join(f"expand={'x' * 1000}{n}" for n in range(6))
    assert call(app, "/lineage", f"asset=mart.orders&{expanded}&format=json")[0].startswith("200")
    # a namespace no asset may have is a bad value (as `olbridge health --namespace` says), not a page of none
    for namespace in ("%3Cscript%3Ex%3C%2Fscript%3E", "Team-A", "a" * 151):
        status, _, text = call(app, "/health", f"namespace={namespace}&format=json")
        assert status.startswith("400") and "namespace" in text, (namespace, status, text)
    # the catalog's strings escaped: a received job named like a script is in a placeholder's reasons
    _, _, text = call(app, "/health", every)
    assert HOSTILE not in text and "&lt;script&gt;" in text
    _, _, text = call(app, "/assets/mart.orders")
    assert '<span class="health FAIL">FAIL</span>' in text and "check not_null on id failed" in text


def test_past_what_a_request_judges_the_health_page_shows_what_the_watch_keeps(
    ui_catalog: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog past what a request judges whole, while a health watch keeps each asset's health:
    /health counts the assets by health, and pages through those of the states asked for, as the
    watch keeps them, each asset on the page judged now with its at-risk flag (what the page judges
    whole gives the same); a token's counts and pages are its namespaces'; the at-risk filter,
    which the watch keeps no flags for, asks for a namespace. Without a live watch, the page asks
    for one as before."""
    mart = decl("mart.orders", type="Table", namespace="team-a.sales")
    summary = decl("hr.summary", type="Table", namespace="team-b.hr")
    with Catalog(ui_catalog) as catalog:  # team-b reads team-a's failing mart
        catalog.record_task_run(
            run("summary", inputs=(mart,), outputs=(summary,), start=at(120), namespace="team-b.hr")
        )
    app, scoped = make_app(ui_catalog, resolver), make_app(ui_catalog, resolver, tokens=True)
    _, headers, _ = call(scoped, "/login", method="POST", body=b"token=secret-b&next=/health")
    cookie = headers["Set-Cookie"].split(";")[0]
    every = "state=FAIL,WARN,PASS,UNKNOWN"
    whole = twin(app, "/health", every)  # a small catalog: judged whole at the request
    theirs = twin(scoped, "/health", every, cookie=cookie)
    assert whole["kept"] is False and whole["tooMany"] is None
    monkeypatch.setattr(pages, "HEALTH_PAGE_AT_MOST", 3)
    with Catalog(ui_catalog) as catalog:
        # a lease taken, its holder's first pass over every asset not made yet: nothing current kept
        assert take_lease(catalog.db, "starting", time.time(), 600.0, kind=LEASE_KIND)
        assert twin(app, "/health", every)["tooMany"] == 3
        release_lease(catalog.db, "starting", kind=LEASE_KIND)
        watch = HealthWatch(catalog, WatchSettings())  # the real clock: the page reads the lease by it
        assert watch.step() is not None
        monkeypatch.setattr(pages, "PAGE", 4)
        try:
            for where, cookie_of, judged in ((app, "", whole), (scoped, cookie, theirs)):
                kept = twin(where, "/health", every, cookie=cookie_of)
                assert kept["kept"] is True and kept["tooMany"] is None and kept["atRisk"] is None
                assert kept["counts"] == judged["counts"] and list(kept["counts"]) == list(judged["counts"])
                shown: list[dict[str, Any]] = []
                after, pages_read = "", 0
                while after is not None and pages_read < 20:  # every page of 4, by id
                    page = twin(where, "/health", f"{every}&after={quote(after)}", cookie=cookie_of)
                    assert len(page["assets"]) <= 4
                    shown, after, pages_read = shown + page["assets"], page["next"], pages_read + 1
                assert pages_read > 1 and shown == judged["assets"]  # each judged now, at-risk path and all
                bad = twin(where, "/health", cookie=cookie_of)  # FAIL and WARN, the default
                assert [a["id"] for a in bad["assets"]] == [
                    a["id"] for a in judged["assets"] if a["health"] in ("FAIL", "WARN")
                ][:4]
            assert {a["namespace"] for a in shown} <= {"team-b.hr", "team-b.ops", None}
            assert twin(app, "/health", f"{every}&risk=1")["tooMany"] == 3  # no at-risk flags kept
            # a received run named under several jobs: the page's assets as the watch keeps them,
            # never judged from the whole catalog's facts
            from bridge.catalog import health as health_queries

            with monkeypatch.context() as patched:
                patched.setattr(health_queries, "_whole", None)
                patched.setattr(health_queries, "ANY_RUN_OF_SEVERAL_JOBS", "SELECT 1")
                alone = twin(app, "/health")
                assert alone["kept"] is True and alone["riskFlagged"] is False
                assert [(a["id"], a["health"], a["atRisk"]) for a in alone["assets"]] == [
                    (a["id"], a["health"], None) for a in whole["assets"] if a["health"] in ("FAIL", "WARN")
                ][:4]
            _, _, text = call(app, "/health")
            assert "as the health watch keeps them" in text and HOSTILE not in text
            _, _, text = call(app, "/health", f"{every}&risk=1")
            assert "the health watch keeps no at-risk flags" in text
        finally:
            release_lease(catalog.db, watch.holder, kind=LEASE_KIND)
    refused = twin(app, "/health", every)
    assert refused["tooMany"] == 3 and refused["kept"] is False
    _, _, text = call(app, "/health")
    assert "no health watch keeps their health now" in text


def test_a_namespace_a_token_does_not_see_is_answered_as_one_that_does_not_exist(
    ui_catalog: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/health judged a namespace a token does not see, and told of it: past what a request judges
    of one namespace, ``tooMany`` (its size was more), where a namespace that does not exist has
    every count 0. Such a namespace is not read now: the health page, the assets list and the runs
    list answer as for one that does not exist."""
    from bridge.catalog import health as health_queries

    monkeypatch.setattr(health_queries, "SOME_AT_MOST", 2)  # team-a.sales holds more assets
    monkeypatch.setattr(pages, "HEALTH_PAGE_AT_MOST", 3)  # and the catalog more than a request judges whole
    app, scoped, cookie = (
        make_app(ui_catalog, resolver),
        make_app(ui_catalog, resolver, tokens=True),
        "olbridge_ui=secret-b",
    )
    assert twin(app, "/health", "namespace=team-a.sales")["tooMany"] == 2  # judged, for one that sees it
    assert set(twin(app, "/health", "namespace=team-a.none-such")["counts"].values()) == {0}
    for path, query in (("/health", "state=FAIL,WARN,PASS,UNKNOWN&"), ("/assets", ""), ("/runs", "")):
        hidden = twin(scoped, path, f"{query}namespace=team-a.sales", cookie=cookie)
        none = twin(scoped, path, f"{query}namespace=team-a.none-such", cookie=cookie)
        assert hidden["filters"].pop("namespace") == "team-a.sales" and none["filters"].pop("namespace")
        assert hidden == none, path
    assert twin(scoped, "/runs", "namespace=team-b.hr", cookie=cookie)["runs"]  # its own: read
    assert twin(scoped, "/assets", "namespace=team-b.hr", cookie=cookie)["assets"]


def test_a_page_never_judges_the_whole_catalog_for_its_assets_health(
    ui_catalog: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The assets list and an asset's page judge their assets from their own facts and those
    upstream of them; where those upstream are more than a page reads (200 with them), without
    at-risk flags (null, and a note says so), never from the whole catalog's facts (on a catalog
    of a million assets, 20 s a page)."""
    from bridge.catalog import health as health_queries

    app = make_app(ui_catalog, resolver)
    assert twin(app, "/assets/report.daily")["health"]["atRisk"] is True  # downstream of the failing mart
    monkeypatch.setattr(health_queries, "_whole", None)  # read it, and the page fails
    monkeypatch.setattr(pages, "HEALTH_UPSTREAM", 1)  # an asset and one upstream are too many
    page = twin(app, "/assets/report.daily")
    assert page["riskFlagged"] is False and page["health"]["atRisk"] is None
    assert page["health"]["health"] == "PASS"  # its own facts still judge it
    _, _, text = call(app, "/assets/report.daily")
    assert "Whether it is at risk is not worked out here" in text
    shown = len(twin(app, "/assets", "namespace=team-a.sales")["assets"])
    monkeypatch.setattr(pages, "HEALTH_UPSTREAM", shown)  # a page's assets, not with those upstream
    listed = twin(app, "/assets", "namespace=team-a.sales")
    assert len(listed["assets"]) == shown and listed["riskFlagged"] is False
    assert {a["health"]["atRisk"] for a in listed["assets"]} == {None}
    assert {a["health"]["health"] for a in listed["assets"]} >= {"FAIL", "PASS"}


SCOPED_RUN = "0194a1b2-0000-7000-8000-0000000000cc"
SECRET_PARENT = "0194a1b2-0000-7000-8000-0000000000dd"
CHILD_RUN = "0194a1b2-0000-7000-8000-0000000000de"


def test_a_token_reads_no_job_or_dataset_of_another_namespace(catalog_target: str, resolver: Resolver) -> None:
    """What team-b does shows to team-a only as "another namespace": the job that wrote a Global
    asset, in its health's reasons and the graph's legend; a team-a run that read team-b's data
    (its raw events, facets, parent); an asset joined to team-a's only through team-b's (the
    lineage over time); where the stream's last error went and what was answered."""
    with Catalog(catalog_target) as catalog:
        secret = decl("s3://secretbkt/b-only", type="File", namespace="team-b.hr")
        shared = decl("g.shared", type="Table")
        mine = decl("a.tbl", type="Table", namespace="team-a.sales")
        source = decl("a.src", type="Table", namespace="team-a.sales")
        runs = [
            run("secretflow", inputs=(source,), outputs=(secret,), start=at(5), namespace="team-b.hr"),
            run("secretflow", inputs=(secret,), outputs=(shared,), start=at(10), namespace="team-b.hr", execution="e2"),
            run("aflow", inputs=(shared,), outputs=(mine,), start=at(20), namespace="team-a.sales"),
        ]
        for each in runs:
            catalog.record_task_run(each)
        parent = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
            "run": {"runId": SECRET_PARENT},
            "job": {"namespace": "team-b-airflow", "name": "SECRET-PARENT-JOB"},
        }
        event = ol_run_event(
            "COMPLETE",
            run_id=SCOPED_RUN,
            job=("team-a-spark", "reads-b"),
            inputs=[ol_dataset("s3://secretbkt", "b-only")],
            outputs=[ol_dataset("s3://bkt", "out")],
            run={"runId": SCOPED_RUN, "facets": {"parent": parent}},
        )
        # a run of team-a's own data whose parent alone is another namespace's
        child = ol_run_event(
            run_id=CHILD_RUN,
            job=("team-a-spark", "child"),
            outputs=[ol_dataset("s3://bkt", "child-out")],
            run={"runId": CHILD_RUN, "facets": {"parent": parent}},
        )
        assert [o.status for o in catalog_intake(catalog, resolver).take([event, child])] == ["accepted"] * 2
        catalog.outbox.record_error(
            DeliveryError(
                "stream", "http://backend.example/api", "refused", 422, "team-b.hr payroll", "2025-03-01T09:00:00Z"
            )
        )
    app = make_app(catalog_target, resolver, tokens=True)
    a, b_ = {"cookie": "olbridge_ui=secret-a"}, {"cookie": "olbridge_ui=secret-b"}

    shown = twin(app, "/assets/g.shared", **a)
    assert [r for r in shown["health"]["reasons"] if "last run" in r] == [
        f"last run {ANOTHER_NAMESPACE} at {format_time(runs[1].ended_at)} succeeded"
    ]
    page = call(app, "/health", "state=PASS", **a)[2] + call(app, "/assets", **a)[2]
    assert "secretflow" not in page and "team-b" not in page
    assert any("team-b.hr/" in r for r in twin(app, "/assets/g.shared", **b_)["health"]["reasons"])

    legend = call(app, "/assets/g.shared", "tab=dependencies&group=flow", **a)[2]
    assert "team-a.sales/flow" in legend  # a flow's label: its namespace and flow id
    assert "team-b" not in legend and ANOTHER_WRITER in legend

    seen = twin(app, f"/runs/{SCOPED_RUN}", **a)
    assert seen["hidden"] is True and seen["rawEvents"] == [] and seen["facets"] == {"run": {}, "job": {}}
    assert seen["parentRunId"] is None and seen["parentKnown"] is False
    page = call(app, f"/runs/{SCOPED_RUN}", **a)[2]
    assert "secretbkt" not in page and "SECRET-PARENT-JOB" not in page and SECRET_PARENT not in page
    seen = twin(app, f"/runs/{CHILD_RUN}", **a)  # its raw events name the parent's job: not shown
    assert seen["hidden"] is True and seen["rawEvents"] == [] and seen["parentRunId"] is None
    assert "SECRET-PARENT-JOB" not in call(app, f"/runs/{CHILD_RUN}", **a)[2]
    open_app = make_app(catalog_target, resolver)  # no tokens: everything, the parent unlinked (not in the catalog)
    whole = twin(open_app, f"/runs/{SCOPED_RUN}")
    assert whole["hidden"] is False and whole["rawEvents"] and whole["parentRunId"] == SECRET_PARENT
    assert whole["parentKnown"] is False
    assert f'href="/runs/{SECRET_PARENT}"' not in call(open_app, f"/runs/{SCOPED_RUN}")[2]

    lineage = twin(app, "/lineage", "asset=a.tbl&direction=up&depth=3", **a)
    assert "a.src" not in lineage["newAssets"] and "a.src" not in str(lineage["nodes"])
    assert "g.shared" in str(lineage["nodes"])
    assert "a.src" in str(twin(open_app, "/lineage", "asset=a.tbl&direction=up&depth=3")["nodes"])

    status = twin(app, "/status", **a)["lastError"]
    assert status["failure"] == "refused" and "target" not in status and "detail" not in status
    assert twin(open_app, "/status")["lastError"]["detail"] == "team-b.hr payroll"


def test_a_runs_page_keeps_back_a_warning_naming_another_namespaces_asset(
    catalog_target: str, resolver: Resolver
) -> None:
    """A run of team-a's declared team-b's asset as an output of team-a: the write failed (WARN),
    and the run's warning names the asset and its namespace. The asset is in none of the run's
    inputs and outputs, so a team-a token saw the warning on the run's page, where the asset's own
    page is a 404: what came with the run is kept back, as for any asset it does not see."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(
            run("copy", outputs=(decl("b.private", type="Table", namespace="team-b.hr"),), namespace="team-b.hr")
        )
        outputs = (decl("b.private", type="Table", namespace="team-a.sales"), decl("a.out", type="Table"))
        mine = run("load", outputs=outputs, namespace="team-a.sales", start=at(10))
        catalog.record_task_run(mine)
    run_id = task_run_id(mine.key, mine.started_at)
    app = make_app(catalog_target, resolver)
    whole = twin(app, f"/runs/{run_id}")
    assert whole["outputs"] == ["a.out"] and any(
        "'b.private' belongs to namespace team-b.hr" in w for w in whole["warnings"]
    )
    scoped = make_app(catalog_target, resolver, tokens=True)
    a = {"cookie": "olbridge_ui=secret-a"}
    assert call(scoped, "/assets/b.private", **a)[0].startswith("404")
    seen = twin(scoped, f"/runs/{run_id}", **a)
    assert seen["hidden"] is True and seen["warnings"] == [] and seen["outputs"] == ["a.out"]
    assert "b.private" not in call(scoped, f"/runs/{run_id}", **a)[2]
    assert "team-b" not in json.dumps(seen)
    # the asset purged since: its warning still names it and its namespace
    with Catalog(catalog_target) as catalog:
        catalog.purge(AssetQuery.create(ids=["b.private"]))
    assert call(scoped, "/assets/b.private", **a)[0].startswith("404")
    seen = twin(scoped, f"/runs/{run_id}", **a)
    assert seen["hidden"] is True and seen["warnings"] == [] and "team-b" not in json.dumps(seen)


def test_a_failed_runs_page_names_what_it_was_to_write(catalog_target: str, resolver: Resolver) -> None:
    """A failed own run wrote none of its outputs: its page (and ``runs show``) names those it was
    to write that the catalog holds, apart from its outputs; a token sees only its namespaces' of
    them, and the page keeps back what came with the run, as for any asset it does not see."""
    with Catalog(catalog_target) as catalog:
        mine = decl("a.mart", type="Table", namespace="team-a.sales")
        catalog.record_task_run(run("load", outputs=(mine,), namespace="team-a.sales"))
        catalog.record_task_run(
            run("copy", outputs=(decl("b.mart", type="Table", namespace="team-b.hr"),), namespace="team-b.hr")
        )
        outputs = (decl("a.mart"), decl("b.mart"), decl("a.never"))  # a.never: new, without a type
        failed = run(
            "load",
            execution="e2",
            outputs=outputs,
            state="FAILED",
            start=at(10),
            error="boom",
            namespace="team-a.sales",
        )
        catalog.record_task_run(failed)
        own = run("load", execution="e3", outputs=outputs[:1], state="KILLED", start=at(20), namespace="team-a.sales")
        catalog.record_task_run(own)
    run_id = task_run_id(failed.key, failed.started_at)
    app = make_app(catalog_target, resolver)
    whole = twin(app, f"/runs/{run_id}")
    assert whole["outputs"] == [] and whole["unwrittenOutputs"] == ["a.mart", "b.mart"]  # a.never: no asset
    page = call(app, f"/runs/{run_id}")[2]
    assert "Outputs it was to write, not written" in page and 'href="/assets/b.mart"' in page
    scoped = make_app(catalog_target, resolver, tokens=True)
    a = {"cookie": "olbridge_ui=secret-a"}
    seen = twin(scoped, f"/runs/{run_id}", **a)
    assert seen["unwrittenOutputs"] == ["a.mart"] and seen["hidden"] is True  # it names team-b's
    assert "b.mart" not in call(scoped, f"/runs/{run_id}", **a)[2]
    # a run of team-a's that names only team-a's: shown whole, its execution as its parent
    theirs = twin(scoped, f"/runs/{task_run_id(own.key, own.started_at)}", **a)
    assert theirs["unwrittenOutputs"] == ["a.mart"] and theirs["hidden"] is False, theirs
    assert theirs["parentRunId"] is not None and theirs["facets"]["run"]["parent"]
    assert theirs["graphAsset"] == "a.mart"  # no output written: the graph is drawn from what it was to write
    code, out, err = invoke(catalog_target, "runs", "show", run_id)
    assert code == 0 and "output:   a.mart (not written: the run ended FAILED)" in out.splitlines(), err
    code, out, err = invoke(catalog_target, "runs", "show", run_id, "--json")
    assert json.loads(out)["unwrittenOutputs"] == ["a.mart", "b.mart"], err  # a.never: no asset when it ended


def test_a_run_named_under_two_jobs_leaves_a_small_catalogs_pages_judged(ui_catalog: str, resolver: Resolver) -> None:
    """A received run named under several jobs makes the few-assets reads unable to answer (its
    outputs' usages are under every job): a catalog small enough for a page is then judged from
    its whole facts, not said to be too large."""
    with Catalog(ui_catalog) as catalog:
        events = [
            ol_run_event(job=("team-a-spark", name), run_id="0194a1b2-0000-7000-8000-0000000000ee", time=moment)
            for name, moment in (("j1", "2025-02-01T00:00:00Z"), ("j2", "2025-02-01T00:01:00Z"))
        ]
        assert [o.status for o in catalog_intake(catalog, resolver).take(events)] == ["accepted", "accepted"]
        assert catalog.health_of_few(at(200), (), namespace="team-a.sales") is None  # what the page falls back from
        whole = [h.asset_id for h in catalog.health(at(200), namespace="team-a.sales")]
    app = make_app(ui_catalog, resolver)
    page = twin(app, "/health", "namespace=team-a.sales&state=FAIL,WARN,PASS,UNKNOWN")
    assert page["tooMany"] is None and page["riskFlagged"] is True
    assert sum(page["counts"].values()) == len(whole)
    listed = twin(app, "/assets", "namespace=team-a.sales")
    assert listed["riskFlagged"] is True and all(a["health"] is not None for a in listed["assets"])
    assert listed["healthJudged"] is True


def test_a_page_that_cannot_judge_its_assets_says_why(
    ui_catalog: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same run in a catalog past what a page judges whole: the assets list showed no health
    and said only that the at-risk flags were not worked out, blaming 200 upstream assets; an
    asset's page showed no health and said nothing. Each says why."""
    from bridge.web import pages

    with Catalog(ui_catalog) as catalog:
        events = [
            ol_run_event(job=("team-a-spark", name), run_id="0194a1b2-0000-7000-8000-0000000000ee", time=moment)
            for name, moment in (("j1", "2025-02-01T00:00:00Z"), ("j2", "2025-02-01T00:01:00Z"))
        ]
        assert [o.status for o in catalog_intake(catalog, resolver).take(events)] == ["accepted", "accepted"]
    monkeypatch.setattr(pages, "HEALTH_PAGE_AT_MOST", 1)  # the catalog past it
    app = make_app(ui_catalog, resolver)
    listed = twin(app, "/assets", "namespace=team-a.sales")
    assert listed["healthJudged"] is False and all(a["health"] is None for a in listed["assets"])
    _, _, text = call(app, "/assets", "namespace=team-a.sales")
    assert "Health is not shown on this page: the catalog holds a received run" in text
    assert "more than 200 assets are upstream" not in text
    _, _, text = call(app, f"/assets/{quote(listed['assets'][0]['id'], safe='')}")
    assert "Its health is not shown here: the catalog holds a received run" in text


def test_a_token_is_not_shown_a_column_edge_to_an_asset_no_longer_in_the_catalog(
    catalog_target: str, resolver: Resolver
) -> None:
    """An asset purged without its lineage leaves its column edges: the Columns tab of a team's
    asset listed another team's purged asset and its column (it found no namespace for it, and
    no namespace passed as Global)."""
    from bridge.catalog.query import AssetQuery
    from bridge.model import Column

    secret = decl("s3://secretbkt/b-only", type="File", namespace="team-b.hr", columns=[Column("ssn", "text")])
    mine = decl("s3://bkt/out", type="File", namespace="team-a.sales", columns=[Column("id", "int")])
    field = {"namespace": "s3://secretbkt", "name": "b-only", "field": "ssn"}
    out = ol_dataset("s3://bkt", "out")
    out["facets"] = {
        "columnLineage": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
            "fields": {"id": {"inputFields": [field]}},
        }
    }
    with Catalog(catalog_target) as catalog:
        for each in (secret, mine):
            catalog.set_asset(each, now=at(0))
        event = ol_run_event(
            "COMPLETE", job=("team-a-spark", "j"), inputs=[ol_dataset("s3://secretbkt", "b-only")], outputs=[out]
        )
        catalog_intake(catalog, resolver).take([event])
    whole = twin(make_app(catalog_target, resolver), "/assets/s3://bkt/out", "tab=columns")["columns"]
    assert [e["asset"] for c in whole for e in c["edges"]] == ["s3://secretbkt/b-only"]
    with Catalog(catalog_target) as catalog:
        catalog.purge(AssetQuery(ids=("s3://secretbkt/b-only",)))
    app = make_app(catalog_target, resolver, tokens=True)
    _, headers, _ = call(app, "/login", method="POST", body=b"token=secret-a&next=/assets")
    cookie = headers["Set-Cookie"].split(";")[0]
    columns = twin(app, "/assets/s3://bkt/out", "tab=columns", cookie=cookie)["columns"]
    assert [e for c in columns for e in c["edges"]] == []


def test_a_runs_page_takes_only_a_place_a_next_link_gives(ui_catalog: str, resolver: Resolver) -> None:
    """The runs list's ``before`` is the place of the last run a page showed: what no next link
    gives (the former ``<time>|<count>``, a key that is no pk, a start that is no time) is refused,
    not read as a place of its own."""
    app = make_app(ui_catalog, resolver)
    assert twin(app, "/runs", "before=2000-01-01T00:00:00Z|olbridge|1")["runs"] == []
    for before, said in [
        ("2025-01-01T00:00:00Z|3", "as a next link gives it"),
        ("2025-01-01T00:00:00Z|olbridge|x1", "as a next link gives it"),
        ("2025-01-01T00:00:00Z|olbridge|\u00b2", "as a next link gives it"),
        ("2025-01-01T00:00:00Z|external|", "as a next link gives it"),
        ("garbage|olbridge|1", "its start is not a time"),
    ]:
        status, _, text = call(app, "/runs", f"before={quote(before)}&format=json")
        assert status.startswith("400") and said in text, (before, text)
    status, _, text = call(app, "/runs", "since=2025-02-01&until=2025-01-01&format=json")
    assert status.startswith("400") and "since is after until" in text


def test_a_bidirectional_override_in_a_name_is_shown_as_its_escape(catalog_target: str, resolver: Resolver) -> None:
    """A job named with U+202E (right-to-left override) would turn the rest of its line around on
    a page (``exe.txt`` read as ``txt.exe``): pages show its escape, as the command line does; the
    twin keeps the name as it is."""
    name = "invoice\u202etxt.exe"
    with Catalog(catalog_target) as catalog:
        event = ol_run_event(run_id=EXTERNAL_RUN, job=("team-a-spark", name))
        assert [o.status for o in catalog_intake(catalog, resolver).take([event])] == ["accepted"]
    app = make_app(catalog_target, resolver)
    for path in (f"/runs/{EXTERNAL_RUN}", "/runs"):
        text = call(app, path)[2]
        assert "\u202e" not in text and "invoice\\u202etxt.exe" in text, path
    assert twin(app, f"/runs/{EXTERNAL_RUN}")["job"]["name"] == name
    # a filter's field holds what was asked, as it was: the form sends it back and finds the run
    text = call(app, "/runs", "job=" + quote(name))[2]
    assert f'name="job" value="{name}"' in text
    assert [r["job"]["name"] for r in twin(app, "/runs", "job=" + quote(name))["runs"]] == [name]


def test_a_received_check_shows_in_the_list_and_on_the_assets_page(catalog_target: str, resolver: Resolver) -> None:
    """The checks column and the assertions table show an asset's latest checks, whoever reported
    them: here a received event's ``dataQualityAssertions``, which an External placeholder's own
    record does not hold."""
    failed = {"assertions": [{"assertion": "not_null", "success": False, "column": "id"}]}
    with Catalog(catalog_target) as catalog:
        event = ol_run_event(outputs=[ol_dataset("s3://bkt", "checked", dataQualityAssertions=failed)])
        (outcome,) = catalog_intake(catalog, resolver).take([event])
        assert outcome.status == "accepted" and len(outcome.placeholders) == 1
    placeholder = outcome.placeholders[0]
    app = make_app(catalog_target, resolver)
    (row,) = [a for a in twin(app, "/assets")["assets"] if a["id"] == placeholder]
    assert row["checks"] == "failing" and row["health"]["health"] == "FAIL"
    page = twin(app, f"/assets/{placeholder}")  # PATH_INFO comes decoded
    assert page["checks"] == "failing"
    assert page["assertions"] == [{"assertion": "not_null", "success": False, "column": "id", "severity": None}]


def test_a_token_is_not_shown_a_datasets_column_lineage_facet(ui_catalog: str, resolver: Resolver) -> None:
    """A received ``columnLineage`` facet names its input datasets, of any namespace: a token that
    sees some namespaces is shown the edges it may see in the Columns tab, not the facet."""
    asset = "s3://bucket/exports/orders.parquet"
    whole = twin(make_app(ui_catalog, resolver), f"/assets/{asset}")
    assert "columnLineage" in whole["facets"] and "columnLineage" in whole["asset"]["facets"]
    scoped = make_app(ui_catalog, resolver, tokens=True)
    seen = twin(scoped, f"/assets/{asset}", cookie="olbridge_ui=secret-a")
    assert "columnLineage" not in seen["facets"] and "columnLineage" not in seen["asset"].get("facets", {})


@pytest.mark.parametrize("tab", ["overview", "dependencies", "runs", "columns", "history"])
def test_every_tab_of_every_demo_asset_draws(tmp_path: Path, resolver: Resolver, tab: str) -> None:
    """The demo's assets, as a first look at the view shows them: every tab answers 200, page and
    twin (a column edge whose transformation has no description broke the Columns tab: a 500)."""
    run_demo(tmp_path / "demo", echo=lambda line: None, out=lambda line: None)
    app = make_app(str(tmp_path / "demo" / "olbridge.db"), resolver)
    ids = [a["id"] for a in twin(app, "/assets")["assets"]]
    assert len(ids) == 3
    for asset_id in ids:
        status, _, text = call(app, f"/assets/{asset_id}", f"tab={tab}")
        assert status.startswith("200"), text[-2000:]
        twin(app, f"/assets/{asset_id}", f"tab={tab}")


def test_an_asset_page_says_the_freshness_rule_it_is_judged_by(ui_catalog: str, resolver: Resolver) -> None:
    """Its verdict names how stale it is; the page says the rule too, and where it comes from (as
    ``assets show`` does), the twin as the rule's JSON."""
    with Catalog(ui_catalog) as catalog:
        catalog.set_freshness("hr.payroll", FreshnessRule.create(max=timedelta(hours=1)), now=at(200))
    app = make_app(ui_catalog, resolver)
    status, _, text = call(app, "/assets/hr.payroll")
    assert status.startswith("200") and "Freshness rule: written within 1h <small>(asset)</small>" in text
    rule = twin(app, "/assets/hr.payroll")["health"]["freshness"]
    assert rule == {"max": "1h", "source": "asset", "says": "written within 1h"}
    assert twin(app, "/assets/raw.orders")["health"]["freshness"] is None  # no rule, none said


def test_the_run_that_failed_an_asset_is_on_its_runs_tab(ui_catalog: str, resolver: Resolver) -> None:
    """An asset FAILed by a run that was to write it and did not: its Runs tab lists that run
    ("output, not written"), so the failure its health names is a click away."""
    with Catalog(ui_catalog) as catalog:
        failed = run(
            "report", execution="e9", inputs=(decl("mart.orders"),), outputs=(decl("report.daily"),),
            state="FAILED", start=at(120), namespace="team-a.sales",
        )  # fmt: skip
        catalog.record_task_run(failed)
        earlier = run(
            "report", execution="e8", inputs=(decl("mart.orders"),), outputs=(decl("report.daily"),),
            state="KILLED", start=at(100), namespace="team-a.sales",
        )  # fmt: skip
        catalog.record_task_run(earlier)  # recorded after, started before: listed by its start
    app = make_app(ui_catalog, resolver)
    listed = twin(app, "/assets/report.daily", "tab=runs")["runs"]
    assert [(r["direction"], r["state"]) for r in listed] == [
        ("unwritten", "FAIL"),
        ("unwritten", "ABORT"),
        ("output", "COMPLETE"),
    ]
    health = twin(app, "/assets/report.daily")["health"]
    assert health["health"] == "FAIL" and "flow.report at 2025-03-01T10:01:00.000000Z failed" in health["reasons"][0]
    status, _, text = call(app, "/assets/report.daily", "tab=runs")
    assert status.startswith("200") and "<td>output, not written</td>" in text


def test_no_control_that_leads_nowhere(ui_catalog: str, resolver: Resolver) -> None:
    """Depth has no "less" at 1 nor "more" at its most; History offers to compare two changes only
    where there are two; the lineage steps' links and the moment are set apart."""
    app = make_app(ui_catalog, resolver)
    text = call(app, "/assets/mart.orders", "tab=dependencies")[2]
    assert 'aria-label="Less depth"' not in text and 'aria-label="More depth"' in text
    text = call(app, "/assets/mart.orders", "tab=dependencies&depth=6")[2]
    assert 'aria-label="Less depth"' in text and 'aria-label="More depth"' not in text
    entries = twin(app, "/assets/raw.orders", "tab=history")["history"]["entries"]
    assert len([e for e in entries if "seq" in e]) == 1
    text = call(app, "/assets/raw.orders", "tab=history")[2]
    assert "Choose two to compare" not in text and 'type="radio"' not in text and ">Compare</button>" not in text
    with Catalog(ui_catalog) as catalog:  # a second change: now there are two to compare
        catalog.set_asset(decl("raw.orders", metadata={"tier": "gold"}, namespace="team-a.sales"), now=at(300))
    text = call(app, "/assets/raw.orders", "tab=history")[2]
    assert "Choose two to compare" in text and text.count('type="radio"') == 4 and ">Compare</button>" in text
    text = call(app, "/lineage", "asset=mart.orders")[2]
    assert "</a> · As of <time>" in text


def test_an_own_asset_is_found_by_its_openlineage_name(tmp_path: Path, resolver: Resolver) -> None:
    """Someone coming from Marquez searches the name it shows, ``<namespace>/<name>``: an asset of
    olbridge's own, named so by the naming rules in its events, is found by it (the names a
    received one came under are searched already)."""
    run_demo(tmp_path / "demo", echo=lambda line: None, out=lambda line: None)
    catalog = str(tmp_path / "demo" / "olbridge.db")
    with Catalog(catalog) as opened:
        asset = opened.asset("dbt.main.my_first_dbt_model")
    named = resolver.dataset_for(asset.id, asset.type, asset.metadata)
    assert named.name != asset.id or "/" not in asset.id  # a name the search of ids would not find
    app = make_app(catalog, resolver)
    found = twin(app, "/assets", f"q={quote(named.namespace + '/' + named.name, safe='')}")
    assert found["namedInOpenLineage"] == ["dbt.main.my_first_dbt_model"]
    text = call(app, "/assets", f"q={quote(named.namespace + '/' + named.name, safe='')}")[2]
    assert 'Named so in OpenLineage: <a href="/assets/dbt.main.my_first_dbt_model">' in text
    assert twin(app, "/assets", "q=nowhere%2Fdbt.main.my_first_dbt_model")["namedInOpenLineage"] == []


def test_a_bad_filter_value_offers_the_page_again_without_filters(ui_catalog: str, resolver: Resolver) -> None:
    app = make_app(ui_catalog, resolver)
    for path, query in (("/health", "state=fial"), ("/runs", "since=yesterday"), ("/assets", "origin=nowhere")):
        status, _, text = call(app, path, query)
        assert status.startswith("400") and f'<a href="{path}">Again, without these filters</a>' in text, text
    # (a review) a type or namespace no asset may have was an empty list, as if there were none
    for query, said in (("type=Tabel", "unknown asset type 'Tabel'"), ("namespace=Bad+NS", "a namespace matches")):
        status, _, text = call(app, "/assets", f"{query}&format=json")
        assert status.startswith("400") and said in text, (query, status, text)
    for query in (
        "type=table",
        "type=io.kestra.plugin.ee.assets.Table",
        "type=company.infra.Snapshot",
        "namespace=Global",
    ):
        assert call(app, "/assets", f"{query}&format=json")[0].startswith("200"), query
    status, _, text = call(app, "/assets/mart.orders", "tab=dependencies&depth=x")
    assert status.startswith("400") and "Again, without these filters" not in text  # not a list's filter


def test_an_asset_s_unwritten_runs_are_taken_newest_by_start(ui_catalog: str, resolver: Resolver) -> None:
    """Past the list's size, the runs kept are the newest by start, not the last recorded (a
    history imported out of order records an older failure after a newer one)."""
    with Catalog(ui_catalog) as catalog:
        for execution, minutes in (("late", 300), ("early", 150)):  # the earlier one recorded last
            catalog.record_task_run(
                run("report", execution=execution, outputs=(decl("report.daily"),), state="FAILED",
                    start=at(minutes), namespace="team-a.sales")
            )  # fmt: skip
        listed = browse.asset_runs(Runs(catalog, Converter(resolver)), "report.daily", limit=1)
    # (and its newest write after them, older than the list's one run)
    assert [(r.direction, r.run.started) for r in listed] == [
        ("unwritten", format_time(at(300))),
        ("output", format_time(at(60))),
    ]


def test_an_asset_s_runs_keep_the_failure_its_health_names_however_many_reads_came_after(
    catalog_target: str, resolver: Resolver
) -> None:
    """Written, then a run that was to write it failed, then read by 60 runs: its health FAILs
    naming that run and links to the Runs tab, whose 50 runs were all reads. The newest write and
    the newest run that did not write stay in the list past its 50."""
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("write", execution="w1", outputs=(decl("hot.x", type="Table"),), start=at(0)))
        catalog.record_task_run(
            run("write", execution="w2", outputs=(decl("hot.x", type="Table"),), state="FAILED", start=at(10))
        )
        for i in range(60):
            catalog.record_task_run(run(f"read{i}", execution=f"r{i}", inputs=(decl("hot.x"),), start=at(20 + i)))
        (health,) = catalog.health(selectors=(), as_of=at(200), ids=["hot.x"])
        assert health.health.value == "FAIL" and "failed" in " ".join(health.verdict.reasons)
    listed = twin(make_app(catalog_target, resolver), "/assets/hot.x", "tab=runs")["runs"]
    assert len(listed) == 52 and {r["direction"] for r in listed[:50]} == {"input"}
    assert [(r["direction"], r["state"], r["started"]) for r in listed[50:]] == [
        ("unwritten", "FAIL", format_time(at(10))),
        ("output", "COMPLETE", format_time(at(0))),
    ]


def test_a_tokens_patterns_are_read_alike_by_every_page_and_the_database(catalog: Catalog) -> None:
    """A token's namespace pattern has two wildcards, ``*`` and ``?``, and is case-sensitive;
    every other character is itself, ``[`` too (as the receiver reads it). The database's filter
    says the same on both engines: the lists, their counts and an asset's neighbours (whose counts
    and ``EXISTS`` nothing checks again) see what the receiver lets the token write, no more."""
    namespaces = {  # as an asset's namespace may be: lower case, digits, ".", "_", "-"
        "tb.a": "team-a",
        "tb.b": "team-b",
        "tb.bx": "team-bx",
        "tb.under": "team_b",
        "tb.dot": "team.b",
    }
    hub = decl("hub.global")
    catalog.record_task_run(
        run(
            "fan",
            inputs=(hub,),
            outputs=tuple(decl(i, type="Table", namespace=ns) for i, ns in namespaces.items()),
            start=at(0),
        )
    )
    for patterns in (("TEAM-B*",), ("team-[ab]*",), ("team_b",), ("team?b",), ("team-b", "team-?x"), ("team%",)):
        scope = browse.Scope(patterns)
        wanted = sorted(i for i, ns in namespaces.items() if writable(patterns, ns))
        page = list_assets(catalog, AssetFilter(prefix="tb."), scope=scope)
        assert [x.asset.id for x in page.assets] == wanted, patterns
        assert page.count == len(wanted), patterns
        down = browse.neighbours(catalog, "hub.global", "downstream", scope=scope)
        assert list(down.ids) == wanted and down.count == len(wanted), patterns
    # as the receiver reads them, where a job's namespace may be any text
    assert writable(("team-[ab]*",), "team-[ab]x") and not writable(("team-[ab]*",), "team-b")
    assert not writable(("TEAM-B*",), "team-b") and writable(("team-a?c",), "team-a%c")
    assert writable(("a\\b*",), "a\\bc") and not writable(("team%",), "team-b")


def test_an_integer_past_64_bits_is_shown_as_it_was_received(catalog_target: str, resolver: Resolver) -> None:
    """The receiver keeps an integer of any size exact, in a dataset's facets, a run's facets and
    an asset's metadata; the pages and their twins show it (they gave a 500, orjson writing no
    integer past 64 bits)."""
    big, huge = 123456789012345678901234567890, 2**70
    run_id = "0194a1b2-0000-7000-8000-0000000000ee"
    dataset = ol_dataset("s3://bucket", "big/rows.parquet", stats={"bytes": big})
    event = ol_run_event(
        run_id=run_id,
        job=("spark", "job"),
        outputs=[dataset],
        run={
            "runId": run_id,
            "facets": {"sized": {"_producer": PRODUCER, "_schemaURL": "https://x.test/S", "n": huge}},
        },
    )
    with Catalog(catalog_target) as catalog:
        assert catalog_intake(catalog, resolver).take([event])[0].status == "accepted"
        catalog.set_asset(decl("mart.big", type="Table", metadata={"rows": huge}), now=at(1))
        placeholder = next(a.id for a in catalog.list_assets() if a.id != "mart.big")
    app = make_app(catalog_target, resolver)
    for path in (f"/assets/{placeholder}", "/assets/mart.big", f"/runs/{run_id}"):
        for query in ("", "tab=history"):
            status, _, text = call(app, path, query)
            assert status.startswith("200"), (path, query, status)
            assert query or str(big) in text or str(huge) in text, path
    assert str(big) in json.dumps(twin(app, f"/assets/{placeholder}"))
    assert twin(app, "/assets/mart.big")["asset"]["metadata"]["rows"] == huge
    assert str(huge) in json.dumps(twin(app, f"/runs/{run_id}"))


def test_a_tokens_lineage_slider_steps_only_where_what_it_sees_changed(catalog_target: str, resolver: Resolver) -> None:
    """Another namespace's run that reads a Global asset is no step of a token's slider (it was:
    a step with no new link, and the moment another team's run ended)."""
    calendar = decl("shared.calendar", type="Table")
    written = [  # (task, what it reads, what it writes, its namespace, when)
        ("load", calendar, "a.out", "team-a.sales", 10),
        ("pay", calendar, "b.secret", "team-b.hr", 50),
        ("more", decl("a.out"), "a.more", "team-a.sales", 90),
    ]
    with Catalog(catalog_target) as catalog:
        for task, read, wrote, namespace, minute in written:
            out = decl(wrote, type="Table", namespace=namespace)
            catalog.record_task_run(run(task, inputs=(read,), outputs=(out,), start=at(minute), namespace=namespace))
    app = make_app(catalog_target, resolver, tokens=True)
    every = twin(make_app(catalog_target, resolver), "/lineage", "asset=shared.calendar")["moments"]
    assert len(every) == 3
    a = twin(app, "/lineage", "asset=shared.calendar", cookie="olbridge_ui=secret-a")
    assert a["moments"] == [every[0], every[2]]
    first = twin(app, "/lineage", "asset=shared.calendar&step=0", cookie="olbridge_ui=secret-a")
    assert first["newEdges"] == [{"upstream": "shared.calendar", "downstream": "a.out"}]
    assert a["newEdges"] == [{"upstream": "a.out", "downstream": "a.more"}]
    b = twin(app, "/lineage", "asset=shared.calendar", cookie="olbridge_ui=secret-b")
    assert b["moments"] == [every[1]] and b["newEdges"] == [{"upstream": "shared.calendar", "downstream": "b.secret"}]


def test_runs_past_what_one_page_may_pass_over_are_reached_by_its_next_link(
    catalog_target: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page passes over at most SCAN_BUDGET own runs that its filters (a job, a state, a token)
    leave out; older runs that they select are on the pages its ``next`` leads to (the list ended
    there, ``next`` null). Every run once, in order, whatever the budget."""
    mine = decl("a.x", type="Table", namespace="team-a.sales")
    theirs = decl("b.y", type="Table", namespace="team-b.hr")
    with Catalog(catalog_target) as catalog:
        for i in range(5):
            catalog.record_task_run(run(f"old{i}", outputs=(mine,), start=at(i), namespace="team-a.sales"))
        for i in range(60):  # more than a page's first read (51 runs)
            catalog.record_task_run(run(f"new{i}", outputs=(theirs,), start=at(100 + i), namespace="team-b.hr"))
        catalog.record_task_run(run("old1", outputs=(mine,), start=at(50), namespace="team-a.sales", execution="e2"))

    def every(app: UiApp, query: str, cookie: str = "") -> list[str]:
        names, before, pages_read = [], None, 0
        while True:
            page = twin(app, "/runs", query + (f"&before={quote(before)}" if before else ""), cookie=cookie)
            names += [r["job"]["name"] for r in page["runs"]]
            before, pages_read = page["next"], pages_read + 1
            assert pages_read < 50
            if before is None:
                return names

    for budget in (7, 55, 20_000):
        monkeypatch.setattr(browse, "SCAN_BUDGET", budget)
        scoped = make_app(catalog_target, resolver, tokens=True)
        assert every(scoped, "", cookie="olbridge_ui=secret-a") == [
            "flow.old1",
            *(f"flow.old{i}" for i in (4, 3, 2, 1, 0)),
        ], budget
        assert every(make_app(catalog_target, resolver), "job=flow.old1") == ["flow.old1", "flow.old1"], budget


def test_runs_written_at_a_pages_boundary_neither_repeat_nor_push_runs_off_the_pages(
    catalog_target: str, resolver: Resolver
) -> None:
    """A page's next link named a start and how many of its runs the pages before showed: a run
    written meanwhile with that start (a task recorded late, an event received) made the next
    page show one of them again. It names the last run's place now: every run shown once, in
    order, whatever is written between the pages."""
    out = decl("t.out", type="Table")
    with Catalog(catalog_target) as catalog:
        intake = catalog_intake(catalog, resolver)
        for i in range(4):  # own and received runs, all of one start
            catalog.record_task_run(run(f"own{i}", outputs=(out,), start=at(10)))
            event = ol_run_event(
                "START",
                run_id=f"0194a1b2-0000-7000-8000-00000000000{i}",
                job=("airflow", f"ext{i}"),
                time="2025-01-01T00:10:00Z",
            )
            assert [o.ok for o in intake.take([event])] == [True]
        runs = Runs(catalog, Converter(resolver))
        first = recent_runs(runs, RunFilter(), limit=3)
        assert first.next is not None
        # written between the pages: one own and one received run of the same start
        catalog.record_task_run(run("late", outputs=(out,), start=at(10)))
        late = ol_run_event(
            "START", run_id="0194a1b2-0000-7000-8000-0000000000ff", job=("airflow", "late"), time="2025-01-01T00:10:00Z"
        )
        assert [o.ok for o in intake.take([late])] == [True]
        seen = [v.run_id for v in first.runs]
        before: str | None = first.next
        while before is not None:
            page = recent_runs(runs, RunFilter(), before=before, limit=3)
            seen += [v.run_id for v in page.runs]
            before = page.next
        everything = {v.run_id for v in runs.list(RunFilter())}
        assert len(seen) == len(set(seen)), seen  # none twice
        # every run there was when the first page was read is on a page; the late ones may not be
        assert everything - set(seen) <= {
            v.run_id for v in runs.list(RunFilter()) if v.job_name in ("flow.late", "late")
        }
        assert len(set(seen)) >= 8


def test_received_runs_past_what_one_page_may_pass_over_are_reached_by_its_next_link(
    catalog_target: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The received runs of a job, a state or a namespace asked for were read by the start index
    with the filter tested on every run passed over, however many: a rare job's runs in a year of
    received runs cost a scan of them all. A page passes over at most SCAN_BUDGET of them, and its
    next link goes on from there: every run once, in order, whatever the budget."""
    with Catalog(catalog_target) as catalog:
        intake = catalog_intake(catalog, resolver)
        events = [
            ol_run_event(
                "COMPLETE",
                run_id=f"0194a1b2-0000-7000-8000-{i:012d}",
                job=("airflow", "rare" if i % 20 == 0 else "busy"),
                time=f"2025-01-01T{i // 60:02d}:{i % 60:02d}:00Z",
            )
            for i in range(100)
        ]
        assert all(o.ok for o in intake.take(events))

    def every(query: str) -> tuple[list[str], int]:
        app, names, before, pages_read = make_app(catalog_target, resolver), [], None, 0
        while True:
            page = twin(app, "/runs", query + (f"&before={quote(before)}" if before else ""))
            names += [r["runId"] for r in page["runs"]]
            before, pages_read = page["next"], pages_read + 1
            assert pages_read < 60
            if before is None:
                return names, pages_read

    rare = [f"0194a1b2-0000-7000-8000-{i:012d}" for i in range(80, -1, -20)]
    for budget in (7, 30, 20_000):
        monkeypatch.setattr(browse, "SCAN_BUDGET", budget)
        names, pages_read = every("job=rare")
        assert names == rare, budget
        # a page passed over at most the budget's runs: the five rare runs of 100 took pages
        assert pages_read == (1 if budget == 20_000 else -(-100 // budget)), (budget, pages_read)
        names, _ = every("state=COMPLETE&origin=external")
        assert names == [f"0194a1b2-0000-7000-8000-{i:012d}" for i in range(99, -1, -1)]


def test_a_tokens_next_link_names_no_run_it_does_not_see(
    catalog_target: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page that passed over its budget of runs a token does not see ends where it stopped: its
    next link named the last of them (its run id, or its key), another team's run. It names a run
    the token sees now, the first past there: every run the token sees once, in order."""
    monkeypatch.setattr(browse, "SCAN_BUDGET", 7)
    out = decl("t.out", type="Table")
    with Catalog(catalog_target) as catalog:
        intake = catalog_intake(catalog, resolver)
        for i in range(30):
            hidden = i % 10 != 0
            ns = "team-a-secret" if hidden else "team-b"
            catalog.record_task_run(run(f"own{i}", outputs=(out,), start=at(i), namespace=ns))
            event = ol_run_event(
                "START", run_id=f"0194a1b2-0000-7000-8000-{i:012d}", job=(ns, f"ext{i}"), time=format_time(at(i))
            )
            assert [o.ok for o in intake.take([event])] == [True]
        runs = Runs(catalog, Converter(resolver))
        scope = browse.Scope(("team-b",))
        hidden_ids = {v.run_id for v in runs.list(RunFilter()) if v.job_namespace != "team-b"}
        shown: list[str] = []
        before: str | None = None
        for _ in range(100):
            page = recent_runs(runs, RunFilter(), before=before, limit=2, scope=scope)
            shown += [v.run_id for v in page.runs]
            before = page.next
            if before is None:
                break
            assert not any(h in before or h[-12:] in before for h in hidden_ids), before
        assert before is None
        seen = [v for v in runs.list(RunFilter()) if v.job_namespace == "team-b"]
        assert sorted(shown) == sorted(v.run_id for v in seen) and len(shown) == len(set(shown)) == 6
    status, _, _ = call(
        make_app(catalog_target, resolver), "/runs", "before=2025-01-01T00:00:00Z|olbridge|9999999999999999999"
    )
    assert status.startswith("400")


def test_a_tokens_pages_go_past_more_hidden_runs_of_one_start_than_a_page_passes_over(
    catalog_target: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of another namespace that share one start, more of them than a page passes over: the
    token's pages went back to that start again and again, empty, never reaching older runs."""
    monkeypatch.setattr(browse, "SCAN_BUDGET", 7)
    out = decl("t.out", type="Table")
    with Catalog(catalog_target) as catalog:
        intake = catalog_intake(catalog, resolver)
        for i, (ns, start) in enumerate([("team-b", 0), *(("team-a-secret", 5),) * 10, ("team-b", 9)]):
            catalog.record_task_run(run(f"own{i}", outputs=(out,), start=at(start), namespace=ns, execution=f"e{i}"))
            event = ol_run_event(
                "START", run_id=f"0194a1b2-0000-7000-8000-{i:012d}", job=(ns, f"ext{i}"), time=format_time(at(start))
            )
            assert [o.ok for o in intake.take([event])] == [True]
        runs = Runs(catalog, Converter(resolver))
        for origin in ("olbridge", "external"):
            shown: list[str] = []
            before: str | None = None
            for _ in range(50):
                page = recent_runs(
                    runs, RunFilter(origin=origin), before=before, limit=2, scope=browse.Scope(("team-b",))
                )
                shown += [v.job_name for v in page.runs]
                if page.next is None:
                    break
                assert page.next != before, page.next  # every page goes on
                before = page.next
            assert page.next is None and len(shown) == 2, (origin, shown)


@pytest.mark.parametrize("patterns", [("team-b",), ("team-b*", "x?")])
def test_a_tokens_next_link_is_always_the_place_of_a_run_it_sees(
    catalog_target: str, resolver: Resolver, monkeypatch: pytest.MonkeyPatch, patterns: tuple[str, ...]
) -> None:
    """A page that passed over its budget of runs a token does not see ended where it stopped: its
    next link gave the start of the last of them, another namespace's run, and for one of
    olbridge's its key (the number the catalog counts runs by), even where the page found none of
    the token's own. It ends at the first run past there that the token sees: every next link is
    the place of a run the token sees, and every run it sees is on a page once, in order."""
    monkeypatch.setattr(browse, "SCAN_BUDGET", 7)
    out = decl("t.out", type="Table")
    with Catalog(catalog_target) as catalog:
        intake = catalog_intake(catalog, resolver)
        for i in range(40):  # each run at a start of its own: another namespace's start would show
            ns = "team-b" if i % 13 == 0 else "team-a-secret"
            catalog.record_task_run(run(f"own{i}", outputs=(out,), start=at(i), namespace=ns, execution=f"e{i}"))
            event = ol_run_event(
                "START", run_id=f"0194a1b2-0000-7000-8000-{i:012d}", job=(ns, f"ext{i}"), time=format_time(at(i))
            )
            assert [o.ok for o in intake.take([event])] == [True]
        conn = catalog._conn
        places = {
            *(
                f"{start}|olbridge|{pk}"
                for start, pk in conn.execute("SELECT started_at, pk FROM task_runs WHERE flow_namespace = 'team-b'")
            ),
            *(
                f"{start}|external|{source}"
                for start, source in conn.execute(
                    "SELECT coalesce(started_at, first_seen), source FROM external_sources "
                    "WHERE job_namespace = 'team-b' AND run_id IS NOT NULL"
                )
            ),
        }
        assert len(places) == 8
        runs, scope = Runs(catalog, Converter(resolver)), browse.Scope(patterns)
        for filters in (
            RunFilter(origin="olbridge"),
            RunFilter(origin="external"),
            RunFilter(),
            RunFilter(since=at(5)),
        ):
            every = recent_runs(runs, filters, limit=100)  # no token: nothing passed over
            assert every.next is None
            sees = [v.run_id for v in every.runs if v.job_namespace == "team-b"]
            shown: list[str] = []
            before: str | None = None
            for _ in range(50):
                page = recent_runs(runs, filters, before=before, limit=2, scope=scope)
                shown += [v.run_id for v in page.runs]
                if page.next is None:
                    break
                assert page.next in places, (filters, page.next)  # a run the token sees, named as its page would
                assert page.next != before  # every page goes on
                before = page.next
            assert page.next is None and shown == sees, (filters, shown)


def test_a_tokens_tree_passes_over_the_assets_it_does_not_see(catalog_target: str, resolver: Resolver) -> None:
    """The tree of id prefixes gave up after 500 probes, one spent on each asset of another
    namespace: a token that saw one asset past 600 of team-b's was shown none. And an id that ends
    in a separator, opened as a folder, is linked with its whole id (the link had no text)."""
    with Catalog(catalog_target) as catalog:
        for i in range(600):
            catalog.set_asset(decl(f"hr.t{i:04d}", type="Table", namespace="team-b.hr"), now=at(0))
        catalog.set_asset(decl("sales.orders", type="Table", namespace="team-a.sales"), now=at(0))
        catalog.set_asset(decl("s3://bucket/dir/", type="File"), now=at(0))
        scope = browse.Scope(("team-a*",))
        assert prefix_children(catalog, scope=scope) == [
            browse.PrefixNode("s3://", False),
            browse.PrefixNode("sales.", False),
        ]
        assert [n.prefix for n in prefix_children(catalog)] == ["hr.", "s3://", "sales."]
        assert prefix_children(catalog, "hr.", scope=scope) == []
        assert len(prefix_children(catalog, "hr.", limit=700)) == 600
        assert prefix_children(catalog, "s3://bucket/", scope=scope) == [browse.PrefixNode("s3://bucket/dir/", False)]
        assert prefix_children(catalog, "s3://bucket/dir/") == [browse.PrefixNode("s3://bucket/dir/", True)]
    _, _, text = call(make_app(catalog_target, resolver), "/assets", "prefix=s3://bucket/dir/")
    assert '<a href="/assets/s3%3A%2F%2Fbucket%2Fdir%2F">s3://bucket/dir/</a>' in text


def test_a_level_of_the_tree_of_id_prefixes_holds_no_prefix_of_another(catalog_target: str) -> None:
    """A segment ran to the end of a run of separators: ``s3://bucket-a/..`` was listed beside the
    ``s3://bucket-a/`` that holds it (and ``s3://x//`` beside ``s3://x/``), a folder that opened on the asset
    alone. A segment ends at its first separator."""
    with Catalog(catalog_target) as catalog:
        for asset_id in ("s3://bucket-a/..", "s3://bucket-a/y", "s3://x//a", "s3://x/b", "db..t"):
            catalog.set_asset(decl(asset_id, type="File"), now=at(0))
        assert [n.prefix for n in prefix_children(catalog)] == ["db.", "s3://"]
        assert prefix_children(catalog, "db.") == [browse.PrefixNode("db..", False)]
        assert prefix_children(catalog, "s3://") == [
            browse.PrefixNode("s3://bucket-a/", False),
            browse.PrefixNode("s3://x/", False),
        ]
        assert prefix_children(catalog, "s3://bucket-a/") == [
            browse.PrefixNode("s3://bucket-a/.", False),
            browse.PrefixNode("s3://bucket-a/y", True),
        ]
        assert prefix_children(catalog, "s3://bucket-a/.") == [browse.PrefixNode("s3://bucket-a/..", False)]
        assert prefix_children(catalog, "s3://bucket-a/..") == [browse.PrefixNode("s3://bucket-a/..", True)]
        assert prefix_children(catalog, "s3://x/") == [
            browse.PrefixNode("s3://x//", False),
            browse.PrefixNode("s3://x/b", True),
        ]


def test_the_tree_of_id_prefixes_pages_through_a_level_of_more_than_50(catalog_target: str, resolver: Resolver) -> None:
    """A level of the tree stopped at its first 50 children, with no note and no way on: a
    catalog whose ids run big.00000.x to big.00119.y could not reach big.00050. on from the tree.
    The level pages by a next link (``tree``), a token's passing over what it does not see."""
    with Catalog(catalog_target) as catalog:
        for i in range(120):
            catalog.set_asset(decl(f"big.{i:05d}.x", type="Table", namespace="team-a.sales"), now=at(0))
            if i % 2 == 0:
                catalog.set_asset(decl(f"big.{i:05d}", type="Table", namespace="team-b.hr"), now=at(0))  # a leaf
    app = make_app(catalog_target, resolver)
    for scoped, cookie, expected in (
        (app, {}, sorted([f"big.{i:05d}." for i in range(120)] + [f"big.{i:05d}" for i in range(0, 120, 2)])),
        (make_app(catalog_target, resolver, tokens=True), {"cookie": "olbridge_ui=secret-a"}, None),
    ):
        shown, query = [], "prefix=big."
        for _ in range(10):
            data = twin(scoped, "/assets", query, **cookie)
            shown += [node["prefix"] for node in data["tree"]]
            if data["treeNext"] is None:
                break
            query = f"prefix=big.&tree={quote(data['treeNext'])}"
        assert len(shown) == len(set(shown))
        assert shown == (expected or [f"big.{i:05d}." for i in range(120)]), shown[:5]
    page = call(app, "/assets", "prefix=big.")[2]
    assert 'rel="next">More of this level' in page
    for bad in ("big.00001", "*other.", "*big."):
        status, _, text = call(app, "/assets", f"prefix=big.&tree={quote(bad)}&format=json")
        assert status.startswith("400") and "tree" in text, (bad, status, text)


def test_an_asset_named_as_a_cluster_is_drawn_as_itself() -> None:
    """A cluster ("N more") was keyed ``cluster:<direction>:<anchor>``, which an asset may be
    named: that asset vanished from the drawing, its node taken by the cluster's."""
    named = "cluster:downstream:hub"

    def node(i: str) -> browse.GraphNode:
        return browse.GraphNode(i, "Table", None, "own", False)

    graph = browse.GraphSlice(
        "hub",
        (node("hub"), node(named), node("fan.a")),
        ((named, "hub"), ("hub", "fan.a")),
        (browse.Cluster("hub", "downstream", 20),),
        False,
    )
    drawn = layout(graph)
    kinds = {n.id: n.kind for n in drawn.nodes}
    assert kinds[named] == "asset" and kinds["hub"] == "asset" and kinds["fan.a"] == "asset"
    assert sorted(kind for kind in kinds.values()) == ["asset", "asset", "asset", "cluster"]
    assert {(e.upstream, e.downstream) for e in drawn.edges} >= {(named, "hub"), ("hub", "fan.a")}


def test_a_token_reads_no_change_made_while_an_asset_was_another_namespaces(
    catalog_target: str, resolver: Resolver
) -> None:
    """An asset moved from team-b's namespace to team-a's: team-a's history tab showed the
    snapshots of its time in team-b's (their description, their metadata)."""
    with Catalog(catalog_target) as catalog:
        catalog.set_asset(
            decl("x.moved", type="Table", namespace="team-b.hr", description="salary table", metadata={"k": "b-only"}),
            now=at(1),
        )
        catalog.set_asset(
            decl("x.moved", type="Table", namespace="team-a.sales", description="orders", metadata={"k": "a"}),
            now=at(2),
        )
    app = make_app(catalog_target, resolver, tokens=True)
    seen = twin(app, "/assets/x.moved", "tab=history", cookie="olbridge_ui=secret-a")
    text = json.dumps(seen)
    assert "b-only" not in text and "salary table" not in text and "team-b.hr" not in text
    assert [e["snapshot"]["namespace"] for e in seen["history"]["entries"] if "snapshot" in e] == ["team-a.sales"]
    assert "b-only" not in call(app, "/assets/x.moved", "tab=history", cookie="olbridge_ui=secret-a")[2]
    every = twin(make_app(catalog_target, resolver), "/assets/x.moved", "tab=history")
    assert len([e for e in every["history"]["entries"] if "snapshot" in e]) == 2


def test_a_script_s_bearer_token_is_read_whatever_the_case_of_its_scheme(ui_catalog: str, resolver: Resolver) -> None:
    """The web view read ``Authorization: Bearer`` with a capital B only, where the receiver reads
    any case (RFC 9110: an authentication scheme is case-insensitive): one reading for both."""
    app = make_app(ui_catalog, resolver, tokens=True)
    for given in ("Bearer secret-a", "bearer secret-a", "BEARER secret-a"):
        token = app.token_of({"HTTP_AUTHORIZATION": given})
        assert token is not None and token.token == "secret-a", given
    assert app.token_of({"HTTP_AUTHORIZATION": "Basic secret-a"}) is None


# the ports browsers refuse to open (the Fetch standard's "bad ports": SIP's 5060 and 5061 among them)
BAD_PORTS = frozenset(
    [
        *(1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104),
        *(109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515),
        *(526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049),
        *(3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080),
    ]
)


def test_the_default_ports_are_ones_a_browser_opens() -> None:
    """The web view's default port was 5060, which browsers refuse (net::ERR_UNSAFE_PORT): the
    README's `olbridge ui` failed at its first use in a browser, whatever curl said."""
    from bridge.cli import cli

    for name in ("ui", "serve"):
        port = next(p for p in cli.commands[name].params if p.name == "port")
        assert port.default not in BAD_PORTS, (name, port.default)


def test_a_tokens_runs_of_an_asset_are_not_crowded_out_by_other_namespaces_jobs(
    catalog_target: str, resolver: Resolver
) -> None:
    """An asset's runs read the runs of at most JOBS_AT_MOST received jobs that used it, chosen
    before the token's scope: twenty jobs of another namespace reading it left a token's own job's
    run off its list. The jobs are those of the token's namespaces."""
    with Catalog(catalog_target) as catalog:
        intake = catalog_intake(catalog, resolver)
        for i in range(browse.JOBS_AT_MOST + 1):
            ns = "team-c" if i == browse.JOBS_AT_MOST else "team-b"
            event = ol_run_event(
                run_id=f"0194a1b2-0000-7000-8000-{i:012d}",
                job=(ns, f"reader{i:02d}"),
                inputs=[ol_dataset("s3://lake-b", "shared")],
                time=format_time(at(i)),
            )
            assert [o.ok for o in intake.take([event])] == [True]
        runs = Runs(catalog, Converter(resolver))
        listed = browse.asset_runs(runs, "s3://lake-b/shared", scope=browse.Scope(("team-c",)))
        assert [(r.direction, r.run.job_namespace) for r in listed] == [("input", "team-c")]
        everyone = browse.asset_runs(runs, "s3://lake-b/shared")
        assert len(everyone) == browse.JOBS_AT_MOST  # every job's own run, of the jobs read


def test_an_assets_runs_are_those_of_the_jobs_that_used_it_last(catalog_target: str, resolver: Resolver) -> None:
    """Of the received jobs that used an asset, its runs read the JOBS_AT_MOST latest used: it read
    the first by name, so that where more jobs had read it, the newest runs (of jobs whose names
    sort last) were not on its list, and its latest read not shown."""
    with Catalog(catalog_target) as catalog:
        intake = catalog_intake(catalog, resolver)
        jobs = browse.JOBS_AT_MOST + 5
        for i in range(jobs):
            event = ol_run_event(
                run_id=f"0194a1b2-0000-7000-8000-{i:012d}",
                job=("team-b", f"reader{i:02d}"),
                inputs=[ol_dataset("s3://lake-b", "shared")],
                time=format_time(at(i)),
            )
            assert [o.ok for o in intake.take([event])] == [True]
        running = ol_run_event(
            "START",
            run_id="0194a1b2-0000-7000-8000-999999999999",
            job=("team-b", "reader-now"),
            inputs=[ol_dataset("s3://lake-b", "shared")],
            time=format_time(at(0)),
        )
        assert [o.ok for o in intake.take([running])] == [True]
        declared = [  # jobs with no run kept (a JobEvent's alone): after every job that ran
            {
                "eventTime": format_time(at(jobs + i)),
                "producer": PRODUCER,
                "schemaURL": JOB_EVENT_URL,
                "job": {"namespace": "team-b", "name": f"declared{i:02d}"},
                "inputs": [ol_dataset("s3://lake-b", "shared")],
                "outputs": [],
            }
            for i in range(browse.JOBS_AT_MOST)
        ]
        assert all(o.ok for o in intake.take(declared))
        listed = browse.asset_runs(Runs(catalog, Converter(resolver)), "s3://lake-b/shared")
        shown = {r.run.job_name for r in listed}
        newest = {f"reader{i:02d}" for i in range(jobs - browse.JOBS_AT_MOST + 1, jobs)}
        assert shown == newest | {"reader-now"}  # a job running now, then the latest ended
