"""An address olbridge sends to or reads from is checked where it is given: a malformed one is an
``Error:`` then, not a connection error retried for ever (or a traceback of the config's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.model.urls import url_problem
from tests.helpers import invoke

BAD = {
    "http://[::1": "cannot be read",
    "http://127.0.0.1:99999/api": "cannot be read",
    "ftp://host/x": "its scheme is 'ftp'",
    "marquez:5000": "no scheme (begin it with http://)",
    "http:///path": "names no host",
    "http://host/a b": "a space or a control character",
    "http://host/\x1b[2J": "a space or a control character",
}


@pytest.mark.parametrize("url", list(BAD))
def test_what_is_wrong_with_an_address(url: str) -> None:
    problem = url_problem(url)
    assert problem is not None and BAD[url] in problem


@pytest.mark.parametrize("url", ["http://127.0.0.1:5000", "https://[::1]:8443/api/v1", "http://marquez.internal/x?y=1"])
def test_a_good_address_passes(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999/api"])
def test_commands_and_the_config_refuse_a_malformed_address(tmp_path: Path, url: str) -> None:
    db = tmp_path / "c.db"
    assert invoke(db, "init")[0] == 0
    for args in (("stream", "--url", url, "--once"), ("backfill", "--url", url), ("import", "--from-marquez", url)):
        code, _, err = invoke(db, *args)
        said = err.strip().splitlines()[-1]  # a bad value of the option: a usage error (exit 2)
        assert code == 2 and said.startswith(f"Error: Invalid value for '{args[1]}'") and "cannot be read" in said, (
            args,
            err,
        )
    config = tmp_path / "olbridge.toml"
    config.write_text(f'[[alerts]]\nname = "a"\non = ["FAIL"]\nwebhook = "{url}"\n')
    code, _, err = invoke(db, "--config", str(config), "status")
    assert code == 1 and "'webhook' must be an http:// or https:// URL" in err and "cannot be read" in err, err
