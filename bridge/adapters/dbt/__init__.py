"""The dbt adapter: a dbt target folder into the catalog."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import attrs

from bridge.adapters.dbt.artifacts import DbtArtifacts, load_artifacts
from bridge.adapters.dbt.freshness import DBT_RULE
from bridge.adapters.dbt.ingest import DbtIngest, dbt_task_runs
from bridge.catalog import Catalog, CatalogSource, RecordResult, opened
from bridge.errors import ArtifactError, RunEndedError, ValidationError
from bridge.mapping import Resolver
from bridge.model import Asset, AssetDeclaration, TaskRun, parse_time


@attrs.frozen
class DbtSummary:
    invocation_id: str
    results: tuple[RecordResult, ...]
    updated: tuple[Asset, ...]
    skipped: int
    catalog_json: bool = False  # whether catalog.json was read
    column_edges: int = 0  # column edges of the outputs written
    column_notes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the artifacts name that the manifest does not have

    def to_json(self) -> dict[str, object]:
        return {
            "invocationId": self.invocation_id,
            "taskRuns": len(self.results),
            "created": sum(r.status == "created" for r in self.results),
            "unchanged": sum(r.status == "unchanged" for r in self.results),
            "assetsWritten": sorted({a for r in self.results for a in r.written}),
            "placeholders": sorted({p for r in self.results for p in r.placeholders}),
            "testResultsApplied": [a.id for a in self.updated],
            "warnings": [w for r in self.results for w in r.warnings],
            "nonRelationResults": self.skipped,
            "catalogJson": self.catalog_json,
            "columnEdges": self.column_edges,
            "columnLineageNotes": list(self.column_notes),
            "notes": list(self.notes),
        }


def ingest_dbt(
    catalog: CatalogSource,
    project_dir: Path | str,
    *,
    target_path: Path | str | None = None,
    profiles_dir: Path | str | None = None,
    target: str | None = None,
    namespace: str = "dbt",
    flow_id: str | None = None,
    catalog_json: Path | str | None = None,
    naming: Resolver | None = None,
) -> DbtSummary:
    """Read a dbt project's artifacts and record them, all in one transaction (the catalog opened
    once they are read). Where no rule of ``naming`` (the built-in ones by default) names the
    adapter's tables, a note says so: they would not join the datasets dbt-ol sends."""
    artifacts = load_artifacts(
        project_dir, target_path=target_path, profiles_dir=profiles_dir, target=target, catalog_json=catalog_json
    )
    try:
        found = dbt_task_runs(artifacts, namespace=namespace, flow_id=flow_id)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        # a field of a shape dbt never writes that the artifacts' checks did not look at: an
        # error naming the files, not a traceback (nothing is recorded yet)
        raise ArtifactError(
            f"{artifacts.manifest_path} and {artifacts.run_results_path}: not as dbt writes them "
            f"({type(exc).__name__}: {exc})"
        ) from None
    generated = parse_time(artifacts.run_results["metadata"]["generated_at"], "run_results.json", assume_utc=True)
    catalog = opened(catalog)
    updates: list[AssetDeclaration] = []
    produced = {d.id for run in found.task_runs for d in run.outputs}
    sources = {d.id for run in found.task_runs for d in run.inputs}
    for decl in found.test_updates:
        exists = decl.id in produced or decl.id in sources or catalog.get_asset(decl.id) is not None
        updates.append(attrs.evolve(decl, type=None if exists else "External"))
    invocation = artifacts.run_results["metadata"]["invocation_id"]
    try:
        results, updated = catalog.record(
            found.task_runs, updates, now=generated, made_at=_freshness_times(artifacts, found, generated)
        )
    except RunEndedError as exc:
        raise RunEndedError(
            f"dbt invocation {invocation} was imported before, with other content (without catalog.json, or "
            f"from other artifacts): {exc}. Nothing was recorded. A run is recorded once and keeps what it was "
            "first recorded with: give --catalog-json on the first import of an invocation; for column lineage "
            "now, import the next dbt build with its catalog.json (the SQL alone gives it without)",
            exc.key,
        ) from None
    _set_source_rules(catalog, found, generated)
    written = {(r.key, a) for r, result in zip(found.task_runs, results, strict=True) for a in result.written}
    edges = sum(
        len(d.column_lineage.edges(d.id))
        for run in found.task_runs
        for d in run.outputs
        if d.column_lineage is not None and (run.key, d.id) in written
    )
    return DbtSummary(
        invocation,
        tuple(results),
        tuple(updated),
        len(found.skipped),
        catalog_json=artifacts.catalog is not None,
        column_edges=edges,
        column_notes=found.column_notes,
        notes=(*found.notes, *_unnamed(found.task_runs, naming or Resolver.load(), artifacts.adapter_type)),
    )


def _freshness_times(artifacts: DbtArtifacts, found: DbtIngest, generated: datetime) -> dict[str, datetime]:
    """When each source ``dbt source freshness`` judged is reported checked: when sources.json was
    written, where that is after the build's run_results.json (``dbt build && dbt source
    freshness``: the build's time said the check was there before it was made); one written before
    the build is reported with it, as the import's other updates are (an update is never dated
    before the asset's last)."""
    written = (artifacts.sources or {}).get("metadata", {}).get("generated_at")
    try:
        freshness = parse_time(written, "sources.json", assume_utc=True)
    except ValidationError:  # no time said: as the build's, as before
        return {}
    return dict.fromkeys(found.freshness_checked, freshness) if freshness > generated else {}


def _unnamed(runs: Sequence[TaskRun], naming: Resolver, adapter: str) -> tuple[str, ...]:
    """A note when the first table the runs write is named by no rule (in the default namespace,
    by its id): so are all of the adapter's, where dbt-ol names them by the connection."""
    first = next((d for run in runs for d in run.outputs), None)
    if first is None:
        return ()
    named = naming.dataset_for(first.id, first.type or "Table", first.metadata)
    if named.rule != "default":
        return ()
    return (
        f"no naming rule takes the tables of the dbt adapter {adapter!r}: they are named in namespace "
        f"{named.namespace!r} by their ids ({first.id} is {named.namespace}/{named.name}), so they will not join "
        f"the datasets dbt-ol and other integrations send for them; a [[rule]] of system {adapter!r} in a "
        "mappings file names them (docs/mappings.md)",
    )


def _set_source_rules(catalog: Catalog, found: DbtIngest, now: datetime) -> None:
    """Each source's freshness as its asset's rule, and the rule of a source whose freshness no
    longer gives one taken off; a rule set again as it was is left (it would change nothing but
    its time). A rule set by hand (``assets set --freshness``) is the asset's own, which wins: dbt
    neither replaces nor takes it off, and says nothing of it."""
    wanted = dict(found.freshness_rules)
    for asset_id in [*wanted, *found.unruled_sources]:
        if catalog.get_asset(asset_id) is None:
            continue
        kept = catalog.freshness_of(asset_id)
        if (kept is None or kept.source == DBT_RULE) and kept != wanted.get(asset_id):
            catalog.set_freshness(asset_id, wanted.get(asset_id), now=now)


__all__ = ["DbtArtifacts", "DbtIngest", "DbtSummary", "dbt_task_runs", "ingest_dbt", "load_artifacts"]
