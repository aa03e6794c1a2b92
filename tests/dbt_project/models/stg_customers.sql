{{ config(materialized='view') }}

select customer_id, customer_name, country_code, updated_at
from {{ source('raw', 'customers') }}
