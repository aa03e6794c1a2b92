"""Naming rules: catalog assets to OpenLineage datasets, and back."""

from bridge.mapping.resolver import DEFAULT_NAMESPACE, AssetRef, DatasetName, Resolver, marquez_namespace
from bridge.mapping.rules import Rule, load_rules

__all__ = ["DEFAULT_NAMESPACE", "AssetRef", "DatasetName", "Resolver", "Rule", "load_rules", "marquez_namespace"]
