"""Asset health over the catalog: the freshness rules set on assets, and the facts, as of a time,
that :mod:`bridge.model.health` judges.

The facts are the catalog's own, read as of a moment (rows whose times are past it are left out):

- the runs that wrote an asset: olbridge's task runs (``usages`` of direction output) and the
  receiver's runs (``external_sources`` outputs), ended by then; the latest successful one's end
  is the asset's last write, the latest one's state its last run;
- its checks: the data-quality assertions of the latest run that reported any by then, from
  ``asset_checks``, kept as each run reported them: olbridge's own (a run's outputs' assertions,
  ``dbt import``'s tests) and the receiver's (the ``dataQualityAssertions`` facets of the events it
  took, recorded as it took them, so they outlive the events); an asset recorded before checks
  were kept has its latest, from its last update;
- the lineage edges of runs ended by then, for the at-risk flags.

Each fact is read whole in one statement that does the choosing (an aggregate, a window function,
an index's look), so that the work left in Python is judging each asset once.

Its statements are written as those of :mod:`bridge.catalog.sql` (SQLite's dialect, ``?``), run
as they are on both engines.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.rows import assertions_json, dumps
from bridge.model import Assertion, format_time
from bridge.model.health import FreshnessRule, Health, Judge, RuleBook, Selector, Verdict, paths_at_risk

SET_RULE = """
    INSERT INTO freshness_rules (asset_id, rule, set_at) VALUES (?, ?, ?)
    ON CONFLICT (asset_id) DO UPDATE SET rule = excluded.rule, set_at = excluded.set_at
"""
UNSET_RULE = "DELETE FROM freshness_rules WHERE asset_id = ?"
GET_RULE = "SELECT rule FROM freshness_rules WHERE asset_id = ?"
ALL_RULES = "SELECT asset_id, rule FROM freshness_rules"
ASSETS_AS_OF = """
    SELECT id, type, namespace FROM assets WHERE created_at <= ? AND (deleted_at IS NULL OR deleted_at > ?)
"""
ASSETS_AS_OF_WITH_METADATA = """
    SELECT id, type, namespace, metadata FROM assets WHERE created_at <= ? AND (deleted_at IS NULL OR deleted_at > ?)
"""
# each task that ever wrote each asset (its outputs are written by successful runs only), and the
# end of its latest run by then that wrote it (NULL: none by then)
OWN_WRITERS = """
    SELECT u.asset_id, t.flow_namespace, t.flow_id, t.task_id, max(CASE WHEN t.ended_at <= ? THEN t.ended_at END)
    FROM usages u JOIN task_runs t ON t.pk = u.task_run_pk WHERE u.direction = 'output'
    GROUP BY u.asset_id, t.flow_namespace, t.flow_id, t.task_id
"""
# the latest run of each task ended by then (by end, then key; task_runs_task finds the later one):
# the latest run of a task that writes an asset is the last run that was to write it
LATEST_RUNS = """
    SELECT t.flow_namespace, t.flow_id, t.task_id, t.state, t.ended_at FROM task_runs t
    WHERE t.ended_at IS NOT NULL AND t.ended_at <= ? AND NOT EXISTS (
        SELECT 1 FROM task_runs n
        WHERE n.flow_namespace = t.flow_namespace AND n.flow_id = t.flow_id AND n.task_id = t.task_id
          AND n.ended_at <= ? AND (n.ended_at > t.ended_at OR (n.ended_at = t.ended_at AND n.pk > t.pk)))
"""
# the receiver's runs, ended by then
EXTERNAL_WRITES = """
    SELECT job_namespace, job_name, state, ended_at, outputs FROM external_sources
    WHERE run_id IS NOT NULL AND ended_at IS NOT NULL AND ended_at <= ?
"""
PUT_CHECKS = """
    INSERT INTO asset_checks (asset_id, reported_at, reporter, assertions) VALUES (?, ?, ?, ?)
    ON CONFLICT (asset_id, reported_at) DO UPDATE
    SET reporter = excluded.reporter, assertions = excluded.assertions, check_rank = NULL
"""
# each asset's latest checks reported by then
LATEST_CHECKS = """
    SELECT asset_id, reported_at, reporter, assertions FROM (
        SELECT asset_id, reported_at, reporter, assertions,
               row_number() OVER (PARTITION BY asset_id ORDER BY reported_at DESC) AS n
        FROM asset_checks WHERE reported_at <= ?) c
    WHERE n = 1
