"""Secrets on the command line: a token or an API key from the environment or a file, so that it
does not show in the process list (``ps`` shows every argument to every user of the machine).

Each secret has an option (``--token``), its environment variable (``OLBRIDGE_TOKEN``) and a file
option (``--token-file``, with a ``..._FILE`` variable of its own). The command line beats the
environment; two ways at the same level are refused. The option itself keeps working, with a
warning on stderr.
"""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from bridge.cli.context import given_path
from bridge.cli.output import say
from bridge.config import read_secret_file

FILE = given_path(dir_okay=False, path_type=Path)


def secret(
    value: str | None, path: Path | None, *, option: str, file_option: str, env: str, file_env: str
) -> str | None:
    """The secret of the current command from ``option`` (given ``value``) or ``file_option``
    (given ``path``); see the module's documentation."""
    ctx = click.get_current_context()

    def source(name: str) -> ParameterSource | None:
        return ctx.get_parameter_source(name.lstrip("-").replace("-", "_"))

    if value == "" and source(option) is ParameterSource.COMMANDLINE:  # not "no secret": a mistake
        raise click.BadParameter("it is empty", param_hint=option)
    given_value, given_file = value not in (None, ""), path is not None
    if given_value and given_file:
        value_level, file_level = source(option), source(file_option)
        if value_level == file_level:
            where = "on the command line" if value_level is ParameterSource.COMMANDLINE else "in the environment"
            names = f"{option} and {file_option}" if where.startswith("on") else f"{env} and {file_env}"
            raise click.UsageError(f"{names} are both given {where}: give the secret one way")
        given_value = value_level is ParameterSource.COMMANDLINE
        given_file = not given_value
    if given_file:
        assert path is not None
        found = read_secret_file(path, file_option)
        warn_if_readable(path, file_option)
        return printable(found, f"{file_option} {path}")
    if not given_value:
        return None
    assert value is not None
    printable(value, option if source(option) is ParameterSource.COMMANDLINE else env)
    if source(option) is ParameterSource.COMMANDLINE:
        say(
            f"warning: {option} on the command line can be read by every user of this machine (ps); "
            f"set {env}, or put it in a file for {file_option}"
        )
    return value


def printable(secret: str, where: str) -> str:
    """``secret`` where it is printable ASCII without a space, as a token or an API key is (one
    with a line break would go into an HTTP header and out in error messages): else a bad value
    (exit 2) that does not repeat it."""
    if not secret.isascii() or not secret.isprintable() or any(c.isspace() for c in secret):
        raise click.BadParameter("a secret is printable ASCII without spaces; this one is not", param_hint=where)
    return secret


def warn_if_readable(path: Path, what: str) -> None:
    """A warning on stderr when the file holding secrets can be read by users other than its owner."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & 0o044:
        say(f"warning: {what} {path} can be read by other users (mode {mode & 0o777:04o}); chmod 600 {path}")


API_KEY_FILE_HELP = "Read the API key for --url from this file: one line, trimmed [env OPENLINEAGE_API_KEY_FILE]."


def api_key_secret(value: str | None, path: Path | None) -> str | None:
    """The backend's API key of ``export``, ``stream`` and ``backfill``: ``--api-key`` or
    ``--api-key-file`` (without either, ``OPENLINEAGE_API_KEY`` or the OpenLineage configuration's)."""
    return secret(
        value,
        path,
        option="--api-key",
        file_option="--api-key-file",
        env="OPENLINEAGE_API_KEY",
        file_env="OPENLINEAGE_API_KEY_FILE",
    )


__all__ = ["API_KEY_FILE_HELP", "FILE", "api_key_secret", "secret"]
