"""Builders for test records, and the helpers every test file shares: running the CLI in process,
and the catalog's contents to compare."""

from __future__ import annotations

import contextlib
import copy
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

import attrs
import requests
from click.testing import CliRunner

from bridge.catalog import Catalog, schema
from bridge.cli import cli
from bridge.model import AssetDeclaration, FailureBehavior, TaskRun, TaskRunKey, TaskState
from tests.backend import free_port
from tests.conftest import at


def invoke(db: Path | str, *args: str, input: str | None = None) -> tuple[int, str, str]:
    """``olbridge --catalog DB ARGS`` in process: its exit status, stdout and stderr. An exception
    other than SystemExit fails the test: a user would see it as a traceback."""
    result = CliRunner().invoke(cli, ["--catalog", str(db), *args], input=input)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


@attrs.define
class Served:
    """An ``olbridge serve`` process started by :func:`serve_process`; once its block has ended,
    its exit status and what it wrote."""

    url: str
    process: subprocess.Popen[str]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""


def _written(file: IO[str]) -> str:
    file.flush()
    file.seek(0)
    return file.read()


@contextlib.contextmanager
def serve_process(
    catalog: Path | str,
    *options: str,
    env: Mapping[str, str] | None = None,
    ready_timeout: float = 30.0,
    stop_timeout: float = 30.0,
) -> Iterator[Served]:
    """``olbridge serve`` (``python -m bridge``) with ``options`` on a free loopback port, ``env``
    its whole environment (None: this one's), until its ``/readyz`` answers 200: a process that
    exits first, or is not ready within ``ready_timeout`` seconds, fails the test with its stderr.
    When the block ends it is stopped with SIGTERM (killed after ``stop_timeout`` seconds) unless
    the test reaped it; the :class:`Served` then holds its exit status, stdout and stderr (kept in
    files, so that a chatty server never blocks on a full pipe)."""
    port = free_port()
    command = [sys.executable, "-m", "bridge", "--catalog", str(catalog), "serve", "--port", str(port), *options]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            command, env=None if env is None else dict(env), stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True
        )
        served = Served(f"http://127.0.0.1:{port}", process)
        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                assert process.poll() is None, f"olbridge serve exited with {process.returncode}: {_written(err)}"
                try:
                    if requests.get(f"{served.url}/readyz", timeout=5).status_code == 200:
                        break
                except (requests.ConnectionError, requests.Timeout):  # not listening, or still starting
                    pass
                assert time.monotonic() < deadline, (
                    f"olbridge serve not ready in {ready_timeout:.0f} s: {_written(err)}"
                )
                time.sleep(0.1)
            yield served
        finally:
            if process.poll() is None:  # not reaped by the test itself
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=stop_timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=30)
            served.returncode = process.returncode
            served.stdout, served.stderr = _written(out), _written(err)


# the tables of what the catalog records (not its outbox, import positions or checkpoints)
RECORD_TABLES = ("assets", "executions", "task_runs", "usages", "lineage", "asset_changes", "declared_jobs")


def in_threads(work: Callable[..., object], argsets: Sequence[tuple[Any, ...]], *, timeout: float) -> None:
    """``work(*args)`` for each of ``argsets``, each on a thread of its own, all at once; fails the
    test when one raised, or did not finish within ``timeout`` seconds in all."""
    failures: list[BaseException] = []

    def guarded(*args: Any) -> None:
        try:
            work(*args)
        except BaseException as exc:  # said by the test, below
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=args) for args in argsets]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(timeout=max(deadline - time.monotonic(), 0.0))
    assert not any(thread.is_alive() for thread in threads), f"a thread did not finish within {timeout:g} s"
    assert not failures, failures


def snapshot(catalog: Catalog) -> tuple[object, ...]:
    """Every row of the record tables, to show that an operation changed nothing, or that two
    inputs recorded the same thing."""
    conn = catalog._conn
    return tuple(conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in RECORD_TABLES)


