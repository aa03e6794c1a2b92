"""The Pebble expressions of a Kestra flow that are known before it runs.

``{{ flow.namespace }}``, ``{{ flow.id }}``, ``{{ flow.revision }}`` (when the file has one),
``{{ task.id }}``, ``{{ task.type }}`` and ``{{ vars.NAME }}`` (a flow variable whose value is plain
text, or text whose expressions are among these) are resolved, through the filters ``lower``,
``upper``, ``trim`` and ``slugify``. Any other expression (``{{ execution.id }}``,
``{{ inputs.day }}``, ``{{ outputs.x.uri }}``, a ``{% tag %}``, another filter) is only known when
the flow runs: :func:`render` reports it instead of guessing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import attrs

from bridge.model import slugify

_BLOCK = re.compile(r"\{\{(.*?)\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
FILTERS: dict[str, Callable[[str], str]] = {
    "lower": str.lower,
    "upper": str.upper,
    "trim": str.strip,
    "slugify": slugify,
}


@attrs.frozen
class Rendered:
    """A rendered text, or None with the expressions that are not known statically."""

    text: str | None
    unknown: tuple[str, ...] = ()


def _evaluate(expression: str, values: Mapping[str, str]) -> str | None:
    name, *filters = (part.strip() for part in expression.split("|"))
    if name not in values:
        return None
    value = values[name]
    for flt in filters:
        apply = FILTERS.get(flt)
        if apply is None:
            return None
        value = apply(value)
    return value


def render(text: str, values: Mapping[str, str]) -> Rendered:
    """``text`` with every known expression replaced by its value; when one is not known, the text
    is None and ``unknown`` lists the expressions as written."""
    unknown: list[str] = []

    def replace(match: re.Match[str]) -> str:
        inner = match.group(1)
        value = None if inner is None else _evaluate(inner.strip(), values)
        if value is None:
            unknown.append(match.group(0))
            return match.group(0)
        return value

    out = _BLOCK.sub(replace, text)
    return Rendered(None, tuple(unknown)) if unknown else Rendered(out)


__all__ = ["FILTERS", "Rendered", "render"]
