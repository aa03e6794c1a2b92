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
import itertools
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from bridge.catalog import sql
from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.rows import assertions_json, dumps
from bridge.catalog.writes_kept import (
    KEPT_WRITERS,
    KEPT_WRITES,
    RECEIVED_STATE,
    SOME_KEPT_WRITERS,
    SOME_KEPT_WRITES,
    received_run,
)
from bridge.model import Assertion, format_time
from bridge.model.health import FreshnessRule, Health, Judge, RuleBook, Selector, Verdict, paths_at_risk
from bridge.model.received import run_day

SET_RULE = """
    INSERT INTO freshness_rules (asset_id, rule, set_at) VALUES (?, ?, ?)
    ON CONFLICT (asset_id) DO UPDATE SET rule = excluded.rule, set_at = excluded.set_at
"""
UNSET_RULE = "DELETE FROM freshness_rules WHERE asset_id = ?"
GET_RULE = "SELECT rule FROM freshness_rules WHERE asset_id = ?"
# Each fact's statement is written once, with ``{only}`` just after its WHERE; :func:`sql.only`
# makes of it the statement over every asset and the one over a few (their ids in ``{values}``,
# read by :func:`sql.in_chunks`), which reads the same facts of them through indexes.
ALL_RULES, SOME_RULES = sql.only("SELECT asset_id, rule FROM freshness_rules WHERE {only}1 = 1", "asset_id")
_AS_OF = "WHERE {only}created_at <= ? AND (deleted_at IS NULL OR deleted_at > ?)"
ASSETS_AS_OF, SOME_ASSETS = sql.only(f"SELECT id, type, namespace FROM assets {_AS_OF}", "id")
# the assets of a namespace there were at a moment (assets_namespace)
NAMESPACE_AS_OF = "SELECT id FROM assets " + _AS_OF.format(only="namespace = ? AND ")
ASSETS_AS_OF_WITH_METADATA, SOME_ASSETS_WITH_METADATA = sql.only(
    f"SELECT id, type, namespace, metadata FROM assets {_AS_OF}", "id"
)
# each task that ever wrote each asset (its outputs are written by successful runs only), and the
# end of its latest run by then that wrote it (NULL: none by then)
OWN_WRITERS, SOME_OWN_WRITERS = sql.only(
    """
    SELECT u.asset_id, t.flow_namespace, t.flow_id, t.task_id, max(CASE WHEN t.ended_at <= ? THEN t.ended_at END)
    FROM usages u JOIN task_runs t ON t.pk = u.task_run_pk WHERE {only}u.direction = 'output'
    GROUP BY u.asset_id, t.flow_namespace, t.flow_id, t.task_id
    """,
    "u.asset_id",
)
# the latest run of each task ended by then (by end, then key; task_runs_task finds the later one),
# a SKIPPED one left out (a skip neither fails nor mends what the task writes): the latest run of
# a task that writes an asset is the last run that was to write it
LATEST_RUNS = """
    SELECT t.flow_namespace, t.flow_id, t.task_id, t.state, t.ended_at FROM task_runs t
    WHERE t.ended_at IS NOT NULL AND t.ended_at <= ? AND t.state <> 'SKIPPED' AND NOT EXISTS (
        SELECT 1 FROM task_runs n
        WHERE n.flow_namespace = t.flow_namespace AND n.flow_id = t.flow_id AND n.task_id = t.task_id
          AND n.ended_at <= ? AND n.state <> 'SKIPPED'
          AND (n.ended_at > t.ended_at OR (n.ended_at = t.ended_at AND n.pk > t.pk)))
"""
# the writers of a few assets as the writes keep them (writes_kept.keep_own), each with its
# latest write, and a task's latest run that ended, as kept: of an asset none of whose facts is
# dated after the moment, what the runs give as of then (SOME_OWN_WRITERS, LATEST_RUN_OF)
SOME_WRITERS_KEPT = (
    "SELECT asset_id, flow_namespace, flow_id, task_id, last_write FROM kept_writers WHERE asset_id IN ({values})"
)
LATEST_RUN_KEPT = (
    "SELECT state, ended_at FROM latest_task_runs WHERE flow_namespace = ? AND flow_id = ? AND task_id = ?"
)
# the same of one task (the task's writers read by a few assets)
LATEST_RUN_OF = """
    SELECT state, ended_at FROM task_runs
    WHERE flow_namespace = ? AND flow_id = ? AND task_id = ? AND ended_at IS NOT NULL AND ended_at <= ?
      AND state <> 'SKIPPED'
    ORDER BY ended_at DESC, pk DESC LIMIT 1
"""
# the receiver's runs, ended by then
EXTERNAL_WRITES = """
    SELECT job_namespace, job_name, state, ended_at, outputs FROM external_sources
    WHERE run_id IS NOT NULL AND ended_at IS NOT NULL AND ended_at <= ?
"""
# of a few assets, the received runs that wrote them are found by their jobs: the jobs that wrote
# any of them (a run's outputs are its job's output usages), then each job's runs ended by then,
# the latest first (by end, then source: external_sources_job), a page at a time, as far as the
# assets' latest run and write need; the lineage into them from their jobs' edges (a row an edge
# and job: a run's inputs to its outputs are its job's), each made by then where a run of its job
# ended by then (read the latest first, as far as the edges need) or its JobEvent was seen by then
SOME_WRITING_JOBS = """
    SELECT DISTINCT job_namespace, job_name, asset_id FROM external_usages
    WHERE asset_id IN ({values}) AND direction = 'output'
"""
# (the next page after a run: by the pair alone, which SQLite seeks to, where with the moment's
# bound beside it it read the page before again and threw it away)
_JOB_RUNS = """
    SELECT source, state, ended_at, inputs, outputs FROM external_sources
    WHERE job_namespace = ? AND job_name = ? AND {ended} AND run_id IS NOT NULL
    ORDER BY ended_at DESC, source DESC LIMIT ?
"""
LATEST_RUNS_OF_JOB = _JOB_RUNS.format(ended="ended_at <= ?")
RUNS_OF_JOB_BEFORE = _JOB_RUNS.format(ended="(ended_at, source) < (?, ?)")
JOB_ROW = "SELECT first_seen, inputs, outputs FROM external_sources WHERE source = ? AND run_day = ? AND run_id IS NULL"
SOME_JOB_EDGES = """
    SELECT upstream_id, downstream_id, job_namespace, job_name FROM external_lineage WHERE downstream_id IN ({values})
"""
# ... but a run named under several jobs (external_sources_jobs) has its outputs' usages under
# every job it was named under, not its own alone: reads by job may miss it
ANY_RUN_OF_SEVERAL_JOBS = "SELECT source FROM external_sources WHERE jobs IS NOT NULL LIMIT 1"
PUT_CHECKS = """
    INSERT INTO asset_checks (asset_id, reported_at, reporter, assertions) VALUES (?, ?, ?, ?)
    ON CONFLICT (asset_id, reported_at) DO UPDATE
    SET reporter = excluded.reporter, assertions = excluded.assertions, check_rank = NULL
"""
# each asset's latest checks reported by then
LATEST_CHECKS, SOME_LATEST_CHECKS = sql.only(
    """
    SELECT asset_id, reported_at, reporter, assertions FROM (
        SELECT asset_id, reported_at, reporter, assertions,
               row_number() OVER (PARTITION BY asset_id ORDER BY reported_at DESC) AS n
        FROM asset_checks WHERE {only}reported_at <= ?) c
    WHERE n = 1
    """,
    "asset_id",
)
# assets whose checks were recorded before checks were kept (none in asset_checks): their latest,
# from their last update on
UNKEPT_CHECKS, SOME_UNKEPT_CHECKS = sql.only(
    """
    SELECT a.id, a.assertions, a.updated_at FROM assets a
    WHERE {only}a.assertions IS NOT NULL AND a.updated_at <= ?
      AND NOT EXISTS (SELECT 1 FROM asset_checks c WHERE c.asset_id = a.id)
    """,
    "a.id",
)
# the lineage by then
OWN_EDGES = """
    SELECT DISTINCT l.upstream_id, l.downstream_id FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE t.ended_at IS NOT NULL AND t.ended_at <= ? ORDER BY l.upstream_id, l.downstream_id
"""
# the lineage into a few assets (their ids in {values}, the rows of a VALUES), one row an edge
# however many runs made it: each asset's upstream ends read through lineage_downstream, each the
# next after the one before; and whether a run that made an edge ended by then (its runs by the
# lineage's key, as far as the first that did)
SOME_EDGES_BY_INDEX = """
    WITH RECURSIVE wanted (id) AS (VALUES {values}), edges (upstream_id, downstream_id) AS (
        SELECT (SELECT l.upstream_id FROM lineage l WHERE l.downstream_id = w.id ORDER BY l.upstream_id LIMIT 1), w.id
        FROM wanted w
        UNION ALL
        SELECT (
            SELECT l.upstream_id FROM lineage l
            WHERE l.downstream_id = e.downstream_id AND l.upstream_id > e.upstream_id ORDER BY l.upstream_id LIMIT 1
        ), e.downstream_id
        FROM edges e WHERE e.upstream_id IS NOT NULL
    )
    SELECT upstream_id, downstream_id FROM edges WHERE upstream_id IS NOT NULL
"""
EDGE_BY_THEN = """
    SELECT 1 FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE l.upstream_id = ? AND l.downstream_id = ? AND t.ended_at <= ? LIMIT 1
"""
EXTERNAL_EDGES = """
    SELECT inputs, outputs FROM external_sources
    WHERE (run_id IS NOT NULL AND ended_at IS NOT NULL AND ended_at <= ?) OR (run_id IS NULL AND first_seen <= ?)
"""
# ... and those of the runs retention deleted, kept (writes_kept.fold_received), by then
KEPT_EDGES = "SELECT upstream_id, downstream_id FROM kept_edges WHERE since <= ?"
SOME_KEPT_EDGES = "SELECT upstream_id, downstream_id FROM kept_edges WHERE downstream_id IN ({values}) AND since <= ?"
SOME_AT_MOST = 20_000  # ids judged by their own facts, at most; more: by the whole catalog's


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
    paths: bool = True,
    namespace: str | None = None,
) -> list[AssetHealth]:
    """The health of every asset there was at ``as_of`` (or of those of ``ids``; of those of
    ``namespace``), by id; without ``paths``, no at-risk flags (every path left empty: for a
    caller that shows none).

    The facts are read whole, each in one statement that does the choosing (the latest run of
    each task, the latest checks of each asset), and each asset is judged once (:class:`Judge`:
    each rule's limits worked out once; an asset nothing speaks for is UNKNOWN at once), with
    the cyclic collector held off (:func:`collector_held`). A few assets (``ids``, at most
    :data:`SOME_AT_MOST`) are judged from their own facts alone, and those of the assets upstream
    of them (their at-risk flags), read through indexes (:class:`_Some`): the same answer, at a
    cost that follows them, not the catalog; so are a namespace's assets, found by its index."""
    moment = format_time(as_of)
    wanted = _wanted(conn, ids, namespace, moment)
    if wanted is not None:
        few = _few(conn, selectors, as_of, wanted, paths, SOME_AT_MOST)
        if few is not None:
            return few
    with collector_held():
        # metadata is read only where a selector asks for it
        by_metadata = any(s.match.metadata for s in selectors)
        facts = _whole(conn, moment, by_metadata, wanted, paths)
        return _verdicts(facts, selectors, as_of, by_metadata, wanted, paths)


