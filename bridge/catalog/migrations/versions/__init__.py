"""The revisions, ``rNNNN_<name>.py``: revision ``NNNN`` brings a catalog from version NNNN - 1 to
NNNN. Never edited once released: a change to the schema is a new revision at the end, and the
same change to the tables of :mod:`bridge.catalog.schema` (a test compares the two ways)."""
