"""The Metaflow adapter: Outerbounds-style data and model assets recorded from inside Metaflow
steps (:mod:`bridge.adapters.metaflow.steps`, the helpers a flow imports from here), and their
definitions and branches (:mod:`bridge.adapters.metaflow.assets`, which ``olbridge metaflow``
uses without Metaflow)."""

from __future__ import annotations

from bridge.adapters.metaflow.steps import (
    AssetReference,
    consume_data_asset,
    consume_model_asset,
    get_data,
    get_model,
    register_data,
    register_model,
)

__all__ = [
    "AssetReference",
    "consume_data_asset",
    "consume_model_asset",
    "get_data",
    "get_model",
    "register_data",
    "register_model",
]
