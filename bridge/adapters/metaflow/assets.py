"""Metaflow assets: Outerbounds-style definitions and branch scoping, without Metaflow itself.

An asset is defined by ``data/<name>/asset_config.toml`` or ``models/<name>/asset_config.toml``::

    name = "Orders"                      # human-readable, required
    id = "orders"                        # what register_data / get_data call it, required
    description = "Cleaned orders"       # optional
    [properties]                         # optional, static, flat scalars
    owner = "analytics"

In the catalog an asset lives in the namespace of its project and branch (``<project>.<branch>``,
e.g. ``shop.user.alice``), under the id ``metaflow://<project>/<branch>/<data|models>/<id>``, so
the same asset on two branches is two catalog assets. :func:`promote` copies an asset's pointers
(its latest instance) from one branch to another.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from bridge.catalog import Catalog, CatalogSource, opened
from bridge.errors import ConfigError, InputFileError, NotFoundError, NotInCatalog, ValidationError
from bridge.files import read_text, reading_problem
from bridge.model import Asset, AssetDeclaration, check_metadata, check_namespace, slugify

CONFIG_FILE = "asset_config.toml"
KINDS = {"data": "data", "model": "models"}  # kind -> folder
ASSET_TYPES = {"data": "Dataset", "model": "Model"}
_CONFIG_KEYS = {"name", "id", "description", "properties"}
_ASSET_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

# metadata keys: the definition's, an instance's (the pointers promote copies), annotations, tags
INSTANCE_PREFIX = "metaflow.instance."
ANNOTATION_PREFIX = "annotation."
TAGS_KEY = "tags"
PROPERTIES_KEY = "metaflow.properties"
_RESERVED = ("metaflow.", ANNOTATION_PREFIX)


@attrs.frozen
class AssetDefinition:
    """One ``asset_config.toml``."""

    kind: str  # "data" | "model"
    id: str
    name: str
    description: str | None
    properties: Mapping[str, Any]
    source: Path


@attrs.frozen
class Scope:
    """Where assets live: a project and a branch, and the catalog namespace made of them."""

    project: str
    branch: str

    @property
    def namespace(self) -> str:
        return f"{self.project}.{self.branch}"

    def catalog_id(self, kind: str, asset_id: str) -> str:
        return f"metaflow://{self.project}/{self.branch}/{KINDS[kind]}/{asset_id}"


# ---------------------------------------------------------------------------------------------
# definitions


def parse_definition(text: str, source: Path, kind: str) -> AssetDefinition:
    """An asset definition from the text of its file; every problem names the file."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{source}: cannot be read: {reading_problem(exc)}") from None
    unknown = sorted(set(document) - _CONFIG_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {', '.join(unknown)}; an asset_config.toml has {', '.join(sorted(_CONFIG_KEYS))}"
        )
    missing = [k for k in ("name", "id") if k not in document]
    if missing:
        raise ConfigError(f"{source}: missing required key(s) {', '.join(missing)}")
    for key in ("name", "id", "description"):
        if key in document and (not isinstance(document[key], str) or not document[key].strip()):
            raise ConfigError(f"{source}: '{key}' must be a non-empty string, not {document[key]!r}")
    asset_id = document["id"]
    if len(asset_id) > 100 or not _ASSET_ID_RE.fullmatch(asset_id):
        raise ConfigError(
            f"{source}: 'id' {asset_id!r} must be letters, digits, '.', '_' or '-' (at most 100, "
            "starting with a letter or digit)"
        )
    properties = document.get("properties", {})
    if not isinstance(properties, dict):
        raise ConfigError(f"{source}: [properties] must be a table of keys to values, not {properties!r}")
    try:
        checked = check_metadata(properties, "properties")
    except ValidationError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    commas = sorted(k for k in checked if "," in k)
    if commas:  # metaflow.properties lists the keys, comma-separated: such a key could never leave
        raise ConfigError(f"{source}: property key(s) {', '.join(map(repr, commas))} hold a comma, which no key may")
    reserved = sorted(k for k in checked if k == TAGS_KEY or k.startswith(_RESERVED))
    if reserved:
        raise ConfigError(
            f"{source}: property key(s) {', '.join(reserved)} are reserved "
            "(tags and annotations are given per instance; metaflow.* is olbridge's)"
        )
    return AssetDefinition(
        kind=kind,
        id=asset_id,
        name=document["name"],
        description=document.get("description"),
        properties=checked,
        source=source,
    )


