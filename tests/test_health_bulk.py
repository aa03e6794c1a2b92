"""Judging many assets at once gives what judging each alone gives: :class:`Judge` against
:func:`evaluate`, :func:`paths_at_risk` against :func:`at_risk` and :func:`path_to_cause`, the
rule book's shortcuts against every selector tried."""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Container, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from bridge.model import Assertion, format_time, health
from bridge.model.health import (
    Facts,
    FreshnessRule,
    Judge,
    Match,
    RuleBook,
    Selector,
    Verdict,
    evaluate,
    paths_at_risk,
)

AS_OF = datetime(2026, 3, 30, 7, 5, 30, 250, tzinfo=UTC)
RULES = [
    None,
    FreshnessRule.create(max=timedelta(hours=6), warn=timedelta(hours=2)),
    FreshnessRule.create(max=timedelta(hours=1)),
    FreshnessRule.create(cron="0 9 * * *", lag=timedelta(hours=1), timezone="Europe/Paris"),
    FreshnessRule.create(cron="*/15 * * * *"),
]
WRITES = [
    None,
    *(
        AS_OF - timedelta(minutes=m, microseconds=us)
        for m in (0, 59, 60, 61, 239, 240, 241, 360, 361, 400, 1440)
        for us in (0, 1)
    ),
]
RUNS = [None, ("SUCCESS", "ns/flow.t at x"), ("FAILED", "ns/flow.t at y"), ("WARNING", "j at z"), ("KILLED", "k")]
CHECKS = [(), (Assertion("unique", True),), (Assertion("not_null", False, column="id"),)]


