from __future__ import annotations

import re
from pathlib import Path

import pytest

from bridge.errors import MappingError
from bridge.mapping import Resolver, marquez_namespace
from bridge.mapping.rules import parse_rule_text

MARQUEZ = re.compile(r"[A-Za-z0-9_\-.:/@+]{1,1024}")
WAREHOUSE = {"database": "db", "schema": "sch", "name": "tbl"}

CASES = [
    (
        "db.sch.tbl",
        "Table",
        {"system": "duckdb", "path": "/data/w.duckdb", **WAREHOUSE},
        "duckdb:///data/w.duckdb",
        "db.sch.tbl",
    ),
    (
        "db.sch.tbl",
        "Table",
        {"system": "postgres", "host": "pg", "port": 5433, **WAREHOUSE},
        "postgres://pg:5433",
        "db.sch.tbl",
    ),
    ("db.sch.tbl", "Table", {"system": "postgres", "host": "pg", **WAREHOUSE}, "postgres://pg:5432", "db.sch.tbl"),
    (
        "db.tbl",
        "Table",
        {"system": "mysql", "host": "my", "database": "db", "name": "tbl"},
        "mysql://my:3306",
        "db.tbl",
    ),
    (
        "db.sch.tbl",
        "Table",
        {"system": "snowflake", "account": "org-acct", **WAREHOUSE},
        "snowflake://org-acct",
        "db.sch.tbl",
    ),
    (
        "p.ds.tbl",
        "Table",
        {"system": "bigquery", "database": "p", "schema": "ds", "name": "tbl"},
        "bigquery",
        "p.ds.tbl",
    ),
    (
        "db.sch.tbl",
        "Table",
        {"system": "redshift", "host": "c.r", "port": 5439, **WAREHOUSE},
        "redshift://c.r:5439",
        "db.sch.tbl",
    ),
    (
        "db.sch.tbl",
        "Table",
        {"system": "trino", "host": "t", "port": 8080, **WAREHOUSE},
        "trino://t:8080",
        "db.sch.tbl",
    ),
    # as dbt-ol names dbt-sqlserver's (the profile's server and port) and dbt-databricks' tables
    (
        "db.sch.tbl",
        "Table",
        {"system": "sqlserver", "host": "sql.example", **WAREHOUSE},
        "mssql://sql.example:1433",
        "db.sch.tbl",
    ),
    (
        "main.sch.tbl",
        "Table",
        {"system": "databricks", "host": "adb-1.example.net", "database": "main", "schema": "sch", "name": "tbl"},
        "databricks://adb-1.example.net",
        "main.sch.tbl",
    ),
    ("analytics.marts.fct", "Table", {"system": "postgres", "host": "pg"}, "postgres://pg:5432", "analytics.marts.fct"),
    # ... and by their id alone, the connection in metadata
    ("shop.orders", "Table", {"system": "mysql", "host": "my"}, "mysql://my:3306", "shop.orders"),
    ("dev.public.t", "Table", {"system": "redshift", "host": "c.r"}, "redshift://c.r:5439", "dev.public.t"),
    ("hive.sales.t", "Table", {"system": "trino", "host": "t"}, "trino://t:8080", "hive.sales.t"),
    ("sales.dbo.t", "Table", {"system": "sqlserver", "host": "s", "port": 1434}, "mssql://s:1434", "sales.dbo.t"),
    ("main.sales.t", "Table", {"system": "databricks", "host": "d"}, "databricks://d", "main.sales.t"),
    ("s3://bucket/data/part-0.parquet", "File", {}, "s3://bucket", "data/part-0.parquet"),
    ("s3a://bucket/key", "File", {}, "s3://bucket", "key"),
    # a folder: named without its slashes, as Spark names it
    ("s3://bucket/curated/orders/", "File", {}, "s3://bucket", "curated/orders"),
    ("gs://bucket//landing/x/", "File", {}, "gs://bucket", "landing/x"),
    ("gs://bucket/obj/x", "File", {}, "gs://bucket", "obj/x"),
    ("abfss://c@acct.dfs.core.windows.net/p/x", "File", {}, "abfss://c@acct.dfs.core.windows.net", "p/x"),
    ("file:///data/x.csv", "File", {}, "file", "/data/x.csv"),
    ("file://nas-1/data/y.csv", "File", {}, "file://nas-1", "/data/y.csv"),  # a remote file: its host (it was "file")
    ("reports.daily", "File", {"path": "/exports/daily.csv"}, "file", "/exports/daily.csv"),
    ("kafka://broker:9092/orders", "Dataset", {}, "kafka://broker:9092", "orders"),
    ("orders.topic", "Dataset", {"system": "kafka", "host": "b", "topic": "orders"}, "kafka://b:9092", "orders"),
    ("prefect://my/asset", "Dataset", {}, "prefect://my", "asset"),
    # the warehouses' URI-form ids (Prefect asset keys), named as their name-form assets are
    ("mysql://orders-db/shop.orders", "Table", {}, "mysql://orders-db:3306", "shop.orders"),
    ("mariadb://m:3307/shop.orders", "Table", {}, "mysql://m:3307", "shop.orders"),
    ("mssql://s/sales.dbo.t", "Table", {}, "mssql://s:1433", "sales.dbo.t"),
    # Spark's JDBC reader and Azure Synapse name SQL Server sqlserver://, Airflow and dbt-ol mssql://
    ("sqlserver://s:1434/sales.dbo.t", "Table", {}, "sqlserver://s:1434", "sales.dbo.t"),
    ("SQLServer://s/sales.dbo.t", "Table", {}, "sqlserver://s:1433", "sales.dbo.t"),
    ("redshift://c.r/dev.public.t", "Table", {}, "redshift://c.r:5439", "dev.public.t"),
    ("trino://t/hive.sales.t", "Table", {}, "trino://t:8080", "hive.sales.t"),
    ("snowflake://xy12345/RAW.PUBLIC.ORDERS", "Table", {}, "snowflake://xy12345.us-west-1.aws", "RAW.PUBLIC.ORDERS"),
    ("snowflake://myorg-acct.privatelink/D.S.T", "Table", {}, "snowflake://myorg-acct", "D.S.T"),
    ("bigquery://proj/ds.t", "Table", {}, "bigquery", "proj.ds.t"),
    ("bigquery://proj/ds/t", "Table", {}, "bigquery", "proj.ds.t"),
    ("plain.asset", "VM", {}, "olbridge", "plain.asset"),
]


