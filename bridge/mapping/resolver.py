"""Apply mapping rules: an asset to its OpenLineage (namespace, name), and a dataset back to an asset.

Pure: rules are loaded once, then every call is a function of its arguments.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from bridge.errors import MappingError, ValidationError
from bridge.mapping.filters import SOURCES
from bridge.mapping.rules import Rule, load_rules
from bridge.model import EXTERNAL, IdForm, id_form, is_uri_id, metadata_text

DEFAULT_NAMESPACE = "olbridge"
MARQUEZ_NAMESPACE_MAX = 1024
# Marquez stores a namespace after replacing every character outside this set with '_'
# (NamespaceName.java, formatNamespaceName); ';' and '=' pass its regex but are replaced too.
_MARQUEZ_UNSAFE = re.compile(r"[^A-Za-z0-9_\-.:/@+]")


@attrs.frozen
class DatasetName:
    namespace: str
    name: str
    rule: str  # the rule that named it ("default" when none matched)


@attrs.frozen
class AssetRef:
    """An asset id found for a dataset, with what the rule says of its type and metadata."""

    id: str
    type: str
    metadata: Mapping[str, str]
    rule: str


MARQUEZ_NAMESPACE_CHARACTERS = "A-Z a-z 0-9 _ - . : / @ +"  # what _MARQUEZ_UNSAFE keeps, as a message says it


def marquez_unsafe(namespace: str) -> str | None:
    """The first character of ``namespace`` that Marquez does not keep in a namespace (None:
    every one is kept, :data:`MARQUEZ_NAMESPACE_CHARACTERS`)."""
    found = _MARQUEZ_UNSAFE.search(namespace)
    return found[0] if found else None


def marquez_namespace(namespace: str) -> str:
    """A namespace as Marquez stores it: outside ``[A-Za-z0-9_-.:/@+]`` every character becomes ``_``."""
    if not namespace:
        raise MappingError("a dataset namespace cannot be empty")
    cleaned = _MARQUEZ_UNSAFE.sub("_", namespace)
    if len(cleaned) > MARQUEZ_NAMESPACE_MAX:
        raise MappingError(
            f"dataset namespace {namespace[:60]!r}... has {len(cleaned)} characters; Marquez takes at most "
            f"{MARQUEZ_NAMESPACE_MAX}"
        )
    return cleaned


def asset_variables(asset_id: str, metadata: Mapping[str, Any]) -> dict[str, str]:
    """The template variables of an asset: its metadata, ``id`` and, for URI-form ids, its parts."""
    values = {key: metadata_text(value) for key, value in metadata.items()}
    values["id"] = asset_id
    if is_uri_id(asset_id):
        scheme, rest = asset_id.split("://", 1)
        authority, _, path = rest.partition("/")
        host_port = authority.rpartition("@")[2]
        host, _, port = host_port.rpartition(":")
        if not host or not port.isdigit():
            host, port = host_port, ""
        # the path as OpenLineage's own extractors name an object: without a slash at either end
        # (s3://lake/orders/ is the dataset orders, as Spark names it)
        path = path.strip("/")
        values.update(
            {"id.scheme": scheme.lower(), "id.authority": authority, "id.host": host, "id.port": port, "id.path": path}
        )
    return values


def _authorities(rule: Rule, values: Mapping[str, str]) -> list[str]:
    """The authorities of a URI-form id a rule's namespace was rendered from: the one it names,
    or its host with its port, and without it where the port is the template's default."""
    if "id.authority" in values:
        return [values["id.authority"]]
    host = values.get("id.host")
    if host is None:
        return [""]  # a namespace without the authority (file:///path)
    port = values.get("id.port")
    if not port:
        return [host]
    defaults = [part[1] for part in rule.namespace.parts if isinstance(part, tuple) and part[0] == "id.port"]
    return [f"{host}:{port}", host] if port in defaults else [f"{host}:{port}"]


def _sources(rule: Rule, values: dict[str, str]) -> list[dict[str, str]]:
    """The variables a rule's templates may have rendered as they parsed to ``values``: a
    variable rendered through a filter (``{id.path!dotted}``) parses back to the filter's text,
    which may have been rendered from others (``dataset/table`` as well as ``dataset.table``)."""
    found = [values]
    for template in (rule.namespace, rule.dataset_name):
        for part in template.parts:
            if not isinstance(part, tuple) or part[2] is None or part[0] not in values:
                continue
            sources = SOURCES.get(part[2])
            if sources is not None:
                found = [{**each, part[0]: given} for each in found for given in sources(each[part[0]])]
    return found