def find_assets_root(start: Path, kind: str) -> Path | None:
    """The folder holding ``data/`` (or ``models/``): ``start`` or the nearest parent that has it,
    not looking above a project root (a folder with ``obproject.toml`` or ``.git``)."""
    folder = KINDS[kind]
    for candidate in (start, *start.parents):
        if (candidate / folder).is_dir():
            return candidate
        if (candidate / "obproject.toml").exists() or (candidate / ".git").exists():
            return None
    return None


def load_definitions(root: Path, kind: str) -> dict[str, AssetDefinition]:
    """Every definition of a kind under ``root``, by id; a bad file or a repeated id is an error."""
    found: dict[str, AssetDefinition] = {}
    for path in sorted((root / KINDS[kind]).glob(f"*/{CONFIG_FILE}")):
        try:
            text = read_text(path)  # said as every reader says it (not Python's own words)
        except InputFileError as exc:
            raise ConfigError(str(exc)) from None
        definition = parse_definition(text, path, kind)
        if definition.id in found:
            raise ConfigError(f"{path}: asset id {definition.id!r} is already defined in {found[definition.id].source}")
        found[definition.id] = definition
    return found


def find_definition(asset_id: str, kind: str, start: Path, root: Path | None = None) -> AssetDefinition:
    """The definition of ``asset_id``: from ``root`` when given, else searched from ``start`` up."""
    base = root if root is not None else find_assets_root(start, kind)
    folder = KINDS[kind]
    if base is None:
        raise ConfigError(
            f"no {folder}/ folder with asset definitions in {start} or its parents "
            "(set OLBRIDGE_METAFLOW_ASSETS or pass assets_dir=)"
        )
    definitions = load_definitions(base, kind)
    if asset_id not in definitions:
        known = ", ".join(sorted(definitions)) or "none"
        raise ConfigError(f"no {kind} asset {asset_id!r} is defined in {base / folder} (defined: {known})")
    return definitions[asset_id]


def property_keys(asset: Asset | None) -> list[str]:
    """The keys of an asset's properties, as ``metaflow.properties`` lists them."""
    if asset is None:
        return []
    return [key for key in str(asset.metadata.get(PROPERTIES_KEY) or "").split(",") if key]


def definition_declaration(definition: AssetDefinition, scope: Scope, stored: Asset | None) -> AssetDeclaration:
    """The catalog asset a definition becomes in a scope (set outside runs: a DatasetEvent when it
    changes). ``metaflow.properties`` lists the property keys, so a property taken out of the file
    is taken out of the catalog too."""
    metadata: dict[str, Any] = {}
    if stored is not None:
        metadata.update({key: None for key in property_keys(stored) if key not in definition.properties})
    metadata.update(definition.properties)
    metadata.update(
        {
            "metaflow.asset": definition.id,
            "metaflow.kind": definition.kind,
            "metaflow.project": scope.project,
            "metaflow.branch": scope.branch,
            PROPERTIES_KEY: ",".join(sorted(definition.properties)) if definition.properties else None,
        }
    )
    return AssetDeclaration.create(
        scope.catalog_id(definition.kind, definition.id),
        type=ASSET_TYPES[definition.kind],
        namespace=scope.namespace,
        display_name=definition.name,
        description=definition.description,
        metadata=metadata,
    )


def define_all(catalog: CatalogSource, root: Path, scope: Scope, *, now: datetime) -> list[Asset]:
    """Set every definition under ``root`` (data/ and models/) as a catalog asset of ``scope``, in
    one transaction; with any bad file nothing is set (the catalog opened once they are read)."""
    definitions = [d for kind in KINDS for d in load_definitions(root, kind).values()]
    if not definitions:
        raise ConfigError(f"no asset definitions in {root / 'data'} or {root / 'models'}")
    catalog = opened(catalog)
    decls = [definition_declaration(d, scope, catalog.get_asset(scope.catalog_id(d.kind, d.id))) for d in definitions]
    return catalog.record([], decls, now=now)[1]


# ---------------------------------------------------------------------------------------------
# branches


def scope_part(value: str, what: str, *, dots: bool) -> str:
    """A project or branch name made valid in a catalog namespace: lower case, other characters
    (``/``, spaces, ``@``) as ``-``. A project keeps no dots, so ``<project>.<branch>`` reads back."""
    text = value.strip().lower()
    allowed = r"[^a-z0-9._-]+" if dots else r"[^a-z0-9_-]+"
    cleaned = re.sub(r"-{2,}", "-", re.sub(allowed, "-", text)).strip("-._")
    if not cleaned:
        raise ValidationError(f"{what} {value!r} has nothing usable in a namespace", rule="metaflow.scope", value=value)
    return cleaned


