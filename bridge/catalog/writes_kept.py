"""What health reads of the runs, kept: of those retention deletes (migration 0021), and of
olbridge's own as they are written (migration 0025).

Health (:mod:`bridge.catalog.health`) reads an asset's last write and last run from the runs that
wrote it. Retention (:mod:`bridge.catalog.retention`) deletes runs, keeping only the latest of each
job or task, so an asset last written by an older run would lose its last write (a stale asset
turning UNKNOWN) and its last run. Before it deletes a batch of runs, in the same transaction, it
folds what health reads of them into two tables, which health reads beside the runs:

- :func:`fold_received`: of the receiver's runs, each asset's latest run (``kept_writes``, fact
  ``run``) and its latest that wrote it successfully (fact ``write``), as health orders them
  (:func:`received_run`), each kept only when later than the one kept before; and each edge of
  their lineage (an input and an output of one run) with the earliest end of a run that made it
  (``kept_edges``, migration 0033), for the at-risk walk;
- :func:`fold_own`: of olbridge's own, each task that wrote an asset with its latest write
  (``kept_writers``): the rows health's writers aggregate gives of usages, so a task that wrote
  an asset once is still one of its writers (its latest run, kept, is the asset's last run); and
  apart, the latest write of the runs that go (``gone_write``, migration 0038), which a moment in
  the window reads where the task's latest write is after it (retention deletes only runs that a
  run of their task ended before the window follows: each went before it);
  and each edge of their lineage with the earliest end of a run that made it (``kept_edges``,
  as the received runs'), so that an asset downstream of one that FAILs stays at risk.

As of a time, a fact after it is left out: as of a time older than the window, only the latest of
what went is known.

Olbridge's own task runs keep theirs as they are written, in the transaction that writes them
(:func:`keep_own`): each task's latest run that ended (``latest_task_runs``), and each writer of an
asset with its latest write (``kept_writers``, the same rows as above; a task whose run was to
write the asset and did not, FAILED, KILLED, CANCELLED or RETRIED, with no write: the run's
``unwritten_outputs``), each moved only forward,
so writers side by side leave the latest whatever their order. Health reads these two tables
(:func:`bridge.catalog.health._own`) instead of aggregating every run a catalog holds: their rows
follow the tasks and what they write, not the history. :data:`FILL_LATEST_RUNS` and
:data:`FILL_WRITERS` make them from the runs (a migrated catalog; a catalog written in bulk), and
:data:`FILL_UNWRITTEN_WRITERS` adds the writers of failed runs that wrote nothing (a catalog
written in bulk, the tests' check of what the writes keep; a catalog migrated to schema 29 has
none to add).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from bridge.catalog import sql
from bridge.catalog.engine import Cursor

# the receiver's run states as the model's (a run's other states say nothing of its outputs)
RECEIVED_STATE = {"COMPLETE": "SUCCESS", "FAIL": "FAILED", "ABORT": "FAILED"}

_RUNS_GOING = """
    SELECT job_namespace, job_name, state, ended_at, outputs, inputs FROM external_sources
    WHERE source IN ({values}) AND run_id IS NOT NULL AND ended_at IS NOT NULL
"""
# an edge of a run that goes, kept with the earliest end of a run that made it
_PUT_EDGE = """
    INSERT INTO kept_edges (upstream_id, downstream_id, since) VALUES (?, ?, ?)
    ON CONFLICT (upstream_id, downstream_id) DO UPDATE SET since = excluded.since
    WHERE excluded.since < kept_edges.since
