"""Configuration: one TOML file (``olbridge.toml``), checked at start-up; unknown keys are errors.

Precedence, highest first: command-line flags, environment variables (``OLBRIDGE_CATALOG``,
``OLBRIDGE_CONFIG``), the config file, defaults. Relative paths in the file are read from the
file's folder.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from bridge.errors import ConfigError
from bridge.mapping.resolver import DEFAULT_NAMESPACE, MARQUEZ_NAMESPACE_MAX
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
        return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in self.namespaces)


TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TOKEN_KEYS = ("namespaces", "token")


def parse_tokens(document: Mapping[str, Any], where: str) -> tuple[NamedToken, ...]:
    """The receiver's tokens from a TOML document with one table per token name, each holding
    ``token`` (the secret) and ``namespaces`` (the job namespaces it may write, ``*`` and ``?``
    patterns)::

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


def load_tokens(file: Path) -> tuple[NamedToken, ...]:
    """The receiver's tokens from a file (see :func:`parse_tokens`)."""
    return parse_tokens(read_toml(file, "tokens file"), str(file))


@attrs.frozen
class ServeConfig:
    """The ``[serve]`` table: the receiver's settings that its command line may also give."""

    forward: bool = False  # queue every accepted event in the outbox, for olbridge stream
    tokens: tuple[NamedToken, ...] | None = None  # inline [serve.tokens.<name>] tables
    tokens_file: Path | None = None  # or a tokens file (`tokens = "path"`), read when serve starts
    limits: Mapping[str, int] = attrs.field(factory=dict)  # the receiver's limits set here (LIMIT_KEYS)


# the receiver's limits, each a [serve] key and an option of serve (--max-body ...): a whole number
LIMIT_KEYS = (
    "max_body",
    "max_gunzipped",
    "max_batch",
    "max_datasets",
    "max_depth",
    "max_request_line",
    "max_header",
    "max_headers",
    "max_in_flight",
)
_SERVE_KEYS = ("forward", "tokens", *LIMIT_KEYS)


def _serve_config(table: Any, where: str, base: Path) -> ServeConfig:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: 'serve' must be a table ([serve])")
    unknown = sorted(set(table) - set(_SERVE_KEYS))
    if unknown:
        raise ConfigError(f"{where}: [serve]: unknown setting(s) {', '.join(unknown)}; known: {', '.join(_SERVE_KEYS)}")
    forward = table.get("forward", False)
    if not isinstance(forward, bool):
        raise ConfigError(f"{where}: [serve]: 'forward' must be true or false, not {forward!r}")
    limits = {key: table[key] for key in LIMIT_KEYS if key in table}
    for key, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}: [serve]: '{key}' must be a whole number of at least 1, not {value!r}")
    tokens = table.get("tokens")
    if isinstance(tokens, str):
        return ServeConfig(forward=forward, tokens_file=base / tokens, limits=limits)
    if isinstance(tokens, dict):
        return ServeConfig(forward=forward, tokens=parse_tokens(tokens, f"{where}: [serve.tokens]"), limits=limits)
    if tokens is not None:
        raise ConfigError(f"{where}: [serve]: 'tokens' is a tokens file's path or [serve.tokens.<name>] tables")
    return ServeConfig(forward=forward, limits=limits)


@attrs.frozen
class Config:
    """The settings, each a key of the file but ``source``."""

    catalog: Path | str = Path("olbridge.db")  # the SQLite catalog file, or a postgresql:// URL
    mappings: tuple[Path, ...] = ()  # extra naming-rule files, tried before the built-in rules at equal priority
    default_namespace: str = DEFAULT_NAMESPACE  # the OpenLineage namespace of assets that no rule names
    job_namespace_prefix: str = ""  # put before a flow's namespace to make its job namespace
    producer: str = PRODUCER  # the `producer` URI of every event olbridge emits
    serve: ServeConfig = ServeConfig()  # the receiver's [serve] table
    source: Path | None = None  # the file it was read from


_KNOWN = frozenset(field.name for field in attrs.fields(Config)) - {"source"}


def _string(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: '{key}' must be a string, not {value!r}")
    return value


def parse_config(document: Mapping[str, Any], where: str, base: Path) -> Config:
    unknown = sorted(set(document) - set(_KNOWN))
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN))}")
    values: dict[str, Any] = {}
    if "catalog" in document:
        catalog = _string(document["catalog"], "catalog", where)
        # a database URL as it is (postgresql://...), a file relative to the config file's folder
        values["catalog"] = catalog if catalog.startswith(("postgresql://", "postgres://")) else base / catalog
    if "mappings" in document:
        files = document["mappings"]
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise ConfigError(f"{where}: 'mappings' must be a list of file paths")
        values["mappings"] = tuple(base / f for f in files)
    if "default_namespace" in document:
        namespace = _string(document["default_namespace"], "default_namespace", where)
        if not namespace or len(namespace) > MARQUEZ_NAMESPACE_MAX or any(c in namespace for c in " ;=?\n\t"):
            raise ConfigError(f"{where}: 'default_namespace' {namespace!r} is not a namespace Marquez takes")
        values["default_namespace"] = namespace
    if "job_namespace_prefix" in document:
        prefix = _string(document["job_namespace_prefix"], "job_namespace_prefix", where)
        if any(not (c.isalnum() or c in "_-.:/@+") for c in prefix):
            raise ConfigError(
                f"{where}: 'job_namespace_prefix' {prefix!r} has characters Marquez refuses in namespaces"
            )
        values["job_namespace_prefix"] = prefix
    if "producer" in document:
        producer = _string(document["producer"], "producer", where)
        if "://" not in producer or " " in producer:
            raise ConfigError(f"{where}: 'producer' must be an absolute URI, not {producer!r}")
        values["producer"] = producer
    if "serve" in document:
        values["serve"] = _serve_config(document["serve"], where, base)
    return Config(**values)


def load_config(path: Path | None, env: Mapping[str, str]) -> Config:
    """The configuration: from ``path``, else ``$OLBRIDGE_CONFIG``, else ``./olbridge.toml`` if it
    exists, else the defaults. A file that is named but missing is an error."""
    named = path or (Path(env["OLBRIDGE_CONFIG"]) if env.get("OLBRIDGE_CONFIG") else None)
    file = named or (Path(CONFIG_FILE) if Path(CONFIG_FILE).is_file() else None)
    if file is None:
        return Config()
    document = read_toml(file)
    return attrs.evolve(parse_config(document, str(file), file.parent), source=file)


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
