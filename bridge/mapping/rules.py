"""Mapping rule files: TOML files of ``[[rule]]`` tables that name an asset as an OpenLineage
dataset, and back. The built-in rules ship inside the package; users add files through config.

A rule::

    [[rule]]
    name = "postgres"
    priority = 50                      # lower runs first; ties keep file order
    [rule.match]                       # every given condition must hold
    id_form = "name"                   # "name" or "uri"
    schemes = ["s3", "s3a"]            # URI-form ids: the id's scheme
    systems = ["postgres"]             # metadata.system, case-insensitive
    types = ["Table"]                  # asset types
    metadata = { env = "prod" }        # exact metadata values
    [rule.dataset]                     # forward: asset -> (namespace, name)
    namespace = "postgres://{host}:{port|5432}"
    name = "{database}.{schema}.{name}"
    [rule.asset]                       # reverse (optional): (namespace, name) -> asset
    id = "{database}.{schema}.{name}"
    type = "Table"
    metadata = { system = "postgres", host = "{host}" }

Template variables are the asset's metadata keys, ``id``, and for URI-form ids ``id.scheme``,
``id.authority``, ``id.host``, ``id.port`` and ``id.path`` (no slash at either end). A rule applies only
when every variable it uses (without a ``|default``) has a value.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from bridge.errors import InputFileError, MappingError, ValidationError
from bridge.files import read_text, reading_problem
from bridge.mapping.template import Template, compile_template
from bridge.model import normalize_type

_RULE_KEYS = {"name", "priority", "description", "match", "dataset", "asset"}
_MATCH_KEYS = {"id_form", "schemes", "systems", "types", "metadata"}
_DATASET_KEYS = {"namespace", "name"}
_ASSET_KEYS = {"id", "type", "metadata"}


@attrs.frozen
class Match:
    id_form: str | None = None
    schemes: frozenset[str] = frozenset()
    systems: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()
    metadata: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Rule:
    name: str
    source: str  # the file (and index) it came from, for messages
    priority: int
    order: int
    match: Match
    namespace: Template
    dataset_name: Template
    asset_id: Template | None = None
    asset_type: str | None = None
    asset_metadata: tuple[tuple[str, Template], ...] = ()

    @property
    def reversible(self) -> bool:
        return self.asset_id is not None


def _check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise MappingError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


def _string_set(value: Any, where: str, lower: bool = False) -> frozenset[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise MappingError(f"{where}: expected a string or a list of strings, not {value!r}")
    return frozenset(v.lower() if lower else v for v in value)


def _table(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MappingError(f"{where}: expected a table, not {value!r}")
    return value


def parse_rules(document: Mapping[str, Any], source: str, first_order: int = 0) -> list[Rule]:
    """The rules of one parsed TOML document."""
    _check_keys(document, {"rule"}, source)
    raw_rules = document.get("rule", [])
    if not isinstance(raw_rules, list):
        raise MappingError(f"{source}: 'rule' must be an array of tables ([[rule]])")
    rules = []
    for index, raw in enumerate(raw_rules):
        where = f"{source}: rule[{index}]"
        raw = _table(raw, where)
        _check_keys(raw, _RULE_KEYS, where)
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise MappingError(f"{where}: a rule needs a 'name'")
        where = f"{source}: rule {name!r}"
        priority = raw.get("priority", 100)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise MappingError(f"{where}: 'priority' must be an integer")
        match_table = _table(raw.get("match", {}), f"{where}.match")
        _check_keys(match_table, _MATCH_KEYS, f"{where}.match")
        id_form = match_table.get("id_form")
        if id_form not in (None, "name", "uri"):
            raise MappingError(f"{where}.match.id_form: 'name' or 'uri', not {id_form!r}")
        try:
            types = frozenset(
                normalize_type(t) for t in _string_set(match_table.get("types", []), f"{where}.match.types")
            )
        except ValidationError as exc:
            raise MappingError(f"{where}.match.types: {exc}") from None
        meta = _table(match_table.get("metadata", {}), f"{where}.match.metadata")
        match = Match(
            id_form=id_form,
            schemes=_string_set(match_table.get("schemes", []), f"{where}.match.schemes", lower=True),
            systems=_string_set(match_table.get("systems", []), f"{where}.match.systems", lower=True),
            types=types,
            metadata=tuple(sorted((str(k), str(v)) for k, v in meta.items())),
        )
        dataset = _table(raw.get("dataset"), f"{where}.dataset") if "dataset" in raw else None
        if dataset is None:
            raise MappingError(f"{where}: a rule needs a [rule.dataset] table with namespace and name")
        _check_keys(dataset, _DATASET_KEYS, f"{where}.dataset")
        asset_id = asset_type = None
        asset_metadata: tuple[tuple[str, Template], ...] = ()
        if "asset" in raw:
            asset = _table(raw["asset"], f"{where}.asset")
            _check_keys(asset, _ASSET_KEYS, f"{where}.asset")
            asset_id = compile_template(asset.get("id"), f"{where}.asset.id")
            if "type" in asset:
                try:
                    asset_type = normalize_type(asset["type"])
                except ValidationError as exc:
                    raise MappingError(f"{where}.asset.type: {exc}") from None
            meta_templates = _table(asset.get("metadata", {}), f"{where}.asset.metadata")
            asset_metadata = tuple(
                (str(k), compile_template(str(v), f"{where}.asset.metadata.{k}")) for k, v in meta_templates.items()
            )
        rules.append(
            Rule(
                name=name,
                source=source,
                priority=priority,
                order=first_order + index,
                match=match,
                namespace=compile_template(dataset.get("namespace"), f"{where}.dataset.namespace"),
                dataset_name=compile_template(dataset.get("name"), f"{where}.dataset.name"),
                asset_id=asset_id,
                asset_type=asset_type,
                asset_metadata=asset_metadata,
            )
        )
    return rules


def load_rule_file(path: Path | str, first_order: int = 0) -> list[Rule]:
    try:
        text = read_text(path)
    except InputFileError as exc:  # missing, unreadable, or not UTF-8
        raise MappingError(f"cannot read mapping file {path}: {exc.message}") from None
    return parse_rule_text(text, str(path), first_order)


def parse_rule_text(text: str, source: str, first_order: int = 0) -> list[Rule]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MappingError(f"{source}: not valid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise MappingError(f"{source}: cannot be read: {reading_problem(exc)}") from None
    return parse_rules(document, source, first_order)


def builtin_rule_texts() -> list[tuple[str, str]]:
    """(name, text) of the rule files shipped with olbridge, in name order.

    In an installed wheel they are ``bridge/_mappings``; in a source checkout, the top-level
    ``mappings/`` folder."""
    packaged = resources.files("bridge") / "_mappings"
    if packaged.is_dir():
        entries = [(e.name, e.read_text(encoding="utf-8")) for e in packaged.iterdir() if e.name.endswith(".toml")]
    else:
        folder = Path(__file__).resolve().parents[2] / "mappings"
        if not folder.is_dir():
            raise MappingError("the built-in mapping rules are missing from this installation")
        entries = [(p.name, p.read_text(encoding="utf-8")) for p in folder.glob("*.toml")]
    return sorted(entries)


def load_rules(extra_files: Iterable[Path | str] = (), *, builtin: bool = True) -> list[Rule]:
    """The user's rule files, then the built-in ones, sorted by priority; at equal priority a
    user's rule comes before a built-in one, and rules keep their file order."""
    rules: list[Rule] = []
    for path in extra_files:
        rules += load_rule_file(path, len(rules))
    if builtin:
        for name, text in builtin_rule_texts():
            rules += parse_rule_text(text, f"builtin:{name}", len(rules))
    # a rule's name says which rule named an asset (`assets show`): one name, one rule (a user's
    # rule named as a built-in one does not replace it; both would apply)
    first: dict[str, Rule] = {}
    for rule in rules:
        other = first.setdefault(rule.name, rule)
        if other is not rule:
            raise MappingError(
                f"{other.source}: rule {rule.name!r}: the name of a rule of {rule.source} too; a rule's name is its "
                "own (one named as a built-in rule is another rule beside it, and does not replace it)"
            )
    return sorted(rules, key=lambda r: (r.priority, r.order))
