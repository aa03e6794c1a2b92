"""0017: received data-quality assertions kept as checks, and what judging health reads by (issue 34).

- ``asset_checks.check_rank``: the receiver now records the ``dataQualityAssertions`` a received
  event gives a dataset as a check of its asset, at the event's time, by the event's job (as
  olbridge's own runs' checks); of two events of one time, the higher-ranked one's (its time and
  digest) are kept. Before, health read them from the received events themselves, so retention
  deleting an event forgot its assertions. The assertions of the events already stored are
  copied here (an input whose facets a token could not apply, as its event's warning says, is
  left out, as the receiver leaves it out now).
- ``task_runs_task``: a task's runs in order of end, so that health finds the latest run of each
  task by then with one look into it a run (rather than sorting every run).
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from bridge.catalog.rows import assertions_json
from bridge.model.received import dataset_assertions

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

TEXT = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
PAGE = 1000

EVENTS = sa.text(
    "SELECT pk, event_time, digest, warnings, body FROM received_events "
    "WHERE pk > :after AND body LIKE '%dataQualityAssertions%' ORDER BY pk LIMIT :page"
)
BINDING = sa.text("SELECT asset_id FROM external_datasets WHERE ol_namespace = :namespace AND ol_name = :name")
PUT = sa.text(
    "INSERT INTO asset_checks (asset_id, reported_at, reporter, assertions, check_rank) "
    "VALUES (:asset_id, :reported_at, :reporter, :assertions, :check_rank) "
    "ON CONFLICT (asset_id, reported_at) DO UPDATE "
    "SET reporter = excluded.reporter, assertions = excluded.assertions, check_rank = excluded.check_rank "
    "WHERE asset_checks.check_rank IS NULL OR excluded.check_rank > asset_checks.check_rank"
)


def upgrade() -> None:
    op.add_column("asset_checks", sa.Column("check_rank", TEXT, nullable=True))
    op.create_index("task_runs_task", "task_runs", ["flow_namespace", "flow_id", "task_id", "ended_at", "pk"])
    _copy_received_checks(op.get_bind())


def _copy_received_checks(connection: Any) -> None:
    bound: dict[tuple[str, str], str | None] = {}

    def asset_of(namespace: Any, name: Any) -> str | None:
        if not isinstance(namespace, str) or not isinstance(name, str):
            return None
        if (namespace, name) not in bound:
            row = connection.execute(BINDING, {"namespace": namespace, "name": name}).fetchone()
            bound[namespace, name] = row[0] if row else None
        return bound[namespace, name]

    after = 0
    while True:
        rows = connection.execute(EVENTS, {"after": after, "page": PAGE}).fetchall()
        if not rows:
            return
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for pk, event_time, digest, warnings, body in rows:
            after = pk
            rank = f"{event_time}|{digest}"
            for asset_id, reporter, assertions in _checks(json.loads(body), json.loads(warnings or "[]"), asset_of):
                kept = found.get((asset_id, event_time))
                if kept is None or rank > kept["check_rank"]:
                    found[asset_id, event_time] = {
                        "asset_id": asset_id,
                        "reported_at": event_time,
                        "reporter": reporter,
                        "assertions": assertions,
                        "check_rank": rank,
                    }
        if found:
            connection.execute(PUT, [found[key] for key in sorted(found)])


def _checks(event: Any, warnings: list[Any], asset_of: Any) -> list[tuple[str, str, str]]:
    """(asset id, reporter, assertions as JSON) of each dataset of a stored event with any."""
    if not isinstance(event, dict):
        return []
    job = event.get("job")
    if isinstance(job, dict):
        reporter = f"{job.get('namespace')}/{job.get('name')}"
        # the inputs whose facets a token could not apply (the receiver's warning names them)
        bare = {
            str(w).split(":", 1)[0]
            for w in warnings
            if isinstance(w, str) and w.startswith("/inputs/") and "may not write namespace" in w
        }
        datasets = [
            ds
            for key in ("inputs", "outputs")
            for index, ds in enumerate(event.get(key) or [])
            if f"/{key}/{index}" not in bare
        ]
    else:
        reporter = str(event.get("producer"))
        datasets = [event["dataset"]] if isinstance(event.get("dataset"), dict) else []
    out = []
    for ds in datasets:
        if not isinstance(ds, dict):
            continue
        assertions = dataset_assertions(ds)
        asset_id = asset_of(ds.get("namespace"), ds.get("name")) if assertions else None
        if asset_id is not None:
            out.append((asset_id, reporter, assertions_json(assertions) or "[]"))
    return out