def assess_few(
    conn: Connection | Cursor,
    selectors: Sequence[Selector],
    as_of: datetime,
    ids: Iterable[str] | None = None,
    *,
    namespace: str | None = None,
    paths: bool = True,
    at_most: int = SOME_AT_MOST,
) -> list[AssetHealth] | None:
    """:func:`assess` of a few assets (those of ``ids``; of those of ``namespace``), only where
    they are judged from their own facts and those of the assets upstream of them (with
    ``paths``), ``at_most`` assets in all; None where that would take more, or the whole
    catalog's facts (a received run named under several jobs): for a caller that must stay fast,
    a web page, whatever the catalog."""
    wanted = _wanted(conn, ids, namespace, format_time(as_of))
    return _few(conn, selectors, as_of, wanted or set(), paths, min(at_most, SOME_AT_MOST))


def _wanted(
    conn: Connection | Cursor, ids: Iterable[str] | None, namespace: str | None, moment: str
) -> set[str] | None:
    """The assets asked for: those of ``ids``, of ``namespace`` there were at ``moment`` (found by
    its index), or of both; None: every asset."""
    wanted = set(ids) if ids is not None else None
    if namespace is not None:
        theirs = {asset_id for (asset_id,) in conn.execute(NAMESPACE_AS_OF, (namespace, moment, moment))}
        wanted = theirs if wanted is None else wanted & theirs
    return wanted


