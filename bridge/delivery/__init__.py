"""The way out: every event olbridge sends or writes leaves through this package.

What goes out: the catalog's history in time order (:mod:`.history`, for ``export`` and
``backfill``), and the events the outbox's rows stand for (:mod:`.outbox_events`, for
``stream``). How it goes: senders (:mod:`.senders`: the one HTTP sender, and openlineage-python's
other transports, chosen by :mod:`.config`), rounds of requests side by side sent again until
settled (:mod:`.dispatch`), retry rules (:mod:`.retry`), failures said as they happen
(:mod:`.report`). Who sends: ``export`` through a sink (:mod:`.sinks`: an NDJSON file or a
backend), the backfill (:mod:`.backfill`), the outbox's stream worker (:mod:`.worker`) under its
lease (:mod:`.lease`)."""
