"""The Prefect 3 adapter: a Prefect server's asset events into catalog task runs.

- :mod:`~bridge.adapters.prefect.client`: the server's events and task runs API;
- :mod:`~bridge.adapters.prefect.events`: asset events as task runs (pure: events in, records out);
- :mod:`~bridge.adapters.prefect.imports`: one import, from where the last one stopped, in one
  transaction (:func:`import_events`), and what it did (:class:`PrefectImportSummary`);
- :mod:`~bridge.adapters.prefect.polling`: the one-shot import that first waits out the settle
  window (:func:`import_once`), and :func:`follow`, which imports again and again.
"""

from __future__ import annotations

from bridge.adapters.prefect.client import PrefectClient
from bridge.adapters.prefect.imports import (
    DEFAULT_NAMESPACE,
    DEFAULT_SETTLE,
    PrefectImportSummary,
    import_events,
    output_types,
)
from bridge.adapters.prefect.polling import MAX_WAIT, Unsettled, follow, import_once, unsettled

__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_SETTLE",
    "MAX_WAIT",
    "PrefectClient",
    "PrefectImportSummary",
    "Unsettled",
    "follow",
    "import_events",
    "import_once",
    "output_types",
    "unsettled",
]
