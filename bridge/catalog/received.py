"""The receiver's tables read back whole: their row counts, and the external runs and jobs with
their inputs and outputs (the tests' and the benchmarks' view of what the receiver kept).
"""

from __future__ import annotations

import json

from bridge.catalog import sql_received
from bridge.catalog.engine import Connection, Cursor
from bridge.catalog.query import ExternalSource


def count_received(conn: Connection | Cursor) -> dict[str, int]:
    """Rows of the receiver's tables: events, datasets, sources (runs and jobs), usages, edges."""
    return {name: int(conn.execute(q).fetchone()[0]) for name, q in sql_received.COUNT_TABLE.items()}


def external_sources(conn: Connection | Cursor) -> list[ExternalSource]:
    """External runs and jobs with their inputs and outputs, in first-seen order."""
    found = []
    for row in conn.execute(sql_received.SELECT_SOURCES).fetchall():
        source, job_ns, job_name, run_id, parent, state, started, ended, first, last, producer, ins, outs = row
        run = (run_id, parent, state, started, ended, first, last, producer)
        inputs, outputs = tuple(json.loads(ins)), tuple(json.loads(outs))
        found.append(ExternalSource(source, job_ns, job_name, *run, inputs, outputs))
    return found


__all__ = ["count_received", "external_sources"]