def make_scope(project: str, branch: str) -> Scope:
    """The scope of a project and branch; the namespace is checked as the catalog checks it."""
    scope = Scope(scope_part(project, "project", dots=False), scope_part(branch, "branch", dots=True))
    check_namespace(scope.namespace, "namespace")
    return scope


def resolve_branch(*, explicit: str | None, project_branch: str | None, username: str | None) -> str:
    """The branch of a run: an explicit one (a deployment's git branch), else the @project branch,
    else ``user.<username>`` for a local run."""
    if explicit:
        return explicit
    if project_branch:
        return project_branch
    if not username:
        raise ValidationError(
            "cannot tell the branch: no @project branch, no OLBRIDGE_METAFLOW_BRANCH and no user name",
            rule="metaflow.branch",
        )
    return f"user.{slugify(username)}"


# ---------------------------------------------------------------------------------------------
# instances and promotion


def instance_metadata(
    stored: Asset | None,
    pointers: Mapping[str, Any],
    annotations: Mapping[str, Any] | None,
    tags: Mapping[str, Any] | Iterable[str] | None,
) -> dict[str, Any]:
    """The metadata an instance writes: its pointers, annotations and tags, with null for the
    previous instance's annotations it does not repeat (the definition's properties stay)."""
    out: dict[str, Any] = {}
    previous = stored.metadata if stored is not None else {}
    for key in previous:
        if key.startswith((INSTANCE_PREFIX, ANNOTATION_PREFIX)) or key == TAGS_KEY:
            out[key] = None
    out.update({f"{INSTANCE_PREFIX}{k}": v for k, v in pointers.items()})
    checked = check_metadata(annotations or {}, "annotations")
    out.update({f"{ANNOTATION_PREFIX}{k}": v for k, v in checked.items()})
    text = tags_text(tags)
    if text:
        out[TAGS_KEY] = text
    return out


def tags_text(tags: Mapping[str, Any] | Iterable[str] | None) -> str:
    """Tags as the metadata ``tags`` text (``key:value,flag``), exported as the tags facet."""
    if tags is None:
        return ""
    if isinstance(tags, str):
        raise ValidationError("tags are a mapping or a list of strings, not a string", rule="metaflow.tags")
    if isinstance(tags, Mapping):
        items = [f"{k}:{v}" if v is not True else str(k) for k, v in tags.items()]
    else:
        items = list(tags)
    for item in items:
        if not isinstance(item, str) or not item or "," in item:
            raise ValidationError(
                f"a tag is a non-empty string without ',': {item!r}", rule="metaflow.tags", value=item
            )
    return ",".join(items)


def promote(
    catalog: Catalog,
    asset_id: str,
    from_branch: str,
    to_branch: str,
    *,
    project: str,
    kind: str = "data",
    now: datetime,
) -> Asset:
    """Copy an asset's pointers (its latest instance: pointers, annotations, tags) and its definition
    from one branch to another. The target is set outside any run, so it becomes a DatasetEvent."""
    if kind not in KINDS:
        raise ValidationError(f"kind is data or model, not {kind!r}", rule="metaflow.kind", value=kind)
    source_scope, target_scope = make_scope(project, from_branch), make_scope(project, to_branch)
    if source_scope == target_scope:
        raise ValidationError(f"promoting to the same branch ({source_scope.branch})", rule="metaflow.promote")
    source = catalog.get_asset(source_scope.catalog_id(kind, asset_id))
    if source is None or source.is_deleted:
        raise NotInCatalog(f"no {kind} asset {asset_id!r} on branch {source_scope.branch} of project {project!r}")
    pointers = {k: v for k, v in source.metadata.items() if k.startswith(INSTANCE_PREFIX)}
    if not pointers:
        raise NotFoundError(f"{kind} asset {asset_id!r} on branch {source_scope.branch} has no instance to promote")
    target = catalog.get_asset(target_scope.catalog_id(kind, asset_id))
    metadata = instance_metadata(target, {}, None, None)  # null for the target's previous instance
    # ... and for the properties of its definition that the source's has not (its keys go with it)
    kept = set(property_keys(source))
    metadata.update({key: None for key in property_keys(target) if key not in kept})
    metadata.update(source.metadata)
    metadata.update({"metaflow.branch": target_scope.branch, f"{INSTANCE_PREFIX}promotedFrom": source_scope.branch})
    decl = AssetDeclaration.create(
        target_scope.catalog_id(kind, asset_id),
        type=source.type,
        namespace=target_scope.namespace,
        display_name=source.display_name,
        description=source.description,
        metadata=metadata,
    )
    return catalog.set_asset(decl, now=now)
