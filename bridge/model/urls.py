"""The web addresses olbridge sends to or reads from (a backend, a webhook, Marquez, Prefect, the
web view's own address in an alert): checked once, where they are given, so that a malformed one
is an error then, not a connection error retried for ever."""

from __future__ import annotations

from urllib.parse import urlsplit


def url_problem(url: object) -> str | None:
    """What is wrong with ``url`` as an http:// or https:// address with a host (None: nothing):
    another scheme, no host, a port out of range, a bracketed IPv6 host left open, a space or a
    control character."""
    if not isinstance(url, str):
        return "it is not text"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "it holds a space or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (reading it checks it: out of range is a ValueError)
    except ValueError as exc:
        return f"it cannot be read ({exc})"
    if parts.scheme not in ("http", "https"):  # said as what it is: the callers say what it should be
        return (
            f"its scheme is {parts.scheme!r}" if parts.scheme and "://" in url else "no scheme (begin it with http://)"
        )
    if not parts.hostname:
        return "it names no host"
    return None


__all__ = ["url_problem"]
