"""``bridge.integrations.metaflow_assets``, the first name of the Metaflow asset definitions and
branches, kept for the code that imports it: they are :mod:`bridge.adapters.metaflow.assets`."""

from __future__ import annotations

from bridge.adapters.metaflow.assets import (
    ANNOTATION_PREFIX,
    ASSET_TYPES,
    CONFIG_FILE,
    INSTANCE_PREFIX,
    KINDS,
    PROPERTIES_KEY,
    TAGS_KEY,
    AssetDefinition,
    Scope,
    define_all,
    definition_declaration,
    find_assets_root,
    find_definition,
    instance_metadata,
    load_definitions,
    make_scope,
    parse_definition,
    promote,
    resolve_branch,
    scope_part,
    tags_text,
)

__all__ = [
    "ANNOTATION_PREFIX",
    "ASSET_TYPES",
    "CONFIG_FILE",
    "INSTANCE_PREFIX",
    "KINDS",
    "PROPERTIES_KEY",
    "TAGS_KEY",
    "AssetDefinition",
    "Scope",
    "define_all",
    "definition_declaration",
    "find_assets_root",
    "find_definition",
    "instance_metadata",
    "load_definitions",
    "make_scope",
    "parse_definition",
    "promote",
    "resolve_branch",
    "scope_part",
    "tags_text",
]