"""
# assets whose checks were recorded before checks were kept (none in asset_checks): their latest,
# from their last update on
UNKEPT_CHECKS = """
    SELECT a.id, a.assertions, a.updated_at FROM assets a
    WHERE a.assertions IS NOT NULL AND a.updated_at <= ?
      AND NOT EXISTS (SELECT 1 FROM asset_checks c WHERE c.asset_id = a.id)
"""
OWN_EDGES = """
    SELECT DISTINCT l.upstream_id, l.downstream_id FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE t.ended_at IS NOT NULL AND t.ended_at <= ? ORDER BY l.upstream_id, l.downstream_id
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


@functools.lru_cache(maxsize=4096)
def _rule_json_once(rule: FreshnessRule) -> dict[str, Any]:
    return rule.to_json()


def _rule_json(rule: FreshnessRule) -> dict[str, Any]:
    """A rule's JSON, worked out once a rule (thousands of assets share one)."""
    return dict(_rule_json_once(rule))


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
            "freshness": _rule_json(rule) if rule else None,
            "atRisk": self.at_risk,
            "cause": self.path[0] if self.path else None,
            "pathToCause": list(self.path),
        }


def assess(
    conn: Connection | Cursor,
    selectors: Sequence[Selector],
    as_of: datetime,
    *,
    ids: Iterable[str] | None = None,
) -> list[AssetHealth]:
    """The health of every asset there was at ``as_of`` (or of those of ``ids``), by id.

    The facts are read whole, each in one statement that does the choosing (the latest run of
    each task, the latest checks of each asset), and each asset is judged once (:class:`Judge`:
    each rule's limits worked out once; an asset nothing speaks for is UNKNOWN at once), with
    the cyclic collector held off (:func:`collector_held`)."""
    moment = format_time(as_of)
    with collector_held():
        # metadata is read only where a selector asks for it; rules alike are parsed once
        by_metadata = any(s.match.metadata for s in selectors)
        rows = conn.execute(ASSETS_AS_OF_WITH_METADATA if by_metadata else ASSETS_AS_OF, (moment, moment)).fetchall()
        parsed: dict[str, FreshnessRule] = {}
        own_rules: dict[str, FreshnessRule] = {}
        for asset_id, body in conn.execute(ALL_RULES):
            rule = parsed.get(body)
            own_rules[asset_id] = rule if rule is not None else parsed.setdefault(body, _rule(body))
        writes, runs = _runs(conn, moment)
        checks = _checks(conn, moment)
        downstream = _edges(conn, moment)
        wanted = set(ids) if ids is not None else None
        if wanted is not None:
            # only they and what is upstream of them (their at-risk flags) are judged
            judged = _with_upstream(wanted, downstream)
            rows = [row for row in rows if row[0] in judged]
        rows.sort(key=_ID)  # by id (ids are unique): the answer's order; ids alone sort faster than rows
        verdicts = _judge(rows, by_metadata, RuleBook(selectors), own_rules, Judge(as_of), writes, runs, checks)
        bad = [row[0] for row, verdict in zip(rows, verdicts, strict=True) if verdict.health in _BAD]
        path_of = (paths_at_risk(bad, downstream) if bad else {}).get
        return [
            AssetHealth(row[0], row[1], row[2], verdict, path_of(row[0], ()))
            for row, verdict in zip(rows, verdicts, strict=True)
            if wanted is None or row[0] in wanted
        ]


_BAD = frozenset((Health.FAIL, Health.WARN))
_ID = operator.itemgetter(0)


def _judge(
    rows: Sequence[Any],
    by_metadata: bool,
    book: RuleBook,
    own_rules: Mapping[str, FreshnessRule],
    judge: Judge,
    writes: Mapping[str, str],
    runs: Mapping[str, tuple[str, str]],
    checks: Mapping[str, tuple[tuple[Assertion, ...], str | None]],
) -> list[Verdict]:
    """The verdict of each asset of ``rows`` (id, type, namespace[, metadata]), in their order."""
    rule_for, own_rule, write_of, run_of, checks_of = book.rule_for, own_rules.get, writes.get, runs.get, checks.get
    verdict_of = judge.verdict
    verdicts: list[Verdict] = []
    add = verdicts.append
    for row in rows:
        asset_id = row[0]
        rule = own_rule(asset_id)
        if rule is None:
            metadata = json.loads(row[3]) if by_metadata and row[3] != "{}" else {}
            rule = rule_for(asset_id, row[1], row[2], metadata, None)
        found = checks_of(asset_id)
        if found is None:
            add(verdict_of(asset_id, rule, write_of(asset_id), run_of(asset_id)))
        else:
            add(verdict_of(asset_id, rule, write_of(asset_id), run_of(asset_id), found[0], found[1]))
    return verdicts


