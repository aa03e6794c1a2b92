"""Shared fixtures: catalogs, fixed times, the official OpenLineage schemas and a PostgreSQL server.

The official schemas (the OpenLineage repository's ``spec/`` folder) are read from the shared
folder beside the repository (``../shared/openlineage-spec``, or ``$OLBRIDGE_SPEC_DIR``); where it
is absent the tests that need them skip and say so, except where ``$OLBRIDGE_REQUIRE_SPEC`` is set
or in CI, where they fail. A facet naming an official schema the folder lacks is an error of the
event, never left unchecked. The PostgreSQL server (:mod:`tests.postgres`) never skips: where none
can be started, the tests that need it fail.

In CI (``$CI`` set to ``true``, as ``.ci/run`` does, or ``$OLBRIDGE_NO_SKIP=1``) a skipped test is
a failed one, named with its reason: a run that left something unchecked is never green.
``--update-golden`` rewrites the golden files that changed, then fails the run, naming them.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Hypothesis keeps its caches (and any example database) in `.hypothesis/` of the working folder,
# the repository's: a folder of its own under the system's temporary one instead, removed at the
# end. Hypothesis reads the variable at its first use of that folder, after this (the processes
# the tests start inherit it).
if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = _hypothesis_dir = tempfile.mkdtemp(prefix="olbridge-hypothesis-")
    atexit.register(shutil.rmtree, _hypothesis_dir, ignore_errors=True)

from bridge.catalog import Catalog
from bridge.mapping import Resolver
from bridge.openlineage.convert import Converter
from tests.group_writer import GroupWriter

if TYPE_CHECKING:
    from tests.postgres import PostgresServer

ROOT = Path(__file__).resolve().parents[1]
OFFICIAL = "https://openlineage.io/spec/"  # where the official schemas' URLs begin


def no_skip() -> bool:
    """Whether this run is CI's, where nothing may skip: ``$CI`` is ``true`` (or ``1``), or
    ``$OLBRIDGE_NO_SKIP`` is ``1``."""
    return os.environ.get("CI", "").lower() in ("true", "1") or os.environ.get("OLBRIDGE_NO_SKIP") == "1"


SLOW = ("dbt", "metaflow", "prefect")  # the markers of the slow tests (real dbt, Metaflow, Prefect)
SLOW_TIMEOUT = 1800  # s each of them may take, against the default of pyproject.toml's `timeout`


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests get a larger timeout than the default, unless they name their own."""
    for item in items:
        if item.get_closest_marker("timeout") is None and any(item.get_closest_marker(m) for m in SLOW):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """In CI, a test that skipped (a marker, ``pytest.skip``, a missing extra) fails, named with
    the reason it gave."""
    report: pytest.TestReport = yield
    if report.skipped and no_skip() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} skipped, and nothing may skip in CI ($CI / $OLBRIDGE_NO_SKIP): {reason}"
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[Any]:
    """In CI, a module that skipped as a whole (``pytest.importorskip`` at its top, say) fails."""
    report: pytest.CollectReport = yield
    if report.skipped and no_skip():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{collector.nodeid} skipped, and nothing may skip in CI ($CI / $OLBRIDGE_NO_SKIP): {reason}"
    return report


SPEC_DIR = Path(os.environ.get("OLBRIDGE_SPEC_DIR", ROOT.parent / "shared" / "openlineage-spec"))
T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


