"""``bridge.integrations.metaflow``, the first name of the Metaflow step helpers, kept for the flows
that import it: they are :mod:`bridge.adapters.metaflow.steps` (import them from
:mod:`bridge.adapters.metaflow`)."""

from __future__ import annotations

from bridge.adapters.metaflow.steps import (
    AssetReference,
    StepContext,
    StepRecorder,
    consume_data_asset,
    consume_model_asset,
    context_from,
    get_data,
    get_model,
    register_data,
    register_model,
)

__all__ = [
    "AssetReference",
    "StepContext",
    "StepRecorder",
    "consume_data_asset",
    "consume_model_asset",
    "context_from",
    "get_data",
    "get_model",
    "register_data",
    "register_model",
]
