"""Kestra flows' declared lineage: the ``assets`` block of each task, as declared jobs.

A flow file is read whole: its tasks, and the tasks nested in flowable ones (``tasks`` of
``WorkingDirectory``, ``Parallel``, ``Sequential``, ``ForEach``, ``AllowFailure`` ...; ``then`` /
``else`` of ``If``; ``cases`` and ``defaults`` of ``Switch``; a ``Dag``'s ``{task, dependsOn}``
items; ``errors`` and ``finally`` of a task or of the flow; the flow's ``afterExecution``). Every task
with an ``assets`` block becomes a declared job ``<flowId>.<taskId>`` with its declared inputs
(``{id, namespace}``) and outputs (Kestra assets: ``id``, ``type``, ``namespace``, ``displayName``,
``description``, ``metadata`` and a typed asset's properties) and ``enableAuto``.

Pebble expressions known before the flow runs are resolved (:mod:`bridge.adapters.kestra.pebble`).
One that is not (``{{ execution.id }}`` ...) is reported as a warning naming the file, line, task and
expression, and the declaration does not guess: an asset whose id, type or namespace depends on it
is left out of the declared lineage (each run names its own, and ``kestra import`` records it), and
any other field that depends on it (displayName, description, a metadata value) is left out.

A malformed flow (bad YAML, a task without ``id`` or ``type``, a duplicate task id, an unknown key in
an ``assets`` block, an output without ``type``) is refused with its file and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from bridge.adapters.kestra.pebble import render
from bridge.errors import ValidationError
from bridge.files import FileResult, read_files, read_text, reading_problem, yaml_problem
from bridge.model import (
    AssetDeclaration,
    DeclaredFlow,
    DeclaredJob,
    FailureBehavior,
    check_namespace,
    metadata_text,
)
from bridge.task_run_json import parse_asset

_TASK_LISTS = ("tasks", "then", "else", "errors", "finally")
_FLOW_LISTS = ("tasks", "errors", "finally", "afterExecution")
_ASSETS_KEYS = {"inputs", "outputs", "enableAuto", "assetFailureBehavior"}
_INPUT_KEYS = {"id", "namespace"}
_IDENTITY = ("id", "type", "namespace")
_TASK_ID_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_-]*")
_FLOW_ID_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]*")


class _Node(dict[Any, Any]):
    """A YAML mapping that remembers the line it starts on."""

    line: int = 0


class _Loader(yaml.SafeLoader):
    """Safe YAML whose mappings know their line, and where a date stays text (as in Kestra)."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> _Node:
    # a key given twice is an error, as Kestra's own parser has it: YAML would keep the last and
    # drop the first without a word (two `outputs:` in one assets block)
    seen: set[Any] = set()
    for key_node, _value in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`, merged by construct_mapping
            continue
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, str | int | float | bool) or key is None:
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
    mapping = _Node(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _line(node: Any) -> int:
    return node.line if isinstance(node, _Node) else 0


class _FlowReader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.warnings: list[str] = []

    def at(self, node: Any, where: str) -> str:
        line = _line(node)
        place = f"{self.source}:{line}" if line else self.source
        return f"{place}: {where}" if where else place

    def fail(self, message: str, node: Any, where: str = "") -> NoReturn:
        raise ValidationError(f"{self.at(node, where)}: {message}", rule="kestra.flow")

    def refuse(self, exc: ValidationError, node: Any, where: str) -> NoReturn:
        """Fail with a model rule's error, placed under ``where``."""
        self.fail(exc.message, node, ".".join(part for part in (where, exc.where.lstrip(".")) if part))

    def warn(self, node: Any, where: str, message: str) -> None:
        self.warnings.append(f"{self.at(node, where)}: {message}")

    # --- the flow ----------------------------------------------------------------------------

    def read(self, text: str) -> DeclaredFlow:
        try:
            doc = yaml.load(text, Loader=_Loader)  # a SafeLoader
        except yaml.YAMLError as exc:
            number, problem = yaml_problem(exc, text)
            line = f":{number}" if number is not None else ""
            raise ValidationError(f"{self.source}{line}: not valid YAML: {problem}", rule="kestra.yaml") from None
        except (ValueError, RecursionError) as exc:
            said = reading_problem(exc)
            raise ValidationError(f"{self.source}: cannot be read: {said}", rule="kestra.yaml") from None
        if not isinstance(doc, dict):
            self.fail("a flow is a YAML mapping with 'id', 'namespace' and 'tasks'", doc)
        missing = [key for key in ("id", "namespace", "tasks") if doc.get(key) is None]
        if missing:
            self.fail(f"a flow needs {', '.join(repr(k) for k in missing)}", doc)
        flow_id = doc["id"]
        if not isinstance(flow_id, str) or not _FLOW_ID_RE.fullmatch(flow_id):
            self.fail(f"a flow id has letters, digits, '.', '_' and '-': {flow_id!r}", doc, "id")
        try:
            namespace = check_namespace(doc["namespace"])
        except ValidationError as exc:
            self.refuse(exc, doc, "")
        assert namespace is not None
        values = {"flow.id": flow_id, "flow.namespace": namespace}
        if isinstance(doc.get("revision"), int):
            values["flow.revision"] = str(doc["revision"])
        values.update(self._variables(doc, values))

        jobs: list[DeclaredJob] = []
        seen: dict[str, dict[str, Any]] = {}
        for key in _FLOW_LISTS:
            for task, where in self._tasks(doc.get(key), key, doc):
                task_id = task["id"]
                if task_id in seen:
                    self.fail(f"task id {task_id!r} is used twice (first on line {_line(seen[task_id])})", task, where)
                seen[task_id] = task
                job = self._job(task, where, namespace, flow_id, values)
                if job is not None:
                    jobs.append(job)
        if not jobs:
            self.warnings.append(f"{self.source}: flow {namespace}.{flow_id} has no task with an 'assets' block")
        return DeclaredFlow(namespace=namespace, flow_id=flow_id, jobs=tuple(jobs), warnings=tuple(self.warnings))

    def _variables(self, doc: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, str]:
        """The flow variables known statically: plain text, numbers and booleans, and text whose
        expressions are known (``{{ flow.id }}`` ...)."""
        variables = doc.get("variables")
        if not isinstance(variables, dict):
            return {}
        out = {}
        for name, value in variables.items():
            if isinstance(value, str):
                text = render(value, values).text
                if text is not None:
                    out[f"vars.{name}"] = text
            elif isinstance(value, int | float | bool):
                out[f"vars.{name}"] = metadata_text(value)
        return out

    def _tasks(self, items: Any, where: str, parent: Any) -> Iterator[tuple[dict[str, Any], str]]:
        """Every task in a list of tasks, and the tasks nested in each, depth first."""
        if items is None:
            return
        if not isinstance(items, list):
            self.fail("must be a list of tasks", parent, where)
        for index, item in enumerate(items):
            here = f"{where}[{index}]"
            if isinstance(item, dict) and "type" not in item and isinstance(item.get("task"), dict):
                item, here = item["task"], f"{here}.task"  # a Dag's {task, dependsOn}
            if not isinstance(item, dict):
                self.fail("a task is a mapping with 'id' and 'type'", parent, here)
            missing = [key for key in ("id", "type") if item.get(key) is None]
            if missing:
                self.fail(f"a task needs {', '.join(repr(k) for k in missing)}", item, here)
            if not isinstance(item["id"], str) or not _TASK_ID_RE.fullmatch(item["id"]):
                self.fail(f"a task id has letters, digits, '_' and '-': {item['id']!r}", item, f"{here}.id")
            if not isinstance(item["type"], str) or not item["type"].strip():
                self.fail("a task's type is its plugin class name", item, f"{here}.type")
            yield item, here
            for key in _TASK_LISTS:
                yield from self._tasks(item.get(key), f"{here}.{key}", item)
            cases = item.get("cases")
            if cases is not None:
                if not isinstance(cases, dict):
                    self.fail("'cases' maps each case to a list of tasks", item, f"{here}.cases")
                for name, branch in cases.items():
                    yield from self._tasks(branch, f"{here}.cases.{name}", item)
            if isinstance(item.get("defaults"), list):  # Switch's default branch
                yield from self._tasks(item["defaults"], f"{here}.defaults", item)

    # --- one task's assets block --------------------------------------------------------------

    def _job(
        self, task: dict[str, Any], where: str, namespace: str, flow_id: str, flow_values: Mapping[str, str]
    ) -> DeclaredJob | None:
        if "assets" not in task:
            return None
        assets = task["assets"]
        here = f"{where}.assets"
        if assets is None:
            assets = {}
        if not isinstance(assets, dict):
            self.fail("'assets' is a mapping of inputs, outputs and enableAuto", task, here)
        extra = sorted(set(assets) - _ASSETS_KEYS)
        if extra:
            self.fail(
                f"unknown key(s) {', '.join(extra)} in 'assets'; allowed: {', '.join(sorted(_ASSETS_KEYS))}",
                assets,
                here,
            )
        values = {**flow_values, "task.id": task["id"], "task.type": task["type"]}
        label = f"task {task['id']!r}, {here}"
        inputs = [self._input(item, f"{label}.inputs[{i}]", values) for i, item in self._list(assets, "inputs", label)]
        outputs = [
            self._output(item, f"{label}.outputs[{i}]", values) for i, item in self._list(assets, "outputs", label)
        ]
        enable_auto = self._enable_auto(assets, label, values)
        if assets.get("assetFailureBehavior") is not None:
            try:
                FailureBehavior.parse(assets["assetFailureBehavior"], "assetFailureBehavior")
            except ValidationError as exc:
                self.refuse(exc, assets, label)
        description = task.get("description")
        if isinstance(description, str):
            description = self._text(description, task, f"task {task['id']!r}, {where}.description", values)
        return DeclaredJob(
            flow_namespace=namespace,
            flow_id=flow_id,
            task_id=task["id"],
            task_type=task["type"],
            inputs=tuple(d for d in inputs if d is not None),
            outputs=tuple(d for d in outputs if d is not None),
            enable_auto=enable_auto,
            description=description if isinstance(description, str) else None,
        )

    def _list(self, assets: dict[str, Any], key: str, label: str) -> Iterator[tuple[int, Any]]:
        items = assets.get(key)
        if items is None:
            return
        if isinstance(items, str) and render(items, {}).unknown:
            self.warn(assets, f"{label}.{key}", f"the list {items!r} is only known when the flow runs; left out")
            return
        if not isinstance(items, list):
            self.fail(f"'{key}' must be a list of assets", assets, f"{label}.{key}")
        yield from enumerate(items)

    def _text(self, text: str, node: Any, where: str, values: Mapping[str, str]) -> str | None:
        rendered = render(text, values)
        if rendered.text is None:
            self.warn(node, where, f"{', '.join(rendered.unknown)} is only known when the flow runs; left out")
        return rendered.text

    def _input(self, item: Any, where: str, values: Mapping[str, str]) -> AssetDeclaration | None:
        if not isinstance(item, dict):
            self.fail("an input is a mapping with an 'id'", None, where)
        extra = sorted(set(item) - _INPUT_KEYS)
        if extra:
            self.fail(f"unknown key(s) {', '.join(extra)} in an input; allowed: id, namespace", item, where)
        if item.get("id") is None:
            self.fail("an input needs an 'id'", item, where)
        rendered = self._identity(item, where, values)
        if rendered is None:
            return None
        try:
            return AssetDeclaration.create(rendered["id"], namespace=rendered.get("namespace"))
        except ValidationError as exc:
            self.refuse(exc, item, where)

    def _output(self, item: Any, where: str, values: Mapping[str, str]) -> AssetDeclaration | None:
        if not isinstance(item, dict):
            self.fail("an output is a Kestra asset: a mapping with 'id' and 'type'", None, where)
        missing = [key for key in ("id", "type") if item.get(key) is None]
        if missing:
            self.fail(f"an output needs {', '.join(repr(k) for k in missing)}", item, where)
        rendered = self._identity(item, where, values)
        if rendered is None:
            return None
        for key, value in item.items():
            if key in _IDENTITY:
                continue
            if key == "metadata" and isinstance(value, dict):
                metadata = {}
                for name, entry in value.items():
                    if isinstance(entry, str):
                        entry = self._text(entry, item, f"{where}.metadata.{name}", values)
                        if entry is None:
                            continue
                    metadata[name] = entry
                rendered[key] = metadata
            elif isinstance(value, str):
                text = self._text(value, item, f"{where}.{key}", values)
                if text is not None:
                    rendered[key] = text
            else:
                rendered[key] = value
        try:
            return parse_asset(rendered, "")
        except ValidationError as exc:
            self.refuse(exc, item, where)

    def _identity(self, item: Mapping[str, Any], where: str, values: Mapping[str, str]) -> dict[str, Any] | None:
        """The asset's id, type and namespace rendered; None (and a warning) when one is not known."""
        out: dict[str, Any] = {}
        for key in _IDENTITY:
            value = item.get(key)
            if isinstance(value, str):
                rendered = render(value, values)
                if rendered.text is None:
                    self.warn(
                        item,
                        f"{where}.{key}",
                        f"{', '.join(rendered.unknown)} is only known when the flow runs; the asset {value!r} is "
                        "left out of the declared lineage (its runs name it)",
                    )
                    return None
                value = rendered.text
            if value is not None:
                out[key] = value
        return out

    def _enable_auto(self, assets: dict[str, Any], label: str, values: Mapping[str, str]) -> bool:
        value = assets.get("enableAuto")
        if value is None:
            return False
        if isinstance(value, str):
            text = self._text(value, assets, f"{label}.enableAuto", values)
            if text is None:
                return False
            value = {"true": True, "false": False}.get(text.strip().lower(), text)
        if not isinstance(value, bool):
            self.fail(f"'enableAuto' is true or false, not {value!r}", assets, f"{label}.enableAuto")
        return value


def parse_flow(text: str, source: str) -> DeclaredFlow:
    """A flow's declared lineage from its YAML text; ``source`` names it in messages."""
    return _FlowReader(source).read(text)


def read_flow_files(paths: Sequence[Path]) -> list[DeclaredFlow]:
    """The declared lineage of every flow file. All are checked first: with any bad file this
    raises one ValidationError naming each problem, and nothing is recorded."""
    places: dict[tuple[str, str], Path] = {}

    def read(path: Path) -> FileResult[DeclaredFlow]:
        flow = parse_flow(read_text(path), str(path))
        key = (flow.namespace, flow.flow_id)
        if key in places:
            return FileResult(problems=(f"{path}: flow {flow.namespace}.{flow.flow_id} is also in {places[key]}",))
        places[key] = path
        return FileResult((flow,))

    return read_files(paths, read, kind="flow", rule="kestra.flows")


__all__ = ["parse_flow", "read_flow_files"]
