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


def snowflake_account_sources(account: str) -> list[str]:
    """The accounts :func:`snowflake_account` renders as ``account``: it, and a locator spelled
    with less of its region and cloud (``xy12345.us-west-1.aws`` is also ``xy12345.us-west-1``
    and ``xy12345``). An organization-account identifier followed by more (``.privatelink``) is
    not found: what followed it is not in its name."""
    parts = account.split(".")
    if "-" in parts[0] or len(parts) != 3 or parts[2] != "aws":
        return [account]
    shorter = [account, f"{parts[0]}.{parts[1]}"]
    return [*shorter, parts[0]] if parts[1] == "us-west-1" else shorter


DOTTED_SOURCES_AT_MOST = 3  # dots of a name whose every choice of slashes is tried; past it, none or all


def dotted_sources(name: str) -> list[str]:
    """The paths :func:`dotted` renders as ``name``: each of its dots may have been a slash
    (``dataset.table`` is also ``dataset/table``); past :data:`DOTTED_SOURCES_AT_MOST` dots, only
    none and all of them."""
    pieces = name.split(".")
    if len(pieces) - 1 > DOTTED_SOURCES_AT_MOST:
        return list(dict.fromkeys([name, name.replace(".", "/")]))
    found = [pieces[0]]
    for piece in pieces[1:]:
        found = [f"{before}{separator}{piece}" for before in found for separator in "./"]
    return found


FILTERS: dict[str, Callable[[str], str]] = {"dotted": dotted, "snowflake_account": snowflake_account}
# what each filter may have been given to render a text (the reverse mapping's candidates)
SOURCES: dict[Callable[[str], str], Callable[[str], list[str]]] = {
    dotted: dotted_sources,
    snowflake_account: snowflake_account_sources,
}
