"""``catalog copy``: a catalog copied to another, between engines."""

from __future__ import annotations

from pathlib import Path

import click

from bridge.catalog import Catalog
from bridge.catalog.copy import TableCheck, check_copy, copy_catalog, count_rows, digests, refuse_rows, snapshot
from bridge.catalog.engine import catalog_target, masked
from bridge.cli.context import warn_of_a_password
from bridge.cli.options import json_flag
from bridge.cli.output import print_json, say
from bridge.cli.progress import progress
from bridge.errors import CatalogError


@click.group("catalog")
def catalog() -> None:
    """The catalog as a whole: copy it to another (between SQLite and PostgreSQL)."""


def _target(text: str, name: str) -> str | Path:
    warn_of_a_password(text, name)
    return catalog_target(text)


def _same(source: str | Path, destination: str | Path) -> bool:
    if isinstance(source, Path) and isinstance(destination, Path):
        return source.resolve() == destination.resolve()
    return str(source) == str(destination)


@catalog.command("copy")
@click.argument("source", metavar="SRC")
@click.argument("destination", metavar="DST")
@json_flag("Print the tables, their rows and digests as JSON (camelCase keys).")
def catalog_copy(source: str, destination: str, as_json: bool) -> None:
    """Copy the catalog SRC into DST (each a SQLite file or a postgresql:// URL), then check it.

    DST must be empty: a new file, an empty database (or ?schema=NAME of one), or a catalog made
    by init that holds nothing; it is made at the current schema, and both must be at this
    olbridge's schema version (olbridge migrate first). Every table is copied from one snapshot
    of SRC in one transaction: DST gets all of it or nothing. SRC may be live: the copy is SRC as
    of that snapshot (what is written later stays behind), and the stream workers' registrations
    and claims stay behind too (DST's outbox is held by nobody). Then every table of DST is read
    and compared with SRC's in the same snapshot by its rows and a digest of them, printed table
    by table; any difference is an error."""
    src, dst = _target(source, "SRC"), _target(destination, "DST")
    if _same(src, dst):
        raise CatalogError(f"SRC and DST are the same catalog ({masked(src)}): copy into another one")
    with Catalog(src, create=False, migrate=False) as origin, Catalog(dst, migrate=False) as target:
        refuse_rows(target, count_rows(target))
        with snapshot(origin):  # counted, copied and digested as of one moment of SRC
            rows = sum(count_rows(origin, copied=True).values())
            say(f"copying {origin.path} ({origin.dialect}) into {target.path} ({target.dialect}): {rows:,} rows")
            try:
                with progress("copying", rows, "rows") as copying:
                    copy_catalog(origin, target, progress=copying.advance, in_snapshot=True)
            except BaseException:
                target.discard()  # a new file this copy made, left empty: taken away again
                raise
            with progress("checking", 2 * rows, "rows") as checking:
                taken = digests(origin, progress=checking.advance, in_snapshot=True)
                checks = check_copy(origin, target, progress=checking.advance, taken=taken)
        source_name, destination_name = origin.path, target.path
    _report(checks, source_name, destination_name, as_json)
    differ = [c.table for c in checks if not c.same]
    if differ:
        raise CatalogError(f"the copy differs from {source_name} in {', '.join(differ)}")


def _report(checks: list[TableCheck], source: str, destination: str, as_json: bool) -> None:
    rows = sum(c.source_rows for c in checks)
    if as_json:
        print_json(
            {
                "source": source,
                "destination": destination,
                "rows": rows,
                "same": all(c.same for c in checks),
                "tables": [c.as_json() for c in checks],
            }
        )
        return
    width = max(len(c.table) for c in checks)
    click.echo(f"{'table':<{width}}  {'rows':>11}  {'digest (SHA-256 of the rows)':<64}  destination")
    for c in checks:
        verdict = "same" if c.same else f"DIFFERS: {c.destination_rows:,} rows, {c.destination_digest}"
        click.echo(f"{c.table:<{width}}  {c.source_rows:>11,}  {c.source_digest}  {verdict}")
    same = all(c.same for c in checks)
    click.echo(f"{rows:,} rows in {len(checks)} tables" + (": every table the same" if same else ""))