ENGINES = ("sqlite", "postgresql")
TEMPLATE = "olbridge_catalog"  # a migrated catalog on the test server, copied for each test


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The tests marked ``both_engines`` (a module's ``pytestmark``) that use a catalog run once on
    SQLite and once on PostgreSQL; the others on SQLite."""
    if "engine" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_engines"):
        metafunc.parametrize("engine", ENGINES, indirect=True)


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> str:
    """The catalog's engine for this test: ``sqlite`` unless the test runs on both."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def catalog_template(postgres: PostgresServer) -> str:
    """A database holding a new catalog, marked a template: a copy of it is a catalog at once."""

    def make(url: str) -> None:
        Catalog(url).close()

    return postgres.make_template(TEMPLATE, make)


@pytest.fixture
def catalog(engine: str, request: pytest.FixtureRequest) -> Iterator[Catalog]:
    """A new catalog of the test's engine: SQLite in memory, or a PostgreSQL database of its own."""
    if engine == "sqlite":
        with Catalog(":memory:") as cat:
            yield cat
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = server.create_database(template=request.getfixturevalue("catalog_template"))
    try:
        with Catalog(server.url(name)) as cat:
            yield cat
    finally:
        server.drop_database(name)


@pytest.fixture
def new_catalog(engine: str, request: pytest.FixtureRequest) -> Iterator[Callable[[], Catalog]]:
    """A function giving a new catalog of the test's engine at each call (closed, and on
    PostgreSQL dropped, after the test)."""
    opened: list[tuple[Catalog, str | None]] = []

    def new() -> Catalog:
        if engine == "sqlite":
            opened.append((Catalog(":memory:"), None))
        else:
            server: PostgresServer = request.getfixturevalue("postgres")
            name = server.create_database(template=request.getfixturevalue("catalog_template"))
            opened.append((Catalog(server.url(name)), name))
        return opened[-1][0]

    yield new
    for cat, name in opened:
        cat.close()
        if name is not None:
            request.getfixturevalue("postgres").drop_database(name)


@pytest.fixture
def catalog_targets(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """A function giving where a new catalog may be made, on the test's engine, each call another:
    a file path that does not exist yet (SQLite), or the URL of an empty database (PostgreSQL)."""
    made: list[str] = []

    def new() -> str:
        if engine == "sqlite":
            path = tmp_path / (f"c{len(made)}.db" if made else "c.db")
            made.append(str(path))
            return str(path)
        server: PostgresServer = request.getfixturevalue("postgres")
        made.append(server.create_database())
        return server.url(made[-1])

    yield new
    if engine != "sqlite":
        server = request.getfixturevalue("postgres")
        for name in made:
            server.drop_database(name)


@pytest.fixture
def catalog_target(catalog_targets: Callable[[], str]) -> str:
    """Where a new catalog may be made, on the test's engine (see ``catalog_targets``)."""
    return catalog_targets()


@pytest.fixture
def catalog_path(catalog_target: str) -> str:
    """A new catalog of the test's engine: a SQLite file, or a PostgreSQL database."""
    Catalog(catalog_target).close()
    return catalog_target


@pytest.fixture
def writer(catalog_path: str, resolver: Resolver) -> Iterator[GroupWriter]:
    """The receiver's group writer on ``catalog_path`` (what the HTTP app hands events to)."""
    writer = GroupWriter(catalog_path, resolver)
    yield writer
    writer.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole run, started on first use (about 2 s) in a temporary
    directory and stopped at the end: ``postgres.url(name)``, ``postgres.create_database()``."""
    from tests.postgres import PostgresServer  # psycopg: only the tests that use the server need it

    server = PostgresServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> Iterator[str]:
    """A new, empty database of its own for one test (a copy of template1), as a
    ``postgresql://`` URL of the trusted superuser; dropped after the test."""
    name = postgres.create_database()
    yield postgres.url(name)
    postgres.drop_database(name)


@pytest.fixture(scope="session")
def resolver() -> Resolver:
    return Resolver.load()


@pytest.fixture
def converter(resolver: Resolver) -> Converter:
    return Converter(resolver)


def _spec_documents() -> list[dict[str, Any]]:
    spec = SPEC_DIR / "spec"
    files = [
        spec / "OpenLineage.json",
        *sorted((spec / "facets").glob("*.json")),
        *sorted((spec / "registry").rglob("facets/*.json")),
    ]
    return [json.loads(f.read_text()) for f in files]


@pytest.fixture(scope="session")
def official() -> Callable[[Any], list[str]]:
    """A function giving the official schemas' errors for an event: the core schema, then every
    facet against the schema its ``_schemaURL`` names, in the folder's version of it (olbridge's
    custom facet against the schema the package ships). An official schema the folder does not
    hold at all is an error of the event, never a facet left unchecked."""
    if not (SPEC_DIR / "spec" / "OpenLineage.json").is_file():
        missing = f"the official OpenLineage schemas are not here ({SPEC_DIR})"
        if os.environ.get("OLBRIDGE_REQUIRE_SPEC") or no_skip():  # the run said they are there: not finding them fails
            pytest.fail(f"{missing}; this run requires them (OLBRIDGE_REQUIRE_SPEC, or CI)", pytrace=False)
        pytest.skip(missing)
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.exceptions import Unresolvable

    documents = _spec_documents()
    documents += [json.loads(path.read_text()) for path in sorted((ROOT / "bridge" / "schemas").glob("*.json"))]
    registry = Registry().with_resources((d["$id"], Resource.from_contents(d)) for d in documents)
    # each schema file by its URL without the version: a facet naming another version of an
    # official schema than the folder's is checked against the folder's
    unversioned = {re.sub(r"/\d+-\d+-\d+/", "/", d["$id"]): d["$id"] for d in documents}
    core = documents[0]
    checker = Draft202012Validator.FORMAT_CHECKER
    core_validator = Draft202012Validator(core, registry=registry, format_checker=checker)
    facet_validators: dict[str, Draft202012Validator] = {}

    def facets_of(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        holders = [("run", event.get("run")), ("job", event.get("job")), ("dataset", event.get("dataset"))]
        for key in ("inputs", "outputs"):
            holders += [(f"{key}[{i}]", d) for i, d in enumerate(event.get(key) or [])]
        for where, holder in holders:
            if not isinstance(holder, dict):
                continue
            for group in ("facets", "inputFacets", "outputFacets"):
                for name, facet in (holder.get(group) or {}).items():
                    yield f"{where}.{group}.{name}", facet

    def errors(event: Any) -> list[str]:
        found = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in core_validator.iter_errors(event)]
        if isinstance(event, dict):
            for where, facet in facets_of(event):
                url = facet.get("_schemaURL") if isinstance(facet, dict) else None
                if not isinstance(url, str):
                    continue
                base, _, fragment = url.partition("#")
                if url.startswith(OFFICIAL) and base not in registry:
                    held = unversioned.get(re.sub(r"/\d+-\d+-\d+/", "/", base))
                    url = f"{held}#{fragment}" if held and fragment else held or url
                if url not in facet_validators:
                    facet_validators[url] = Draft202012Validator(
                        {"$ref": url}, registry=registry, format_checker=checker
                    )
                try:
                    found += [f"{where}: {e.message}" for e in facet_validators[url].iter_errors(facet)]
                except Unresolvable:
                    if url.startswith(OFFICIAL):  # an official schema the folder lacks: never left unchecked
                        found.append(f"{where}: no schema {url} in {SPEC_DIR / 'spec'}")
                    # a custom schema: the core schema's facet rules are all there is
        return found

    return errors


@pytest.fixture(scope="session")
def spec_dir(official: Callable[[Any], list[str]]) -> Path:
    return SPEC_DIR


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="Rewrite the golden files that changed, then fail the run, naming them (check and commit them).",
    )


REWRITTEN = pytest.StashKey[list[str]]()  # the golden files --update-golden rewrote


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[Path, str], None]:
    """A function that compares a text with its golden file, or with ``--update-golden``
    rewrites the file when the text differs (the run then fails, naming it)."""
    config = request.config

    def check(path: Path, text: str) -> None:
        if config.getoption("--update-golden"):
            if not path.is_file() or path.read_text() != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                config.stash.setdefault(REWRITTEN, []).append(str(path.relative_to(ROOT)))
            return
        assert path.is_file(), f"no golden file {path.relative_to(ROOT)}: run pytest --update-golden, then check it"
        assert text == path.read_text(), f"{path.relative_to(ROOT)} changed; if on purpose, run pytest --update-golden"

    return check


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if config.getoption("--update-golden"):
        rewritten = config.stash.get(REWRITTEN, [])
        said = (
            "rewrote " + ", ".join(rewritten) if rewritten else "rewrote no golden file (all were as the tests wrote)"
        )
        terminalreporter.write_line(f"--update-golden {said}; this run fails so that it never passes as a check")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """``--update-golden`` never ends green: the files it rewrote are to be looked at first."""
    if session.config.getoption("--update-golden") and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


