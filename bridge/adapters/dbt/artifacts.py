"""Reading a dbt target folder: ``manifest.json``, ``run_results.json``, ``catalog.json`` when
present (``dbt docs generate``) and the profile.

Every problem is an :class:`ArtifactError` that names the file and what is wrong with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml
from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

from bridge.errors import ArtifactError, InputFileError, ValidationError
from bridge.files import read_text, reading_problem, yaml_problem
from bridge.model.times import parse_time


@attrs.frozen
class DbtArtifacts:
    manifest: Mapping[str, Any]
    run_results: Mapping[str, Any]
    adapter_type: str
    project_name: str
    connection: Mapping[str, Any]  # the profile target's output (type, path, host, port, ...)
    manifest_path: Path
    run_results_path: Path
    # ``catalog.json`` (``dbt docs generate``): the columns and types of relations, when present
    catalog: Mapping[str, Any] | None = None
    catalog_path: Path | None = None
    # ``sources.json`` (``dbt source freshness``): each source's freshness as dbt judged it, when present
    sources: Mapping[str, Any] | None = None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ArtifactError(f"{path}: file not found (run dbt first, or give --target-path)")
    if path.is_dir():
        raise ArtifactError(f"{path}: a folder, not dbt's artifact (a file)")
    try:
        document = json.loads(read_text(path))
    except InputFileError as exc:  # not UTF-8 text, or cannot be read (permissions, say)
        raise ArtifactError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise ArtifactError(f"{path}: cannot be read: {reading_problem(exc)}") from None
    if not isinstance(document, dict):
        raise ArtifactError(f"{path}: expected a JSON object at the top, found {type(document).__name__}")
    return document


def _require(document: Mapping[str, Any], key: str, kind: type, path: Path, where: str = "") -> Any:
    value = document.get(key)
    if not isinstance(value, kind):
        place = f"{where}.{key}" if where else key
        found = "nothing" if value is None else type(value).__name__
        raise ArtifactError(f"{path}: '{place}' must be a {kind.__name__}, found {found}")
    return value


def _schema_metadata(artifact: Mapping[str, Any], kind: str, path: Path) -> dict[str, Any]:
    """The artifact's ``metadata``, once its ``dbt_schema_version`` says it is a dbt ``kind``."""
    metadata: dict[str, Any] = _require(artifact, "metadata", dict, path)
    version = metadata.get("dbt_schema_version", "")
    if not isinstance(version, str) or f"/{kind}/" not in version:
        raise ArtifactError(f"{path}: metadata.dbt_schema_version {version!r} is not a dbt {kind} schema")
    return metadata


def _optional(document: Mapping[str, Any], key: str, kind: type, path: Path, where: str) -> Any:
    """``document[key]`` where it is there and not null, once it is a ``kind``."""
    value = document.get(key)
    if value is not None and (not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool)):
        raise ArtifactError(f"{path}: '{where}.{key}' must be a {kind.__name__} or null, found {type(value).__name__}")
    return value


# the text fields of a node or source that olbridge reads (a relation's name, its SQL, its docs)
_NODE_TEXTS = ("database", "schema", "alias", "identifier", "description", "compiled_code", "language")


def _check_node(node: Any, path: Path, where: str) -> None:
    """The fields of a node (or source) that the import reads, each of the type dbt writes."""
    if not isinstance(node, dict):
        raise ArtifactError(f"{path}: {where} must be an object")
    for key in _NODE_TEXTS:
        _optional(node, key, str, path, where)
    depends = _optional(node, "depends_on", dict, path, where)
    if depends is not None:
        parents = _optional(depends, "nodes", list, path, f"{where}.depends_on")
        if parents is not None and not all(isinstance(p, str) for p in parents):
            raise ArtifactError(f"{path}: '{where}.depends_on.nodes' must be a list of unique ids")
    _optional(node, "config", dict, path, where)
    _optional(node, "attached_node", str, path, where)
    _optional(node, "column_name", str, path, where)
    meta = _optional(node, "test_metadata", dict, path, where)
    if meta is not None:
        _optional(meta, "name", str, path, f"{where}.test_metadata")
        _optional(meta, "kwargs", dict, path, f"{where}.test_metadata")
    for name, column in (_optional(node, "columns", dict, path, where) or {}).items():
        if not isinstance(column, dict):
            raise ArtifactError(f"{path}: {where}.columns[{name!r}] must be an object")
        for key in ("name", "data_type", "description"):
            _optional(column, key, str, path, f"{where}.columns[{name!r}]")


