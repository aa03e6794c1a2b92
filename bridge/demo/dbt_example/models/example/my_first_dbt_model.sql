-- A starter model materialized as a table.
{{ config(materialized='table') }}

with source_data as (
    select 1 as id, 'first' as label
    union all
    select 2 as id, 'second' as label
)

select * from source_data
