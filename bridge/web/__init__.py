"""``olbridge ui``: a read-only window onto the catalog in a browser. Server-rendered pages
(Jinja2), each with a JSON twin (``?format=json``); a scoped lineage graph laid out in Python
(:mod:`bridge.web.layout`) and drawn as SVG; a few lines of the package's own JavaScript. It reads
through the catalog's query API (:mod:`bridge.catalog.browse`) and holds no SQL."""

from bridge.web.app import UiApp
from bridge.web.server import serve

__all__ = ["UiApp", "serve"]
