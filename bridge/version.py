"""The version of olbridge and the URLs that name it in OpenLineage events."""

__version__ = "0.1.0"

PROJECT_URL = "https://github.com/olbridge/olbridge"
PRODUCER = f"{PROJECT_URL}/tree/v{__version__}"
