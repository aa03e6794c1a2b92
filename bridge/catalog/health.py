"""Asset health over the catalog: the freshness rules set on assets, and the facts, as of a time,
that :mod:`bridge.model.health` judges.

The facts are the catalog's own, read as of a moment (rows whose times are past it are left out):

- the runs that wrote an asset: olbridge's task runs (``usages`` of direction output) and the
  receiver's runs (``external_sources`` outputs), ended by then; the latest successful one's end
  is the asset's last write, the latest one's state its last run;
- its checks: the data-quality assertions of the latest run that reported any by then; the
  receiver's from the ``dataQualityAssertions`` facets of the events kept (input or dataset
  facets, read from the events themselves: nothing more is written when they arrive); olbridge's
  own (a run's outputs' assertions, ``dbt import``'s tests) from ``asset_checks``, kept as each
  run reported them (an asset recorded before they were kept: its latest, from its last update);
- the lineage edges of runs ended by then, for the at-risk flags.

Its statements are written as those of :mod:`bridge.catalog.sql` (SQLite's dialect, ``?``), run
as they are on both engines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.rows import assertions_json, dumps
from bridge.model import Assertion, format_time
from bridge.model.health import (
    Facts,
    FreshnessRule,
    Health,
    RuleBook,
    Selector,
    Verdict,
    at_risk,
    evaluate,
    path_to_cause,
)

SET_RULE = """
    INSERT INTO freshness_rules (asset_id, rule, set_at) VALUES (?, ?, ?)
    ON CONFLICT (asset_id) DO UPDATE SET rule = excluded.rule, set_at = excluded.set_at
"""
UNSET_RULE = "DELETE FROM freshness_rules WHERE asset_id = ?"
GET_RULE = "SELECT rule FROM freshness_rules WHERE asset_id = ?"
ALL_RULES = "SELECT asset_id, rule FROM freshness_rules"
ASSETS_AS_OF = """
    SELECT id, type, namespace, metadata, assertions, updated_at FROM assets
    WHERE created_at <= ? AND (deleted_at IS NULL OR deleted_at > ?)
"""
# the tasks that write each asset (its outputs are written by successful runs only), and the
# runs of every task, ended by then: the latest run of a task that writes an asset was to write it
OWN_WRITERS = """
    SELECT DISTINCT u.asset_id, t.flow_namespace, t.flow_id, t.task_id
    FROM usages u JOIN task_runs t ON t.pk = u.task_run_pk
    WHERE u.direction = 'output'
"""
OWN_RUNS = """
    SELECT flow_namespace, flow_id, task_id, state, ended_at, pk FROM task_runs
    WHERE ended_at IS NOT NULL AND ended_at <= ?
"""
OWN_WRITES = """
    SELECT u.asset_id, max(t.ended_at) FROM usages u JOIN task_runs t ON t.pk = u.task_run_pk
    WHERE u.direction = 'output' AND t.ended_at IS NOT NULL AND t.ended_at <= ? GROUP BY u.asset_id
"""
# the receiver's runs, ended by then
EXTERNAL_WRITES = """
    SELECT job_namespace, job_name, state, ended_at, outputs FROM external_sources
    WHERE run_id IS NOT NULL AND ended_at IS NOT NULL AND ended_at <= ?
"""
# the received events that may carry assertions (the facet's name in their text), by then
ASSERTION_EVENTS = """
    SELECT event_time, source, body FROM received_events
    WHERE event_time <= ? AND body LIKE ? ORDER BY event_time, pk
"""
PUT_CHECKS = """
    INSERT INTO asset_checks (asset_id, reported_at, reporter, assertions) VALUES (?, ?, ?, ?)
    ON CONFLICT (asset_id, reported_at) DO UPDATE SET reporter = excluded.reporter, assertions = excluded.assertions
