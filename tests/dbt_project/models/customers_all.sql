{{ config(materialized='table') }}

-- SELECT *: its columns are those of stg_customers (catalog.json lists them)
select * from {{ ref('stg_customers') }}
