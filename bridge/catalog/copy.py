"""Copying a catalog to another, between engines (SQLite to PostgreSQL and back), and checking it.

Every table of the schema (:mod:`bridge.catalog.schema`) is copied row by row (into PostgreSQL by
``COPY``), keys included, in the order its foreign keys need, from one snapshot of the source (a
read transaction) into the destination in one transaction: the destination gets all of it or,
should anything fail, nothing (a row it cannot take is an error naming its table). The
destination must be empty (a new file or database, or a catalog made by ``init`` that holds no
rows) and both must be at this olbridge's schema version (``olbridge migrate`` first). Afterwards
each counting key is set past its table's highest (:meth:`Catalog.reset_keys`), so that the next
task run or received event gets a key of its own.

Then every table is read again on both sides, in one order (its primary key; a table without one,
all its columns), and compared by its count of rows and a digest of them: SHA-256 over each row's
values as JSON, the values typed by the schema's columns (text, integers, seconds), so that both
engines give the same digest for the same rows. Rows are read in pages of :data:`PAGE`, after the
previous page's last key, so that neither side is held in memory.

A live source (receivers and stream workers writing it) can be copied: within :func:`snapshot`
the rows are counted, copied and digested on one snapshot of it (PostgreSQL's REPEATABLE READ,
SQLite's read transaction), so the copy is checked against what it copied, not the source's later
state. What belongs to the source's running processes stays behind (:data:`LEFT_BEHIND`, and the
outbox's claims, :data:`CLEARED`): the copy starts with no stream worker holding anything.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import orjson

from bridge.catalog.engine import Cursor
from bridge.catalog.store import Catalog
from bridge.errors import BridgeError, CatalogError

PAGE = 5_000  # rows read at a time
# the source's running processes, not its data: the stream workers' registrations and SQLite's
# outbox lease are not copied, and the outbox's claims are copied as none
LEFT_BEHIND = ("stream_workers", "outbox_lease")
CLEARED = {"outbox": ("claimed_by", "claim_expires")}

Progress = Callable[[int], object]  # rows done since the last call


@attrs.frozen
class TableCheck:
    """One table after a copy: its rows and digest on each side."""

    table: str
    source_rows: int
    source_digest: str
    destination_rows: int
    destination_digest: str

    @property
    def same(self) -> bool:
        return (self.source_rows, self.source_digest) == (self.destination_rows, self.destination_digest)

    def as_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "rows": self.source_rows,
            "digest": self.source_digest,
            "destinationRows": self.destination_rows,
            "destinationDigest": self.destination_digest,
            "same": self.same,
        }


@attrs.frozen
class _Table:
    """How a table is read and written: its columns, the key it is read in order of (columns or
    expressions; a table without a primary key is read in the order of all its columns, NULLs
    as the unique index that stands for its key counts them), each column's kind."""

    name: str
    columns: tuple[str, ...]
    order: tuple[str, ...]
    kinds: tuple[str, ...]  # "text" | "integer" | "seconds", by column


def tables() -> list[_Table]:
    """The schema's tables, parents before the tables whose foreign keys name them."""
    import sqlalchemy as sa

    from bridge.catalog import schema

    found = []
    for table in schema.metadata.sorted_tables:
        columns = tuple(c.name for c in table.columns)
        kinds = tuple(
            "seconds" if isinstance(c.type, sa.Float) else "integer" if isinstance(c.type, sa.Integer) else "text"
            for c in table.columns
        )
        keys = tuple(c.name for c in table.primary_key.columns)
        if not keys:
            keys = tuple(
                (f"coalesce({c.name}, {0 if kind == 'integer' else repr('')})" if c.nullable else c.name)
                for c, kind in zip(table.columns, kinds, strict=True)
            )
        found.append(_Table(table.name, columns, keys, kinds))
    return found


