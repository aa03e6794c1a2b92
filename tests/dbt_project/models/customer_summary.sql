{{ config(materialized='table', alias='dim_customers') }}

select customer_id, customer_name, count(*) as order_count, sum(amount) as total_amount
from {{ ref('orders_enriched') }}
group by customer_id, customer_name
