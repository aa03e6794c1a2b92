"""``olbridge ui`` in a real browser: Debian's Chromium driven by Playwright (never a downloaded
browser), against a real ``olbridge ui`` process. A person searches, opens an asset, walks its
tabs, expands and collapses the graph, opens a cluster, moves the time slider, opens a run and
goes back; no request leaves localhost, the console shows no error, hostile names render as
text, and axe-core finds no serious or critical accessibility violation on any page.

``make test`` installs Chromium (``apt-get install chromium``) and axe-core (tests/axe)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from bridge.mapping import Resolver
from tests.ui_catalog import EXTERNAL_RUN, HOSTILE, HUB_FANOUT, TOKENS, build

CHROMIUM = os.environ.get("OLBRIDGE_CHROMIUM", "/usr/bin/chromium")
AXE = Path(__file__).parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# where the screenshots go: docs/screenshots when asked (the README shows them), else nowhere
SHOTS = os.environ.get("OLBRIDGE_UI_SCREENSHOTS")
LOCAL = {"127.0.0.1", "localhost"}


@contextlib.contextmanager
def ui_process(path: str, *options: str, says: str) -> Iterator[str]:
    """A real ``olbridge ui`` process on a free loopback port; its address. Its first line on
    stderr must say ``says``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge", "--catalog", path, "ui", "--port", "0", *options],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"olbridge ui on (http://127\.0\.0\.1:\d+)/ \(", line)
    try:
        assert found and says in line, line
        yield found.group(1)
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("ui") / "catalog.db")
    build(path, Resolver.load())
    return path


@pytest.fixture(scope="module")
def ui_url(catalog_file: str) -> Iterator[str]:
    with ui_process(catalog_file, says="no tokens: listening on loopback only") as url:
        yield url