"""
CHECKS_AS_OF = "SELECT asset_id, reported_at, reporter, assertions FROM asset_checks WHERE reported_at <= ?"
CHECKED_ASSETS = "SELECT DISTINCT asset_id FROM asset_checks"
DATASET_NAMES = "SELECT ol_namespace, ol_name, asset_id FROM external_datasets"
OWN_EDGES = """
    SELECT DISTINCT l.upstream_id, l.downstream_id FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE t.ended_at IS NOT NULL AND t.ended_at <= ?
"""
EXTERNAL_EDGES = """
    SELECT inputs, outputs FROM external_sources
    WHERE (run_id IS NOT NULL AND ended_at IS NOT NULL AND ended_at <= ?) OR (run_id IS NULL AND first_seen <= ?)
"""

# the receiver's run states as the model's
_EXTERNAL_STATE = {"COMPLETE": "SUCCESS", "FAIL": "FAILED", "ABORT": "FAILED"}


def set_rule(cur: Cursor, asset_id: str, rule: FreshnessRule | None, *, now: datetime) -> None:
    """Set (or, with None, remove) the freshness rule of an asset, in the caller's transaction."""
    if rule is None:
        cur.execute(UNSET_RULE, (asset_id,))
        return
    cur.execute(SET_RULE, (asset_id, dumps(rule.to_json()), format_time(now)))


def record_checks(cur: Cursor, asset_id: str, at: datetime, reporter: str, assertions: Sequence[Assertion]) -> None:
    """Keep the checks a run reported on an asset, at the time it reported them (in the caller's
    transaction, the one recording the run)."""
    cur.execute(PUT_CHECKS, (asset_id, format_time(at), reporter, assertions_json(assertions) or "[]"))


def get_rule(conn: Connection | Cursor, asset_id: str) -> FreshnessRule | None:
    row = conn.execute(GET_RULE, (asset_id,)).fetchone()
    return _rule(row[0]) if row else None


def _rule(text: str) -> FreshnessRule:
    """A stored rule, with where it came from (``asset``: set by ``assets set``; ``dbt``: a
    source's freshness)."""
    data = json.loads(text)
    return FreshnessRule.from_json(data, source=str(data.get("source") or "asset"))


@attrs.frozen
class AssetHealth:
    """One asset's verdict, and its at-risk flag (the path from the cause to it, or empty)."""

    asset_id: str
    type: str
    namespace: str | None
    verdict: Verdict
    path: tuple[str, ...] = ()

    @property
    def health(self) -> Health:
        return self.verdict.health

    @property
    def at_risk(self) -> bool:
        return bool(self.path)

    def to_json(self) -> dict[str, Any]:
        rule = self.verdict.rule
        return {
            "id": self.asset_id,
            "type": self.type,
            "namespace": self.namespace,
            "health": self.verdict.health.value,
            "reasons": list(self.verdict.reasons),
            "freshness": rule.to_json() if rule else None,
            "atRisk": self.at_risk,
            "cause": self.path[0] if self.path else None,
            "pathToCause": list(self.path),
        }


@attrs.frozen
class _Asset:
    id: str
    type: str
    namespace: str | None
    metadata: Mapping[str, Any]
    checks: tuple[Assertion, ...]
    updated_at: str


