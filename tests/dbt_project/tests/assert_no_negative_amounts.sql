-- Singular test: passes when no order has a negative amount.
select order_id from {{ ref('orders_enriched') }} where amount < 0