"""
_KEPT_OF = (
    "SELECT asset_id, fact, job_namespace, job_name, state, ended_at FROM kept_writes WHERE asset_id IN ({values})"
)
_PUT_KEPT = """
    INSERT INTO kept_writes (asset_id, fact, job_namespace, job_name, state, ended_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (asset_id, fact) DO UPDATE SET job_namespace = excluded.job_namespace,
        job_name = excluded.job_name, state = excluded.state, ended_at = excluded.ended_at
    WHERE excluded.ended_at >= kept_writes.ended_at
"""
_WRITERS_GOING = """
    SELECT u.asset_id, t.flow_namespace, t.flow_id, t.task_id, max(t.ended_at)
    FROM usages u JOIN task_runs t ON t.pk = u.task_run_pk
    WHERE t.pk IN ({values}) AND u.direction = 'output' AND t.ended_at IS NOT NULL
    GROUP BY u.asset_id, t.flow_namespace, t.flow_id, t.task_id
"""
# the lineage of own runs that go, each edge with the earliest end of a run that made it (a run
# that never ended made no edge for health)
_EDGES_GOING = """
    SELECT l.upstream_id, l.downstream_id, min(t.ended_at)
    FROM lineage l JOIN task_runs t ON t.pk = l.task_run_pk
    WHERE t.pk IN ({values}) AND t.ended_at IS NOT NULL
    GROUP BY l.upstream_id, l.downstream_id
"""
# ... each a writer with its write, kept as its latest write (where later) and apart as the latest
# of the runs that went (of a task whose later run, kept, wrote the asset again: last_write is
# that run's)
_PUT_GONE = """
    INSERT INTO kept_writers (asset_id, flow_namespace, flow_id, task_id, last_write, gone_write)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (asset_id, flow_namespace, flow_id, task_id) DO UPDATE SET
        last_write = CASE WHEN kept_writers.last_write IS NULL OR excluded.last_write > kept_writers.last_write
                          THEN excluded.last_write ELSE kept_writers.last_write END,
        gone_write = CASE WHEN kept_writers.gone_write IS NULL OR excluded.gone_write > kept_writers.gone_write
                          THEN excluded.gone_write ELSE kept_writers.gone_write END
"""
_PUT_WRITER = """
    INSERT INTO kept_writers (asset_id, flow_namespace, flow_id, task_id, last_write) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (asset_id, flow_namespace, flow_id, task_id) DO UPDATE SET last_write = excluded.last_write
    WHERE kept_writers.last_write IS NULL OR excluded.last_write > kept_writers.last_write
"""

# a task's latest run that ended, as the runs now say (its index, task_runs_task, read backwards),
# a SKIPPED one left out: a skip is no run of the task for health, and neither fails nor mends what
# the task writes
_LATEST_OF_TASK = """
    SELECT pk, state, ended_at FROM task_runs
    WHERE flow_namespace = ? AND flow_id = ? AND task_id = ? AND ended_at IS NOT NULL AND state <> 'SKIPPED'
    ORDER BY ended_at DESC, pk DESC LIMIT 1
"""
# ... kept if later than the one kept (by end, then key: a writer side by side may have kept a later
# one its own transaction sees), or if the one kept is the run just written (rewritten: it may have
# moved back, or lost its end)
_PUT_LATEST_RUN = """
    INSERT INTO latest_task_runs (flow_namespace, flow_id, task_id, ended_at, run_pk, state) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (flow_namespace, flow_id, task_id) DO UPDATE SET ended_at = excluded.ended_at,
        run_pk = excluded.run_pk, state = excluded.state
    WHERE excluded.ended_at > latest_task_runs.ended_at
       OR (excluded.ended_at = latest_task_runs.ended_at AND excluded.run_pk >= latest_task_runs.run_pk)
       OR latest_task_runs.run_pk = ?
"""
# ... or none: the run just written, kept, no longer ended, and no other run of its task has
_FORGET_LATEST_RUN = (
    "DELETE FROM latest_task_runs WHERE flow_namespace = ? AND flow_id = ? AND task_id = ? AND run_pk = ?"
)
# the two tables made from the runs (the first empty; the second may hold the writers of runs
# retention deleted)
FILL_LATEST_RUNS = """
    INSERT INTO latest_task_runs (flow_namespace, flow_id, task_id, ended_at, run_pk, state)
    SELECT t.flow_namespace, t.flow_id, t.task_id, t.ended_at, t.pk, t.state FROM task_runs t
    WHERE t.ended_at IS NOT NULL AND t.state <> 'SKIPPED' AND NOT EXISTS (
        SELECT 1 FROM task_runs n
        WHERE n.flow_namespace = t.flow_namespace AND n.flow_id = t.flow_id AND n.task_id = t.task_id
          AND n.ended_at IS NOT NULL AND n.state <> 'SKIPPED'
          AND (n.ended_at > t.ended_at OR (n.ended_at = t.ended_at AND n.pk > t.pk)))
    ON CONFLICT (flow_namespace, flow_id, task_id) DO NOTHING
"""
FILL_WRITERS = """
    INSERT INTO kept_writers (asset_id, flow_namespace, flow_id, task_id, last_write)
    SELECT u.asset_id, t.flow_namespace, t.flow_id, t.task_id, max(t.ended_at)
    FROM usages u JOIN task_runs t ON t.pk = u.task_run_pk
    WHERE u.direction = 'output' AND t.ended_at IS NOT NULL
    GROUP BY u.asset_id, t.flow_namespace, t.flow_id, t.task_id
    ON CONFLICT (asset_id, flow_namespace, flow_id, task_id) DO UPDATE SET last_write = excluded.last_write
    WHERE kept_writers.last_write IS NULL OR excluded.last_write > kept_writers.last_write
"""
# ... and the tasks of the runs that were to write an asset and failed to, with no write (after
# FILL_WRITERS: where a task wrote the asset too, its write stays; a skipped run's are none's)
FILL_UNWRITTEN_WRITERS = """
    INSERT INTO kept_writers (asset_id, flow_namespace, flow_id, task_id, last_write)
    SELECT DISTINCT o.asset_id, t.flow_namespace, t.flow_id, t.task_id, NULL
    FROM unwritten_outputs o JOIN task_runs t ON t.pk = o.task_run_pk
    WHERE t.ended_at IS NOT NULL AND t.state <> 'SKIPPED'
    ON CONFLICT (asset_id, flow_namespace, flow_id, task_id) DO NOTHING
"""

# what health reads, as of a time, of every asset or of a few (:func:`sql.only`); the rows are
# those of its statements of the runs: a received run's (job ns, job name, state, end, outputs),
# with the one asset as its outputs; an own writer's (asset, flow ns, flow, task, latest write by
# then)
KEPT_WRITES, SOME_KEPT_WRITES = sql.only(
    "SELECT job_namespace, job_name, state, ended_at, asset_id FROM kept_writes WHERE {only}ended_at <= ?", "asset_id"
)
KEPT_WRITERS, SOME_KEPT_WRITERS = sql.only(
    """
    SELECT asset_id, flow_namespace, flow_id, task_id,
           CASE WHEN last_write <= ? THEN last_write WHEN gone_write <= ? THEN gone_write END
    FROM kept_writers WHERE {only}1 = 1
    """,
    "asset_id",
)


def received_run(job_namespace: str, job_name: str, state: str | None, ended: str) -> tuple[str, str, str] | None:
    """A received run as health orders them: (end, label, state as the model's); of two ended
    at once, the one whose label, then state, sorts last is the later. None: a state that says
    nothing of its outputs."""
    mapped = RECEIVED_STATE.get(state or "")
    if mapped is None:
        return None
    return (ended, f"{job_namespace}/{job_name} at {ended}", mapped)


def fold_received(cur: Cursor, sources: Sequence[str]) -> None:
    """Keep what health reads of the received runs ``sources`` (keys of ``external_sources``),
    in the caller's transaction, before it deletes them."""
    # each asset's candidates: its latest run and its latest successful one, with their rows
    found: dict[tuple[str, str], tuple[tuple[str, str, str], tuple[str, str, str, str]]] = {}
    edges: dict[tuple[str, str], str] = {}  # the runs' edges (health's at-risk walk), each at its first end
    for job_ns, job_name, state, ended, outputs, inputs in list(sql.in_chunks(cur, _RUNS_GOING, sources)):
        downs = json.loads(outputs)
        for up in json.loads(inputs):
            for down in downs:
                if down != up and ended < edges.get((up, down), "~"):
                    edges[up, down] = ended
        run = received_run(job_ns, job_name, state, ended)
        if run is None:
            continue
        for asset_id in json.loads(outputs):
            for fact in ("run", "write") if run[2] != "FAILED" else ("run",):
                held = found.get((asset_id, fact))
                if held is None or run > held[0]:
                    found[asset_id, fact] = (run, (job_ns, job_name, state, ended))
    cur.executemany(_PUT_EDGE, [(up, down, since) for (up, down), since in sorted(edges.items())])
    if not found:
        return
    assets = {asset_id for asset_id, _fact in found}
    for asset_id, fact, job_ns, job_name, state, ended in list(sql.in_chunks(cur, _KEPT_OF, assets)):
        kept = received_run(job_ns, job_name, state, ended)
        held = found.get((asset_id, fact))
        if held is not None and kept is not None and kept >= held[0]:
            del found[asset_id, fact]  # what is kept is as late: left as it is
    cur.executemany(_PUT_KEPT, [(asset_id, fact, *row) for (asset_id, fact), (_, row) in sorted(found.items())])


def keep_own(
    cur: Cursor,
    task: tuple[str, str, str],
    run_pk: int,
    ended_at: str | None,
    written: Sequence[str],
    unwritten: Sequence[str] = (),
) -> None:
    """Keep what health reads of an own task run as it is written (in the caller's transaction,
    after the run's row): its task's latest run that ended, as the runs now say (a run written
    again, not ended before, may have moved its end back or lost it), the run's write of each
    asset of ``written`` (at its end: only a run that ended writes outputs), and its task as a
    writer, with no write, of each asset of ``unwritten`` (the outputs it was to write and did
    not: its run, the task's latest, FAILs them)."""
    found = cur.execute(_LATEST_OF_TASK, task).fetchone()
    if found is None:
        cur.execute(_FORGET_LATEST_RUN, (*task, run_pk))
    else:
        cur.execute(_PUT_LATEST_RUN, (*task, found[2], found[0], found[1], run_pk))
    if written and ended_at is not None:
        cur.executemany(_PUT_WRITER, [(asset_id, *task, ended_at) for asset_id in sorted(set(written))])
    if unwritten and ended_at is not None:
        cur.executemany(_PUT_WRITER, [(asset_id, *task, None) for asset_id in sorted(set(unwritten))])


def fold_own(cur: Cursor, pks: Sequence[int]) -> None:
    """Keep what health reads of olbridge's own task runs ``pks`` (the tasks that wrote each
    asset, with their latest write; the edges of their lineage, each with its first end), in the
    caller's transaction, before it deletes them."""
    rows = sorted(tuple(row) for row in sql.in_chunks(cur, _WRITERS_GOING, pks))
    cur.executemany(_PUT_GONE, [(*row, row[4]) for row in rows])
    edges: dict[tuple[str, str], str] = {}
    for up, down, ended in sql.in_chunks(cur, _EDGES_GOING, pks):
        if ended < edges.get((up, down), "~"):
            edges[up, down] = ended
    cur.executemany(_PUT_EDGE, [(up, down, since) for (up, down), since in sorted(edges.items())])


__all__ = [
    "FILL_LATEST_RUNS",
    "FILL_UNWRITTEN_WRITERS",
    "FILL_WRITERS",
    "KEPT_WRITERS",
    "KEPT_WRITES",
    "RECEIVED_STATE",
    "SOME_KEPT_WRITERS",
    "SOME_KEPT_WRITES",
    "fold_own",
    "fold_received",
    "keep_own",
    "received_run",
]
