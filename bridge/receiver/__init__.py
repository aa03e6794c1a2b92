"""The receiver: external OpenLineage events become External placeholder assets, external runs
and lineage edges in the catalog. Over HTTP (:mod:`bridge.receiver.server`), from files and from a
Marquez instance (:mod:`bridge.receiver.imports`)."""