@pytest.mark.parametrize(
    ("asset_id", "kind", "meta", "namespace", "name"),
    CASES,
    ids=[c[0] + "/" + str(c[2].get("system", "")) for c in CASES],
)
def test_builtin_rules_follow_the_naming_table(
    resolver: Resolver, asset_id: str, kind: str, meta: dict[str, object], namespace: str, name: str
) -> None:
    named = resolver.dataset_for(asset_id, kind, meta)
    assert (named.namespace, named.name) == (namespace, name)
    assert MARQUEZ.fullmatch(named.namespace)


@pytest.mark.parametrize(
    "asset_id",
    [
        "s3://bucket/data/part-0.parquet",
        "gs://bucket/obj/x",
        "kafka://broker:9092/orders",
        "file:///data/x.csv",
        "file://nas-1/data/y.csv",
    ],
)
def test_uri_ids_round_trip(resolver: Resolver, asset_id: str) -> None:
    named = resolver.dataset_for(asset_id, "File", {})
    assert resolver.asset_for(named.namespace, named.name).id == asset_id


def test_reverse_rules_give_ids_and_metadata(resolver: Resolver) -> None:
    ref = resolver.asset_for("postgres://pg:5432", "db.sch.tbl")
    assert (ref.id, ref.type, ref.metadata["host"], ref.rule) == ("db.sch.tbl", "Table", "pg", "postgres")
    assert resolver.asset_for("olbridge", "plain.asset").id == "plain.asset"
    table = resolver.asset_for("mssql://sql.example:1433", "db.sch.tbl")
    assert (table.id, table.rule, table.metadata["host"]) == ("db.sch.tbl", "sqlserver", "sql.example")
    odd = resolver.asset_for("weird ns", "name with spaces")
    assert odd.id.startswith("ol:") and odd.id == resolver.asset_for("weird ns", "name with spaces").id
    assert odd.id != resolver.asset_for("weird ns", "other name").id