def _check_manifest(manifest: Mapping[str, Any], path: Path) -> None:
    _schema_metadata(manifest, "manifest", path)
    for key in ("nodes", "sources"):
        _require(manifest, key, dict, path)
    for unique_id, node in manifest["nodes"].items():
        _check_node(node, path, f"nodes[{unique_id!r}]")
        for key in ("resource_type", "name", "unique_id"):
            _require(node, key, str, path, f"nodes[{unique_id!r}]")
    for unique_id, node in manifest["sources"].items():
        _check_node(node, path, f"sources[{unique_id!r}]")
        for key in ("name", "schema"):
            _require(node, key, str, path, f"sources[{unique_id!r}]")
        _optional(node, "source_name", str, path, f"sources[{unique_id!r}]")
        freshness = _optional(node, "freshness", dict, path, f"sources[{unique_id!r}]")
        for after in ("warn_after", "error_after"):
            if freshness is not None:
                _optional(freshness, after, dict, path, f"sources[{unique_id!r}].freshness")


# run_results.json of commands that run nothing: their results are compilations, not runs
_NOT_RUNS = {
    "generate": "docs generate",
    "compile": "compile",
    "list": "list",
    "parse": "parse",
    "show": "show",  # its results say success of the model it previewed, which wrote nothing
    "run-operation": "run-operation",
}


def _check_run_results(run_results: Mapping[str, Any], path: Path) -> None:
    metadata = _schema_metadata(run_results, "run-results", path)
    if not _require(metadata, "invocation_id", str, path, "metadata").strip():
        raise ArtifactError(f"{path}: 'metadata.invocation_id' is empty")
    generated = _require(metadata, "generated_at", str, path, "metadata")
    try:  # a result without its timing is dated by it: a bad one is said where it is
        parse_time(generated, f"{path}: metadata.generated_at", assume_utc=True)
    except ValidationError as exc:
        raise ArtifactError(str(exc)) from None
    args = _optional(run_results, "args", dict, path, "run_results") or {}
    command = args.get("which")
    if command in _NOT_RUNS:
        raise ArtifactError(
            f"{path}: written by `dbt {_NOT_RUNS[command]}`, which runs no model; run the build again "
            f"(dbt {_NOT_RUNS[command]} replaces run_results.json: give it --target-path elsewhere"
            + (", and its catalog.json with --catalog-json)" if command == "generate" else ")")
        )
    results = _require(run_results, "results", list, path)
    seen: dict[str, int] = {}
    for index, result in enumerate(results):
        where = f"results[{index}]"
        if not isinstance(result, dict):
            raise ArtifactError(f"{path}: {where} must be an object")
        for key in ("unique_id", "status"):
            _require(result, key, str, path, where)
        _optional(result, "message", str, path, where)
        timing = _optional(result, "timing", list, path, where) or []
        for step, entry in enumerate(timing):
            if not isinstance(entry, dict):
                raise ArtifactError(f"{path}: {where}.timing[{step}] must be an object")
            for key in ("name", "started_at", "completed_at"):
                _optional(entry, key, str, path, f"{where}.timing[{step}]")
        earlier = seen.setdefault(result["unique_id"], index)
        if earlier != index:
            raise ArtifactError(f"{path}: {where} is a second result of {result['unique_id']} (results[{earlier}])")


# what `dbt source freshness` says of a source (sources.json's FreshnessStatus)
SOURCE_STATUSES = ("pass", "warn", "error", "runtime error")


def _check_sources(sources: Mapping[str, Any], path: Path) -> None:
    _schema_metadata(sources, "sources", path)
    for index, result in enumerate(_require(sources, "results", list, path)):
        where = f"results[{index}]"
        if not isinstance(result, dict):
            raise ArtifactError(f"{path}: {where} must be an object")
        _require(result, "unique_id", str, path, where)
        status = _require(result, "status", str, path, where)
        if status not in SOURCE_STATUSES:
            raise ArtifactError(f"{path}: '{where}.status' is {status!r}, not one of {', '.join(SOURCE_STATUSES)}")


def _check_catalog(catalog: Mapping[str, Any], path: Path) -> None:
    _schema_metadata(catalog, "catalog", path)
    for group in ("nodes", "sources"):
        for unique_id, entry in _require(catalog, group, dict, path).items():
            where = f"{group}[{unique_id!r}]"
            if not isinstance(entry, dict):
                raise ArtifactError(f"{path}: {where} must be an object")
            _require(entry, "metadata", dict, path, where)
            for name, column in _require(entry, "columns", dict, path, where).items():
                if not isinstance(column, dict):
                    raise ArtifactError(f"{path}: {where}.columns[{name!r}] must be an object")


