"""Helpers used inside other systems (Metaflow steps) to record into the catalog."""
