"""Filters of the naming rules' templates: ``{account!snowflake_account}`` renders a variable
through one of them, so that a dataset is named as OpenLineage's own integrations name it.

Each filter is idempotent: a value it gave renders to itself, so a name read back from a dataset
(the reverse mapping parses the rendered text as it is) names the dataset the same way forward.
"""

from __future__ import annotations

from collections.abc import Callable


def snowflake_account(account: str) -> str:
    """A Snowflake account as OpenLineage's naming spec names it, the way openlineage-dbt and
    Airflow's Snowflake integration normalise it: an organization-account identifier
    (``myorg-myaccount``, a hyphen in its first part) alone, what follows it (``.privatelink``)
    left out; a legacy account locator with its region and cloud, AWS's ``us-west-1`` where it
    gives no region and ``aws`` where it gives no cloud (``xy12345`` → ``xy12345.us-west-1.aws``,
    ``xy12345.us-east-1`` → ``xy12345.us-east-1.aws``); a full locator as it is."""
    parts = account.split(".")
    if "-" in parts[0]:
        return parts[0]
    if len(parts) == 1:
        return f"{account}.us-west-1.aws"
    if len(parts) == 2:
        return f"{account}.aws"
    return account


def dotted(path: str) -> str:
    """A path's segments joined by dots, as a warehouse names a table: a BigQuery key
    ``bigquery://project/dataset/table`` names ``project.dataset.table``, as does
    ``bigquery://project/dataset.table``."""
    return path.replace("/", ".")


FILTERS: dict[str, Callable[[str], str]] = {"dotted": dotted, "snowflake_account": snowflake_account}