def decl(asset_id: str, **fields: Any) -> AssetDeclaration:
    return AssetDeclaration.create(asset_id, **fields)


def run(
    task: str = "task",
    *,
    inputs: tuple[AssetDeclaration, ...] = (),
    outputs: tuple[AssetDeclaration, ...] = (),
    state: str = "SUCCESS",
    start: datetime | None = None,
    end: datetime | None = None,
    execution: str = "e1",
    namespace: str = "company.data",
    flow: str = "flow",
    behavior: str = "WARN",
    error: str | None = None,
) -> TaskRun:
    parsed = TaskState.parse(state)
    started = start or at(0)
    return TaskRun(
        key=TaskRunKey.create(namespace, flow, task, execution, f"{execution}.{task}"),
        state=parsed,
        started_at=started,
        ended_at=end or (started + timedelta(minutes=1) if parsed.is_terminal else None),
        inputs=inputs,
        outputs=outputs,
        failure_behavior=FailureBehavior.parse(behavior),
        error=error,
    )


def table_contents(catalog: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of a catalog, keys and all, to show that a refused input changed
    nothing (:func:`catalog_state` with the keys)."""
    return catalog_state(catalog, keys=True)


# keys a catalog gives rows in the order it takes them, which is not theirs: two catalogs that took
# the same events in other orders (other writers, other groups) differ only there (and, a health
# watch live, in how many marks an asset has for it: a row a group)
TAKEN_ORDER_KEYS = {"received_events": ("pk",), "health_marks": ("seq",)}


def catalog_state(catalog: Any, *, keys: bool = False) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the schema, in one order whatever the engine (sorted by their
    repr: SQLite and PostgreSQL sort NULLs apart), to compare two catalogs table by table; without
    ``keys``, without :data:`TAKEN_ORDER_KEYS` (a received event's pk)."""
    conn = catalog._conn
    found: dict[str, list[tuple[Any, ...]]] = {}
    for table in schema.metadata.sorted_tables:
        left_out = () if keys else TAKEN_ORDER_KEYS.get(table.name, ())
        columns = ", ".join(c.name for c in table.columns if c.name not in left_out)
        rows = conn.execute(f"SELECT {columns} FROM {table.name}").fetchall()
        found[table.name] = sorted((tuple(row) for row in rows), key=repr)
    return found


RUN_EVENT_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
DATASET_EVENT_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
JOB_EVENT_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
PRODUCER = "https://github.com/example/producer/tree/1.0"


def ol_run_event(
    event_type: str = "COMPLETE",
    *,
    run_id: str = "0194a1b2-0000-7000-8000-000000000001",
    job: tuple[str, str] = ("airflow", "dag.task"),
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    time: str = "2025-03-01T08:00:00Z",
    **extra: Any,
) -> dict[str, Any]:
    """An external RunEvent as a producer would send it."""
    return {
        "eventType": event_type,
        "eventTime": time,
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_URL,
        "run": {"runId": run_id},
        "job": {"namespace": job[0], "name": job[1]},
        "inputs": inputs or [],
        "outputs": outputs or [],
        **extra,
    }


def ol_dataset(namespace: str, name: str, **facets: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": namespace, "name": name}
    if facets:
        out["facets"] = {
            key: {
                "_producer": PRODUCER,
                "_schemaURL": f"https://openlineage.io/spec/facets/1-0-1/{key[0].upper()}{key[1:]}DatasetFacet.json",
                **value,
            }
            for key, value in facets.items()
        }
    return out


def mutated(event: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``event`` with the value at ``path`` (``run/runId``, ``inputs/0/name``)
    replaced, or removed when ``value`` is ``KeyError``."""
    out = copy.deepcopy(event)
    *parents, last = path.split("/")
    target: Any = out
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return out


def terminated(command: list[str], ready: Callable[[], bool]) -> tuple[int, str, str]:
    """Run ``command``, send it SIGTERM once ``ready``, and give its exit status, stdout and stderr."""
    from tests.backend import wait_for

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(ready, timeout=60)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, out, err
