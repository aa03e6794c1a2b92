"""``runs list / show``: olbridge's own runs and the external runs the receiver took."""

from __future__ import annotations

import json

import click

from bridge.catalog.runs import EXTERNAL, OWN, RunFilter, Runs, RunView
from bridge.cli.context import NAMED, AppContext, pass_app
from bridge.cli.examples import examples
from bridge.cli.options import STATE_HELP, StateParam, count, json_flag, window
from bridge.cli.output import echo_lines, print_json, print_rows, say
from bridge.errors import NotInCatalog


@click.group()
def runs() -> None:
    """List and show runs: olbridge's own (task runs it recorded) and external ones (received)."""


HEADER = ("runId", "origin", "state", "started", "ended", "job", "lineage", "notes")


def _row(view: RunView) -> tuple[str, ...]:
    started = (view.started or "-") + (" (inferred)" if view.start_inferred else "")
    flows = f"{', '.join(view.inputs) or '-'} -> {', '.join(view.outputs) or '-'}"
    conflict = f"also named under {len(view.jobs) - 1} other job(s)" if view.jobs else ""
    job = f"{view.job_namespace}/{view.job_name}"
    return (view.run_id, view.origin, view.state or "-", started, view.ended or "-", job, flows, conflict)


@runs.command(
    "list",
    epilog=examples(
        "olbridge runs list --external --state fail --since 2025-03-01 --json",
        "olbridge runs list --own --job dbt_build_with_lineage.export_report --limit 20",
    ),
)
@click.option(
    "--job", type=NAMED, help="Only runs of this job (its name, as its events give it: <flowId>.<taskId> for ours)."
)
@click.option("--namespace", type=NAMED, help="Only runs of jobs in this job namespace.")
@click.option("--state", type=StateParam(run_state=True), help=f"Only runs in this state ({STATE_HELP}).")
@click.option("--since", help="Only runs started at or after this time (ISO 8601; no offset: UTC).")
@click.option("--until", help="Only runs started before this time.")
@click.option("--own", is_flag=True, help="Only olbridge's own runs.")
@click.option("--external", is_flag=True, help="Only external runs.")
@click.option("--limit", type=count(1), default=1000, show_default=True, help="At most this many runs.")
@click.option(
    "--offset",
    type=count(0),
    default=0,
    show_default=True,
    help="Skip this many of the newest runs first (the next page: --offset 1000, 2000, ...).",
)
@json_flag("Print a JSON array.")
@pass_app
def runs_list(
    app: AppContext,
    job: str | None,
    namespace: str | None,
    state: str | None,
    since: str | None,
    until: str | None,
    own: bool,
    external: bool,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """List runs, newest first (by start time): run id, origin (olbridge or external), state,
    start (marked inferred when the run's START never came), end, job, inputs -> outputs, under
    a header row. When more runs match than are shown, stderr says which of how many, and
    --offset pages on.

    --json gives each run's producer, parent run, facets (the latest of each, for external
    runs), warnings, and the jobs of a run whose events named it under more than one.
    """
    if own and external:
        raise click.UsageError("--own and --external each leave out the other's runs: give one, or neither for both")
    start, end = window(since, until)
    origin = OWN if own else EXTERNAL if external else None
    filters = RunFilter(job=job, namespace=namespace, state=state, since=start, until=end, origin=origin)
    page = Runs(app.catalog(), app.converter()).page(filters, limit=limit, offset=offset)
    if as_json:
        print_json([view.to_json() for view in page.runs])
    else:
        print_rows(HEADER, (_row(view) for view in page.runs))
    shown = len(page.runs)
    if shown < page.total:
        if not shown:  # past the last
            say(f"no runs past --offset {offset:,}: there are {page.total:,}")
            return
        more = f"; --offset {offset + shown} shows the next" if offset + shown < page.total else ""
        say(f"showing runs {offset + 1:,}-{offset + shown:,} of {page.total:,}, newest first{more}")


@runs.command("show")
@click.argument("run_id")
@json_flag("Print the run as JSON.")
@pass_app
def runs_show(app: AppContext, run_id: str, as_json: bool) -> None:
    """Show one run by its OpenLineage run id (the runId its events carry): its job, state,
    times, inputs and outputs, producer, facets and warnings."""
    view = Runs(app.catalog(), app.converter()).get(run_id)
    if view is None:
        raise NotInCatalog(f"no run with id {run_id!r} (olbridge runs list shows them)")
    if as_json:
        print_json(view.to_json())
        return
    lines = [
        f"run:      {view.run_id} ({view.origin})",
        f"job:      {view.job_namespace}/{view.job_name}",
        f"state:    {view.state or '-'}",
        f"started:  {view.started or '-'}"
        + (" (inferred: no START came; the first event's time)" if view.start_inferred else ""),
        f"ended:    {view.ended or '-'}",
        f"producer: {view.producer}",
    ]
    if view.parent_run_id:
        lines.append(f"parent:   {view.parent_run_id}")
    lines += [f"input:    {asset}" for asset in view.inputs]
    lines += [f"output:   {asset}" for asset in view.outputs]
    ended = (view.task_run or {}).get("taskState") or view.state
    lines += [f"output:   {asset} (not written: the run ended {ended})" for asset in view.unwritten]
    if view.jobs:
        lines.append("jobs:     " + ", ".join(f"{ns}/{name}" for ns, name in view.jobs) + " (its events disagree)")
    for side, facets in (("run", view.run_facets), ("job", view.job_facets)):
        for key, facet in facets.items():
            lines.append(f"{side} facet {key}: {json.dumps(facet, sort_keys=True, ensure_ascii=False)}")
    lines += [f"warning:  {warning}" for warning in view.warnings]
    echo_lines(lines)
