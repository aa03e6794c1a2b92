{{ config(materialized='incremental', unique_key='order_id') }}

select order_id, customer_id, amount, order_date
from {{ ref('orders_enriched') }}
{% if is_incremental() %}
where order_date > (select max(order_date) from {{ this }})
{% endif %}
