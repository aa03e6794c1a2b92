"""``runs list`` on a catalog of many runs: the newest first, a line on stderr saying which of how
many are shown when not all are, and pages by ``--offset``; ``--own`` with ``--external`` and a
bad time are usage errors (exit status 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.catalog import Catalog
from bridge.catalog.runs import Runs
from tests.conftest import at
from tests.helpers import invoke, run

RUNS = 10_000


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A catalog of 10,000 task runs of one flow, run i started at hour i (the catalog's own API,
    in one transaction)."""
    db = tmp_path_factory.mktemp("many") / "c.db"
    with Catalog(db) as catalog:
        catalog.record_task_runs([run("t", execution=f"e{i}", start=at(i * 60)) for i in range(RUNS)])
    return db


def listed(db: Path, *args: str) -> tuple[list[dict[str, Any]], str]:
    code, out, err = invoke(db, "runs", "list", "--json", *args)
    assert code == 0, err
    return json.loads(out), err


def executions(found: list[dict[str, Any]]) -> list[int]:
    return [int(view["taskRun"]["executionId"][1:]) for view in found]


def test_the_newest_first_and_a_line_saying_how_many_are_not_shown(many: Path) -> None:
    found, err = listed(many)
    assert executions(found) == list(range(RUNS - 1, RUNS - 1001, -1))
    assert err == "showing runs 1-1,000 of 10,000, newest first; --offset 1000 shows the next\n"
    found, err = listed(many, "--limit", "2")
    assert executions(found) == [RUNS - 1, RUNS - 2]
    assert "showing runs 1-2 of 10,000" in err


def test_pages_by_offset_cover_every_run_once(many: Path) -> None:
    seen: list[int] = []
    for offset in range(0, RUNS, 3000):
        found, err = listed(many, "--limit", "3000", "--offset", str(offset))
        seen += executions(found)
        last = min(offset + 3000, RUNS)
        assert err.startswith(f"showing runs {offset + 1:,}-{last:,} of 10,000")
        assert ("--offset" in err) == (last < RUNS)
    assert seen == list(range(RUNS - 1, -1, -1))
    found, err = listed(many, "--offset", str(RUNS + 5))
    assert found == [] and err == "no runs past --offset 10,005: there are 10,000\n"  # was "runs 10,005-10,005"


def test_text_has_a_header_and_all_shown_says_nothing(many: Path) -> None:
    code, out, err = invoke(many, "runs", "list", "--since", at((RUNS - 3) * 60).isoformat())
    assert code == 0 and err == ""
    header, *rows = out.splitlines()
    assert header.startswith("runId\torigin\tstate\tstarted")
    assert len(rows) == 3


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--own", "--external"), "--own and --external"),
        (("--since", "garbage"), "--since"),
        (("--since", "2025-02-01", "--until", "2025-01-01"), "is not before"),
        (("--state", "done"), "not a state"),
    ],
)
def test_bad_values_are_usage_errors(many: Path, args: tuple[str, ...], said: str) -> None:
    code, out, err = invoke(many, "runs", "list", *args)
    assert code == 2 and out == "" and said in err, err


def test_a_page_reads_the_runs_up_to_it_not_every_run(many: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``runs list`` made a view of every run the filters selected, to count them and choose its
    page (a year of daily runs of 3,000 tasks: 38 s and 630 MB for twenty runs): it reads the
    newest runs up to its page by the start index, counted by the database, so a page costs what
    the pages up to it hold; a job or a state is tested by the database, as the view names it."""
    made = 0
    own = Runs._own

    def counted(self: Runs, *args: Any, **kwargs: Any) -> Any:
        nonlocal made
        made += 1
        return own(self, *args, **kwargs)

    monkeypatch.setattr(Runs, "_own", counted)
    found, err = listed(many, "--limit", "20", "--offset", "40")
    assert executions(found) == list(range(RUNS - 41, RUNS - 61, -1))
    assert f"showing runs 41-60 of {RUNS:,}" in err
    assert made <= 60 + 20  # the runs up to the page, then the page's own with their facets
    made = 0
    found, err = listed(many, "--job", "flow.t", "--state", "COMPLETE", "--limit", "5")
    assert executions(found) == list(range(RUNS - 1, RUNS - 6, -1)) and f"of {RUNS:,}" in err
    assert made <= 5 + 5
    assert listed(many, "--job", "flow.other")[0] == [] and listed(many, "--state", "FAIL")[0] == []


def test_a_page_far_down_the_history_reads_the_uses_of_its_own_runs_alone(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page read the uses of every run up to it in one statement, a bound value a run: past
    250,000 runs SQLite refused it (a traceback of `runs list --offset 500000`). Here with
    SQLite's bound lowered to 100 values: a page of 10 after 9,000 runs reads only its own."""
    import sqlite3

    from bridge.mapping import Resolver
    from bridge.openlineage.convert import Converter

    with Catalog(many) as catalog:
        conn = catalog.db.conn
        assert isinstance(conn, sqlite3.Connection)
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 100)
        page = Runs(catalog, Converter(Resolver.load())).page(limit=10, offset=9000)
        assert page.total == RUNS and len(page.runs) == 10
        # a page of runs past the bound has its uses read in parts
        monkeypatch.setattr("bridge.catalog.history.USES_AT_ONCE", 50)
        whole = list(catalog.iter_task_runs(page_size=500))
        assert len(whole) == RUNS and [r.pk for r in whole] == sorted(r.pk for r in whole)
