"""Configuration: one TOML file (``olbridge.toml``), checked at start-up; unknown keys are errors.

Precedence, highest first: command-line flags, environment variables (``OLBRIDGE_CATALOG``,
``OLBRIDGE_CONFIG``), the config file, defaults. Relative paths in the file are read from the
file's folder.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from bridge.errors import BadValueError, ConfigError, ValidationError
from bridge.files import reading_problem
from bridge.jsontext import MAX_DEPTH
from bridge.mapping.resolver import (
    DEFAULT_NAMESPACE,
    MARQUEZ_NAMESPACE_CHARACTERS,
    MARQUEZ_NAMESPACE_MAX,
    marquez_unsafe,
)
from bridge.model.alerts import EVENTS, UPDATED, AlertRule, check_webhook
from bridge.model.health import FreshnessRule, Match, Selector, parse_duration
from bridge.model.ids import NAMESPACE_MAX
from bridge.model.received import namespace_matches
from bridge.model.urls import url_problem
from bridge.version import PRODUCER

CONFIG_FILE = "olbridge.toml"


@attrs.frozen
class NamedToken:
    """One of the receiver's tokens (``serve --tokens``): its name, its secret, and the job
    namespaces (patterns such as ``spark-*``) the events it brings may name."""

    name: str
    token: str = attrs.field(repr=False)
    namespaces: tuple[str, ...]

    def may_write(self, namespace: str) -> bool:
        return any(namespace_matches(namespace, pattern) for pattern in self.namespaces)


def bearer(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, its scheme in any case (RFC 9110
    section 11.1: an authentication scheme is case-insensitive); None for another scheme or none.
    The receiver's and the web view's."""
    scheme, _, token = authorization.partition(" ")
    return token.lstrip(" ") if scheme.lower() == "bearer" else None


TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TOKEN_KEYS = ("namespaces", "token")


def parse_tokens(document: Mapping[str, Any], where: str) -> tuple[NamedToken, ...]:
    """The receiver's tokens from a TOML document with one table per token name, each holding
    ``token`` (the secret) and ``namespaces`` (the namespaces it may write: its jobs' and its
    outputs' datasets', ``*`` and ``?`` patterns)::

        [spark]
        token = "..."
        namespaces = ["spark-*"]
    """
    tokens: list[NamedToken] = []
    for name, table in document.items():
        if not TOKEN_NAME.fullmatch(name):
            raise ConfigError(f"{where}: token name {name!r}: letters, digits, '_', '.', '-', at most 64")
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: '{name}' must be a table holding token and namespaces")
        unknown = sorted(set(table) - set(_TOKEN_KEYS))
        if unknown:
            raise ConfigError(f"{where}: [{name}]: unknown key(s) {', '.join(unknown)}; known: token, namespaces")
        secret = table.get("token")
        if not isinstance(secret, str) or not secret.strip():
            raise ConfigError(f"{where}: [{name}]: 'token' must be a non-empty string")
        if secret != secret.strip() or any(c.isspace() or not c.isprintable() for c in secret):
            raise ConfigError(f"{where}: [{name}]: 'token' may not hold spaces or control characters")
        patterns = table.get("namespaces")
        if (
            not isinstance(patterns, list)
            or not patterns
            or not all(isinstance(p, str) and p.strip() and p == p.strip() for p in patterns)
        ):
            raise ConfigError(
                f"{where}: [{name}]: 'namespaces' must be a non-empty list of namespaces or patterns ('spark-*')"
            )
        tokens.append(NamedToken(name, secret, tuple(patterns)))
    if not tokens:
        raise ConfigError(f"{where}: no tokens: give one table per token name, holding token and namespaces")
    seen: dict[str, str] = {}
    for named in tokens:
        if named.token in seen:
            raise ConfigError(f"{where}: [{seen[named.token]}] and [{named.name}] hold the same token")
        seen[named.token] = named.name
    return tuple(tokens)


