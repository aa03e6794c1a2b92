{{ config(materialized='ephemeral') }}

select order_id, customer_id, amount, status, order_date
from {{ source('raw', 'orders') }}