@contextmanager
def naming(catalog: Catalog) -> Iterator[None]:
    """An error about ``catalog``'s storage raised in the block (a server gone, a full disk), as
    the CatalogError that names that catalog. A copy works on two catalogs, neither of them the
    command's own ``--catalog``, which an error left to the command line would name instead."""
    try:
        yield
    except BridgeError:
        raise
    except Exception as exc:
        found = catalog.engine.storage_error(exc)
        if found is None:
            raise
        raise found from exc


def count_rows(catalog: Catalog, *, copied: bool = False) -> dict[str, int]:
    """Each table's count of rows (``copied``: of the tables a copy takes)."""
    with naming(catalog):
        return count_rows_on(catalog._conn, [t for t in tables() if not (copied and t.name in LEFT_BEHIND)])


@contextmanager
def snapshot(catalog: Catalog) -> Iterator[None]:
    """A read transaction on one snapshot of the catalog: the reads in the block (a copy, its
    count and its digests) see the catalog as of its first read, whatever others write."""
    conn = catalog._conn
    with naming(catalog):
        conn.execute(_snapshot(catalog))
    try:
        yield
    finally:
        with naming(catalog):
            conn.execute("COMMIT")


def _pages(catalog: Catalog, table: _Table) -> Iterator[list[tuple[Any, ...]]]:
    """The table's rows in key order, a page at a time (each after the last key of the one before).
    An error about the catalog's storage (a file damaged, a server gone, text that is not UTF-8)
    is one naming the catalog and the table."""
    listed = ", ".join(table.columns)
    order = ", ".join(table.order)
    width = len(table.order)
    first = f"SELECT {listed}, {order} FROM {table.name} ORDER BY {order} LIMIT {PAGE}"
    after = (
        f"SELECT {listed}, {order} FROM {table.name} WHERE ({order}) > ({', '.join('?' * width)}) "
        f"ORDER BY {order} LIMIT {PAGE}"
    )
    if width == 1:  # a row value of one is the value itself
        after = f"SELECT {listed}, {order} FROM {table.name} WHERE {order} > ? ORDER BY {order} LIMIT {PAGE}"

    def read(statement: str, *params: Any) -> list[Any]:
        try:
            return list(catalog._conn.execute(statement, params).fetchall())
        except Exception as exc:
            found = catalog.engine.storage_error(exc)
            if found is None:
                raise
            raise CatalogError(f"{found}, reading table {table.name}") from exc

    if table.name in LEFT_BEHIND:
        return
    cleared = [table.columns.index(name) for name in CLEARED.get(table.name, ())]
    rows = read(first)
    while rows:
        size = len(table.columns)
        page = [tuple(row[:size]) for row in rows]
        if cleared:
            page = [tuple(None if i in cleared else value for i, value in enumerate(row)) for row in page]
        yield page
        if len(rows) < PAGE:
            return
        rows = read(after, *rows[-1][size:])


def _typed(row: Sequence[Any], kinds: Sequence[str]) -> list[Any]:
    """A row's values as the schema types them (a REAL column holding 0 is 0.0 on both engines)."""
    out: list[Any] = []
    for value, kind in zip(row, kinds, strict=True):
        if value is None:
            out.append(None)
        elif kind == "seconds":
            out.append(float(value))
        elif kind == "integer":
            out.append(int(value))
        else:
            out.append(str(value))
    return out


def digest_table(catalog: Catalog, table: _Table, progress: Progress | None = None) -> tuple[int, str]:
    """A table's count of rows and the SHA-256 of its rows (as JSON lines, in key order)."""
    hashed = hashlib.sha256()
    count = 0
    for page in _pages(catalog, table):
        for row in page:
            hashed.update(orjson.dumps(_typed(row, table.kinds)) + b"\n")
        count += len(page)
        if progress is not None:
            progress(len(page))
    return count, hashed.hexdigest()


def _snapshot(catalog: Catalog) -> str:
    """The statement that begins a read transaction on one snapshot of the catalog."""
    return catalog.engine.begin_snapshot()


