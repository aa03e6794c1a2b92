-- A starter model built on top of my_first_dbt_model.
select id, label
from {{ ref('my_first_dbt_model') }}
where id = 1