def _few(
    conn: Connection | Cursor,
    selectors: Sequence[Selector],
    as_of: datetime,
    wanted: set[str],
    paths: bool,
    at_most: int,
) -> list[AssetHealth] | None:
    """``wanted`` judged from their own facts and those upstream of them (:class:`_Some`), at most
    ``at_most`` assets in all; None where more are, or the reads by job cannot answer."""
    if len(wanted) > at_most:
        return None
    with collector_held():
        by_metadata = any(s.match.metadata for s in selectors)
        facts = _Some(conn, format_time(as_of), by_metadata).read(wanted, upstream=paths, at_most=at_most)
        return None if facts is None else _verdicts(facts, selectors, as_of, by_metadata, wanted, paths)


def _verdicts(
    facts: _Facts,
    selectors: Sequence[Selector],
    as_of: datetime,
    by_metadata: bool,
    wanted: set[str] | None,
    paths: bool,
) -> list[AssetHealth]:
    """Each asset's verdict from the facts read, and its at-risk path (with ``paths``), by id: of
    ``wanted`` alone, when given."""
    rows = facts.rows
    rows.sort(key=_ID)  # by id (ids are unique): the answer's order; ids alone sort faster than rows
    judge = Judge(as_of)
    book = RuleBook(selectors)
    verdicts = _judge(rows, by_metadata, book, facts.rules, judge, facts.writes, facts.runs, facts.checks)
    path_of: Callable[[str, tuple[str, ...]], tuple[str, ...]] = lambda _id, none: none  # noqa: E731
    if paths:
        bad = [row[0] for row, verdict in zip(rows, verdicts, strict=True) if verdict.health in _BAD]
        path_of = (paths_at_risk(bad, facts.downstream) if bad else {}).get
    return [
        AssetHealth(row[0], row[1], row[2], verdict, path_of(row[0], ()))
        for row, verdict in zip(rows, verdicts, strict=True)
        if wanted is None or row[0] in wanted
    ]