def read_toml(file: Path, what: str = "config file") -> dict[str, Any]:
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{file}: cannot be read: {reading_problem(exc)}") from None


def load_tokens(file: Path) -> tuple[NamedToken, ...]:
    """The receiver's tokens from a file (see :func:`parse_tokens`)."""
    return parse_tokens(read_toml(file, "tokens file"), str(file))


@attrs.frozen
class ServeConfig:
    """The ``[serve]`` table: the receiver's settings that its command line may also give."""

    forward: bool = False  # queue every accepted event in the outbox, for olbridge stream
    tokens: tuple[NamedToken, ...] | None = None  # inline [serve.tokens.<name>] tables
    tokens_file: Path | None = None  # or a tokens file (`tokens = "path"`), read when serve starts
    access_log: str | None = None  # "text" or "json": serve's access log (None: "off", none)
    limits: Mapping[str, int] = attrs.field(factory=dict)  # the receiver's limits set here (LIMIT_KEYS)


ACCESS_LOG = ("text", "json", "off")  # the access log's formats, and none
# the receiver's limits, each a [serve] key and an option of serve (--max-body ...): a whole number
LIMIT_KEYS = (
    "max_body",
    "max_gunzipped",
    "max_batch",
    "max_datasets",
    "max_column_edges",
    "max_values",
    "max_depth",
    "max_request_line",
    "max_header",
    "max_headers",
    "max_in_flight",
    "max_connections",
)
_SERVE_KEYS = ("access_log", "forward", "tokens", *LIMIT_KEYS)


