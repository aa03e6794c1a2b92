{{ config(materialized='table') }}

select
    o.order_id,
    o.customer_id,
    c.customer_name,
    co.country_name,
    o.amount,
    o.status,
    o.order_date
from {{ ref('stg_orders') }} as o
join {{ ref('stg_customers') }} as c on o.customer_id = c.customer_id
left join {{ ref('countries') }} as co on c.country_code = co.country_code