@attrs.define
class _Facts:
    """What the judging reads: the assets' rows (id, type, namespace[, metadata]), their own
    rules, last writes, last runs and latest checks, and the downstream edges (each asset's
    downstream assets, sorted)."""

    rows: list[Any]
    rules: dict[str, FreshnessRule]
    writes: dict[str, str]
    runs: dict[str, tuple[str, str]]
    checks: dict[str, tuple[tuple[Assertion, ...], str | None]]
    downstream: dict[str, list[str]]


def _whole(conn: Connection | Cursor, moment: str, by_metadata: bool, wanted: set[str] | None, paths: bool) -> _Facts:
    """The facts of the whole catalog (with ``wanted``: of those and the assets upstream of them)."""
    rows = conn.execute(ASSETS_AS_OF_WITH_METADATA if by_metadata else ASSETS_AS_OF, (moment, moment)).fetchall()
    rules = _rules(conn.execute(ALL_RULES))
    latest, writers, no_late_run = _own(conn, moment)
    external = itertools.chain(
        (
            (ns, name, state, ended, json.loads(outputs))
            for ns, name, state, ended, outputs in conn.execute(EXTERNAL_WRITES, (moment,))
        ),
        (
            (ns, name, state, ended, (asset_id,))
            for ns, name, state, ended, asset_id in conn.execute(KEPT_WRITES, (moment,))
        ),
    )
    writes, runs = _runs(latest, writers, external)
    checks = _checks(conn.execute(UNKEPT_CHECKS, (moment,)), conn.execute(LATEST_CHECKS, (moment,)))
    downstream: dict[str, list[str]] = {}
    if paths:
        edges = conn.execute(ALL_OWN_EDGES) if no_late_run else conn.execute(OWN_EDGES, (moment,))
        downstream = _edges(
            edges,
            itertools.chain(
                conn.execute(EXTERNAL_EDGES, (moment, moment)), _kept_edges(conn.execute(KEPT_EDGES, (moment,)))
            ),
        )
    if wanted is not None:
        # only they and what is upstream of them (their at-risk flags) are judged
        judged = _with_upstream(wanted, downstream) if paths else wanted
        rows = [row for row in rows if row[0] in judged]
    return _Facts(rows, rules, writes, runs, checks, downstream)


# is anything the writes keep of the own runs dated after a moment (then it cannot say what was)
ANY_LATE_RUN = "SELECT 1 FROM latest_task_runs WHERE ended_at > ? LIMIT 1"
ANY_LATE_WRITE = "SELECT 1 FROM kept_writers WHERE last_write > ? LIMIT 1"
# every task's latest run that ended, and every writer of every asset with its latest write
ALL_LATEST_RUNS = "SELECT flow_namespace, flow_id, task_id, state, ended_at FROM latest_task_runs"
ALL_WRITERS = "SELECT asset_id, flow_namespace, flow_id, task_id, last_write FROM kept_writers"
# the assets whose writers' kept facts are after a moment (their latest write, or a writing task's
# latest run)
LATE_WRITERS = f"""
    SELECT DISTINCT w.asset_id FROM kept_writers w LEFT JOIN latest_task_runs l
        ON l.flow_namespace = w.flow_namespace AND l.flow_id = w.flow_id AND l.task_id = w.task_id
    WHERE w.last_write > ? OR l.ended_at > ? LIMIT {SOME_AT_MOST + 1}
"""
# the lineage, when no own run ended after the moment (an edge is a run's that wrote its
# downstream end: every run with lineage ended), as OWN_EDGES orders it
ALL_OWN_EDGES = "SELECT DISTINCT upstream_id, downstream_id FROM lineage ORDER BY upstream_id, downstream_id"

Latest = dict[tuple[str, str, str], tuple[str, str]]  # each task's latest run by then: (state, end)


def _own_from_runs(conn: Connection | Cursor, moment: str) -> tuple[Latest, Iterable[Sequence[Any]]]:
    """:func:`_own`'s facts from every run (the latest of each task by a look into the index of
    its task's runs; each asset's writers by an aggregate of every output)."""
    latest = {(ns, flow, task): (state, end) for ns, flow, task, state, end in conn.execute(LATEST_RUNS, (moment,) * 2)}
    return latest, itertools.chain(conn.execute(OWN_WRITERS, (moment,)), conn.execute(KEPT_WRITERS, (moment, moment)))


