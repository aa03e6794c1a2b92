"""Lineage drawn for people, from the catalog's graphs: an asset's lineage (:mod:`.asset_graph`)
and a column's (:mod:`.column_graph`), each as indented text (:mod:`.tree`: each subtree once),
JSON and a Mermaid flowchart, with the node ids and label text Mermaid needs (:mod:`.mermaid`)."""
