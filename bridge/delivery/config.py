"""Which sender ``olbridge stream`` and ``olbridge backfill`` use (and ``olbridge export --url``).

With ``--url``, olbridge's HTTP sender to that backend. Without it, the configuration the
OpenLineage client reads, found and merged by openlineage-python itself: ``$OPENLINEAGE_CONFIG``
or ``./openlineage.yml`` (or ``~/.openlineage/openlineage.yml``), then ``OPENLINEAGE__TRANSPORT__*``
variables, then ``OPENLINEAGE_URL`` / ``OPENLINEAGE_ENDPOINT`` / ``OPENLINEAGE_API_KEY``. An
``http`` transport is delivered by olbridge's HTTP sender with its url, endpoint, auth, headers,
timeout and TLS settings; any other type (kafka, file, console, composite, ...) by the transport
openlineage-python builds (``console``: each event a line on stdout). Unlike the client, no
configuration at all is an error, not the console: a worker that prints its outbox away would
lose it.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from bridge.delivery.senders import HttpSender, Sender, TransportSender
from bridge.errors import ConfigError
from bridge.files import reading_problem, yaml_problem


def sender_for(
    url: str | None,
    *,
    api_key: str | None = None,
    timeout: float | None = None,
    batch: bool = True,
    environ: Mapping[str, str] = os.environ,
) -> Sender:
    """The sender for ``--url`` (with ``--api-key``), else for the OpenLineage configuration."""
    if url:
        key = api_key or _key(environ.get("OPENLINEAGE_API_KEY"))
        return HttpSender(url, api_key=key, timeout=timeout or 5.0, batch=batch)
    if environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        raise ConfigError("OPENLINEAGE_DISABLED is true: nothing would be delivered (unset it, or give --url)")
    transport = openlineage_transport_config(environ)
    if transport and transport.get("type"):
        if transport["type"] == "http":
            return _http_sender(transport, timeout=timeout, batch=batch, api_key=api_key)
        from openlineage.client.transport import get_default_factory

        quiet = logging.getLogger("openlineage")  # it logs its own traceback first: the error below says it
        level, quiet.level = quiet.level, logging.CRITICAL + 1
        try:
            _console_to_stdout()
            return TransportSender(get_default_factory().create(transport))
        except Exception as exc:  # whatever openlineage-python says of its own configuration
            raise ConfigError(f"cannot set up the {transport['type']!r} OpenLineage transport: {exc}") from exc
        finally:
            quiet.setLevel(level)
    if environ.get("OPENLINEAGE_URL"):
        return HttpSender(
            environ["OPENLINEAGE_URL"],
            endpoint=environ.get("OPENLINEAGE_ENDPOINT", "api/v1/lineage"),
            api_key=api_key or _key(environ.get("OPENLINEAGE_API_KEY")),
            timeout=timeout or 5.0,
            batch=batch,
        )
    raise ConfigError(
        "no OpenLineage backend configured: give --url, set OPENLINEAGE_URL, or write an openlineage.yml "
        "(or OPENLINEAGE__TRANSPORT__* variables)"
    )


# the logger openlineage-python's console transport emits each event through, at INFO
CONSOLE_LOGGER = "openlineage.client.transport.console"


class _Stdout(logging.Handler):
    """Each record's message a line on stdout, flushed; a write that fails raises (logging's own
    stream handler swallows it: an event unwritten would count as delivered, and be deleted)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stdout.write(record.getMessage() + "\n")
        sys.stdout.flush()


def _console_to_stdout() -> None:
    """The console transport's events on stdout, one a line: it hands each to a logger at INFO,
    which nothing here prints (a stream to it said every event delivered, and none was seen)."""
    console = logging.getLogger(CONSOLE_LOGGER)
    if any(isinstance(handler, _Stdout) for handler in console.handlers):
        return
    console.addHandler(_Stdout())
    console.setLevel(logging.INFO)
    console.propagate = False


def _key(value: str | None) -> str | None:
    """``OPENLINEAGE_API_KEY``, where it is a key: printable ASCII without spaces (one with a line
    break would go into the header, and out in error messages, as a connection error retried)."""
    if value and (not value.isascii() or not value.isprintable() or any(c.isspace() for c in value)):
        raise ConfigError("OPENLINEAGE_API_KEY is no key: a key is printable ASCII without spaces")
    return value or None


def openlineage_transport_config(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The ``transport`` section as the OpenLineage client merges it (file, then variables). The
    file the client would read is read here, so that one it cannot read is an error that says why
    (the client logs a traceback and goes on without it): ``OPENLINEAGE_CONFIG`` naming no file
    too."""
    from openlineage.client.client import OpenLineageClient
    from openlineage.client.utils import deep_merge_dicts

    merged: dict[str, Any] = {}
    named = environ.get("OPENLINEAGE_CONFIG")
    if named and not os.path.isfile(named):
        raise ConfigError(f"OPENLINEAGE_CONFIG names {named}, which is no file")
    path = named or OpenLineageClient._find_yaml_config_path()
    if path:
        merged = _yaml_config(path)
    from_env = OpenLineageClient._load_config_from_env_variables()
    if from_env:
        merged = deep_merge_dicts(from_env, merged)
    transport = merged.get("transport")
    if transport is not None and not isinstance(transport, dict):
        raise ConfigError(f"the OpenLineage configuration's transport must be a mapping, not {transport!r}")
    return transport or {}


def _yaml_config(path: str) -> dict[str, Any]:
    """The OpenLineage client's configuration file: a YAML mapping (empty: none)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        content = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: the OpenLineage configuration cannot be read: {exc}") from None
    except yaml.YAMLError as exc:  # said on one line, where it is first
        number, problem = yaml_problem(exc, text)
        at = "" if number is None else f"line {number}: "
        raise ConfigError(f"{path}: the OpenLineage configuration cannot be read: {at}{problem}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: the OpenLineage configuration cannot be read: {reading_problem(exc)}") from None
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ConfigError(f"{path}: the OpenLineage configuration must be a mapping (transport: ...)")
    return content


SECONDS_MOST = 365 * 86_400.0  # the most seconds a timeout may be: a year (the command line's options too)


def _seconds(value: Any) -> float:
    """The http transport's ``timeout``, checked before anything is sent (a word, or a negative
    number, was a traceback once delivery began): a number of seconds above 0, up to a year (a
    text of one, as an environment variable gives it, is read)."""
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= SECONDS_MOST):
        raise ConfigError(
            f"the OpenLineage http transport configuration is wrong: timeout must be a number of seconds above 0 "
            f"(up to a year), not {value!r}"
        )
    return seconds


def _http_sender(config: dict[str, Any], *, timeout: float | None, batch: bool, api_key: str | None) -> HttpSender:
    from openlineage.client.transport.http import HttpConfig

    try:
        http = HttpConfig.from_dict(config)
    except Exception as exc:  # openlineage-python's own checks of its http settings
        raise ConfigError(f"the OpenLineage http transport configuration is wrong: {exc}") from exc
    headers = {}
    seconds = timeout or _seconds(http.timeout)
    bearer = http.auth.get_bearer()
    if bearer:
        headers["Authorization"] = bearer
    headers.update(http.custom_headers)
    verify: bool | str = http.verify
    if http.ssl_context and http.ssl_context.ca_cert_path:
        verify = http.ssl_context.ca_cert_path
    return HttpSender(
        http.url,
        endpoint=http.endpoint,
        headers=headers,
        api_key=api_key,
        timeout=seconds,
        verify=verify,
        batch=batch,
    )