def _own(conn: Connection | Cursor, moment: str) -> tuple[Latest, Iterable[Sequence[Any]], bool]:
    """The facts of olbridge's own runs, of every asset: each task's latest run by then, each
    writer of each asset with its latest write by then (OWN_WRITERS's rows); and whether no own
    run ended after ``moment`` (then every lineage edge counts).

    Read from what the writes keep (:data:`ALL_LATEST_RUNS`, :data:`ALL_WRITERS`; two reads,
    faster on SQLite than one joining them): an asset a kept fact of whose writers is dated after
    ``moment`` (its latest write, a writing task's latest run) cannot be said of then, and its
    writers, and their tasks' latest runs, are read from the runs, for those alone; when more
    than :data:`SOME_AT_MOST` assets are (a moment far back in the history), every run is read
    instead, as before anything was kept."""
    late_run = conn.execute(ANY_LATE_RUN, (moment,)).fetchone() is not None
    if not late_run and conn.execute(ANY_LATE_WRITE, (moment,)).fetchone() is None:
        latest = {(ns, flow, task): (state, end) for ns, flow, task, state, end in conn.execute(ALL_LATEST_RUNS)}
        return latest, conn.execute(ALL_WRITERS), True
    late = {asset_id for (asset_id,) in conn.execute(LATE_WRITERS, (moment, moment))}
    if len(late) > SOME_AT_MOST:
        return (*_own_from_runs(conn, moment), not late_run)
    latest = {
        (ns, flow, task): (state, end) for ns, flow, task, state, end in conn.execute(ALL_LATEST_RUNS) if end <= moment
    }
    theirs = [
        *sql.in_chunks(conn, SOME_OWN_WRITERS, late, (moment,)),
        *sql.in_chunks(conn, SOME_KEPT_WRITERS, late, (moment, moment)),
    ]
    for task in sorted({(w[1], w[2], w[3]) for w in theirs}):  # as of then, kept or not
        found = conn.execute(LATEST_RUN_OF, (*task, moment)).fetchone()
        latest.pop(task, None)
        if found is not None:
            latest[task] = (found[0], found[1])
    rows = [row for row in conn.execute(ALL_WRITERS) if row[0] not in late]
    return latest, itertools.chain(rows, theirs), not late_run


