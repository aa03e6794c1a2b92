"""Name templates of the mapping rules: ``postgres://{host}:{port|5432}``.

A template renders from variables (forward: asset → dataset) and parses back into variables
(reverse: dataset → asset). ``{var|default}`` gives a default when the variable is missing;
``{var!filter}`` renders the variable through a filter of :mod:`bridge.mapping.filters`
(``snowflake://{account!snowflake_account}``), and parses back the text as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import attrs

from bridge.errors import MappingError
from bridge.mapping.filters import FILTERS

_FIELD = re.compile(r"\{([A-Za-z0-9_.\-]+)(?:!([^{}|]*))?(?:\|([^{}]*))?\}")
# a variable of a template: its name, its default, its filter
Field = tuple[str, str | None, Callable[[str], str] | None]


@attrs.frozen
class Template:
    text: str
    parts: tuple[str | Field, ...]  # literal text, or a variable
    pattern: re.Pattern[str]

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(p[0] for p in self.parts if isinstance(p, tuple))

    def render(self, values: Mapping[str, str]) -> str | None:
        """The rendered text, or None when a variable without default is missing or empty."""
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            name, default, apply = part
            value = values.get(name)
            if value is None or value == "":
                if default is None:
                    return None
                value = default
            out.append(apply(value) if apply is not None else value)
        return "".join(out)

    def parse(self, text: str) -> dict[str, str] | None:
        """The variables that render ``text``, or None when it does not fit the template."""
        match = self.pattern.fullmatch(text)
        if match is None:
            return None
        groups = {f"v{i}": name for i, name in enumerate(self.variables)}
        values: dict[str, str] = {}
        for group, name in groups.items():
            value = match.group(group)
            if value is None:
                continue
            if name in values and values[name] != value:
                return None
            values[name] = value
        return values


def compile_template(text: object, where: str) -> Template:
    if not isinstance(text, str) or not text:
        raise MappingError(f"{where}: a template must be a non-empty string, not {text!r}")
    parts: list[str | Field] = []
    regex = []
    position = 0
    for index, match in enumerate(_FIELD.finditer(text)):
        literal = text[position : match.start()]
        if "{" in literal or "}" in literal:
            raise MappingError(f"{where}: unbalanced brace in template {text!r}")
        if literal:
            parts.append(literal)
            regex.append(re.escape(literal))
        name, filter_name, default = match.groups()
        apply = None
        if filter_name is not None:
            apply = FILTERS.get(filter_name)
            if apply is None:
                known = ", ".join(sorted(FILTERS))
                raise MappingError(f"{where}: unknown filter {filter_name!r} in template {text!r}; known: {known}")
        parts.append((name, default, apply))
        last = match.end() == len(text)
        regex.append(f"(?P<v{index}>.+)" if last else f"(?P<v{index}>.+?)")
        position = match.end()
    tail = text[position:]
    if "{" in tail or "}" in tail:
        raise MappingError(f"{where}: unbalanced brace in template {text!r}")
    if tail:
        parts.append(tail)
        regex.append(re.escape(tail))
    return Template(text, tuple(parts), re.compile("".join(regex), re.DOTALL))