def copy_catalog(
    source: Catalog, destination: Catalog, *, progress: Progress | None = None, in_snapshot: bool = False
) -> int:
    """Copy every row of ``source`` into the empty ``destination``, in one transaction; returns
    how many rows. A CatalogError when the destination holds rows (nothing is written then), and
    for an error about either catalog's storage, naming the one that failed (:func:`naming`).
    Read on a snapshot of its own, unless ``in_snapshot`` (the caller's :func:`snapshot`)."""
    layout = tables()
    insert = {
        t.name: f"INSERT INTO {t.name} ({', '.join(t.columns)}) VALUES ({', '.join('?' * len(t.columns))})"
        for t in layout
    }
    with contextlib.nullcontext() if in_snapshot else snapshot(source):

        def work(cur: Cursor) -> int:
            refuse_rows(destination, count_rows_on(cur, layout))
            copied = 0
            for table in layout:
                for page in _pages(source, table):
                    _write_page(destination, cur, table.name, insert[table.name], page)
                    copied += len(page)
                    if progress is not None:
                        progress(len(page))
            destination.engine.reset_keys(cur)
            return copied

        with naming(destination):  # (the source's reads name the source: _pages)
            return destination.db.write(work, attempts=1)


def _write_page(destination: Catalog, cur: Cursor, table: str, insert: str, page: Sequence[Sequence[Any]]) -> None:
    """A page of rows into the destination's table, which holds none of them: streamed in where
    the engine can (PostgreSQL's ``COPY``). A key there already (the destination written to
    meanwhile) or a value the destination cannot hold (a NUL character a SQLite file kept) is an
    error naming the table, not a race to run again: the copy is written whole or not at all."""
    engine = destination.engine
    try:
        engine.write_new(cur, insert, page)
    except Exception as exc:
        if not (engine.conflict(exc) or engine.refused(exc)):
            raise
        said = "; ".join(" ".join(line.split()) for line in str(exc.__cause__ or exc).strip().splitlines())
        raise CatalogError(f"catalog {destination.path}: table {table}: {said}; nothing was copied") from exc


def refuse_rows(destination: Catalog, counts: dict[str, int]) -> None:
    """A CatalogError when a destination's tables hold rows (``counts``, by table)."""
    held = {name: n for name, n in counts.items() if n}
    if held:
        name, rows = next(iter(held.items()))
        raise CatalogError(
            f"catalog {destination.path} is not empty ({rows:,} row(s) in {name}"
            + (f" and {len(held) - 1} other table(s)" if len(held) > 1 else "")
            + "): copy into a new catalog (a new file, an empty database or schema)"
        )


def count_rows_on(cur: Any, layout: Sequence[_Table]) -> dict[str, int]:
    """Each table's of ``layout`` count of rows, read on a connection or cursor."""
    return {t.name: int(cur.execute(f"SELECT count(*) FROM {t.name}").fetchone()[0]) for t in layout}


def digests(
    catalog: Catalog, *, progress: Progress | None = None, in_snapshot: bool = False
) -> dict[str, tuple[int, str]]:
    """Every table's count of rows and digest, as a copy takes them, read on one snapshot (the
    caller's :func:`snapshot` with ``in_snapshot``)."""
    with contextlib.nullcontext() if in_snapshot else snapshot(catalog):
        return {table.name: digest_table(catalog, table, progress) for table in tables()}


def check_copy(
    source: Catalog,
    destination: Catalog,
    *,
    progress: Progress | None = None,
    taken: dict[str, tuple[int, str]] | None = None,
) -> list[TableCheck]:
    """Every table's count of rows and digest, on both sides (each side read on one snapshot);
    ``taken``: the source's, from the snapshot it was copied from (:func:`digests`)."""
    theirs = taken if taken is not None else digests(source, progress=progress)
    ours = digests(destination, progress=progress)
    return [TableCheck(name, *theirs[name], *ours[name]) for name in theirs]


__all__ = [
    "CLEARED",
    "LEFT_BEHIND",
    "PAGE",
    "TableCheck",
    "check_copy",
    "copy_catalog",
    "count_rows",
    "digest_table",
    "digests",
    "refuse_rows",
    "snapshot",
    "tables",
]