def _section(table: Any, name: str, keys: Sequence[str], where: str) -> dict[str, Any]:
    """Section ``[name]`` of the file, once it is a table holding only ``keys``."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: '{name}' must be a table ([{name}])")
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: [{name}]: unknown setting(s) {', '.join(unknown)}; known: {', '.join(keys)}")
    return table


def _serve_config(table: Any, where: str, base: Path) -> ServeConfig:
    table = _section(table, "serve", _SERVE_KEYS, where)
    forward = table.get("forward", False)
    if not isinstance(forward, bool):
        raise ConfigError(f"{where}: [serve]: 'forward' must be true or false, not {forward!r}")
    access_log = table.get("access_log", "off")
    if access_log not in ACCESS_LOG:
        raise ConfigError(f'{where}: [serve]: \'access_log\' must be "text", "json" or "off", not {access_log!r}')
    limits = {key: table[key] for key in LIMIT_KEYS if key in table}
    for key, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}: [serve]: '{key}' must be a whole number of at least 1, not {value!r}")
        if key == "max_depth" and value > MAX_DEPTH:  # what the receiver can hold to: a bad value before any command
            raise ConfigError(f"{where}: [serve]: 'max_depth' is {value}, more than {MAX_DEPTH}, the most it can be")
    settings = ServeConfig(forward=forward, access_log=None if access_log == "off" else access_log, limits=limits)
    tokens = table.get("tokens")
    if isinstance(tokens, str):
        return attrs.evolve(settings, tokens_file=base / _path(tokens, "[serve]: 'tokens'", where))
    if isinstance(tokens, dict):
        return attrs.evolve(settings, tokens=parse_tokens(tokens, f"{where}: [serve.tokens]"))
    if tokens is not None:
        raise ConfigError(f"{where}: [serve]: 'tokens' is a tokens file's path or [serve.tokens.<name>] tables")
    return settings


def _array_tables(tables: Any, name: str, keys: Sequence[str], where: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Each ``[[name]]`` table, numbered from 1, with where it is, once it holds only ``keys``."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{where}: '{name}' must be [[{name}]] tables")
    for number, table in enumerate(tables, 1):
        at = f"{where}: [[{name}]] #{number}"
        unknown = sorted(set(table) - set(keys))
        if unknown:
            raise ConfigError(f"{at}: unknown key(s) {', '.join(unknown)}; known: {', '.join(keys)}")
        yield number, at, table


_FRESHNESS_KEYS = ("match", "max", "warn", "cron", "lag", "timezone")


def parse_freshness(tables: Any, where: str) -> tuple[Selector, ...]:
    """The ``[[freshness]]`` tables: each a ``match`` (namespace, type, id_prefix, metadata; every
    key optional) and a rule: ``max`` and ``warn`` (durations such as ``"24h"``), or ``cron``,
    ``lag`` and ``timezone``."""
    out: list[Selector] = []
    for number, at, table in _array_tables(tables, "freshness", _FRESHNESS_KEYS, where):
        try:
            match = Match.parse(table.get("match"), f"{at}: match")
            durations = {k: parse_duration(table[k], f"{at}: {k}") for k in ("max", "warn", "lag") if k in table}
            for key in ("cron", "timezone"):
                if key in table and not isinstance(table[key], str):
                    raise ConfigError(f"{at}: '{key}' must be a string")
            rule = FreshnessRule.create(
                **durations,
                cron=table.get("cron"),
                timezone=table.get("timezone"),
                source=f"[[freshness]] #{number}",
                where=at,
            )
        except ValidationError as exc:
            raise ConfigError(str(exc)) from None
        out.append(Selector(match, rule))
    return tuple(out)


def _seconds(text: Any, where: str) -> float:
    """A duration of the config (``"30s"``, ``"15m"``, ``"12h"``, ``"7d"``, ``"1d12h"``, as
    :func:`bridge.model.health.parse_duration` reads it, one way for every table): seconds."""
    try:
        seconds = parse_duration(text, where).total_seconds()
    except ValidationError as exc:  # said as every duration is: the form it takes
        raise ConfigError(str(exc)) from None
    if seconds <= 0:
        raise ConfigError(f"{where} must be longer than nothing, not {text!r}")
    return seconds


@attrs.frozen
class RetentionConfig:
    """The ``[retention]`` table: how long each kind of history is kept, in seconds (None: kept),
    whether column edges of runs that are gone go, and how often ``serve`` runs it (None: never)."""

    received_events: float | None = None
    external_runs: float | None = None
    delivered_outbox: float | None = None
    pending_outbox: float | None = None  # events (and alerts) nobody delivered: kept unless given
    dead_letters: float | None = None
    delivery_errors: float | None = None
    task_runs: float | None = None  # olbridge's own history: kept unless given
    checks: float | None = None  # never an asset's latest
    column_edges: bool = False
    every: float | None = None

    @property
    def configured(self) -> bool:
        return any(
            getattr(self, f.name) not in (None, False) for f in attrs.fields(RetentionConfig) if f.name != "every"
        )


_RETENTION_KEYS = tuple(field.name for field in attrs.fields(RetentionConfig))


def _retention_config(table: Any, where: str) -> RetentionConfig:
    table = _section(table, "retention", _RETENTION_KEYS, where)
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key == "column_edges":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: [retention]: 'column_edges' must be true or false, not {value!r}")
            values[key] = value
        else:
            values[key] = _seconds(value, f"{where}: [retention]: '{key}'")
    settings = RetentionConfig(**values)
    if settings.every is not None and not settings.configured:
        raise ConfigError(f"{where}: [retention]: 'every' is set but no window is (received_events = \"7d\", ...)")
    return settings


_ALERT_KEYS = ("headers", "match", "name", "on", "updated_metadata", "webhook")
ALERT_NAME = TOKEN_NAME
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP header's name: a token (RFC 9110)


def _field_value_problem(value: str) -> str | None:
    """What keeps ``value`` from being an HTTP field's value (RFC 9110 section 5.5: visible
    characters, and spaces and tabs between them; Latin-1's upper half as obs-text), said without
    repeating it; None when it is one."""
    for index, char in enumerate(value, 1):
        code = ord(char)
        if code > 0xFF:
            return f"holds U+{code:04X} (character {index}), which a header cannot carry (Latin-1 at most)"
        if (code < 0x20 and char != "\t") or code == 0x7F:
            return f"holds a control character (U+{code:04X}, character {index})"
    if value != value.strip(" \t"):
        return "begins or ends with a space or a tab"
    return None


def parse_alerts(tables: Any, where: str) -> tuple[AlertRule, ...]:
    """The ``[[alerts]]`` tables: each a ``name``, a ``match`` (as ``[[freshness]]``'s), ``on`` (some
    of FAIL, WARN, RECOVERED, UPDATED), a ``webhook`` (http:// or https://), and optionally
    ``headers`` (a table of strings) and ``updated_metadata`` (UPDATED only when the asset's
    metadata holds these values)."""
    out: list[AlertRule] = []
    for _number, at, table in _array_tables(tables, "alerts", _ALERT_KEYS, where):
        name = table.get("name")
        if not isinstance(name, str) or not ALERT_NAME.fullmatch(name):
            raise ConfigError(f"{at}: 'name' must be letters, digits, '_', '.', '-', at most 64, not {name!r}")
        if any(rule.name == name for rule in out):
            raise ConfigError(f"{at}: the name {name!r} is taken by another [[alerts]] table")
        on = table.get("on")
        if not isinstance(on, list) or not on or not all(isinstance(e, str) and e.upper() in EVENTS for e in on):
            raise ConfigError(f"{at}: 'on' must be a non-empty list of {', '.join(EVENTS)}, not {on!r}")
        events = frozenset(e.upper() for e in on)
        headers = table.get("headers", {})
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and HEADER_NAME.fullmatch(k) and isinstance(v, str) for k, v in headers.items()
        ):
            raise ConfigError(
                f"{at}: 'headers' must be a table of header names and one-line strings ({{ Authorization = \"...\" }})"
            )
        for header, value in headers.items():
            problem = _field_value_problem(value)
            if problem is not None:  # (the value not said: it may be a secret)
                raise ConfigError(
                    f"{at} ({name}): header {header!r}: its value {problem}; a header's value is visible characters, "
                    "spaces and tabs between them (RFC 9110)"
                )
        try:
            match = Match.parse(table.get("match"), f"{at}: match")
            condition = Match.parse({"metadata": table.get("updated_metadata", {})}, f"{at}: updated_metadata")
            webhook = check_webhook(table.get("webhook"), at)
        except ValidationError as exc:
            raise ConfigError(str(exc)) from None
        if condition.metadata and UPDATED not in events:
            raise ConfigError(f"{at}: 'updated_metadata' goes with \"UPDATED\" in 'on'")
        out.append(AlertRule(name, match, events, webhook, dict(headers), condition.metadata))
    return tuple(out)


@attrs.frozen
class HealthConfig:
    """The ``[health]`` table: how often the health watch (``serve``, ``stream``) judges every
    asset (``every``, seconds) and looks for assets written since (``poll``), and the web view's
    address for the alerts' links (``web_url``). ``watch``: the watch runs (a ``[health]`` table
    or ``[[alerts]]`` is in the file)."""

    every: float = 3600.0
    poll: float = 2.0
    web_url: str | None = None
    watch: bool = False


_HEALTH_KEYS = ("every", "poll", "web_url")


def _health_config(table: Any, where: str) -> HealthConfig:
    table = _section(table, "health", _HEALTH_KEYS, where)
    values: dict[str, Any] = {"watch": True}
    for key in ("every", "poll"):
        if key in table:
            values[key] = _seconds(table[key], f"{where}: [health]: '{key}'")
    if "web_url" in table:
        url = table["web_url"]
        problem = url_problem(url)
        if problem is not None:
            raise ConfigError(
                f"{where}: [health]: 'web_url' must be an http:// or https:// URL, not {url!r}: {problem}"
            )
        values["web_url"] = url
    return HealthConfig(**values)


@attrs.frozen
class Config:
    """The settings, each a key of the file but ``source``."""

    catalog: Path | str = Path("olbridge.db")  # the SQLite catalog file, or a postgresql:// URL
    mappings: tuple[Path, ...] = ()  # extra naming-rule files, tried before the built-in rules at equal priority
    default_namespace: str = DEFAULT_NAMESPACE  # the OpenLineage namespace of assets that no rule names
    job_namespace_prefix: str = ""  # put before a flow's namespace to make its job namespace
    producer: str = PRODUCER  # the `producer` URI of every event olbridge emits
    serve: ServeConfig = ServeConfig()  # the receiver's [serve] table
    freshness: tuple[Selector, ...] = ()  # the [[freshness]] tables: rules by selector
    retention: RetentionConfig = RetentionConfig()  # the [retention] table: what history goes when
    alerts: tuple[AlertRule, ...] = ()  # the [[alerts]] tables
    health: HealthConfig = HealthConfig()  # the [health] table: the health watch
    source: Path | None = None  # the file it was read from


_KNOWN = frozenset(field.name for field in attrs.fields(Config)) - {"source"}


def _string(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: '{key}' must be a string, not {value!r}")
    return value


def _path(text: str, key: str, where: str) -> str:
    """A path the file gives (under ``key``), once it holds no NUL character, which no path may
    hold (the operating system ends one there: an error at first use, or another file)."""
    if "\x00" in text:  # (the text itself not said: a catalog's URL may hold a password)
        at = text.index("\x00") + 1
        raise ConfigError(f"{where}: {key} holds a NUL character (character {at}), which no path or URL may hold")
    return text


def _catalog(text: str, base: Path, where: str) -> Path | str:
    """A catalog named in the file or the environment: a database URL (postgresql://...) as it
    is, a file relative to ``base``; a URL of another scheme is an error, not a file name."""
    _path(text, "'catalog'", where)
    if text.startswith(("postgresql://", "postgres://")):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # bytes of the environment that are not UTF-8
            raise ConfigError(f"{where}: the catalog's URL is not UTF-8 text") from None
        return text
    if "://" in text or not text.strip():  # an empty one would be the folder itself
        raise ConfigError(f"{where}: 'catalog' must be a SQLite file or a postgresql:// URL, not {text!r}")
    return base / text


# the longest job namespace prefix: with the longest flow namespace, the longest namespace Marquez takes
PREFIX_MAX = MARQUEZ_NAMESPACE_MAX - NAMESPACE_MAX


def _uri(text: str) -> bool:
    """Whether ``text`` is a URI as the spec's ``format: uri`` and Marquez (``java.net.URI``)
    both read one: the ``producer`` of every event and facet olbridge writes."""
    # (imported here: the event validator is not needed to start a command)
    from bridge.openlineage.marquez_rules import java_uri
    from bridge.openlineage.validate import is_uri

    return is_uri(text) and java_uri(text)


def parse_config(document: Mapping[str, Any], where: str, base: Path) -> Config:
    unknown = sorted(set(document) - set(_KNOWN))
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN))}")
    values: dict[str, Any] = {}
    if "catalog" in document:
        values["catalog"] = _catalog(_string(document["catalog"], "catalog", where), base, where)
    if "mappings" in document:
        files = document["mappings"]
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ConfigError(f"{where}: 'mappings' must be a list of file paths")
        values["mappings"] = tuple(base / _path(f, f"'mappings' #{n}", where) for n, f in enumerate(files, 1))
    if "default_namespace" in document:
        namespace = _string(document["default_namespace"], "default_namespace", where)
        if not namespace or len(namespace) > MARQUEZ_NAMESPACE_MAX or any(c in namespace for c in " ;=?\n\t"):
            raise ConfigError(f"{where}: 'default_namespace' {namespace!r} is not a namespace Marquez takes")
        values["default_namespace"] = namespace
    if "job_namespace_prefix" in document:
        prefix = _string(document["job_namespace_prefix"], "job_namespace_prefix", where)
        unsafe = marquez_unsafe(prefix)
        if unsafe is not None:
            raise ConfigError(
                f"{where}: 'job_namespace_prefix' {prefix!r} has characters Marquez refuses in namespaces "
                f"({unsafe!r}; it takes {MARQUEZ_NAMESPACE_CHARACTERS})"
            )
        if len(prefix) > PREFIX_MAX:
            raise ConfigError(
                f"{where}: 'job_namespace_prefix' has {len(prefix)} characters; at most {PREFIX_MAX}, so that a job "
                f"namespace (it and a flow's namespace of up to {NAMESPACE_MAX}) is one Marquez takes"
            )
        values["job_namespace_prefix"] = prefix
    if "producer" in document:
        producer = _string(document["producer"], "producer", where)
        if "://" not in producer or not _uri(producer):
            raise ConfigError(
                f"{where}: 'producer' must be an absolute URI, not {producer!r}: scheme://..., as the OpenLineage "
                "spec and Marquez read one (the characters RFC 3986 allows, % only before two hex digits, # once "
                "at most)"
            )
        values["producer"] = producer
    if "serve" in document:
        values["serve"] = _serve_config(document["serve"], where, base)
    if "freshness" in document:
        values["freshness"] = parse_freshness(document["freshness"], where)
    if "retention" in document:
        values["retention"] = _retention_config(document["retention"], where)
    if "alerts" in document:
        values["alerts"] = parse_alerts(document["alerts"], where)
    health = _health_config(document["health"], where) if "health" in document else HealthConfig()
    values["health"] = attrs.evolve(health, watch=health.watch or bool(values.get("alerts")))
    return Config(**values)


def load_config(path: Path | None, env: Mapping[str, str], *, catalog_given: bool = False) -> Config:
    """The configuration: from ``path``, else ``$OLBRIDGE_CONFIG``, else ``./olbridge.toml`` if it
    exists, else the defaults. A file that is named but missing is an error. ``$OLBRIDGE_CATALOG``
    (a file, or a postgresql:// URL), the one place it is read, outranks the file's ``catalog``.
    Either variable set but empty, where it is read (not ``path``; not ``catalog_given``, a
    catalog the command line gives), is an error: an unset variable in a script is not taken for
    "not given"."""
    if path is None and env.get("OLBRIDGE_CONFIG") == "":
        raise BadValueError("$OLBRIDGE_CONFIG is set but empty: give it a config file, or unset it")
    named = path or (Path(env["OLBRIDGE_CONFIG"]) if env.get("OLBRIDGE_CONFIG") else None)
    file = named or (Path(CONFIG_FILE) if Path(CONFIG_FILE).is_file() else None)
    config = (
        Config() if file is None else attrs.evolve(parse_config(read_toml(file), str(file), file.parent), source=file)
    )
    given = env.get("OLBRIDGE_CATALOG")
    if given == "" and not catalog_given:
        raise BadValueError("$OLBRIDGE_CATALOG is set but empty: give it a catalog, or unset it")
    return attrs.evolve(config, catalog=_catalog(given, Path(), "$OLBRIDGE_CATALOG")) if given else config


def read_secret_file(path: Path, option: str) -> str:
    """The secret (a token, an API key) a file holds: one line, trimmed, not empty. A file that
    cannot be read, is empty or holds more than one line is a ConfigError naming ``option``."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{option} {path}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot read it: {exc.strerror or exc}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ConfigError(f"{option} {path}: the file is empty; it holds the secret on one line")
    if len(lines) > 1:
        raise ConfigError(f"{option} {path}: {len(lines)} lines; the file holds the secret alone, on one line")
    return lines[0]