def assess(
    conn: Connection | Cursor,
    selectors: Sequence[Selector],
    as_of: datetime,
    *,
    ids: Iterable[str] | None = None,
) -> list[AssetHealth]:
    """The health of every asset there was at ``as_of`` (or of those of ``ids``), by id."""
    moment = format_time(as_of)
    # metadata is read only where a selector asks for it; rules alike are parsed once
    by_metadata = any(s.match.metadata for s in selectors)
    assets = [
        _Asset(i, t, ns, json.loads(md) if by_metadata and md != "{}" else {}, _own_checks(checks), updated)
        for i, t, ns, md, checks, updated in conn.execute(ASSETS_AS_OF, (moment, moment))
    ]
    parsed: dict[str, FreshnessRule] = {}
    own_rules = {
        asset_id: parsed.get(body) or parsed.setdefault(body, _rule(body)) for asset_id, body in conn.execute(ALL_RULES)
    }
    writes, runs = _runs(conn, moment)
    received = _received_checks(conn, moment)
    kept = _kept_checks(conn, moment)
    # assets whose checks were recorded before checks were kept: the latest, from their last update on
    unkept = {a.id for a in assets if a.checks} - {asset_id for (asset_id,) in conn.execute(CHECKED_ASSETS)}
    downstream = _edges(conn, moment)
    book = RuleBook(selectors)
    wanted = set(ids) if ids is not None else None
    # for some assets, only they and what is upstream of them (their at-risk flags) are judged
    judged = _with_upstream(wanted, downstream) if wanted is not None else None
    verdicts: dict[str, Verdict] = {}
    for a in assets:
        if judged is not None and a.id not in judged:
            continue
        rule = book.rule_for(a.id, a.type, a.namespace, a.metadata, own_rules.get(a.id))
        checks, checks_from = received.get(a.id, ((), None))
        own = kept.get(a.id)
        if own is None and a.id in unkept and a.updated_at <= moment:
            own = (a.checks, (a.updated_at, "the last run recorded"))
        if own is not None and (checks_from is None or checks_from[0] < own[1][0]):
            checks, checks_from = own
        written = writes.get(a.id)
        facts = Facts(
            a.id,
            # only a rule reads it (datetime.fromisoformat: the catalog's one text form of a time)
            last_write=datetime.fromisoformat(written) if written is not None and rule is not None else None,
            last_run=runs[a.id][1] if a.id in runs else None,
            checks=checks,
            checks_from=checks_from[1] if checks_from else None,
        )
        verdicts[a.id] = evaluate(facts, rule, as_of)
    bad = {i for i, v in verdicts.items() if v.health in (Health.FAIL, Health.WARN)}
    before = at_risk(bad, downstream)
    out: list[AssetHealth] = []
    for a in sorted(assets, key=lambda a: a.id):
        if wanted is not None and a.id not in wanted:
            continue
        path = path_to_cause(a.id, before, bad) if a.id in before else ()
        out.append(AssetHealth(a.id, a.type, a.namespace, verdicts[a.id], path))
    return out


def _with_upstream(ids: set[str], downstream: Mapping[str, Sequence[str]]) -> set[str]:
    """``ids`` and every asset upstream of them."""
    upstream: dict[str, list[str]] = {}
    for up, downs in downstream.items():
        for down in downs:
            upstream.setdefault(down, []).append(up)
    found, frontier = set(ids), list(ids)
    while frontier:
        node = frontier.pop()
        for up in upstream.get(node, ()):
            if up not in found:
                found.add(up)
                frontier.append(up)
    return found


def _kept_checks(conn: Connection | Cursor, moment: str) -> dict[str, tuple[tuple[Assertion, ...], tuple[str, str]]]:
    """Each asset's latest checks recorded by then, with their time and reporter."""
    out: dict[str, tuple[tuple[Assertion, ...], tuple[str, str]]] = {}
    for asset_id, reported, reporter, assertions in conn.execute(CHECKS_AS_OF, (moment,)):
        if asset_id not in out or reported > out[asset_id][1][0]:
            out[asset_id] = (_own_checks(assertions), (reported, f"{reporter} at {reported}"))
    return out


def _own_checks(text: str | None) -> tuple[Assertion, ...]:
    return tuple(Assertion(**a) for a in json.loads(text)) if text else ()