class _Some:
    """The facts of a few assets, and of those upstream of them, read through indexes: their
    rows, rules, writers and checks by their ids; the received runs that wrote them by their jobs'
    output usages (every run's outputs are its job's). Of an asset none of whose own facts the
    writes keep is dated after the moment (as of now, every asset), its writers and their tasks'
    latest runs as kept (``kept_writers``, ``latest_task_runs``), and the edges into it by
    ``lineage_downstream`` alone, a row an edge; of the others, from their runs (the latest of
    each task by ``task_runs_task``; the edges into them by ``lineage_downstream`` and those
    runs). The same facts, of the same assets, as :func:`_whole` reads, at a cost that follows
    the assets, not the runs kept of them."""

    def __init__(self, conn: Connection | Cursor, moment: str, by_metadata: bool) -> None:
        self.conn, self.moment, self.by_metadata = conn, moment, by_metadata
        self.writing_jobs: dict[str, set[tuple[str, str]]] = {}  # each asset's received jobs, read so far
        self.jobs: dict[tuple[str, str], _JobRuns] = {}  # each job's runs, read so far
        self.kept: dict[str, list[tuple[Any, ...]]] = {}  # each asset's writers as kept, read so far
        self.tasks: dict[tuple[str, str, str], tuple[str, str] | None] = {}  # each task's latest run kept

    def _rows(
        self,
        statement: str,
        ids: Iterable[str],
        before: Sequence[Any] = (),
        after: Sequence[Any] = (),
        *,
        mark: str = "?",
    ) -> list[Any]:
        return list(sql.in_chunks(self.conn, statement, ids, before, after, mark=mark))

    def _read_kept(self, ids: Iterable[str]) -> None:
        """The kept writers of those of ``ids`` not read yet, and their tasks' latest runs."""
        unread = set(ids).difference(self.kept)
        self.kept.update((asset_id, []) for asset_id in unread)
        for row in self._rows(SOME_WRITERS_KEPT, unread):
            self.kept[row[0]].append(tuple(row))
        for task in sorted({(r[1], r[2], r[3]) for a in unread for r in self.kept[a]}.difference(self.tasks)):
            found = self.conn.execute(LATEST_RUN_KEPT, task).fetchone()
            self.tasks[task] = None if found is None else (found[0], found[1])

    def _late(self, asset_id: str) -> bool:
        """Whether a kept fact of an asset's writers is dated after the moment (a task's latest
        write of it, or a writing task's latest run): then what is kept cannot say what was."""
        for _id, ns, flow, task, written in self.kept[asset_id]:
            latest = self.tasks[ns, flow, task]
            if (written is not None and written > self.moment) or (latest is not None and latest[1] > self.moment):
                return True
        return False

    def _own_edges(self, ids: set[str]) -> list[Any]:
        """The own lineage into ``ids`` by then (OWN_EDGES's rows into them), each edge read once
        through the index. An edge is made by a run that wrote its downstream end: its task is
        one of that asset's writers kept, and the run ended at the task's latest write at the
        latest. Into an asset written, whose kept writes are all of then or before, every edge
        counts; into the others, those a run ended by then made."""
        self._read_kept(ids)
        by_index = {a for a in ids if any(r[4] is not None for r in self.kept[a]) and not self._late(a)}
        return [
            (up, down)
            for up, down in self._rows(SOME_EDGES_BY_INDEX, ids, mark="(?)")
            if down in by_index or self.conn.execute(EDGE_BY_THEN, (up, down, self.moment)).fetchone() is not None
        ]

    def _own_writers(self, ids: set[str]) -> tuple[Latest, list[Any]]:
        """Each task's latest run by then, and the writers of ``ids`` with their latest writes by
        then (OWN_WRITERS's rows): as kept, where no kept fact of an asset's writers is dated after
        the moment; of the others, from their runs (as :func:`_own` reads them)."""
        moment = self.moment
        self._read_kept(ids)
        late = {asset_id for asset_id in ids if self._late(asset_id)}
        writers: list[Any] = [row for asset_id in sorted(ids - late) for row in self.kept[asset_id]]
        latest: Latest = {}
        for task in {(w[1], w[2], w[3]) for w in writers}:
            found = self.tasks[task]
            if found is not None:
                latest[task] = found
        if late:
            theirs = [
                *self._rows(SOME_OWN_WRITERS, late, before=(moment,)),
                *self._rows(SOME_KEPT_WRITERS, late, before=(moment, moment)),
            ]
            for task in sorted({(w[1], w[2], w[3]) for w in theirs}):
                found = self.conn.execute(LATEST_RUN_OF, (*task, moment)).fetchone()
                latest.pop(task, None)
                if found is not None:
                    latest[task] = (found[0], found[1])
            writers += theirs
        return latest, writers

    def _job(self, job: tuple[str, str]) -> _JobRuns:
        found = self.jobs.get(job)
        if found is None:
            found = self.jobs[job] = _JobRuns(self.conn, job, self.moment)
        return found

    def _received_writes(self, ids: set[str]) -> list[tuple[Any, ...]]:
        """The received runs ended by then that wrote ``ids``, as EXTERNAL_WRITES's rows (their
        outputs as lists): of each job that wrote any of them (its output usages), its runs the
        latest first, as far as each of those it wrote has its latest run and its latest write
        among them (and the runs that ended at the same time as the last of those)."""
        unread = ids.difference(self.writing_jobs)
        self.writing_jobs.update((asset_id, set()) for asset_id in unread)
        for ns, name, asset_id in self._rows(SOME_WRITING_JOBS, unread):
            self.writing_jobs[asset_id].add((ns, name))
        theirs: dict[tuple[str, str], set[str]] = {}
        for asset_id in ids:
            for job in self.writing_jobs[asset_id]:
                theirs.setdefault(job, set()).add(asset_id)
        found: list[tuple[Any, ...]] = []
        for job, assets in sorted(theirs.items()):
            unfound = {(asset_id, fact) for asset_id in assets for fact in ("run", "write")}
            last: str | None = None  # the end of the run that found the last of them
            for _source, state, ended, _inputs, outputs in self._job(job):
                if last is not None and ended < last:
                    break
                found.append((*job, state, ended, outputs))
                mapped = RECEIVED_STATE.get(state or "")
                if mapped is not None:
                    for asset_id in assets.intersection(outputs):
                        unfound.discard((asset_id, "run"))
                        if mapped != "FAILED":
                            unfound.discard((asset_id, "write"))
                if not unfound and last is None:
                    last = ended
        return found

    def _received_edges(self, ids: set[str]) -> list[tuple[str, str]]:
        """The received lineage into ``ids`` by then, each edge (upstream, downstream) once: of
        the edges their jobs keep (SOME_JOB_EDGES), those a run of the job ended by then made
        (its runs read the latest first, as far as they find them) or its JobEvent, seen by
        then, declares."""
        unfound: dict[tuple[str, str], dict[str, set[str]]] = {}  # by job: each downstream end's upstream ends
        for up, down, ns, name in self._rows(SOME_JOB_EDGES, ids):
            if up != down:
                unfound.setdefault((ns, name), {}).setdefault(down, set()).add(up)
        found: set[tuple[str, str]] = set()
        for job, edges in sorted(unfound.items()):
            left = sum(map(len, edges.values()))
            declared = self._job(job).declared()
            for _source, _state, _ended, inputs, outputs in itertools.chain(declared, self._job(job)):
                for down in outputs:
                    ups = edges.get(down)
                    if ups:
                        made = ups.intersection(inputs)
                        ups -= made
                        left -= len(made)
                        found.update((up, down) for up in made)
                if not left:
                    break
        return sorted(found)

    def read(self, wanted: set[str], *, upstream: bool, at_most: int = SOME_AT_MOST) -> _Facts | None:
        """Their facts (None: more than :data:`SOME_AT_MOST` assets are upstream of them, read
        faster whole; or the catalog holds a received run named under several jobs, which the
        reads by job cannot be sure to find)."""
        if self.conn.execute(ANY_RUN_OF_SEVERAL_JOBS).fetchone() is not None:
            return None
        moment = self.moment
        judged = set(wanted)
        own_edges: list[Any] = []
        received: list[tuple[str, str]] = []
        frontier = set(wanted) if upstream else set()
        while frontier:  # up the lineage, a step at a time, while it finds assets not seen
            step = self._own_edges(frontier)
            own_edges += step
            ups = {up for up, _down in step}
            theirs = self._received_edges(frontier)
            received += _kept_edges(theirs)
            ups.update(up for up, _down in theirs)
            kept = self._rows(SOME_KEPT_EDGES, frontier, after=(moment,))
            received += _kept_edges(kept)
            ups.update(up for up, _down in kept)
            frontier = ups - judged
            judged |= frontier
            if len(judged) > at_most:
                return None
        own_edges.sort()  # as OWN_EDGES orders them
        statement = SOME_ASSETS_WITH_METADATA if self.by_metadata else SOME_ASSETS
        rows = self._rows(statement, judged, after=(moment, moment))
        rules = _rules(self._rows(SOME_RULES, judged))
        latest, writers = self._own_writers(judged)
        external = self._received_writes(judged)
        external += [
            (ns, name, state, ended, (asset_id,))
            for ns, name, state, ended, asset_id in self._rows(SOME_KEPT_WRITES, judged, after=(moment,))
        ]
        writes, runs = _runs(latest, writers, external)
        checks = _checks(
            self._rows(SOME_UNKEPT_CHECKS, judged, after=(moment,)),
            self._rows(SOME_LATEST_CHECKS, judged, after=(moment,)),
        )
        return _Facts(rows, rules, writes, runs, checks, _edges(own_edges, received) if upstream else {})