@pytest.fixture(scope="module")
def tokens_url(catalog_file: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = tmp_path_factory.mktemp("tokens") / "tokens.toml"
    tokens.write_text(TOKENS)
    with ui_process(catalog_file, "--tokens", str(tokens), says="2 named token(s)") as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is not at {CHROMIUM}: install Debian's chromium package (make test does)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


class Watch:
    """What a page did that it must not: console errors, uncaught exceptions, dialogs (an alert a
    hostile name would open), requests to another host."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.outside: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: None if urlsplit(r.url).hostname in LOCAL else self.outside.append(r.url))

    def check(self) -> None:
        assert self.errors == []
        assert self.dialogs == []
        assert self.outside == []


@pytest.fixture
def page(browser: Browser) -> Iterator[tuple[Page, Watch]]:
    context = browser.new_context()
    # a request to another host is stopped here, and recorded by Watch
    context.route(re.compile(r"^(?!https?://(127\.0\.0\.1|localhost)[:/]).*"), lambda route: route.abort())
    opened = context.new_page()
    watch = Watch(opened)
    yield opened, watch
    context.close()
    watch.check()


def shot(page: Page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=False)


def test_search_open_an_asset_walk_its_tabs_and_go_back(ui_url: str, page: tuple[Page, Watch]) -> None:
    p, _ = page
    p.goto(ui_url + "/")
    expect(p).to_have_url(ui_url + "/assets")
    rows = p.locator("#assets-results tbody tr")
    expect(rows).to_have_count(HUB_FANOUT + 9)
    shot(p, "assets")
    p.get_by_label("Search assets").press_sequentially("payr", delay=30)
    expect(rows).to_have_count(1)
    expect(p).to_have_url(re.compile(r"/assets\?q=payr$"))  # the state is in the address
    p.get_by_role("link", name="hr.payroll").click()
    expect(p.get_by_role("heading", level=1)).to_have_text("hr.payroll")
    for tab, seen in [
        ("Dependencies", "svg.graph"),
        ("Runs", "table"),
        ("Columns", "main"),
        ("History", "table"),
        ("Overview", "#upstream-h"),
    ]:
        tabs = p.get_by_role("navigation", name="Asset views")
        tabs.get_by_role("link", name=tab, exact=True).click()
        expect(tabs.get_by_role("link", name=tab, exact=True)).to_have_attribute("aria-current", "page")
        expect(p.locator(seen).first).to_be_visible()
    expect(p.get_by_role("link", name="hr.people")).to_be_visible()  # its upstream asset
    p.go_back()
    history = p.get_by_role("navigation", name="Asset views").get_by_role("link", name="History")
    expect(history).to_have_attribute("aria-current", "page")
    # the search form works without JavaScript too: the same address it leads to
    p.goto(ui_url + "/assets?q=calendar")
    expect(rows).to_have_count(1)


def test_expand_and_collapse_the_graph_and_open_a_cluster(ui_url: str, page: tuple[Page, Watch]) -> None:
    p, _ = page
    p.goto(ui_url + "/assets/report.daily?tab=dependencies")
    nodes = p.locator("svg.graph a.node:not(.cluster)")
    expect(nodes).to_have_count(2)
    p.locator('svg.graph a.node[data-id="mart.orders"]').click()  # expand
    expect(nodes).to_have_count(4)
    expect(p.locator('svg.graph a.node[data-id="mart.orders"]')).to_have_class(re.compile(r"\bexpanded\b"))
    expect(p.locator('svg.graph a.node[data-id="raw.orders"]')).to_be_visible()
    shot(p, "dependencies")
    p.locator('svg.graph a.node[data-id="mart.orders"]').click()  # collapse
    expect(nodes).to_have_count(2)
    p.get_by_role("link", name="More depth").click()
    expect(p).to_have_url(re.compile(r"depth=2"))
    expect(nodes).to_have_count(4)
    # the hub: 12 of its fan drawn, the others a cluster that opens into a searchable list
    p.goto(ui_url + "/assets/hub.events?tab=dependencies")
    expect(nodes).to_have_count(13)
    cluster = p.locator("svg.graph a.node.cluster")
    expect(cluster).to_contain_text(f"{HUB_FANOUT - 12} more")
    cluster.click()
    expect(p.get_by_role("heading", level=1)).to_contain_text(f"{HUB_FANOUT} downstream assets")
    items = p.locator("#neighbour-results li")
    expect(items).to_have_count(HUB_FANOUT)
    p.get_by_label("Search these assets").press_sequentially("f02", delay=30)
    expect(items).to_have_count(10)
    p.go_back()
    expect(nodes).to_have_count(13)


def test_the_time_slider_steps_through_the_lineage(ui_url: str, page: tuple[Page, Watch]) -> None:
    p, _ = page
    p.goto(ui_url + "/lineage?asset=mart.orders")
    slider = p.get_by_role("slider")
    expect(slider).to_have_value("1")
    report = p.locator('svg.graph a.node[data-id="report.daily"]')
    expect(report).to_have_class(re.compile(r"\bnew\b"))  # new at the last step
    shot(p, "lineage")
    slider.focus()
    p.keyboard.press("ArrowLeft")
    expect(p).to_have_url(re.compile(r"step=0"))
    expect(report).to_have_count(0)
    expect(p.locator('svg.graph a.node[data-id="raw.orders"]')).to_have_class(re.compile(r"\bnew\b"))
    # the page the slider went to gives it the focus back: the keys go on stepping from there
    expect(p.get_by_role("slider")).to_be_focused()
    p.keyboard.press("ArrowRight")
    expect(p).to_have_url(re.compile(r"step=1"))
    expect(report).to_be_visible()
    # back: the slider is at the page's moment, not where it was moved before the page was left
    # (the browser put back the value it had then: the next key skipped a moment)
    p.go_back()
    expect(p).to_have_url(re.compile(r"step=0"))
    expect(p.get_by_role("slider")).to_have_value("0")
    # another direction or depth has moments of its own: its page starts at the latest, not at
    # this one's step number
    p.goto(ui_url + "/lineage?asset=mart.orders&step=0")
    p.get_by_label("Direction").select_option("up")
    p.get_by_role("button", name="Show").click()
    expect(p).to_have_url(re.compile(r"direction=up"))
    assert "step=" not in p.url
    slider = p.get_by_role("slider")
    expect(slider).to_be_enabled()
    p.go_back()  # the page before, its slider as it was
    expect(p).to_have_url(re.compile(r"step=0"))
    expect(p.get_by_role("slider")).to_be_enabled()


def test_from_the_health_page_to_a_failing_asset_and_what_is_at_risk_by_keyboard(
    ui_url: str, page: tuple[Page, Watch]
) -> None:
    """The health page, reached from the menu, lists what FAILs with its reason; its counts link
    to the assets at risk, each with the path from the cause; an asset's page says its health."""
    p, _ = page
    p.goto(ui_url + "/assets")
    p.get_by_role("navigation").get_by_role("link", name="Health").click()
    expect(p).to_have_url(ui_url + "/health")
    failing = p.locator("tbody tr", has=p.get_by_role("link", name="mart.orders", exact=True))
    expect(failing).to_contain_text("FAIL")
    expect(failing).to_contain_text("check not_null on id failed")
    shot(p, "health")
    at_risk = p.get_by_role("link", name="At risk")
    at_risk.focus()
    p.keyboard.press("Enter")
    expect(p).to_have_url(re.compile(r"risk=1"))
    report = p.locator("tbody tr", has=p.get_by_role("link", name="report.daily", exact=True))
    expect(report).to_contain_text("mart.orders")  # the path from the cause
    report.get_by_role("link", name="report.daily", exact=True).first.focus()
    p.keyboard.press("Enter")
    expect(p).to_have_url(ui_url + "/assets/report.daily")
    p.go_back()
    p.go_back()
    expect(p).to_have_url(ui_url + "/health")
    p.get_by_role("link", name="mart.orders", exact=True).first.click()
    expect(p.get_by_text("FAIL").first).to_be_visible()


def test_grouped_nodes_wear_their_group_s_colour_and_a_narrow_screen_scrolls_no_page(
    ui_url: str, browser: Browser
) -> None:
    """group=...: each node is filled with its group's colour, the legend's (a rule for every
    node's white fill outranked them: every node stayed white); a FAIL asset has the health
    legend's FAIL border. On a phone-sized screen no page
    is wider than the screen: a wide table scrolls in itself, the tabs wrap."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    p = context.new_page()
    try:
        p.goto(ui_url + "/assets/mart.orders?tab=dependencies&group=namespace")
        fills = p.eval_on_selector_all(
            "svg.graph a.node:not(.cluster) rect", "rects => rects.map(r => getComputedStyle(r).fill)"
        )
        swatches = p.eval_on_selector_all(
            '.legend[aria-label="Groups"] .swatch', "s => s.map(e => getComputedStyle(e).backgroundColor)"
        )
        assert len(set(swatches)) > 1 and set(fills) == set(swatches), (fills, swatches)
        # a FAIL asset's border is the health legend's FAIL (mart.orders fails its check)
        stroke = p.eval_on_selector("svg.graph a.node.FAIL rect", "r => getComputedStyle(r).stroke")
        swatch = p.eval_on_selector(
            '.legend[aria-label="Health now"] .swatch.FAIL', "e => getComputedStyle(e).borderTopColor"
        )
        assert stroke == swatch == "rgb(164, 0, 0)", (stroke, swatch)
        p.set_viewport_size({"width": 360, "height": 800})
        for path in (
            "/assets",
            "/assets/mart.orders",
            "/assets/mart.orders?tab=runs",
            "/runs",
            "/health",
            "/lineage?asset=mart.orders",
        ):
            p.goto(ui_url + path)
            assert p.evaluate("document.documentElement.scrollWidth") <= 360, path
    finally:
        context.close()


def test_open_a_run_and_go_back(ui_url: str, page: tuple[Page, Watch]) -> None:
    p, watch = page
    p.goto(ui_url + "/runs")
    expect(p.get_by_text(f"team-a-spark/{HOSTILE}")).to_be_visible()  # as text, not run
    shot(p, "runs")
    p.get_by_role("link", name=EXTERNAL_RUN).click()
    expect(p.get_by_role("heading", level=1)).to_contain_text(EXTERNAL_RUN)
    expect(p.get_by_text("inferred: the first event's time")).to_be_visible()
    expect(p.get_by_text(HOSTILE).first).to_be_visible()
    shot(p, "run")
    p.get_by_role("link", name="Show this run's reads and writes on the graph").click()
    expect(p.locator("svg.graph a.node.written")).to_have_count(1)
    expect(p.locator("svg.graph a.node.read")).to_have_count(1)
    p.go_back()
    p.go_back()
    expect(p).to_have_url(ui_url + "/runs")
    expect(p.locator("tbody tr")).to_have_count(5)
    p.goto(ui_url + "/assets/raw.orders")
    expect(p.get_by_text(HOSTILE).first).to_be_visible()
    assert watch.dialogs == []


def test_a_token_logs_in_and_sees_its_namespaces(tokens_url: str, page: tuple[Page, Watch]) -> None:
    p, _ = page
    p.goto(tokens_url + "/assets?q=raw.orders")
    expect(p).to_have_url(re.compile(r"/login\?next="))
    p.get_by_label("Token").fill("wrong")
    p.get_by_role("button", name="Log in").click()
    expect(p.get_by_role("alert")).to_have_text("That token is not known.")
    p.get_by_label("Token").fill("secret-b")
    p.get_by_role("button", name="Log in").click()
    expect(p).to_have_url(tokens_url + "/assets?q=raw.orders")  # back where it was going
    expect(p.locator("#assets-results tbody")).to_contain_text("No asset matches.")  # team-a's orders
    p.goto(tokens_url + "/assets?q=hr.")
    expect(p.locator("#assets-results tbody tr")).to_have_count(2)
    (cookie,) = p.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == ("olbridge_ui", True, "Strict")
    assert p.evaluate("document.cookie") == ""  # out of the pages' scripts' reach
    # team-a's asset is not there for team-b, page and twin alike (asked with the page's cookie)
    assert p.request.get(tokens_url + "/assets/raw.orders").status == 404
    assert p.request.get(tokens_url + "/assets/raw.orders?format=json").status == 404
    assert p.request.get(tokens_url + "/assets/hr.payroll?format=json").status == 200
    p.get_by_role("link", name="Log out").click()
    expect(p).to_have_url(re.compile(r"/login$"))
    p.goto(tokens_url + "/assets")
    expect(p).to_have_url(re.compile(r"/login\?next="))


PAGES = [
    "/assets",
    "/assets?q=orders&prefix=hub.",
    "/assets/raw.orders",
    "/assets/mart.orders?tab=dependencies&group=namespace",
    "/assets/mart.orders?tab=dependencies&group=flow",
    "/assets/hub.events?tab=dependencies",
    "/assets/raw.orders?tab=runs",
    "/assets/raw.orders?tab=columns",
    "/assets/raw.orders?tab=history",
    "/neighbours?asset=hub.events&direction=down",
    "/lineage",
    "/lineage?asset=mart.orders",
    "/runs",
    f"/runs/{EXTERNAL_RUN}",
    "/status",
    "/health",
    "/health?state=FAIL,WARN,PASS,UNKNOWN&risk=1",
    "/assets/no.such.asset",
    "/login",
]


@pytest.mark.parametrize("path", PAGES)
def test_no_serious_accessibility_violation(ui_url: str, browser: Browser, path: str) -> None:
    if not AXE.exists():
        pytest.fail(f"axe-core is not installed at {AXE}: run npm ci --prefix tests/axe (make test does)")
    # axe is injected as an inline script, which the pages' Content-Security-Policy would refuse
    context = browser.new_context(bypass_csp=True)
    p = context.new_page()
    try:
        p.goto(ui_url + path)
        p.add_script_tag(path=str(AXE))
        found: list[dict[str, Any]] = p.evaluate(
            """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
                .map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 3)}))"""
        )
    finally:
        context.close()
    assert [v for v in found if v["impact"] in ("serious", "critical")] == []


def test_chromium_is_debians(browser: Browser) -> None:
    assert shutil.which("chromium") or Path(CHROMIUM).exists()
    assert browser.version
