"""Configuration: one TOML file (``olbridge.toml``), checked at start-up; unknown keys are errors.

Precedence, highest first: command-line flags, environment variables (``OLBRIDGE_CATALOG``,
``OLBRIDGE_CONFIG``), the config file, defaults. Relative paths in the file are read from the
file's folder.
"""

from __future__ import annotations

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
class Config:
    """The settings, each a key of the file but ``source``."""

    catalog: Path | str = Path("olbridge.db")  # the SQLite catalog file, or a postgresql:// URL
    mappings: tuple[Path, ...] = ()  # extra naming-rule files, tried before the built-in rules at equal priority
    default_namespace: str = DEFAULT_NAMESPACE  # the OpenLineage namespace of assets that no rule names
    job_namespace_prefix: str = ""  # put before a flow's namespace to make its job namespace
    producer: str = PRODUCER  # the `producer` URI of every event olbridge emits
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
    return Config(**values)


def load_config(path: Path | None, env: Mapping[str, str]) -> Config:
    """The configuration: from ``path``, else ``$OLBRIDGE_CONFIG``, else ``./olbridge.toml`` if it
    exists, else the defaults. A file that is named but missing is an error."""
    named = path or (Path(env["OLBRIDGE_CONFIG"]) if env.get("OLBRIDGE_CONFIG") else None)
    file = named or (Path(CONFIG_FILE) if Path(CONFIG_FILE).is_file() else None)
    if file is None:
        return Config()
    try:
        document = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
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
