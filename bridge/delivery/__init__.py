"""Delivery to an OpenLineage backend: senders (:mod:`.senders`, chosen by :mod:`.config`),
rounds of requests side by side (:mod:`.dispatch`), retry rules (:mod:`.retry`), the outbox's
stream worker (:mod:`.worker`, rendering rows with :mod:`.render`) and the backfill
(:mod:`.backfill`)."""