def test_namespaces_are_made_valid_for_marquez() -> None:
    assert marquez_namespace("duckdb://my file;x=1.duckdb") == "duckdb://my_file_x_1.duckdb"
    with pytest.raises(MappingError):
        marquez_namespace("x" * 1100)


def test_user_rules_come_first_and_bad_files_are_refused(tmp_path: Path) -> None:
    rules = tmp_path / "mine.toml"
    rules.write_text(
        '[[rule]]\nname = "lake"\npriority = 40\n[rule.match]\nschemes = ["s3"]\n'
        '[rule.dataset]\nnamespace = "s3://lake"\nname = "{id.authority}/{id.path}"\n'
    )
    resolver = Resolver.load([rules])
    assert resolver.dataset_for("s3://bucket/k", "File", {}).namespace == "s3://lake"
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nname = "x"\nsurprise = 1\n[rule.dataset]\nnamespace = "a"\nname = "b"\n')
    with pytest.raises(MappingError, match="unknown key"):
        Resolver.load([bad])
    broken = tmp_path / "broken.toml"
    broken.write_text("[[rule]\n")
    with pytest.raises(MappingError, match="not valid TOML"):
        Resolver.load([broken])
    with pytest.raises(MappingError, match=r"cannot read mapping file .*missing\.toml: file not found"):
        Resolver.load([tmp_path / "missing.toml"])
    utf16 = tmp_path / "utf16.toml"
    utf16.write_bytes('[[rule]]\nname = "x"\n'.encode("utf-16"))  # a BOM, then not UTF-8: no traceback
    with pytest.raises(MappingError, match=r"cannot read mapping file .*utf16\.toml: not UTF-8 text"):
        Resolver.load([utf16])
    # a rule's name is its own: `assets show` says which rule named an asset by it
    twice = tmp_path / "twice.toml"
    twice.write_text(rules.read_text() * 2)
    with pytest.raises(MappingError, match=r"twice\.toml: rule 'lake': the name of a rule of .*twice\.toml too; "):
        Resolver.load([twice])
    builtin = tmp_path / "builtin.toml"
    builtin.write_text(rules.read_text().replace('"lake"', '"local-file"'))
    with pytest.raises(
        MappingError, match=r"builtin\.toml: rule 'local-file': the name of a rule of builtin:files\.toml too; "
    ):
        Resolver.load([builtin])


