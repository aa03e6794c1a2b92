{{ config(materialized='table') }}

-- DuckDB's own SQL: a struct literal, a column alias used again in the same SELECT (total),
-- an ordered list aggregate, an aggregate's FILTER clause and GROUP BY ALL
select
    customer_id,
    {'name': customer_name, 'country': country_name} as profile,
    sum(amount) as total,
    total * 100 as total_cents,
    list(amount order by order_date) as amounts,
    count(*) filter (where status = 'returned') as returns
from {{ ref('orders_enriched') }}
group by all
