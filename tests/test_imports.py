"""Imports: files (the client's file transport, arrays, single events), a Marquez instance (paged
by time window, resumable), and real dbt-ol events joining the assets olbridge's dbt adapter made."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import requests
import responses
from click.testing import CliRunner

from bridge.adapters.dbt import ingest_dbt
from bridge.catalog import Catalog, ExternalUsage
from bridge.cli import cli
from bridge.errors import CatalogError, InputFileError, SourceError, ValidationError
from bridge.mapping import Resolver
from bridge.model import Origin
from bridge.receiver.imports import MarquezEvents, catalog_intake, import_files, import_marquez
from tests.conftest import at
from tests.helpers import ol_dataset, ol_run_event, table_contents, terminated

pytestmark = pytest.mark.both_engines

MARQUEZ = "http://marquez.test:5000"


def _event(n: int, minute: int) -> dict[str, Any]:
    return ol_run_event(
        "COMPLETE",
        run_id=f"0194a1b2-0000-7000-8000-{n:012d}",
        job=("airflow", f"job_{n}"),
        inputs=[ol_dataset("s3://bucket", f"in/{n}")],
        outputs=[ol_dataset("s3://bucket", f"out/{n}")],
        time=f"2025-03-01T08:{minute:02d}:00Z",
    )


def test_files_of_every_shape_import_and_a_bad_line_does_not_stop_the_rest(
    tmp_path: Path, catalog: Catalog, resolver: Resolver
) -> None:
    ndjson = tmp_path / "events.ndjson"
    ndjson.write_text(
        json.dumps(_event(1, 0))
        + "\n"
        + "{not json\n"
        + json.dumps({"eventTime": "x"})
        + "\n"
        + json.dumps(_event(2, 1))
    )
    array = tmp_path / "events.json"
    array.write_text(json.dumps([_event(3, 2), _event(1, 0)]))
    single = tmp_path / "one.json"
    single.write_text(json.dumps(_event(4, 3), indent=2))
    summary = import_files([ndjson, array, single], catalog_intake(catalog, resolver))
    assert (summary.read, summary.accepted, summary.duplicates) == (7, 4, 1)
    assert [where for where, _ in summary.refused] == [f"{ndjson}:2", f"{ndjson}:3"]
    assert "not valid JSON" in summary.refused[0][1]
    assert summary.placeholders == 8
    assert len(catalog.external_sources()) == 4


def test_a_missing_file_refuses_the_import_before_anything_is_written(
    tmp_path: Path, catalog: Catalog, resolver: Resolver
) -> None:
    good = tmp_path / "good.ndjson"
    good.write_text(json.dumps(_event(1, 0)))
    before = table_contents(catalog)
    with pytest.raises(InputFileError, match=r"missing\.ndjson: file not found$"):
        import_files([good, tmp_path / "missing.ndjson"], catalog_intake(catalog, resolver))
    assert table_contents(catalog) == before


def test_the_import_command_shows_its_progress(tmp_path: Path) -> None:
    lines = tmp_path / "events.ndjson"
    lines.write_text("".join(json.dumps(_event(n, 0)) + "\n\n" for n in range(3)))
    array = tmp_path / "events.json"
    array.write_text(json.dumps([_event(n, 1) for n in range(3)], indent=2))
    first = CliRunner().invoke(cli, ["--catalog", str(tmp_path / "c.db"), "import", str(lines)])
    assert first.exit_code == 0, first.output
    shown = first.stderr.splitlines()
    assert shown[0] == "importing: 0/3 events"  # one event a line: the total is known
    assert shown[1].startswith("importing: 3 events in ")
    second = CliRunner().invoke(cli, ["--catalog", str(tmp_path / "c.db"), "import", str(lines), str(array)])
    assert second.exit_code == 0, second.output
    shown = second.stderr.splitlines()
    assert shown[0] == "importing: 0 events"  # an array: not known before it is read
    assert shown[1].startswith("importing: 6 events in ")


def test_the_import_command_reads_a_pipe(tmp_path: Path) -> None:
    """``producer | olbridge import /dev/stdin`` (or a FIFO) is read once, whole: it was refused as
    a file not found, after the count of its events had read it."""
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    olbridge = str(Path(sys.executable).parent / "olbridge")
    body = "".join(json.dumps(_event(n, 0)) + "\n" for n in range(3))
    for source in ("/dev/stdin", str(fifo)):
        command = [olbridge, "--catalog", str(tmp_path / f"c{len(source)}.db"), "import", source]
        if source == "/dev/stdin":
            done = subprocess.run(command, input=body, capture_output=True, text=True, timeout=60)
        else:
            reader = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            fifo.write_text(body)
            out, err = reader.communicate(timeout=60)
            done = subprocess.CompletedProcess(command, reader.returncode, out, err)
        assert done.returncode == 0, done.stderr
        assert "Imported 3 events: 3 accepted" in done.stderr, done.stderr
    folder = CliRunner().invoke(cli, ["--catalog", str(tmp_path / "d.db"), "import", str(tmp_path)])
    assert folder.exit_code == 2 and "is a directory" in folder.stderr


def test_the_import_command_prints_a_summary(tmp_path: Path, catalog_target: str) -> None:
    events = tmp_path / "events.ndjson"
    events.write_text(json.dumps(_event(1, 0)) + "\n[broken\n")
    db = catalog_target
    result = CliRunner().invoke(cli, ["--catalog", str(db), "import", str(events), "--json"])
    assert result.exit_code == 1, result.output  # a line was refused; the good one is in
    summary = json.loads(result.stdout)
    assert list(summary) == [  # the shape of every import's summary: read, its counts, refused, refusals
        "read",
        "accepted",
        "duplicates",
        "newPlaceholders",
        "acceptedWithWarnings",
        "refused",
        "refusals",
    ]
    assert (summary["accepted"], summary["refused"], summary["newPlaceholders"]) == (1, 1, 2)
    assert summary["refusals"][0]["where"] == f"{events}:2"
    listed = CliRunner().invoke(cli, ["--catalog", str(db), "assets", "list", "--json"])
    assert {a["origin"] for a in json.loads(listed.stdout)} == {"external"}
    usage = CliRunner().invoke(cli, ["--catalog", str(db), "import"])
    assert usage.exit_code == 2 and "FILE... or --from-marquez" in usage.output


def test_a_file_that_is_not_text_is_refused_in_its_place_and_the_others_are_taken(
    tmp_path: Path, catalog_target: str
) -> None:
    """``import`` of several files, one not UTF-8: that file is refused as one input, in its place
    among the refusals, and the others' events are taken (exit status 1, the summary says all):
    it stopped with an Error and no summary, the files before it taken, those after it not."""
    first, bad, last = tmp_path / "1.ndjson", tmp_path / "2.ndjson", tmp_path / "3.ndjson"
    first.write_text(json.dumps(_event(1, 0)) + "\nnot json\n" + json.dumps(_event(2, 0)) + "\n")
    bad.write_bytes(b'{"a": "\xff"}\n')
    last.write_text(json.dumps(_event(3, 0)) + "\n")
    result = CliRunner().invoke(
        cli, ["--catalog", str(catalog_target), "import", str(first), str(bad), str(last), "--json"]
    )
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert (summary["read"], summary["accepted"], summary["refused"]) == (5, 3, 2)
    assert [r["where"] for r in summary["refusals"]] == [f"{first}:2", str(bad)]
    assert summary["refusals"][1]["reason"] == "not UTF-8 text"
    said = [line for line in result.stderr.splitlines() if line.startswith("refused ")]
    assert said == [f"refused {first}:2: not valid JSON: Expecting value (column 1)", f"refused {bad}: not UTF-8 text"]


@pytest.mark.parametrize("content", ["", "\n  \n", "[]", " [ ]\n"], ids=["empty", "blank", "array", "spaced"])
def test_a_file_that_holds_no_event_is_refused(tmp_path: Path, content: str) -> None:
    """An empty file, a blank one or an empty array holds no event: refused, naming it, exit 1, as
    ``validate`` and ``record --file`` refuse it (it was "Imported 0 events" and exit 0: the file
    not written yet, or the wrong one, went unnoticed). It is no event read; the others are taken."""
    db, empty, good = tmp_path / "c.db", tmp_path / "empty.ndjson", tmp_path / "good.ndjson"
    empty.write_text(content)
    good.write_text(json.dumps(_event(1, 0)) + "\n")
    result = CliRunner().invoke(cli, ["--catalog", str(db), "import", str(empty)])
    assert result.exit_code == 1, result.output
    assert f"refused {empty}: it holds no event to import" in result.stderr.splitlines()
    assert "Imported 0 events: 0 accepted (0 with warnings), 0 duplicates, 1 refused" in result.stderr
    assert not db.exists()  # nothing taken: no catalog made
    result = CliRunner().invoke(cli, ["--catalog", str(db), "import", str(empty), str(good), "--json"])
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert (summary["read"], summary["accepted"], summary["refused"]) == (1, 1, 1)
    assert summary["refusals"] == [{"where": str(empty), "reason": "it holds no event to import"}]


@responses.activate
def test_a_resumed_marquez_import_that_finds_nothing_new_is_no_error(tmp_path: Path) -> None:
    marquez = FakeMarquez([_event(n, n) for n in range(3)])
    responses.add_callback(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=marquez)
    command = ["--catalog", str(tmp_path / "c.db"), "import", "--from-marquez", MARQUEZ, "--json"]
    first = CliRunner().invoke(cli, command)
    assert first.exit_code == 0 and json.loads(first.stdout)["accepted"] == 3, first.output
    again = CliRunner().invoke(cli, command)
    assert again.exit_code == 0 and json.loads(again.stdout)["accepted"] == 0, again.output


def test_an_import_stopped_between_batches_says_so_and_taken_again_takes_the_rest(
    tmp_path: Path, catalog: Catalog, resolver: Resolver
) -> None:
    """A stop request (SIGTERM, Ctrl-C: the command's) ends an import of files after the batch
    in hand, its summary saying so (the command then exits 1 with an Error: it stopped with
    click's 'Aborted!', nothing said of what it took); run again, it takes the rest."""
    import threading

    from bridge.receiver.imports import BATCH

    events = tmp_path / "e.ndjson"
    events.write_text("".join(json.dumps(_event(n, n % 60)) + "\n" for n in range(BATCH + 5)))
    stop = threading.Event()
    first = import_files([events], catalog_intake(catalog, resolver), progress=lambda n: stop.set(), stop=stop)
    assert (first.stopped, first.accepted, first.read) == (True, BATCH, BATCH)
    again = import_files([events], catalog_intake(catalog, resolver))
    assert (again.stopped, again.accepted, again.duplicates) == (False, 5, BATCH)
    small = tmp_path / "s.ndjson"
    small.write_text(json.dumps(_event(9_999, 0)) + "\n")
    stop.clear()  # a file named twice: stopped in the first of them, it is not at its end
    twice = import_files(
        [small, events, small], catalog_intake(catalog, resolver), progress=lambda n: stop.set(), stop=stop
    )
    assert twice.stopped and twice.read == 1


def test_import_stopped_by_sigterm_exits_1_saying_what_it_took(tmp_path: Path) -> None:
    events, db = tmp_path / "e.ndjson", tmp_path / "c.db"
    events.write_text("".join(json.dumps(_event(n, n % 60)) + "\n" for n in range(20_000)))
    olbridge = str(Path(sys.executable).parent / "olbridge")
    code, out, err = terminated([olbridge, "--catalog", str(db), "import", str(events), "--json"], db.exists)
    assert code == 1, err
    assert err.strip().splitlines()[-1] == (
        "Error: the import was stopped before its end; run it again (the events taken are duplicates then)"
    )
    assert 0 < json.loads(out)["accepted"] < 20_000


class FakeMarquez:
    """``GET /api/v1/events/lineage`` as Marquez 0.51 answers it: after inclusive, before exclusive,
    ascending by eventTime, offset paging, only RunEvents."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.calls: list[dict[str, str]] = []
        self.fail_after: int | None = None
        self.unstable = False  # equal times in another order at every answer, as Marquez may give them

    def __call__(self, request: Any) -> tuple[int, dict[str, str], str]:
        query = {k: v[0] for k, v in parse_qs(urlparse(request.url).query).items()}
        self.calls.append(query)
        if self.fail_after is not None and len(self.calls) > self.fail_after:
            return 500, {}, ""
        assert query["sortDirection"] == "asc"
        after, before = query["after"], query["before"]
        shuffled = random.Random(len(self.calls)).sample(self.events, len(self.events))
        selected = sorted(
            (e for e in (shuffled if self.unstable else self.events) if after <= _norm(e["eventTime"]) < before),
            key=lambda e: _norm(e["eventTime"]),
        )
        offset, limit = int(query["offset"]), int(query["limit"])
        body = {"events": selected[offset : offset + limit], "totalCount": len(self.events)}
        return 200, {"Content-Type": "application/json"}, json.dumps(body)


def _norm(time: str) -> str:
    return time.replace("Z", ".000000Z") if "." not in time else time


@responses.activate
def test_a_marquez_import_pages_by_time_and_resumes(catalog: Catalog, resolver: Resolver) -> None:
    events = [_event(n, n // 3) for n in range(20)]  # three events a minute: pages cut through instants
    marquez = FakeMarquez(events)
    responses.add_callback(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=marquez)
    intake = catalog_intake(catalog, resolver)
    source = MarquezEvents(MARQUEZ, page_size=4)
    marquez.fail_after = 3  # Marquez goes away after three pages
    with pytest.raises(SourceError, match=r"^Marquez answered 500 to GET "):
        import_marquez(source, intake, catalog, now=lambda: at(60))
    first = len(catalog.external_sources())
    assert first == 10  # the events of the three pages before the failure
    saved = catalog.position("marquez-import", MARQUEZ)
    assert saved is not None and saved.updated_at == "2025-03-01T09:00:00.000000Z"
    position = saved.value["after"]
    assert position == "2025-03-01T08:03:00.000000Z"
    marquez.fail_after = None
    calls = len(marquez.calls)
    summary = import_marquez(MarquezEvents(MARQUEZ, page_size=4), intake, catalog, now=lambda: at(61))
    assert marquez.calls[calls]["after"] == position  # resumed where it stopped
    assert len(catalog.external_sources()) == 20
    assert summary.refused == []
    assert (summary.accepted, summary.duplicates) == (10, 1)  # the boundary instant is read again
    assert summary.position == "2025-03-01T08:06:00.000000Z"
    # nothing new: an import from the last position takes nothing
    again = import_marquez(MarquezEvents(MARQUEZ, page_size=4), intake, catalog, now=lambda: at(62))
    assert again.accepted == 0


@responses.activate
def test_a_whole_page_at_one_instant_is_stepped_through(catalog: Catalog, resolver: Resolver) -> None:
    events = [_event(n, 0) for n in range(10)]  # ten events at the same time, pages of three
    responses.add_callback(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=FakeMarquez(events))
    summary = import_marquez(
        MarquezEvents(MARQUEZ, page_size=3), catalog_intake(catalog, resolver), catalog, now=lambda: at(1)
    )
    assert (summary.accepted, summary.duplicates) == (10, 0)


@responses.activate
@pytest.mark.parametrize("page_size", [1, 3, 7, 25, 200])
def test_events_at_one_instant_in_an_order_that_changes_are_each_taken_once(
    catalog: Catalog, resolver: Resolver, page_size: int
) -> None:
    """More events at one instant than a page holds, which Marquez gives in another order at each
    answer: each is taken once, none left out (stepping through them by offset lost some)."""
    events = [_event(n, n // 25) for n in range(134)]  # 25 events a minute, and 9 at the last
    marquez = FakeMarquez(events)
    marquez.unstable = True
    responses.add_callback(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=marquez)
    summary = import_marquez(
        MarquezEvents(MARQUEZ, page_size=page_size), catalog_intake(catalog, resolver), catalog, now=lambda: at(9)
    )
    assert (summary.accepted, summary.refused) == (134, [])
    assert len(catalog.external_sources()) == 134
    again = import_marquez(
        MarquezEvents(MARQUEZ, page_size=page_size), catalog_intake(catalog, resolver), catalog, now=lambda: at(10)
    )
    assert again.accepted == 0


@responses.activate
def test_marquez_errors_are_clear(catalog: Catalog, resolver: Resolver) -> None:
    responses.add(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", body="<html>", status=200)
    with pytest.raises(SourceError, match=r"^Marquez's answer to GET .* is not JSON: "):
        import_marquez(MarquezEvents(MARQUEZ), catalog_intake(catalog, resolver), catalog, now=lambda: at(1))
    responses.replace(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", body=requests.ConnectionError("refused"))
    with pytest.raises(SourceError, match=r"^cannot reach Marquez at "):
        import_marquez(MarquezEvents(MARQUEZ), catalog_intake(catalog, resolver), catalog, now=lambda: at(1))
    with pytest.raises(ValidationError, match=r"^a Marquez URL is an http:// or https:// URL, not 'marquez:5000'"):
        MarquezEvents("marquez:5000")
    result = CliRunner().invoke(cli, ["--catalog", ":memory:", "import", "--from-marquez", "ftp://x"])
    # a bad value of the option: a usage error (exit 2), as docs/cli.md says
    assert result.exit_code == 2 and "Invalid value for '--from-marquez'" in result.output, result.output


@pytest.mark.dbt
def test_dbt_ol_events_join_the_assets_of_olbridges_dbt_adapter(
    dbt_ol: tuple[Path, list[dict[str, Any]]], tmp_path: Path, resolver: Resolver
) -> None:
    project, theirs = dbt_ol
    events = tmp_path / "dbt-ol.ndjson"
    events.write_text("\n".join(json.dumps(e) for e in theirs))
    with Catalog(":memory:") as catalog:
        ingest_dbt(catalog, project, namespace="analytics")
        ours = {a.id: a for a in catalog.list_assets()}
        models = {i for i, a in ours.items() if a.origin is Origin.AUTO}
        assert len(models) >= 6
        summary = import_files([events], catalog_intake(catalog, resolver))
        assert summary.refused == []
        assert summary.accepted == len(theirs)
        after = {a.id: a for a in catalog.list_assets()}
        new = set(after) - set(ours)
        # the only new asset is the ephemeral model, which dbt-ol names and olbridge does not
        assert new == {"warehouse.main.stg_orders"}, new
        named = {
            resolver.asset_for(d["namespace"], d["name"]).id
            for e in theirs
            for d in e.get("inputs", []) + e.get("outputs", [])
        }
        assert len(models & named) >= 5  # every model dbt-ol reports (it leaves seeds out)
        for asset_id in models:
            assert after[asset_id] == ours[asset_id]  # joined, never overwritten
        for asset_id in models & named:
            assert any(isinstance(u, ExternalUsage) for u in catalog.usages_of(asset_id)), asset_id


@responses.activate
def test_a_pages_events_and_its_position_land_in_one_transaction(
    catalog: Catalog, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    responses.add_callback(
        responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=FakeMarquez([_event(n, n) for n in range(3)])
    )

    def refuse(cur: object, position: object) -> None:
        raise RuntimeError("the position cannot be written")

    monkeypatch.setattr("bridge.catalog.positions.save", refuse)
    with pytest.raises(RuntimeError, match=r"^the position cannot be written$"):  # the fault itself, not wrapped
        import_marquez(MarquezEvents(MARQUEZ), catalog_intake(catalog, resolver), catalog, now=lambda: at(1))
    assert catalog.external_sources() == [] and catalog.count_received()["received_events"] == 0
    monkeypatch.undo()
    summary = import_marquez(MarquezEvents(MARQUEZ), catalog_intake(catalog, resolver), catalog, now=lambda: at(2))
    assert summary.accepted == 3 and catalog.position("marquez-import", MARQUEZ) is not None


@responses.activate
def test_a_page_with_an_event_the_catalog_could_not_take_keeps_its_position_before_it(
    catalog: Catalog, resolver: Resolver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One event of a page meets a busy catalog when the page is taken event by event (another
    event was refused): the import stops with an error, and the page's position is not saved, so
    the next import reads that event again; the events that landed stay once."""
    from bridge.catalog import external
    from bridge.catalog.engine import Busy

    page = [_event(n, n) for n in range(3)]
    responses.add_callback(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=FakeMarquez(page))
    real = external.ingest_events

    def flaky(cur: Any, events: Any, *args: Any, **kwargs: Any) -> Any:
        if len(events) > 1:
            raise ValueError("one event of the group cannot be kept")  # the group goes event by event
        if events[0].run_id.endswith("1"):
            raise Busy("the catalog is busy")
        return real(cur, events, *args, **kwargs)

    monkeypatch.setattr(external, "ingest_events", flaky)
    with pytest.raises(CatalogError, match="could not take the event"):
        import_marquez(MarquezEvents(MARQUEZ), catalog_intake(catalog, resolver), catalog, now=lambda: at(1))
    assert catalog.position("marquez-import", MARQUEZ) is None
    monkeypatch.undo()
    summary = import_marquez(MarquezEvents(MARQUEZ), catalog_intake(catalog, resolver), catalog, now=lambda: at(2))
    assert catalog.count_received()["received_events"] == 3
    assert summary.accepted == 1 and summary.duplicates == 2


@responses.activate
def test_marquez_errors_are_one_short_line(catalog: Catalog, resolver: Resolver) -> None:
    """An HTML page (the web UI's port, a proxy's error page) is named by its title, never pasted;
    a connection that fails says the system's reason, not urllib3's chain of exceptions."""
    page = "<!doctype html><html><head><title>Marquez</title></head><body>" + "<div>x</div>" * 500 + "</body></html>"
    endpoint = f"{MARQUEZ}/api/v1/events/lineage"
    said = []
    responses.add(responses.GET, endpoint, body="")
    for answer in [
        {"body": page, "status": 200, "content_type": "text/html"},
        {"body": page, "status": 502, "content_type": "text/html"},
        {"body": "oops\n" * 100, "status": 500},
        {
            "body": requests.ConnectionError(
                "HTTPConnectionPool(host='m', port=5000): Max retries exceeded with url: /api (Caused by "
                "NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f>: Failed to establish a new "
                "connection: [Errno 111] Connection refused'))"
            )
        },
    ]:
        responses.replace(responses.GET, endpoint, **answer)
        with pytest.raises(SourceError) as caught:
            import_marquez(MarquezEvents(MARQUEZ), catalog_intake(catalog, resolver), catalog, now=lambda: at(1))
        said.append(str(caught.value))
    assert said[0] == (
        f"Marquez's answer to GET {endpoint} is not JSON: an HTML page (Marquez), not Marquez's API: is the URL "
        "its API's (port 5000 by default), not its web UI's?"
    )
    assert said[1].startswith(f"Marquez answered 502 to GET {endpoint}") and "<div>" not in said[1]
    assert said[2].endswith("oops oops oops oops ...") and "\n" not in said[2] and len(said[2]) < 400
    assert said[3] == f"cannot reach Marquez at {endpoint}: connection refused"


@responses.activate
def test_a_marquez_event_without_a_time_is_refused_saying_so(catalog: Catalog, resolver: Resolver) -> None:
    """A refusal names where the event was: at its time, or, without one, that it has none (it
    read "event at None", or "event at ?")."""
    good = _event(1, 0)
    timeless = {k: v for k, v in _event(2, 0).items() if k != "eventTime"}
    pages = [{"events": [good, timeless, "x"], "totalCount": 3}, {"events": [], "totalCount": 3}]

    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        return (
            200,
            {"Content-Type": "application/json"},
            json.dumps(pages[0] if "offset=0" in request.url else pages[1]),
        )

    responses.add_callback(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=answer)
    summary = import_marquez(
        MarquezEvents(MARQUEZ, page_size=10), catalog_intake(catalog, resolver), catalog, now=lambda: at(60)
    )
    wheres = [where for where, _ in summary.refused]
    assert wheres == [f"{MARQUEZ} event with no eventTime"] * 2, summary.refused
    assert summary.accepted == 1


@responses.activate
def test_a_marquez_event_holding_nan_is_refused_alone(catalog: Catalog, resolver: Resolver) -> None:
    """Marquez's pages are read leniently, and a NaN or an infinity (which no JSON holds) was taken
    and written as a null. Such an event is refused, saying so; the others land."""
    odd = _event(2, 0)
    odd["run"]["facets"] = {"stats": {"_producer": "p", "_schemaURL": "https://example.com/s", "rows": "NUMBER"}}
    events = json.dumps([_event(1, 0), odd]).replace('"NUMBER"', "NaN")
    page = '{"events": ' + events + ', "totalCount": 2}'

    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        return 200, {"Content-Type": "application/json"}, page if "offset=0" in request.url else '{"events": []}'

    responses.add_callback(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=answer)
    summary = import_marquez(
        MarquezEvents(MARQUEZ, page_size=10), catalog_intake(catalog, resolver), catalog, now=lambda: at(60)
    )
    assert summary.accepted == 1 and len(summary.refused) == 1, summary.refused
    assert summary.refused[0][1] == "the event holds NaN, which is no JSON number"
    assert len(catalog.external_sources()) == 1


@responses.activate
def test_a_marquez_event_with_a_lone_surrogate_is_refused_alone(catalog: Catalog, resolver: Resolver) -> None:
    """Marquez's pages are JSON read leniently; an event with a lone surrogate (an escape no UTF-8
    text holds) stopped the whole import with a traceback. It is refused; the others land."""
    odd = _event(2, 0)
    odd["job"]["name"] = "SURROGATE"
    events = json.dumps([_event(1, 0), odd]).replace("SURROGATE", "load\\ud800")  # the JSON escape, as text
    page = '{"events": ' + events + ', "totalCount": 2}'

    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        return 200, {"Content-Type": "application/json"}, page if "offset=0" in request.url else '{"events": []}'

    responses.add_callback(responses.GET, f"{MARQUEZ}/api/v1/events/lineage", callback=answer)
    intake = catalog_intake(catalog, resolver)
    summary = import_marquez(MarquezEvents(MARQUEZ, page_size=10), intake, catalog, now=lambda: at(60))
    assert summary.accepted == 1 and len(summary.refused) == 1, summary.refused
    assert "lone surrogate" in summary.refused[0][1]