def _runs(conn: Connection | Cursor, moment: str) -> tuple[dict[str, str], dict[str, tuple[str, tuple[str, str]]]]:
    """The last successful write of each asset, and its latest run that ended ((end, (state, label)))."""
    last_write: dict[str, str] = {}
    last_run: dict[str, tuple[str, tuple[str, str]]] = {}

    def saw(asset_id: str, state: str, ended: str, label: str) -> None:
        if state in ("SUCCESS", "WARNING") and ended > last_write.get(asset_id, ""):
            last_write[asset_id] = ended
        if asset_id not in last_run or ended >= last_run[asset_id][0]:
            last_run[asset_id] = (ended, (state, f"{label} at {ended}"))

    for asset_id, ended in conn.execute(OWN_WRITES, (moment,)):
        last_write[asset_id] = ended
    latest: dict[tuple[str, str, str], tuple[str, int, str]] = {}
    for ns, flow, task, state, ended, pk in conn.execute(OWN_RUNS, (moment,)):
        key = (ns, flow, task)
        if key not in latest or (ended, pk) > latest[key][:2]:
            latest[key] = (ended, pk, state)
    for asset_id, ns, flow, task in conn.execute(OWN_WRITERS):
        found = latest.get((ns, flow, task))
        if found is not None:
            ended, _pk, state = found
            if asset_id not in last_run or ended >= last_run[asset_id][0]:
                last_run[asset_id] = (ended, (state, f"{ns}/{flow}.{task} at {ended}"))
    for job_ns, job_name, state, ended, outputs in conn.execute(EXTERNAL_WRITES, (moment,)):
        mapped = _EXTERNAL_STATE.get(state or "")
        if mapped is None:
            continue
        for asset_id in json.loads(outputs):
            saw(asset_id, mapped, ended, f"{job_ns}/{job_name}")
    return last_write, last_run


def _received_checks(
    conn: Connection | Cursor, moment: str
) -> dict[str, tuple[tuple[Assertion, ...], tuple[str, str]]]:
    """Each asset's assertions, from the latest received event that gave it any (with its time
    and its job's name)."""
    names = {(ns, name): asset_id for ns, name, asset_id in conn.execute(DATASET_NAMES)}
    out: dict[str, tuple[tuple[Assertion, ...], tuple[str, str]]] = {}
    for event_time, _source, body in conn.execute(ASSERTION_EVENTS, (moment, "%dataQualityAssertions%")):
        event = json.loads(body)
        job = event.get("job") if isinstance(event.get("job"), dict) else {}
        label = f"{job.get('namespace')}/{job.get('name')} at {event_time}"
        datasets = [
            *(event.get("inputs") or []),
            *(event.get("outputs") or []),
            *([event["dataset"]] if isinstance(event.get("dataset"), dict) else []),
        ]
        for ds in datasets:
            if not isinstance(ds, dict):
                continue
            asset_id = names.get((ds.get("namespace"), ds.get("name")))
            found = _assertions(ds)
            if asset_id is not None and found:
                out[asset_id] = (found, (event_time, label))
    return out


def _assertions(dataset: Mapping[str, Any]) -> tuple[Assertion, ...]:
    for key in ("inputFacets", "facets"):
        facets = dataset.get(key)
        facet = facets.get("dataQualityAssertions") if isinstance(facets, dict) else None
        items = facet.get("assertions") if isinstance(facet, dict) else None
        if isinstance(items, list):
            return tuple(
                Assertion(
                    assertion=str(a["assertion"]),
                    success=a["success"],
                    column=a.get("column") if isinstance(a.get("column"), str) else None,
                    severity=a.get("severity") if isinstance(a.get("severity"), str) else None,
                )
                for a in items
                if isinstance(a, dict) and isinstance(a.get("assertion"), str) and isinstance(a.get("success"), bool)
            )
    return ()


def _edges(conn: Connection | Cursor, moment: str) -> dict[str, list[str]]:
    downstream: dict[str, set[str]] = {}
    for up, down in conn.execute(OWN_EDGES, (moment,)):
        downstream.setdefault(up, set()).add(down)
    for inputs, outputs in conn.execute(EXTERNAL_EDGES, (moment, moment)):
        for up in json.loads(inputs):
            for down in json.loads(outputs):
                if up != down:
                    downstream.setdefault(up, set()).add(down)
    return {k: sorted(v) for k, v in downstream.items()}


__all__ = ["AssetHealth", "assess", "get_rule", "record_checks", "set_rule"]