DBT_PROJECT = ROOT / "tests" / "dbt_project"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def dbt_ol(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """The test project built by ``dbt-ol build`` (which runs ``dbt build``), with its events,
    and its ``catalog.json`` from ``dbt docs generate``."""
    if not (BIN / "dbt").is_file() or not (BIN / "dbt-ol").is_file():
        pytest.skip("dbt and dbt-ol are not installed (pip install -e '.[dbt]')")
    work = tmp_path_factory.mktemp("dbt")
    project = work / "project"
    shutil.copytree(DBT_PROJECT, project)
    events = work / "events.jsonl"
    config = work / "openlineage.yml"
    config.write_text(f"transport:\n  type: file\n  log_file_path: {events}\n  append: true\n")
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "OPENLINEAGE_CONFIG": str(config),
        "OPENLINEAGE_NAMESPACE": "olbridge_test",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    done = subprocess.run(
        [str(BIN / "dbt-ol"), "build", "--project-dir", ".", "--profiles-dir", "."],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # catalog.json, as `dbt docs generate` writes it after a build; generated beside the target
    # folder so that the build's run_results.json stays as dbt-ol read it
    docs = subprocess.run(
        [str(BIN / "dbt"), "docs", "generate", "--project-dir", ".", "--profiles-dir", ".", "--target-path", "docs"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert docs.returncode == 0, docs.stdout[-3000:] + docs.stderr[-3000:]
    shutil.copy(project / "docs" / "catalog.json", project / "target" / "catalog.json")
    return project, [json.loads(line) for line in events.read_text().splitlines() if line.strip()]
