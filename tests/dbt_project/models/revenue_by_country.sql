{{ config(materialized='table', schema='marts') }}

select country_name, sum(amount) as revenue
from {{ ref('orders_enriched') }}
group by country_name
