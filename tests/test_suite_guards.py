"""The guards around the suite itself: in CI nothing may skip (a skip fails, naming the test),
``--update-golden`` rewrites and then fails the run, naming the files, and every test has a
timeout. Each is checked by running pytest in a subprocess: on a real test of this suite with a
skip forced in (as an extra left uninstalled would), and on small test files beside a copy of
this suite's ``conftest.py``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REAL = "tests/test_validate.py::test_valid_base_event"
GUARDS = ("CI", "OLBRIDGE_NO_SKIP", "OLBRIDGE_REQUIRE_SPEC", "PYTEST_ADDOPTS")

# a plugin that skips every test it collects, as a test skips when an extra is not installed
FORCE_SKIP = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="forced: the extra is not installed"))
"""


def pytest_run(args: list[str], cwd: Path, plugins: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in GUARDS} | env
    if plugins is not None:
        environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(plugins), environ.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider", "-rsfE"]
    return subprocess.run(command, cwd=cwd, env=environ, capture_output=True, text=True, timeout=120)


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "force_skip.py").write_text(FORCE_SKIP)
    return folder


def test_a_skip_passes_a_local_run(plugins: Path) -> None:
    done = pytest_run([REAL, "-p", "force_skip"], ROOT, plugins)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "forced: the extra is not installed" in done.stdout


@pytest.mark.parametrize("env", [{"CI": "true"}, {"CI": "1"}, {"OLBRIDGE_NO_SKIP": "1"}])
def test_in_ci_a_skip_fails_naming_the_test_and_its_reason(plugins: Path, env: dict[str, str]) -> None:
    done = pytest_run([REAL, "-p", "force_skip"], ROOT, plugins, **env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("1 error")  # at its setup, where the skip came
    assert f"{REAL} skipped, and nothing may skip in CI" in done.stdout
    assert "forced: the extra is not installed" in done.stdout


def test_ci_false_is_no_ci(plugins: Path) -> None:
    done = pytest_run([REAL, "-p", "force_skip"], ROOT, plugins, CI="false")
    assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout + done.stderr


@pytest.fixture
def beside_conftest(tmp_path: Path) -> Path:
    """A folder holding a copy of this suite's conftest.py, for small test files of its own."""
    folder = tmp_path / "suite"
    folder.mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", folder / "conftest.py")
    (folder / "pytest.ini").write_text("[pytest]\n")  # its own root: not this project's options
    return folder


def test_in_ci_a_module_that_skips_as_a_whole_fails_naming_it(beside_conftest: Path) -> None:
    (beside_conftest / "test_extra.py").write_text(
        'import pytest\n\npytest.importorskip("olbridge_no_such_extra")\n\n\ndef test_it() -> None:\n    pass\n'
    )
    local = pytest_run(["test_extra.py"], beside_conftest)
    assert "1 skipped" in local.stdout and "nothing may skip" not in local.stdout, local.stdout + local.stderr
    done = pytest_run(["test_extra.py"], beside_conftest, CI="true")
    assert done.returncode != 0, done.stdout + done.stderr
    assert "test_extra.py skipped, and nothing may skip in CI" in done.stdout
    assert "olbridge_no_such_extra" in done.stdout


def test_update_golden_rewrites_what_changed_then_fails_the_run_naming_it(beside_conftest: Path) -> None:
    (beside_conftest / "golden").mkdir()
    stale, kept = beside_conftest / "golden" / "a.txt", beside_conftest / "golden" / "b.txt"
    stale.write_text("old\n")
    kept.write_text("same\n")
    (beside_conftest / "test_golden.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            HERE = Path(__file__).parent / "golden"


            def test_a(golden):
                golden(HERE / "a.txt", "new\\n")


            def test_b(golden):
                golden(HERE / "b.txt", "same\\n")
            """
        )
    )
    checked = pytest_run(["test_golden.py"], beside_conftest)
    assert checked.returncode == 1 and "1 failed, 1 passed" in checked.stdout, checked.stdout
    assert "golden/a.txt changed; if on purpose, run pytest --update-golden" in checked.stdout
    updated = pytest_run(["test_golden.py", "--update-golden"], beside_conftest)
    assert updated.returncode == 1, updated.stdout + updated.stderr  # never green
    assert "2 passed" in updated.stdout
    assert "--update-golden rewrote suite/golden/a.txt; this run fails" in updated.stdout
    assert (stale.read_text(), kept.read_text()) == ("new\n", "same\n")
    again = pytest_run(["test_golden.py", "--update-golden"], beside_conftest)
    assert again.returncode == 1 and "rewrote no golden file" in again.stdout, again.stdout
    assert pytest_run(["test_golden.py"], beside_conftest).returncode == 0


def test_a_test_that_hangs_fails_at_its_timeout_and_slow_tests_get_more(beside_conftest: Path) -> None:
    (beside_conftest / "test_hang.py").write_text(
        textwrap.dedent(
            """
            import threading

            import pytest


            @pytest.mark.timeout(1)
            def test_hangs():
                threading.Event().wait()  # a lock never released


            @pytest.mark.dbt
            def test_slow(request):
                assert request.node.get_closest_marker("timeout").args == (1800,)
            """
        )
    )
    done = pytest_run(["test_hang.py", "-W", "ignore::pytest.PytestUnknownMarkWarning"], beside_conftest)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout and "Timeout" in done.stdout


def test_the_suite_has_a_default_timeout(pytestconfig: pytest.Config) -> None:
    assert float(pytestconfig.getini("timeout")) == 300


def test_ci_without_the_schemas_fails_before_anything_runs(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if k not in GUARDS} | {"OLBRIDGE_SPEC_DIR": str(tmp_path / "none")}
    # a session of its own: were the guard missing, the script would go on to `make test`, whose
    # processes a timeout must stop with it (killing bash alone would leave them running)
    with subprocess.Popen(
        [str(ROOT / ".ci" / "run")],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as ci:
        try:
            stdout, stderr = ci.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(ci.pid, signal.SIGKILL)  # the script and everything it started
            ci.communicate(timeout=30)
            raise
    assert ci.returncode == 1 and stdout == "", stdout + stderr
    assert stderr.startswith(f"Error: the official OpenLineage schemas are not at {tmp_path / 'none'}")
    assert "OpenLineage repository's spec/ folder" in stderr and "OLBRIDGE_SPEC_DIR" in stderr