@contextlib.contextmanager
def collector_held() -> Iterator[None]:
    """The cyclic garbage collector held off while the health of a catalog is worked out, or
    written out: that makes a few objects an asset, none in a cycle, and with the collector on,
    their numbers set off collections of the oldest generation again and again, each walking all
    of them (a third of the time of the judging, measured; three quarters of that of making the
    JSON objects). It is set back as it was, whatever happens."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def _checks(conn: Connection | Cursor, moment: str) -> dict[str, tuple[tuple[Assertion, ...], str | None]]:
    """Each asset's latest checks reported by then, with who reported them and when (those of an
    asset recorded before checks were kept: its latest, from its last update on)."""
    out: dict[str, tuple[tuple[Assertion, ...], str | None]] = {}
    for asset_id, assertions, _updated in conn.execute(UNKEPT_CHECKS, (moment,)):
        out[asset_id] = (_own_checks(assertions), "the last run recorded")
    for asset_id, reported, reporter, assertions in conn.execute(LATEST_CHECKS, (moment,)):
        out[asset_id] = (_own_checks(assertions), f"{reporter} at {reported}")
    return out


def _own_checks(text: str | None) -> tuple[Assertion, ...]:
    return tuple(Assertion(**a) for a in json.loads(text)) if text else ()


def _runs(conn: Connection | Cursor, moment: str) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """The last successful write of each asset, and the state of its latest run that ended, with
    the run's label ((state, label))."""
    latest = {
        (ns, flow, task): (state, ended) for ns, flow, task, state, ended in conn.execute(LATEST_RUNS, (moment,) * 2)
    }
    last_write: dict[str, str] = {}
    ended_at: dict[str, str] = {}
    last_run: dict[str, tuple[str, str]] = {}
    for asset_id, ns, flow, task, written in conn.execute(OWN_WRITERS, (moment,)):
        if written is not None and written > last_write.get(asset_id, ""):
            last_write[asset_id] = written
        found = latest.get((ns, flow, task))
        if found is not None:
            state, ended = found
            before = ended_at.get(asset_id)
            label = f"{ns}/{flow}.{task} at {ended}"
            # of two tasks' runs ended at once, the one of the task that sorts last
            if before is None or ended > before or (ended == before and label > last_run[asset_id][1]):
                ended_at[asset_id] = ended
                last_run[asset_id] = (state, label)
    for job_ns, job_name, state, ended, outputs in conn.execute(EXTERNAL_WRITES, (moment,)):
        mapped = _EXTERNAL_STATE.get(state or "")
        if mapped is None:
            continue
        for asset_id in json.loads(outputs):
            if mapped != "FAILED" and ended > last_write.get(asset_id, ""):
                last_write[asset_id] = ended
            if ended >= ended_at.get(asset_id, ""):
                ended_at[asset_id] = ended
                last_run[asset_id] = (mapped, f"{job_ns}/{job_name} at {ended}")
    return last_write, last_run


def _edges(conn: Connection | Cursor, moment: str) -> dict[str, list[str]]:
    """Each asset's downstream assets, by id (olbridge's lineage comes sorted and distinct; the
    receiver's, from its runs' inputs and outputs, is merged in where there is any)."""
    downstream: dict[str, list[str]] = {}
    for up, down in conn.execute(OWN_EDGES, (moment,)):
        found = downstream.get(up)
        if found is None:
            downstream[up] = [down]
        else:
            found.append(down)
    received: dict[str, set[str]] = {}
    for inputs, outputs in conn.execute(EXTERNAL_EDGES, (moment, moment)):
        downs = json.loads(outputs)
        for up in json.loads(inputs):
            received.setdefault(up, set()).update(down for down in downs if down != up)
    for up, downs in received.items():
        downstream[up] = sorted(downs.union(downstream.get(up, ())))
    return downstream


__all__ = ["AssetHealth", "assess", "collector_held", "get_rule", "record_checks", "set_rule"]