class Resolver:
    """Names assets as OpenLineage datasets by the first rule that applies, and back."""

    def __init__(self, rules: Sequence[Rule], default_namespace: str = DEFAULT_NAMESPACE) -> None:
        self.rules = tuple(rules)
        self.default_namespace = marquez_namespace(default_namespace)

    @classmethod
    def load(cls, extra_files: Iterable[Path | str] = (), default_namespace: str = DEFAULT_NAMESPACE) -> Resolver:
        return cls(load_rules(extra_files), default_namespace)

    # --- forward ---------------------------------------------------------------------------

    def dataset_for(self, asset_id: str, asset_type: str, metadata: Mapping[str, Any]) -> DatasetName:
        """The (namespace, name) of an asset. (The converter keeps its datasets per asset version,
        so this is not memoized here.)"""
        pinned_namespace, pinned_name = metadata.get("olNamespace"), metadata.get("olName")
        if isinstance(pinned_namespace, str) and isinstance(pinned_name, str) and pinned_namespace and pinned_name:
            # the dataset an external event named (a placeholder), or one a user pinned
            return DatasetName(marquez_namespace(pinned_namespace), pinned_name, "pinned")
        values = asset_variables(asset_id, metadata)
        form = IdForm.URI.value if "id.scheme" in values else IdForm.NAME.value
        system = values.get("system", "").lower()
        for rule in self.rules:
            m = rule.match
            if m.id_form and m.id_form != form:
                continue
            if m.schemes and values.get("id.scheme") not in m.schemes:
                continue
            if m.systems and system not in m.systems:
                continue
            if m.types and asset_type not in m.types:
                continue
            if m.metadata and any(values.get(k) != v for k, v in m.metadata):
                continue
            namespace = rule.namespace.render(values)
            name = rule.dataset_name.render(values)
            if namespace is None or name is None:
                continue
            return DatasetName(marquez_namespace(namespace), name.replace("\x00", ""), rule.name)
        return DatasetName(self.default_namespace, asset_id, "default")

    # --- reverse ---------------------------------------------------------------------------

    def ids_named(self, namespace: str, name: str) -> list[str]:
        """The ids an asset the rules name (``namespace``, ``name``) may have besides the one
        :meth:`asset_for` gives: a rule that names a URI-form id by its parts is read back into
        every spelling it takes (each of its schemes, the port its template adds by default or
        not, the path with or without a trailing slash: ``s3a://lake/raw/orders`` is named
        ``s3://lake`` + ``raw/orders``), and a rule that names an asset by its id gives the id.
        Each is only a candidate: the caller names it forward to see that it is so named. An
        asset named by its metadata alone (a Kafka topic by ``topic``) is not found this way."""
        found: dict[str, None] = {}
        for rule in self.rules:
            parsed = rule.namespace.parse(namespace)
            named = rule.dataset_name.parse(name) if parsed is not None else None
            if parsed is None or named is None or any(parsed.get(k, v) != v for k, v in named.items()):
                continue
            parsed.update(named)
            for values in _sources(rule, parsed):
                if values.get("id"):
                    found[values["id"]] = None
                path = values.get("id.path")
                if path is None or not path.strip("/"):
                    continue
                # the scheme its namespace names, else each the rule takes
                schemes = [values["id.scheme"]] if "id.scheme" in values else sorted(rule.match.schemes)
                for scheme in dict.fromkeys([*schemes, *(s.upper() for s in schemes)]):  # a scheme is read in any case
                    for authority in _authorities(rule, values):
                        for tail in ("", "/"):
                            found[f"{scheme}://{authority}/{path.strip('/')}{tail}"] = None
        return list(found)

    def asset_for(self, namespace: str, name: str) -> AssetRef:
        """The asset id for an OpenLineage dataset: by the first reversible rule that parses it,
        else the name itself in the default namespace, else a URI ``namespace/name``, else a
        stable hashed id. Always a valid id; never the same id for two different datasets unless
        a rule says so."""
        for rule in self.rules:
            if rule.asset_id is None:
                continue
            ns_values = rule.namespace.parse(namespace)
            if ns_values is None:
                continue
            name_values = rule.dataset_name.parse(name)
            if name_values is None or any(ns_values.get(k, v) != v for k, v in name_values.items()):
                continue
            values = {**ns_values, **name_values}
            asset_id = rule.asset_id.render(values)
            if asset_id is None or not _valid_id(asset_id):
                continue
            metadata = {}
            for key, template in rule.asset_metadata:
                rendered = template.render(values)
                if rendered is not None:
                    metadata[key] = rendered
            return AssetRef(asset_id, rule.asset_type or EXTERNAL, metadata, rule.name)
        if namespace == self.default_namespace and _valid_id(name):
            return AssetRef(name, EXTERNAL, {}, "default")
        joined = f"{namespace.rstrip('/')}/{name.lstrip('/')}"
        if "://" in namespace and _valid_id(joined):
            return AssetRef(joined, EXTERNAL, {"olNamespace": namespace, "olName": name}, "uri")
        digest = hashlib.sha256(f"{namespace}\n{name}".encode()).hexdigest()[:16]
        return AssetRef(f"ol:{digest}", EXTERNAL, {"olNamespace": namespace, "olName": name}, "hash")


def _valid_id(text: str) -> bool:
    try:
        id_form(text)
    except ValidationError:
        return False
    return True
