"""The Metaflow helpers' first name, kept so that flows written for it still import: the code is
the Metaflow adapter, :mod:`bridge.adapters.metaflow`."""