def _profile_jinja(env: Mapping[str, str], path: Path) -> SandboxedEnvironment:
    """The Jinja that renders a profile's values as dbt (and openlineage-dbt) renders them:
    ``env_var('NAME', 'default')``, the filters ``as_text``, ``as_number``, ``as_bool`` and
    ``as_native``, and Jinja's own (``trim``, ``lower``); anything else undefined is an error."""
    jinja = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)

    def env_var(name: str, default: Any = None) -> Any:
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise ArtifactError(f"{path}: the profile reads environment variable {name}, which is not set")

    jinja.globals["env_var"] = env_var
    # the values dbt keeps secret (DBT_ENV_SECRET_...), left out of what an error says
    jinja.extend(olbridge_secrets=tuple(v for k, v in env.items() if k.startswith("DBT_ENV_SECRET_") and v))
    jinja.filters.update(as_text=str, as_number=_as_number, as_bool=_as_bool, as_native=lambda value: value)
    return jinja


def _secrets(jinja: SandboxedEnvironment) -> tuple[str, ...]:
    secrets: tuple[str, ...] = getattr(jinja, "olbridge_secrets", ())
    return secrets


def _as_number(value: Any) -> int | float:
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        return float(text)  # a ValueError here is the template's error, said with its key


def _as_bool(value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{value!r} is not a boolean")
    return text == "true"


def _render_env(value: Any, jinja: SandboxedEnvironment, path: Path, where: str) -> Any:
    """A profile's value with its Jinja rendered (``{{ env_var('NAME', 'default') | trim }}``),
    as dbt renders it; ``where`` names the key in errors."""
    if isinstance(value, str):
        if "{{" not in value and "{%" not in value:
            return value
        try:
            return jinja.from_string(value).render()
        except ArtifactError:
            raise
        except (TemplateError, ValueError, TypeError) as exc:
            said = str(exc)
            for secret in _secrets(jinja):  # as dbt does, never said
                said = said.replace(secret, "*****")
            raise ArtifactError(f"{path}: cannot render {where} {value!r}: {said}") from None
    if isinstance(value, dict):
        return {k: _render_env(v, jinja, path, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_render_env(v, jinja, path, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _read_yaml(path: Path) -> Any:
    text = read_text(path)  # a file missing, unreadable or not UTF-8 said as every reader says it
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        number, problem = yaml_problem(exc, text)
        raise ArtifactError(f"{path}{'' if number is None else f':{number}'}: not valid YAML: {problem}") from None
    except (ValueError, RecursionError) as exc:
        raise ArtifactError(f"{path}: cannot be read: {reading_problem(exc)}") from None


def read_connection(
    project_dir: Path, profiles_dir: Path | None, target: str | None, env: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(``dbt_project.yml``, the profile target's output), ``profiles.yml`` looked for where dbt
    looks: ``--profiles-dir``, ``$DBT_PROFILES_DIR``, the project folder, ``~/.dbt``."""
    project_file = project_dir / "dbt_project.yml"
    if not project_file.is_file():
        raise ArtifactError(f"{project_file}: file not found (is --project-dir a dbt project?)")
    project = _read_yaml(project_file)
    if not isinstance(project, dict) or not isinstance(project.get("profile"), str):
        raise ArtifactError(f"{project_file}: needs a 'profile' name")
    profile_name = project["profile"]
    if profiles_dir is not None and not (profiles_dir / "profiles.yml").is_file():  # dbt would stop here too
        raise ArtifactError(f"{profiles_dir / 'profiles.yml'}: file not found (--profiles-dir)")
    candidates = [profiles_dir] if profiles_dir else []
    if env.get("DBT_PROFILES_DIR"):
        candidates.append(Path(env["DBT_PROFILES_DIR"]))
    candidates += [project_dir, Path.home() / ".dbt"]
    profiles_file = next((d / "profiles.yml" for d in candidates if (d / "profiles.yml").is_file()), None)
    if profiles_file is None:
        raise ArtifactError(f"profiles.yml not found in {', '.join(str(c) for c in candidates)} (give --profiles-dir)")
    profiles = _read_yaml(profiles_file)
    if not isinstance(profiles, dict) or not isinstance(profiles.get(profile_name), dict):
        raise ArtifactError(f"{profiles_file}: no profile named {profile_name!r}")
    profile = profiles[profile_name]
    jinja = _profile_jinja(env, profiles_file)
    target_name = target or _render_env(profile.get("target"), jinja, profiles_file, f"{profile_name}.target")
    outputs = profile.get("outputs")
    if (
        not isinstance(outputs, dict)
        or not isinstance(target_name, str)
        or not isinstance(outputs.get(target_name), dict)
    ):
        raise ArtifactError(f"{profiles_file}: profile {profile_name!r} has no output for target {target_name!r}")
    connection = _render_env(outputs[target_name], jinja, profiles_file, f"{profile_name}.outputs.{target_name}")
    if not isinstance(connection.get("type"), str):
        raise ArtifactError(f"{profiles_file}: target {target_name!r} of {profile_name!r} has no adapter 'type'")
    return project, connection


# the results of nodes that ran (a skipped one did not), of the kinds whose SQL gives their lineage
_RAN_WITH_SQL = ("model.", "snapshot.")


def _check_same_invocation(
    manifest: Mapping[str, Any], run_results: Mapping[str, Any], manifest_path: Path, results_path: Path
) -> None:
    """A manifest another dbt command wrote after the build (``dbt source freshness``, ``ls``,
    ``parse`` rewrite it, without the compiled SQL, and leave run_results.json) would record the
    build's runs without their column lineage, for good (a run is recorded once): refused where a
    model or snapshot that ran has no compiled SQL in it (an import of them recorded already was
    refused as well: a run is recorded once, and these would be runs with other content). A
    manifest of another invocation that has the SQL is read as before."""
    ids = (manifest["metadata"].get("invocation_id"), run_results["metadata"]["invocation_id"])
    if ids[0] == ids[1]:
        return
    nodes = manifest.get("nodes") or {}
    for result in run_results["results"]:
        node = nodes.get(result["unique_id"])
        if (
            result["unique_id"].startswith(_RAN_WITH_SQL)
            and result["status"] != "skipped"
            and isinstance(node, dict)
            and node.get("language", "sql") == "sql"
            and not node.get("compiled_code")
        ):
            raise ArtifactError(
                f"{manifest_path}: written by another dbt command (invocation {ids[0]}) than {results_path} "
                f"(invocation {ids[1]}), without the compiled SQL of {result['unique_id']}, which ran: its column "
                "lineage would be lost for good; `dbt source freshness`, `dbt ls` and `dbt parse` rewrite "
                "manifest.json: run them with --target-path elsewhere (copy their sources.json beside the build's "
                "artifacts), then build again"
            )


def load_artifacts(
    project_dir: Path | str,
    *,
    target_path: Path | str | None = None,
    profiles_dir: Path | str | None = None,
    target: str | None = None,
    env: Mapping[str, str] | None = None,
    catalog_json: Path | str | None = None,
) -> DbtArtifacts:
    """Read and check a dbt project's artifacts. ``target_path`` defaults to ``target`` and, when
    relative, is read inside the project folder (as dbt writes it); ``catalog.json`` is read
    from ``catalog_json``, else from the target folder when it is there."""
    env = os.environ if env is None else env
    project = Path(project_dir)
    if not project.is_dir():
        raise ArtifactError(f"{project}: project folder not found")
    folder = project / (target_path or "target")  # a relative target path is inside the project, as for dbt
    manifest_path, results_path = folder / "manifest.json", folder / "run_results.json"
    manifest = _read_json(manifest_path)
    _check_manifest(manifest, manifest_path)
    run_results = _read_json(results_path)
    _check_run_results(run_results, results_path)
    catalog_path = Path(catalog_json) if catalog_json is not None else folder / "catalog.json"
    catalog = None
    if catalog_json is not None or catalog_path.exists():
        catalog = _read_json(catalog_path)
        _check_catalog(catalog, catalog_path)
    _check_same_invocation(manifest, run_results, manifest_path, results_path)
    sources_path = folder / "sources.json"
    sources = None
    if sources_path.exists():
        sources = _read_json(sources_path)
        _check_sources(sources, sources_path)
    project_file, connection = read_connection(project, Path(profiles_dir) if profiles_dir else None, target, env)
    adapter = manifest["metadata"].get("adapter_type") or connection["type"]
    project_name = manifest["metadata"].get("project_name") or project_file.get("name") or "dbt"
    return DbtArtifacts(
        manifest=manifest,
        run_results=run_results,
        adapter_type=str(adapter).lower(),
        project_name=str(project_name),
        connection=connection,
        manifest_path=manifest_path,
        run_results_path=results_path,
        catalog=catalog,
        catalog_path=catalog_path if catalog is not None else None,
        sources=sources,
    )