def test_the_spellings_of_an_id_a_dataset_name_may_come_from(resolver: Resolver) -> None:
    """What the receiver looks for where no asset has the id a dataset is named back as: every
    spelling a rule names so, each of which names forward as the dataset is named."""
    for namespace, name, spelled in [
        ("s3://lake", "raw/orders", "s3a://lake/raw/orders"),
        ("s3://lake", "curated/orders", "s3://lake/curated/orders/"),
        ("gs://acme", "landing/x", "gcs://acme/landing/x"),
        ("postgres://db.internal:5432", "shop.public.t", "postgresql://db.internal/shop.public.t"),
        ("postgres://db.internal:5433", "shop.public.t", "postgres://db.internal:5433/shop.public.t"),
        ("mysql://orders-db:3306", "shop.orders", "mysql://orders-db/shop.orders"),
        ("mssql://s:1433", "sales.dbo.t", "mssql://s/sales.dbo.t"),
        ("sqlserver://s:1433", "sales.dbo.t", "sqlserver://s/sales.dbo.t"),
        ("bigquery", "proj.ds.t", "bigquery://proj/ds.t"),
        ("bigquery", "proj.ds.t", "bigquery://proj/ds/t"),
        ("snowflake://xy12345.us-west-1.aws", "DB.S.T", "snowflake://xy12345/DB.S.T"),
        ("snowflake://xy12345.us-west-1.aws", "DB.S.T", "snowflake://xy12345.us-west-1/DB.S.T"),
        ("snowflake://xy12345.us-east-1.aws", "DB.S.T", "snowflake://xy12345.us-east-1/DB.S.T"),
        ("s3://lake", "k", "S3A://lake/k"),
    ]:
        ids = resolver.ids_named(namespace, name)
        assert spelled in ids, (namespace, name, ids)
        for asset_id in ids:
            if "://" in asset_id:
                named = resolver.dataset_for(asset_id, "Dataset", {})
                assert (named.namespace, named.name) == (namespace, name), asset_id
    # a port other than the default is no spelling without it
    assert "postgres://db.internal/shop.public.t" not in resolver.ids_named(
        "postgres://db.internal:5433", "shop.public.t"
    )


SNOWFLAKE_ACCOUNTS = [
    "myorg-myaccount",
    "myorg-myaccount.privatelink",
    "xy12345",
    "xy12345.us-east-1",
    "xy12345.us-west-1.aws",
    "xy12345.east-us-2.azure",
]


@pytest.mark.parametrize("account", SNOWFLAKE_ACCOUNTS)
def test_a_snowflake_account_is_named_as_openlineage_names_it(resolver: Resolver, account: str) -> None:
    """A declared Snowflake table's namespace, by its parts or by its id, against openlineage's
    own normalisation (dbt-ol and Airflow send ``snowflake://xy12345.us-west-1.aws``; the rules
    gave ``snowflake://xy12345``, another dataset in Marquez); read back, it names itself."""
    from openlineage.common.provider.snowflake import fix_account_name

    expected = f"snowflake://{fix_account_name(account)}"
    by_parts = {"system": "snowflake", "account": account, "database": "ANALYTICS", "schema": "MARTS", "name": "DIM_X"}
    for metadata in (by_parts, {"system": "snowflake", "account": account}):
        named = resolver.dataset_for("ANALYTICS.MARTS.DIM_X", "Table", metadata)
        assert (named.namespace, named.name) == (expected, "ANALYTICS.MARTS.DIM_X"), named.rule
        back = resolver.asset_for(named.namespace, named.name)
        again = resolver.dataset_for(back.id, back.type, back.metadata)
        assert (back.id, again.namespace, again.name) == ("ANALYTICS.MARTS.DIM_X", expected, named.name)


def test_a_template_filter_renders_a_variable_and_an_unknown_one_is_refused() -> None:
    namespace = "snowflake://{account!snowflake_account|xy12345}"
    rule = f'[[rule]]\nname = "sf"\n[rule.dataset]\nnamespace = "{namespace}"\nname = "{{id}}"\n'
    resolver = Resolver(parse_rule_text(rule, "mine.toml"))
    assert resolver.dataset_for("a.b.c", "Table", {}).namespace == "snowflake://xy12345.us-west-1.aws"
    named = resolver.dataset_for("a.b.c", "Table", {"account": "org-acct.privatelink"})
    assert named.namespace == "snowflake://org-acct"
    known = r"known: dotted, snowflake_account"
    with pytest.raises(MappingError, match=rf"mine.toml: rule 'sf'.*unknown filter 'upper'.*{known}"):
        parse_rule_text(rule.replace("snowflake_account|xy12345", "upper"), "mine.toml")
