"""What the health watch keeps after each look is what judging the whole catalog gives then (every
asset's health and reasons), as writes and time go on at random, on both engines: the writes mark
every asset whose health they may change, and the due times find those time alone changes. And
what it keeps, read: counted and paged by health and namespace."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from bridge.catalog import Catalog, health_kept, health_state
from bridge.catalog import health as health_queries
from bridge.catalog.browse import Scope
from bridge.catalog.health_state import WatchSeen, kept
from bridge.delivery.health_watch import HealthWatch, WatchSettings
from bridge.mapping import Resolver
from bridge.model import Assertion
from bridge.model.health import FreshnessRule, Health
from bridge.receiver.imports import catalog_intake
from tests.conftest import at
from tests.helpers import decl, ol_dataset, ol_run_event, run
from tests.test_health_some import IDS, NAMES, NAMESPACE, SELECTORS, build

pytestmark = pytest.mark.both_engines

DAY = 86400.0


def writes(catalog: Catalog, resolver: Resolver, chosen: random.Random, minute: int, n: int) -> None:
    """What a few minutes of work write, at random: own runs (some failing, some skipped, some
    with checks), received events, a rule set, now and then an asset deleted."""
    for k in range(chosen.randint(0, 2)):
        outs = tuple(
            decl(
                o,
                type="Table",
                namespace=f"team-{IDS.index(o) % 3}",
                assertions=[Assertion("unique", chosen.random() < 0.6)] if chosen.random() < 0.3 else None,
            )
            for o in chosen.sample(IDS, chosen.randint(1, 2))
        )
        ins = tuple(decl(i) for i in chosen.sample(IDS, chosen.randint(0, 2)))
        state = chosen.choice(["SUCCESS", "SUCCESS", "FAILED", "SKIPPED"])
        catalog.record_task_run(
            # ended by the watch's clock (a fact dated ahead of it counts at its recheck, later)
            run(
                f"task{(n + k) % 5}",
                execution=f"late{n}.{k}",
                inputs=ins,
                outputs=outs,
                state=state,
                start=at(minute - 1),
            )
        )
    if chosen.random() < 0.5:
        event = ol_run_event(
            chosen.choice(["COMPLETE", "FAIL"]),
            run_id=f"0194a1b2-0000-7000-9000-{n:012d}",
            job=("airflow", f"dag.job{n % 4}"),
            inputs=[ol_dataset(NAMESPACE, name) for name in chosen.sample(NAMES, 1)],
            outputs=[ol_dataset(NAMESPACE, name) for name in chosen.sample(NAMES, chosen.randint(1, 2))],
            time=at(minute).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        assert all(o.ok for o in catalog_intake(catalog, resolver).take([event]))
    if chosen.random() < 0.3:
        rule = FreshnessRule.create(max=timedelta(minutes=chosen.randint(30, 300)))
        catalog.set_freshness(chosen.choice(IDS), rule, now=at(minute))
    if chosen.random() < 0.1:
        held = [h.asset_id for h in catalog.health(at(minute), SELECTORS)]
        if held:
            catalog.delete_asset(chosen.choice(held), now=at(minute))


@pytest.mark.parametrize("seed", range(4))
def test_what_the_watch_keeps_after_each_look_is_what_the_whole_catalog_gives(
    catalog_target: str, resolver: Resolver, seed: int
) -> None:
    chosen = random.Random(seed)
    now = [0.0]
    with Catalog(catalog_target) as catalog:
        catalog.watch_seen = WatchSeen(clock=lambda: now[0], seen_for=0.0)
        minute = build(catalog, resolver, chosen, expire=seed % 2 == 1)[-1] + 1
        now[0] = at(minute).timestamp()
        watch = HealthWatch(catalog, WatchSettings(selectors=SELECTORS), clock=lambda: now[0], ttl=DAY, catch_up=DAY)
        watch.step()  # its first pass over every asset; then only what is marked or due, for a day
        seen: set[str] = set()
        for n in range(14):
            minute += chosen.choice([1, 7, 30, 90, 200])
            now[0] = at(minute).timestamp()
            writes(catalog, resolver, chosen, minute, n)
            result = watch.step()
            assert result is not None and not result.lost
            whole = {h.asset_id: (h.health, h.verdict.reasons) for h in catalog.health(at(minute), SELECTORS)}
            held = {asset_id: (k.health, k.reasons) for asset_id, k in kept(catalog._conn).items()}
            assert held == whole, (n, [(a, held.get(a), whole.get(a)) for a in set(held) | set(whole)])
            seen.update(h.value for h, _ in whole.values())
    assert seen >= {"FAIL", "PASS"}, seen


def test_a_task_that_fails_on_one_output_fails_every_asset_it_wrote_at_the_next_look(catalog_target: str) -> None:
    """Health judges an asset by the latest run of each task that wrote it: a task that wrote two
    tables and then failed naming one fails both, and the watch sees it at its next look, not at
    its next pass over every asset."""
    now = [at(0).timestamp()]
    with Catalog(catalog_target) as catalog:
        catalog.watch_seen = WatchSeen(clock=lambda: now[0], seen_for=0.0)
        watch = HealthWatch(catalog, WatchSettings(), clock=lambda: now[0], ttl=DAY, catch_up=DAY)
        watch.step()
        both = (decl("mart.a", type="Table"), decl("mart.b", type="Table"))
        catalog.record_task_run(run("build", execution="e1", outputs=both, start=at(1)))
        now[0] = at(2).timestamp()
        watch.step()
        assert {a: k.health.value for a, k in kept(catalog._conn).items()} == {"mart.a": "PASS", "mart.b": "PASS"}
        catalog.record_task_run(run("build", execution="e2", outputs=both[1:], state="FAILED", start=at(10)))
        now[0] = at(11).timestamp()
        result = watch.step()
        assert result is not None and result.marks == 2  # both marked by the failed run
        judged = {h.asset_id: h.health.value for h in health_queries.assess(catalog._conn, (), at(11))}
        assert judged == {"mart.a": "FAIL", "mart.b": "FAIL"}
        assert {a: k.health.value for a, k in kept(catalog._conn).items()} == judged


def test_an_asset_written_ahead_of_the_watchs_clock_is_judged_once_its_time_comes(catalog_target: str) -> None:
    """A write dated a little ahead of the watch's clock (another host's) made an asset that, as
    of the look, did not exist yet: the look dropped its mark and judged it at the next pass over
    every asset, an hour later. Its mark stays until a look reaches its time."""
    now = [at(0).timestamp()]
    with Catalog(catalog_target) as catalog:
        catalog.watch_seen = WatchSeen(clock=lambda: now[0], seen_for=0.0)
        watch = HealthWatch(catalog, WatchSettings(), clock=lambda: now[0], ttl=DAY, catch_up=DAY)
        watch.step()
        catalog.record_task_run(run("build", outputs=(decl("mart.x", type="Table"),), start=at(0.25), end=at(0.5)))
        now[0] = at(0.1).timestamp()  # 24 s before the write's end, by the watch's clock
        watch.step()
        assert "mart.x" not in kept(catalog._conn)
        now[0] = at(0.6).timestamp()
        result = watch.step()
        assert result is not None and result.marks == 1
        assert {a: k.health.value for a, k in kept(catalog._conn).items()} == {"mart.x": "PASS"}
        # dated further ahead than a marked asset's recheck (5 minutes): left to the pass over
        # every asset, its mark not kept to be read again at every look until then
        catalog.record_task_run(run("far", outputs=(decl("mart.far", type="Table"),), start=at(59), end=at(60)))
        watch.step()
        assert catalog._conn.execute("SELECT count(*) FROM health_marks").fetchone()[0] == 0


def test_a_batch_of_marks_dated_ahead_waits_for_the_poll_not_a_look_after_another(catalog_target: str) -> None:
    """Marks kept for a later look (their assets written a little ahead of the watch's clock) do
    not count as a full batch judged: the watch waits its poll before looking again rather than
    looking again at once, and at once, until their time (3,000 looks in 10 s, a core's worth)."""
    now = at(0).timestamp()
    with Catalog(catalog_target) as catalog:
        catalog.watch_seen = WatchSeen(clock=lambda: now, seen_for=0.0)
        watch = HealthWatch(catalog, WatchSettings(poll=0.2), clock=lambda: now, ttl=DAY, catch_up=DAY, batch=2)
        watch.step()
        outputs = tuple(decl(f"mart.ahead{i}", type="Table") for i in range(3))
        catalog.record_task_run(run("build", outputs=outputs, start=at(1), end=at(2)))  # 2 minutes ahead
        looks: list[health_state.PassResult | None] = []
        real_step = watch.step

        def step() -> health_state.PassResult | None:
            looks.append(real_step())
            if len(looks) >= 5:
                watch.stop.set()
            return looks[-1]

        watch.step = step  # type: ignore[method-assign]
        watch.stop.clear()
        waits: list[float] = []
        watch.stop.wait = lambda seconds=None: bool(waits.append(seconds or 0.0)) or watch.stop.is_set()  # type: ignore[method-assign]
        watch.run()
        assert len(waits) >= 4  # a poll between looks
        assert [r.ahead if r else None for r in looks] == [2] * 5  # the same batch each look
        assert catalog._conn.execute("SELECT count(*) FROM health_marks").fetchone()[0] == 3


def test_a_full_batch_with_some_marks_kept_for_later_looks_again_at_once(catalog_target: str) -> None:
    """A batch of marks of which some were kept for a later look, not all: the others were
    judged, and more may wait, so the watch looks again at once (a backlog drained a batch a
    poll behind one asset dated ahead)."""
    now = at(0).timestamp()
    with Catalog(catalog_target) as catalog:
        catalog.watch_seen = WatchSeen(clock=lambda: now, seen_for=0.0)
        watch = HealthWatch(catalog, WatchSettings(poll=0.2), clock=lambda: now, ttl=DAY, catch_up=DAY, batch=2)
        watch.step()
        catalog.record_task_run(run("ahead", outputs=(decl("mart.a", type="Table"),), start=at(1), end=at(2)))
        for name in ("mart.b", "mart.c", "mart.d"):
            catalog.record_task_run(
                run(name, outputs=(decl(name, type="Table"),), start=at(-2), end=at(-1), execution=name)
            )
        said: list[str] = []
        real_step = watch.step

        def step() -> health_state.PassResult | None:
            said.append("look")
            if said.count("look") >= 3:
                watch.stop.set()
            return real_step()

        watch.step = step  # type: ignore[method-assign]
        watch.stop.clear()
        watch.stop.wait = lambda seconds=None: bool(said.append("wait")) or watch.stop.is_set()  # type: ignore[method-assign]
        watch.run()
        assert said[:2] == ["look", "look"], said


@pytest.mark.parametrize("limit", [1, 3, 50])
def test_the_kept_health_is_counted_and_paged_by_state_and_namespace(
    catalog_target: str, resolver: Resolver, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts by kept health, and the pages of the assets of some states by id, of every asset
    or those a token sees, are what the kept rows hold: every asset once, in order, a page
    ending early (with where to go on, an asset the token sees) once it has read its bound of
    kept rows; an asset deleted since the watch last looked is not listed."""
    chosen = random.Random(limit)
    with Catalog(catalog_target) as catalog:
        build(catalog, resolver, chosen, expire=False)
        watch = HealthWatch(catalog, WatchSettings(selectors=SELECTORS), clock=lambda: at(24 * 60).timestamp())
        watch.step()
        conn = catalog._conn
        held = kept(conn)
        namespace = {a.id: a.namespace for a in catalog.list_assets()}
        typed = {a.id: (a.namespace, a.type) for a in catalog.list_assets()}
        gone = sorted(held)[1]  # deleted since the watch looked: its kept row is still there, not listed
        catalog.delete_asset(gone, now=at(24 * 60))
        monkeypatch.setattr(health_kept, "SCANNED_AT_MOST", 2)
        for scope in (None, Scope(("team-1",)), Scope(("team-?", "none-such"))):
            sees = [a for a in sorted(held) if scope is None or scope.allows(namespace[a])]
            counted = health_kept.kept_counts(conn, scope)
            assert counted == {h.value: sum(1 for a in sees if held[a].health is h) for h in Health}
            for states in (["FAIL"], ["FAIL", "WARN"], ["PASS", "FAIL", "UNKNOWN"], []):
                wanted = [a for a in sees if held[a].health.value in states]
                found: list[str] = []
                after, pages = None, 0
                while pages < 100:
                    page, after = health_kept.kept_in_states(conn, states, after, limit, scope)
                    assert len(page) <= limit
                    assert after is None or scope is None or scope.allows(namespace[after]), after
                    assert all((namespace, type_) == typed[i] for i, namespace, type_ in page)
                    found, pages = found + [i for i, _, _ in page], pages + 1
                    if after is None:
                        break
                assert found == [a for a in wanted if a != gone], (scope, states)
        assert {h.health.value for h in held.values()} >= {"FAIL", "PASS"}


@pytest.mark.parametrize("patterns", [("team-b",), ("team-b*", "team-c?")])
def test_a_tokens_page_cut_short_starts_the_next_at_an_asset_it_sees(
    catalog_target: str, monkeypatch: pytest.MonkeyPatch, patterns: tuple[str, ...]
) -> None:
    """A page that read its bound of kept rows, the last of them another namespace's asset, ended
    there: where the next page starts was that asset's id, and a token, choosing the states and
    where to start, read another namespace's ids and their health. It ends at the first asset past
    there that the token sees: every page's ``after`` is one of its assets (or None), every asset
    of its is listed once, in order, and each page goes on past the one before."""
    with Catalog(catalog_target) as catalog:
        namespaces = {}
        for n in range(60):  # team-b's and a Global asset now and then, among another team's
            namespace = "team-b" if n % 12 == 5 else None if n == 30 else "team-a-secret"
            namespace = "team-b" if n == 58 else namespace
            catalog.set_asset(decl(f"t{n:03d}", type="Table", namespace=namespace), now=at(0))
            namespaces[f"t{n:03d}"] = namespace
        catalog.set_asset(decl("t041", type="Table", namespace="team-c1"), now=at(0))  # team-b* sees team-c? too
        namespaces["t041"] = "team-c1"
        watch = HealthWatch(catalog, WatchSettings(), clock=lambda: at(60).timestamp())
        watch.step()
        catalog.delete_asset("t017", now=at(1))  # team-b's, deleted since the watch looked: not listed
        conn, held = catalog._conn, kept(catalog._conn)
        scope = Scope(patterns)
        sees = [a for a in sorted(held) if a != "t017" and scope.allows(namespaces[a])]
        assert len(sees) >= 5 and len(sees) < len(held) / 5
        states = sorted({k.health.value for k in held.values()})
        monkeypatch.setattr(health_kept, "SCANNED_AT_MOST", 3)
        for limit in (1, 2, 50):
            found: list[str] = []
            after: str | None = None
            for _ in range(100):
                page, following = health_kept.kept_in_states(conn, states, after, limit, scope)
                found += [i for i, _, _ in page]
                assert following is None or scope.allows(namespaces[following]), (limit, following)
                assert following is None or after is None or following > after  # every page goes on
                if following is None:
                    break
                after = following
            assert following is None and found == sees, (limit, found)


def test_a_task_with_more_assets_than_a_run_marks_marks_only_those_its_run_names(
    catalog_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task that wrote more assets than :data:`TASK_MARKS_AT_MOST` (a new dated file each run)
    marks at a run's end only those the run names: the others are judged at the watch's next pass
    over every asset, not marked by thousands at every run."""
    assert "LIMIT 1001" in health_state.TASK_WRITES  # the bound, one past it read
    monkeypatch.setattr(health_state, "TASK_WRITES", health_state.TASK_WRITES.replace("LIMIT 1001", "LIMIT 3"))
    monkeypatch.setattr(health_state, "TASK_MARKS_AT_MOST", 2)
    now = [at(0).timestamp()]
    with Catalog(catalog_target) as catalog:
        catalog.watch_seen = WatchSeen(clock=lambda: now[0], seen_for=0.0)
        watch = HealthWatch(catalog, WatchSettings(), clock=lambda: now[0], ttl=DAY, catch_up=DAY)
        watch.step()
        for n, day in enumerate(("d1", "d2")):  # two files: at most two, every one marked
            catalog.record_task_run(run("export", execution=f"e{n}", outputs=(decl(day, type="File"),), start=at(n)))
        marked = {m for (m,) in catalog._conn.execute("SELECT asset_id FROM health_marks")}
        assert marked == {"d1", "d2"}
        now[0] = at(30).timestamp()  # past their writes: judged, and their marks gone
        watch.step()
        catalog.record_task_run(run("export", execution="e3", outputs=(decl("d3", type="File"),), start=at(5)))
        marked = {m for (m,) in catalog._conn.execute("SELECT asset_id FROM health_marks")}
        assert marked == {"d3"}  # three written: past the bound, only the run's own


def test_the_kept_health_is_current_only_after_the_lease_holder_s_own_pass(catalog_target: str) -> None:
    """What the watch keeps is read as current once the lease's holder has made a pass over every
    asset; not once the lease lapsed (writers may have marked nothing meanwhile), until its next."""
    now = [at(0).timestamp()]
    with Catalog(catalog_target) as catalog:
        catalog.record_task_run(run("build", outputs=(decl("mart.a", type="Table"),), start=at(0)))
        watch = HealthWatch(catalog, WatchSettings(), clock=lambda: now[0], ttl=60.0, catch_up=15.0)
        conn = catalog._conn
        assert not health_kept.watch_live(conn, now[0])
        watch.step()
        assert health_kept.watch_live(conn, now[0])
        now[0] += 61  # the lease's end passed, nobody took it over: a write of the watch sees it lapsed
        assert catalog.db.write(watch._fence)
        assert not health_kept.watch_live(conn, now[0])
        watch.step()  # taken back, a pass over every asset at once: marks may have been missed during it
        assert not health_kept.watch_live(conn, now[0])
        now[0] += 15
        watch.step()  # the pass 15 s later, every writer marking by then: current again
        assert health_kept.watch_live(conn, now[0])
        other = HealthWatch(catalog, WatchSettings(), clock=lambda: now[0] + 120, ttl=60.0)
        assert other.step() is not None  # a takeover: its own pass, and current for it
        assert health_kept.watch_live(conn, now[0] + 120)