class _JobRuns:
    """A received job's runs ended by a moment, read the latest first (by end, then source),
    a page at a time as far as its readers go, each read once; and its JobEvent's row. Each run
    as (source, state, end, inputs, outputs), its inputs and outputs as lists."""

    FIRST, MOST = 8, 1024  # runs a page reads: at first, and at most

    def __init__(self, conn: Connection | Cursor, job: tuple[str, str], moment: str) -> None:
        self.conn, self.job, self.moment = conn, job, moment
        self.runs: list[tuple[str, str | None, str, list[str], list[str]]] = []
        self.done = False
        self.lists: dict[str, list[str]] = {}  # each JSON list read, parsed once
        self.job_row: list[tuple[str, str | None, str, list[str], list[str]]] | None = None

    def _list(self, text: str) -> list[str]:
        found = self.lists.get(text)
        if found is None:
            found = self.lists[text] = json.loads(text)
        return found

    def __iter__(self) -> Iterator[tuple[str, str | None, str, list[str], list[str]]]:
        n = 0
        while True:
            while n < len(self.runs):
                yield self.runs[n]
                n += 1
            if self.done:
                return
            self._more()

    def _more(self) -> None:
        size = min(max(len(self.runs), self.FIRST), self.MOST)
        if self.runs:
            source, _, ended, _, _ = self.runs[-1]
            page = self.conn.execute(RUNS_OF_JOB_BEFORE, (*self.job, ended, source, size)).fetchall()
        else:
            page = self.conn.execute(LATEST_RUNS_OF_JOB, (*self.job, self.moment, size)).fetchall()
        self.done = len(page) < size
        self.runs += [
            (source, state, ended, self._list(inputs), self._list(outputs))
            for source, state, ended, inputs, outputs in page
        ]

    def declared(self) -> list[tuple[str, str | None, str, list[str], list[str]]]:
        """The job's JobEvent's row where it was seen by then (its edges then known), as a run's."""
        if self.job_row is None:
            source = f"job:{self.job[0]}/{self.job[1]}"
            row = self.conn.execute(JOB_ROW, (source, run_day(source))).fetchone()
            seen = row is not None and row[0] <= self.moment
            self.job_row = [(source, None, row[0], self._list(row[1]), self._list(row[2]))] if seen else []
        return self.job_row


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


def _rules(rows: Iterable[Sequence[Any]]) -> dict[str, FreshnessRule]:
    """The assets' own rules, each text parsed once (thousands of assets share one)."""
    parsed: dict[str, FreshnessRule] = {}
    own: dict[str, FreshnessRule] = {}
    for asset_id, body in rows:
        rule = parsed.get(body)
        own[asset_id] = rule if rule is not None else parsed.setdefault(body, _rule(body))
    return own


