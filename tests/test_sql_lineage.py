"""Column lineage of SQL queries, read by sqlglot in a dialect."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from bridge.adapters.dbt.sql_lineage import (
    QueryLineage,
    UnreadableSql,
    UnresolvedColumns,
    available,
    compose,
    query_lineage,
    relation_key,
)
from bridge.model import Transformation

pytestmark = pytest.mark.skipif(not available(), reason="sqlglot is not installed (pip install -e '.[dbt]')")

T = relation_key("db", "main", "t")
U = relation_key("db", "main", "u")
RELATIONS: Mapping[tuple[str, ...], Sequence[str]] = {
    T: ["id", "name", "email", "amount", "status", "d", "customer_id", "l"],
    U: ["id", "label"],
}


def lineage(sql: str, dialect: str | None = "duckdb") -> QueryLineage:
    return query_lineage(sql, dialect=dialect, relations=RELATIONS)


def fields(found: QueryLineage) -> dict[str, set[tuple[str, str, str | None]]]:
    return {
        column: {(s.relation[-1], s.column, s.transformation.subtype) for s in sources}
        for column, sources in found.fields.items()
    }


def test_columns_through_ctes_and_unions_with_their_transformations() -> None:
    found = lineage(
        """
        with c as (select upper(name) as n, id from db.main.t where status = 'open')
        select n, id from c
        union all
        select label, id from db.main.u
        """
    )
    assert found.columns == ("n", "id")
    assert fields(found) == {
        "n": {("t", "name", "TRANSFORMATION"), ("u", "label", "IDENTITY")},
        "id": {("t", "id", "IDENTITY"), ("u", "id", "IDENTITY")},
    }
    assert {(s.relation[-1], s.column, s.transformation.subtype) for s in found.dataset} == {("t", "status", "FILTER")}


def test_conditions_windows_and_hashes() -> None:
    found = lineage(
        """
        select
            case when status = 'x' then amount end as paid,
            sum(amount) over (partition by customer_id order by d) as running,
            md5(email) as email_hash
        from db.main.t
        """
    )
    assert fields(found) == {
        "paid": {("t", "status", "CONDITIONAL"), ("t", "amount", "TRANSFORMATION")},
        "running": {("t", "amount", "AGGREGATION"), ("t", "customer_id", "WINDOW"), ("t", "d", "WINDOW")},
        "email_hash": {("t", "email", "TRANSFORMATION")},
    }
    (email,) = found.fields["email_hash"]
    assert email.transformation.masking and email.transformation.description == "MD5(t.email)"


def test_joins_grouping_and_scalar_subqueries() -> None:
    found = lineage(
        """
        select t.customer_id, count(*) as n, (select max(label) from db.main.u) as top
        from db.main.t as t join db.main.u as u on t.id = u.id
        group by t.customer_id
        order by n
        """
    )
    assert fields(found) == {
        "customer_id": {("t", "customer_id", "IDENTITY")},
        "n": set(),
        "top": {("u", "label", "AGGREGATION")},
    }
    assert {(s.relation[-1], s.column, s.transformation.subtype) for s in found.dataset} == {
        ("t", "id", "JOIN"),
        ("u", "id", "JOIN"),
        ("t", "customer_id", "GROUP_BY"),
    }


def test_the_dialect_knows_duckdbs_own_sql() -> None:
    # a column alias used again in the same SELECT, a lambda and a struct literal
    found = lineage(
        """
        select amount * 2 as doubled, doubled + 1 as more,
               list_transform(l, lambda x: x + 1) as bumped, {'n': name} as s
        from db.main.t
        """
    )
    assert fields(found) == {
        "doubled": {("t", "amount", "TRANSFORMATION")},
        "more": {("t", "amount", "TRANSFORMATION")},  # not a column 'doubled' of t
        "bumped": {("t", "l", "TRANSFORMATION")},  # and no column 'x'
        "s": {("t", "name", "TRANSFORMATION")},
    }


def test_select_star_is_expanded_with_the_known_columns_and_noted_when_unknown() -> None:
    found = lineage("select * from db.main.u")
    assert found.columns == ("id", "label") and found.notes == ()
    assert fields(found) == {"id": {("u", "id", "IDENTITY")}, "label": {("u", "label", "IDENTITY")}}
    unknown = lineage("select * from db.main.elsewhere")
    assert unknown.columns == () and "SELECT *" in unknown.notes[0]


def test_a_column_is_named_as_a_warehouse_that_keeps_its_case_keeps_it() -> None:
    """DuckDB (as BigQuery, Databricks and Spark) keeps a column's name as the query writes it,
    and dbt-ol and catalog.json name it so; sqlglot reads them without their case, and a model's
    columns came out in small letters (`customerid`), their edges apart from dbt-ol's. PostgreSQL
    and Snowflake keep their own reading (small letters, capitals)."""
    sql = 'select id as CustomerId, name as "CustomerName", upper(name) as Shout from db.main.t'
    found = lineage(sql)
    assert found.columns == ("CustomerId", "CustomerName", "Shout")
    assert fields(found)["CustomerId"] == {("t", "id", "IDENTITY")}
    assert lineage(sql, "postgres").columns == ("customerid", "CustomerName", "shout")
    assert lineage(sql, "snowflake").columns == ("CUSTOMERID", "CustomerName", "SHOUT")
    starred = query_lineage(
        "select * from db.main.w",
        dialect="duckdb",
        relations={("db", "main", "w"): ["Id"], ("db", "main", "v"): ["ID"]},
    )
    assert starred.columns == ("Id",)  # as the relation it reads names it, not another
    # dbt's usual shape: the names a CTE (or a subquery) writes, through a star over it
    assert lineage(
        'with final as (select id as CustomerId, name as "Name" from db.main.t) select * from final'
    ).columns == (
        "CustomerId",
        "Name",
    )
    assert lineage("select * from (select id as CustomerId from db.main.t) s").columns == ("CustomerId",)
    assert lineage("select id as CustomerId, * from db.main.u").columns == ("CustomerId", "id", "label")
    assert lineage("select customerid from (select id as CustomerId from db.main.t) s").columns == ("customerid",)


def test_an_output_column_sorted_by_is_the_columns_it_is_made_of() -> None:
    """ORDER BY an output column's alias (or its place) made an edge from a column of that name of
    the relation, which it has not (`t.total`); it is the columns the output is made of."""
    for order in ("total desc", "2 desc"):
        found = lineage(
            f"select customer_id, sum(amount) as total from db.main.t group by customer_id order by {order}"
        )
        assert {(s.relation[-1], s.column, s.transformation.subtype) for s in found.dataset} == {
            ("t", "amount", "SORT"),
            ("t", "customer_id", "GROUP_BY"),
        }, order


def test_sql_that_cannot_be_read_says_why() -> None:
    with pytest.raises(UnreadableSql):
        lineage("select from where")
    # what sqlglot's optimizer refuses that is no column of unknown relations is not said to be one
    with pytest.raises(UnreadableSql, match="Alias already used") as raised:
        lineage("select x.a from db.main.t as x join db.main.u as x on true")
    assert not isinstance(raised.value, UnresolvedColumns)
    with pytest.raises(UnresolvedColumns, match="Unknown column: nope"):
        lineage("select x.nope from db.main.t as x")
    with pytest.raises(UnreadableSql, match="expected one query"):
        lineage("create table x as select 1; select 2")


def test_an_indirect_step_makes_the_whole_path_indirect() -> None:
    identity, aggregation = Transformation.of("IDENTITY"), Transformation.of("AGGREGATION", "sum(a)")
    assert compose(identity, aggregation) == aggregation
    assert compose(aggregation, identity).subtype == "AGGREGATION"
    assert compose(identity, Transformation.of("FILTER")).subtype == "FILTER"
    assert compose(Transformation.of("JOIN"), aggregation).subtype == "JOIN"
    masked = Transformation.of("TRANSFORMATION", masking=True)
    assert compose(identity, masked).masking


def test_sqlglot_s_own_warnings_stay_off_stderr() -> None:
    """sqlglot logs what it cannot do on its logger (``Cannot convert untyped key-value
    definitions``, reading a trino model): with no handler configured, Python printed each as a
    bare line on stderr beside olbridge's own. A process that read SQL no longer shows them."""
    import subprocess
    import sys

    probe = (
        "import logging\n"
        "from bridge.adapters.dbt.sql_lineage import query_lineage\n"
        "query_lineage('select 1 as a', dialect='trino', relations={})\n"
        "logging.getLogger('sqlglot').warning('Cannot convert untyped key-value definitions (try annotate_types).')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr == ""