def test_the_judge_says_what_evaluate_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the common path the judge judges by itself, and must say what evaluate says; off it
    (checks, or a rule and no write, or a write not in the catalog's form) it hands the facts to
    evaluate, which is checked as such: comparing evaluate with itself would tell nothing."""
    handed: list[tuple[Facts, FreshnessRule | None, datetime, Verdict]] = []  # evaluate's calls by the judge

    def recorded(facts: Facts, rule: FreshnessRule | None, as_of: datetime) -> Verdict:
        handed.append((facts, rule, as_of, evaluate(facts, rule, as_of)))
        return handed[-1][-1]

    monkeypatch.setattr(health, "evaluate", recorded)
    judge = Judge(AS_OF)
    alone = delegated = 0
    odd = AS_OF - timedelta(minutes=61)
    cases = [
        *(
            (rule, written, format_time(written) if written is not None else None, run, checks)
            for rule, written, run, checks in itertools.product(RULES, WRITES, RUNS, CHECKS)
        ),
        *((rule, odd, odd.isoformat(), run, ()) for rule in RULES[1:] for run in RUNS),  # +00:00, not Z
    ]
    for rule, written, text, run, checks in cases:
        facts = Facts("a", written if rule is not None else None, run, checks, "r at t")
        handed.clear()
        verdict = judge.verdict("a", rule, text, run, checks, "r at t")
        case = (rule, text, run, checks)
        if checks or (rule is not None and (text is None or not text.endswith("Z"))):  # off the common path
            assert [h[:3] for h in handed] == [(facts, rule, AS_OF)], case
            assert verdict is handed[0][3], case
            delegated += 1
        else:  # the judge's own verdict
            assert handed == [], case
            assert verdict == evaluate(facts, rule, AS_OF), case
            alone += 1
    assert alone and delegated, (alone, delegated)


def nearest_causes(node: str, bad: set[str], downstream: dict[str, list[str]]) -> int | None:
    """The fewest edges from a bad asset other than ``node`` to it, every asset between them not
    bad (worked out here, a walk from each bad asset); None: none reaches it so."""
    best = None
    for cause in sorted(bad - {node}):
        distance, queue = {cause: 0}, deque([cause])
        while queue:
            here = queue.popleft()
            for child in downstream.get(here, ()):
                if child == node:
                    best = distance[here] + 1 if best is None else min(best, distance[here] + 1)
                elif child not in distance and child not in bad:
                    distance[child] = distance[here] + 1
                    queue.append(child)
    return best


def at_risk(bad: Iterable[str], downstream: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """A reference for :func:`paths_at_risk`, the plain walk: the assets downstream of the ``bad``
    ones, breadth first from each in order, each with the asset before it on a shortest path
    (:func:`path_to_cause` follows them back); a bad asset reached through a cycle back to
    itself is left as the walk reaches it."""
    before: dict[str, str] = {}
    queue: deque[tuple[str, str]] = deque()
    for cause in sorted(set(bad)):
        for child in downstream.get(cause, ()):
            queue.append((cause, child))
    while queue:
        parent, node = queue.popleft()
        if node in before:
            continue
        before[node] = parent
        for child in downstream.get(node, ()):
            if child not in before:
                queue.append((node, child))
    return before


def path_to_cause(asset_id: str, before: Mapping[str, str], bad: Container[str]) -> tuple[str, ...]:
    """The path from the cause (a bad asset, first) to ``asset_id`` (last), from :func:`at_risk`."""
    path = [asset_id]
    seen = {asset_id}
    node = before[asset_id]
    while True:
        path.append(node)
        if node in bad or node not in before or node in seen:
            break
        seen.add(node)
        node = before[node]
    return tuple(reversed(path))


def test_the_paths_at_risk_are_those_of_the_walk_and_its_paths() -> None:
    chosen = random.Random(34)
    for _ in range(300):
        nodes = [f"n{i}" for i in range(chosen.randint(1, 30))]
        downstream: dict[str, list[str]] = {}
        for _edge in range(chosen.randint(0, 60)):
            up, down = chosen.choice(nodes), chosen.choice(nodes)
            downstream.setdefault(up, [])
            if down not in downstream[up]:
                downstream[up].append(down)
        downstream = {k: sorted(v) for k, v in downstream.items()}
        bad = set(chosen.sample(nodes, chosen.randint(0, min(5, len(nodes)))))
        before = at_risk(bad, downstream)
        paths = paths_at_risk(bad, downstream)
        # the walk's paths, but for a bad asset it reached only through a cycle back to itself
        assert {n: p for n, p in paths.items() if n not in bad} == {
            n: path_to_cause(n, before, bad) for n in before if n not in bad
        }
        # every asset at risk is, and by a shortest path from another bad asset through assets
        # that are not bad (worked out here from each bad asset); none from itself
        for node in nodes:
            fewest = nearest_causes(node, bad, downstream)
            path = paths.get(node)
            assert (path is None) == (fewest is None), (node, path, fewest, bad, downstream)
            if path is not None:
                assert path[0] in bad and path[0] != node and path[-1] == node
                assert all(b in downstream.get(a, ()) for a, b in itertools.pairwise(path))
                assert not bad.intersection(path[1:-1]) and len(path) - 1 == fewest, (node, path, fewest)
    # b is the only bad asset, in a cycle b -> c -> b: c is at risk from it, b itself is not
    cycle = {"b": ["c"], "c": ["b", "d"], "d": ["e"]}
    assert paths_at_risk({"b"}, cycle) == {"c": ("b", "c"), "d": ("b", "c", "d"), "e": ("b", "c", "d", "e")}
    assert paths_at_risk({"b", "d"}, cycle)["d"] == ("b", "c", "d")  # another bad asset upstream: at risk
    assert "b" not in paths_at_risk({"b"}, {"b": ["b"]})
    # a and b bad, both into x, and x back into a: a is at risk from b (b -> x -> a), not from itself
    assert paths_at_risk({"a", "b"}, {"a": ["x"], "b": ["x"], "x": ["a"]}) == {"x": ("a", "x"), "a": ("b", "x", "a")}


def test_the_rule_book_finds_the_most_specific_selector_as_trying_every_one_would() -> None:
    def rule(n: int) -> FreshnessRule:
        return FreshnessRule.create(max=timedelta(hours=n + 1), source=f"#{n}")

    matches = [
        Match(),
        Match(namespace="a"),
        Match(type="Table"),
        Match(namespace="a", type="Table"),
        Match(id_prefix="x."),
        Match(id_prefix="x.y."),
        Match(namespace="b", id_prefix="x."),
        Match(metadata={"tier": "gold"}),
        Match(namespace="a", metadata={"tier": "gold", "team": "t"}),
        Match(type="File", id_prefix="x.y.z"),
    ]
    chosen = random.Random(7)
    for _ in range(200):
        selectors = [
            Selector(m, rule(n)) for n, m in enumerate(chosen.sample(matches, chosen.randint(1, len(matches))))
        ]
        book = RuleBook(selectors)
        for asset_id, type, namespace, metadata in itertools.product(
            ("x.y.z1", "x.q", "other"),
            ("Table", "File"),
            ("a", "b", None),
            ({}, {"tier": "gold"}, {"tier": "gold", "team": "t"}),
        ):
            matching = [(n, s) for n, s in enumerate(selectors) if s.match.matches(asset_id, type, namespace, metadata)]
            best = min(matching, key=lambda item: (tuple(-x for x in item[1].match.specificity), item[0]), default=None)
            assert book.rule_for(asset_id, type, namespace, metadata, None) is (best[1].rule if best else None)
