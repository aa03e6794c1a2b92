"""The catalog's migrations: Alembic's environment (``env.py``) and revisions (``versions/``), one
chain for both engines, run by :mod:`bridge.catalog.migrate` (no ``alembic.ini``)."""
