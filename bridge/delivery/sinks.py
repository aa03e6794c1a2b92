"""Where exported events go: an NDJSON file or stream, or an OpenLineage HTTP endpoint.

The HTTP sink posts one event per request to ``<url>/api/v1/lineage`` (Marquez's path) and
counts any 2xx as success; anything else stops the export with an :class:`ExportError` that says
which event and what the backend answered.
"""

from __future__ import annotations

from typing import IO, Protocol

import requests

from bridge.errors import ExportError


class Sink(Protocol):
    def emit(self, line: str) -> None:
        """Send one serialized event (a JSON text without newline)."""

    def close(self) -> None: ...


class NdjsonSink:
    """One event per line, UTF-8."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.count = 0

    def emit(self, line: str) -> None:
        self.stream.write(line)
        self.stream.write("\n")
        self.count += 1

    def close(self) -> None:
        self.stream.flush()


class HttpSink:
    """POST each event to an OpenLineage HTTP endpoint."""

    def __init__(
        self,
        url: str,
        *,
        endpoint: str = "api/v1/lineage",
        api_key: str | None = None,
        timeout: float = 10.0,
        session: requests.Session | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ExportError(f"--url must be an http:// or https:// URL, not {url!r}")
        self.target = f"{url.rstrip('/')}/{endpoint.lstrip('/')}"
        self.timeout = timeout
        self.session = session or requests.Session()
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.count = 0

    def emit(self, line: str) -> None:
        body = line.encode("utf-8")
        try:
            response = self.session.post(self.target, data=body, headers=self.headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise ExportError(f"cannot reach {self.target}: {exc}") from None
        if not 200 <= response.status_code < 300:
            detail = response.text.strip()[:300]
            raise ExportError(
                f"{self.target} refused event {self.count + 1} ({line[:80]}...): "
                f"HTTP {response.status_code}{': ' + detail if detail else ''}"
            )
        self.count += 1

    def close(self) -> None:
        self.session.close()