def _checks(
    unkept: Iterable[Sequence[Any]], latest: Iterable[Sequence[Any]]
) -> dict[str, tuple[tuple[Assertion, ...], str | None]]:
    """Each asset's latest checks reported by then, with who reported them and when (those of an
    asset recorded before checks were kept: its latest, from its last update on): from
    UNKEPT_CHECKS's rows, then LATEST_CHECKS's."""
    out: dict[str, tuple[tuple[Assertion, ...], str | None]] = {}
    for asset_id, assertions, _updated in unkept:
        out[asset_id] = (_own_checks(assertions), "the last run recorded")
    for asset_id, reported, reporter, assertions in latest:
        out[asset_id] = (_own_checks(assertions), f"{reporter} at {reported}")
    return out


def latest_checks(conn: Connection | Cursor, ids: Iterable[str], as_of: datetime) -> dict[str, tuple[Assertion, ...]]:
    """The latest checks reported by ``as_of`` of each of the assets of ``ids`` that has any
    (those the health judges: a run's, a received event's ``dataQualityAssertions``, ``dbt
    import``'s), read through the indexes."""
    moment, wanted = format_time(as_of), list(dict.fromkeys(ids))
    found = _checks(
        sql.in_chunks(conn, SOME_UNKEPT_CHECKS, wanted, (), (moment,)),
        sql.in_chunks(conn, SOME_LATEST_CHECKS, wanted, (), (moment,)),
    )
    return {asset_id: assertions for asset_id, (assertions, _from) in found.items()}


def _own_checks(text: str | None) -> tuple[Assertion, ...]:
    return tuple(Assertion(**a) for a in json.loads(text)) if text else ()


def _runs(
    latest: Mapping[tuple[str, str, str], tuple[str, str]],
    own_writers: Iterable[Sequence[Any]],
    external_writes: Iterable[Sequence[Any]],
) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """The last successful write of each asset, and the state of its latest run that ended, with
    the run's label ((state, label)): from the latest run of each task (by its key), the rows of
    OWN_WRITERS (and KEPT_WRITERS) and those of EXTERNAL_WRITES (and KEPT_WRITES), their outputs
    as lists."""
    last_write: dict[str, str] = {}
    ended_at: dict[str, str] = {}
    last_run: dict[str, tuple[str, str]] = {}
    write_of, ended_of, latest_of = last_write.get, ended_at.get, latest.get
    for asset_id, ns, flow, task, written in own_writers:
        if written is not None and written > write_of(asset_id, ""):
            last_write[asset_id] = written
        found = latest_of((ns, flow, task))
        if found is not None:
            state, ended = found
            before = ended_of(asset_id)
            label = f"{ns}/{flow}.{task} at {ended}"
            # of two tasks' runs ended at once, the one of the task that sorts last
            if before is None or ended > before or (ended == before and label > last_run[asset_id][1]):
                ended_at[asset_id] = ended
                last_run[asset_id] = (state, label)
    # each asset's latest received run: of two ended at once, the one whose label, then state,
    # sorts last (whatever order the rows come in)
    received: dict[str, tuple[str, str, str]] = {}
    for job_ns, job_name, state, ended, outputs in external_writes:
        run = received_run(job_ns, job_name, state, ended)
        if run is None:
            continue
        for asset_id in outputs:
            if run[2] != "FAILED" and ended > last_write.get(asset_id, ""):
                last_write[asset_id] = ended
            if run > received.get(asset_id, ("",)):
                received[asset_id] = run
    for asset_id, (ended, label, state) in received.items():
        if ended >= ended_at.get(asset_id, ""):  # a received run and an own one ended at once: the received
            last_run[asset_id] = (state, label)
    return last_write, last_run


def _kept_edges(rows: Iterable[Sequence[Any]]) -> list[tuple[str, str]]:
    """KEPT_EDGES's rows as EXTERNAL_EDGES's: (inputs, outputs) as JSON texts, one of each."""
    return [(json.dumps([up]), json.dumps([down])) for up, down in rows]


def _edges(own: Iterable[Sequence[Any]], received: Iterable[Sequence[Any]]) -> dict[str, list[str]]:
    """Each asset's downstream assets, by id, from OWN_EDGES's rows (olbridge's lineage, sorted
    and distinct) and EXTERNAL_EDGES's (the receiver's, from its runs' inputs and outputs, merged
    in where there is any)."""
    downstream: dict[str, list[str]] = {}
    for up, down in own:
        found = downstream.get(up)
        if found is None:
            downstream[up] = [down]
        else:
            found.append(down)
    merged: dict[str, set[str]] = {}
    for inputs, outputs in received:
        downs = json.loads(outputs)
        for up in json.loads(inputs):
            merged.setdefault(up, set()).update(down for down in downs if down != up)
    for up, downs in merged.items():
        downstream[up] = sorted(downs.union(downstream.get(up, ())))
    return downstream


__all__ = [
    "AssetHealth",
    "assess",
    "assess_few",
    "collector_held",
    "get_rule",
    "latest_checks",
    "record_checks",
    "set_rule",
]
