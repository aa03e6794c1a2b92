"""The receiver's writes: external OpenLineage events become placeholders, external runs and jobs,
their usages, lineage edges and column edges, and their datasets' data-quality assertions the
checks of their assets (``asset_checks``, kept with the event's time and job). Each write runs
inside a transaction the caller holds.

A group of events is taken by one :class:`GroupIngest`: it reads each row it needs once, merges
the group's events in memory, and writes each touched row once at :meth:`GroupIngest.flush`, so a
dataset that a thousand events name costs one read and one write, not a thousand.

The state they leave depends only on the set of events taken, never on their order or on the
clock: times come from the events, and where two events disagree (a run's state, a dataset's
facets) the one that ranks higher wins (:attr:`IncomingEvent.rank`, :attr:`IncomingEvent.state_rank`).
(The one reading of the clock is when an event to forward was queued in the outbox.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from bridge.catalog import external_rows, health_state, sql, sql_received
from bridge.catalog.engine import Conflict, Cursor, Engine, read_each, write_each
from bridge.catalog.health_state import WatchSeen
from bridge.catalog.rows import assertions_json, asset_from_row, asset_row
from bridge.catalog.writes import get_asset
from bridge.model import Assertion, Asset, Origin, TaskRunKey, format_time, parse_time
from bridge.model.received import (
    TERMINAL,
    IncomingEvent,
    ReceivedColumnEdge,
    SeenDataset,
    marquez_source,
    run_day,
    writable,
    writes_stored,
)
from bridge.openlineage.convert import task_run_id
from bridge.version import PROJECT_URL

if TYPE_CHECKING:
    from bridge.mapping.resolver import AssetRef, Resolver


@attrs.frozen
class IngestResult:
    """What taking one external event did."""

    status: str  # "accepted" | "duplicate" | "forbidden" (nothing taken: ``message`` says why)
    placeholders: tuple[str, ...] = ()  # External placeholders it created
    warnings: tuple[str, ...] = ()
    message: str = ""
    pointer: str | None = None  # of a refusal: where in the event (None: its run, or its job)


# the results of nearly every event, shared: a group's answer pickles each once (the rest refer to
# it), where a result an event cost the writer about 3 us to build and pickle and the worker 1 to
# unpickle
_ACCEPTED = IngestResult("accepted")
_DUPLICATE = IngestResult("duplicate")
# an event of one of olbridge's own task runs come back (an import of olbridge's export, of a
# Marquez it streams to): the run the catalog holds already, not an external run
_OWN_RUN = IngestResult("duplicate", message="one of olbridge's own task runs, which the catalog holds")


WARNINGS_KEPT = 200  # distinct warnings kept with an external run or job


@attrs.define
class _Source:
    """An external run's or job's job (the one its earliest-ranked event names), every job its
    events named, and their warnings."""

    rank: str
    job: tuple[str, str]
    jobs: set[tuple[str, str]]
    warnings: set[str] = attrs.field(factory=set)


@attrs.define
class _Binding:
    """A dataset's binding to its asset, and what the group's events said of it."""

    asset_id: str
    first: str
    last: str
    seen_rank: str
    facets_rank: str | None
    facets_digest: str | None
    new: bool
    all_rank: str | None = None  # of the latest event that gave it facets, any
    all_digest: str | None = None  # of all that event's facets
    base: dict[str, Any] = attrs.field(factory=dict)  # the naming rule's metadata, for a new asset
    producer: str | None = None  # of the latest-ranked event naming it, when in this group
    facets: SeenDataset | None = None  # of the latest-ranked event describing it, when in this group
    reported: bool = False  # whether an event of the group has reported its placeholder
    dirty: bool = False
    # its facet rows (key -> (rank, JSON); rank None: as the latest event with facets has it),
    # read once an event of the group says something new of them, and the keys to write
    facet_rows: dict[str, tuple[str | None, str]] | None = None
    facet_dirty: set[str] = attrs.field(factory=set)
    # the row as the group read it (first, last, seen rank, then the facets' columns): what the
    # group changed of it is what it writes
    stored: tuple[str | None, ...] = ()

    def change(self) -> str | None:
        """What the group writes of the binding: ``"whole"`` (new, or its facets changed: the row
        and its placeholder rebuilt), ``"seen"`` (only its sightings or producer moved), or None
        (seen again as it was: nothing)."""
        if self.new or self.facets is not None or self.facet_dirty or self.stored[3:] != self.facet_columns():
            return "whole"
        return "seen" if self.stored[:3] != (self.first, self.last, self.seen_rank) else None

    def facet_columns(self) -> tuple[str | None, ...]:
        return (self.facets_rank, self.facets_digest, self.all_rank, self.all_digest)


class GroupIngest:
    """Takes a group of accepted events inside one transaction; call :meth:`flush` at the end.

    A dataset seen again as it was writes nothing; one whose sightings (first and last seen, the
    producer of its latest event) alone moved has them moved in place, its row read by nobody
    (:data:`sql_received.MOVE_SIGHTINGS` where writers run side by side); only one whose facets
    changed, or a new one, is rebuilt whole.

    On an engine whose writers run side by side (``engine.concurrent_writers``) the bindings are
    read without a lock: a popular dataset's row is locked only by the statement that moves its
    sightings, at the end of the group. The runs the group merges into are locked as they are
    read; the bindings and placeholders it rebuilds whole are locked at :meth:`flush`, and a
    binding whose facets another process changed since the group read it raises
    :class:`Conflict`, as does a row another process wrote first that could not be locked
    because it did not exist yet (a new event, a new run, a new binding): the transaction is run
    again and finds it."""

    def __init__(
        self,
        cur: Cursor,
        resolver: Resolver,
        events: Sequence[IncomingEvent],
        *,
        engine: Engine | None = None,
        watch: WatchSeen | None = None,
    ) -> None:
        self.cur = cur
        self.engine = engine
        self.watch = watch
        self.concurrent = engine is not None and engine.concurrent_writers
        # reads that do not depend on one another, and writes whose counts nobody reads, go to an
        # engine with a server in one round trip each (without an engine: SQLite's cursor, one
        # writer, each statement on its own)
        self.read_all = engine.read_all if engine is not None else read_each
        self.write_all = engine.write_all if engine is not None else write_each
        self.resolver = resolver
        self.received: list[tuple[Any, ...]] = []
        self.bindings: dict[tuple[str, str], _Binding | None] = {}  # None: known not to be bound yet
        self.bound_here: dict[str, tuple[str, str]] = {}  # asset id -> dataset, bound in this group
        self.assets: dict[str, Asset | None] = {}
        # each run's (or job's) source row, the group's events merged as UPSERT_SOURCE merges them
        self.sources: dict[str, tuple[Any, ...]] = {}
        self.usages: dict[str, dict[str, set[str]]] = {}
        self.job_usages: dict[tuple[str, str, str, str], None] = {}  # (job ns, job name, direction, asset)
        self.edges: dict[tuple[str, str, str, str], None] = {}  # (upstream, downstream, job ns, job name)
        # column_lineage rows: (downstream, column, upstream, column, transformations, task run, source)
        self.column_edges: dict[tuple[str, str, str, str, str, int | None, str], None] = {}
        self.source_rows: dict[str, tuple[Any, ...]] = {}
        self.forwards: list[tuple[str, str, str, str]] = []  # (run key, text, event time, digest)
        self.source_states: dict[str, _Source] = {}
        self.own_runs: dict[str, bool] = {}  # run ids looked up as olbridge's own (_own_run)
        # for the health watch: the assets whose health the group's events may change (the outputs
        # of its run events, the datasets with assertions), and the runs an event of it ended (every
        # output of theirs)
        self.marked: set[str] = set()
        self.ended: set[str] = set()
        self.facets: dict[tuple[str, str], tuple[str, str]] = {}  # (owner, key) -> (rank, JSON), the latest
        # (namespace, name, asset id) -> (rank, type) of a dataset's symlink identifiers
        self.identifiers: dict[tuple[str, str, str], tuple[str, str | None]] = {}
        # (asset id, event time) -> (rank, reporter, assertions) of the datasets' data-quality
        # assertions, the highest-ranked event's of a time
        self.checks: dict[tuple[str, str], tuple[str, str, tuple[Assertion, ...]]] = {}
        self._preload(events)

    @staticmethod
    def _chunks(values: Sequence[Any], size: int = 256) -> Iterator[Sequence[Any]]:
        """``values`` in chunks of 1, 4, 16, 64 or 256, the last one padded with repeats: a few
        statement shapes, which SQLite's statement cache keeps compiled."""
        for start in range(0, len(values), size):
            chunk = list(values[start : start + size])
            width = next(w for w in (1, 4, 16, 64, 256) if w >= len(chunk))
            yield chunk + [chunk[-1]] * (width - len(chunk))

    def _queries(self, statement: Callable[[int], str], keys: Sequence[Any]) -> list[tuple[str, list[Any]]]:
        """The statements ``statement(n)`` and their parameters for ``keys`` (values, or tuples of
        values), n at a time, to run with others (:meth:`_read`)."""
        queries = []
        for chunk in self._chunks(keys):
            params = [part for key in chunk for part in key] if isinstance(chunk[0], tuple) else list(chunk)
            queries.append((statement(len(chunk)), params))
        return queries

    def _read(self, *reads: list[tuple[str, list[Any]]]) -> list[list[Any]]:
        """The rows of each list of queries (:meth:`_queries`), all of them read at once."""
        found = self.read_all(self.cur, [query for queries in reads for query in queries])
        out, start = [], 0
        for queries in reads:
            out.append([row for rows in found[start : start + len(queries)] for row in rows])
            start += len(queries)
        return out

    def _preload(self, events: Sequence[IncomingEvent]) -> None:
        """Read what the group's events touch in a few statements, not one a row (one round trip
        on an engine with a server)."""
        pairs = [(e.time_text, e.digest) for e in events]
        datasets = list(
            dict.fromkeys(
                [
                    *((d.namespace, d.name) for e in events for d in e.datasets),
                    *(c.input for e in events for c in e.column_edges),  # named by column lineage only
                ]
            )
        )
        self.bindings = dict.fromkeys(datasets)
        sources = sorted(
            {(e.source, run_day(e.source)) for e in events if e.source is not None}
            | {(m, run_day(m)) for e in events if e.kind == "RunEvent" and (m := _marquez_source(e)) is not None}
        )
        # before the bindings are read: a takeover of a placeholder waits for the group (adopt.py)
        lock = self.engine.adoption_lock(exclusive=False) if self.engine is not None else None
        _, digests, bindings, stored = self._read(
            [(lock, [])] if lock else [],
            self._queries(sql_received.received_digests, pairs),
            self._queries(sql_received.bindings_of, sorted(datasets)),
            self._queries(sql_received.locked_sources_of if self.concurrent else sql_received.sources_of, sources),
        )
        self.known: set[str] = {digest for (digest,) in digests}
        for row in bindings:
            self._bound(row)
        # with named tokens, the olbridge namespaces of the assets the bound datasets are, read at
        # once (an event may not write an asset its token may not see: _not_its_asset)
        self.asset_namespaces: dict[str, str | None] = {}
        if any(e.writes is not None for e in events):
            ids = sorted({b.asset_id for b in self.bindings.values() if b is not None})
            self.asset_namespaces = dict.fromkeys(ids)
            (found,) = self._read(self._queries(asset_namespaces_of, ids)) if ids else ([],)
            self.asset_namespaces.update((asset_id, namespace) for asset_id, namespace in found)
        self.stored_sources: set[str] = set()
        for row in stored:
            source, inputs, outputs, job_ns, job_name, job_rank, jobs, warnings = row
            self.stored_sources.add(source)
            sets = self._usage_sets(source)
            sets["input"].update(json.loads(inputs))
            sets["output"].update(json.loads(outputs))
            named = {(ns, name) for ns, name in json.loads(jobs)} if jobs else {(job_ns, job_name)}
            # a run kept before job ranks were: its job stays its job
            self.source_states[source] = _Source(job_rank or "", (job_ns, job_name), named, set(json.loads(warnings)))
        # each dataset's symlinks, as all the group's events give them (whatever their order)
        symlinks: dict[tuple[str, str], set[tuple[str, str, str | None]]] = {}
        for e in events:
            for e_ds in e.datasets:
                if e_ds.symlinks:
                    symlinks.setdefault((e_ds.namespace, e_ds.name), set()).update(e_ds.symlinks)
        self._read_spellings({key: tuple(sorted(found, key=str)) for key, found in symlinks.items()})

    def _bound(self, row: Sequence[Any]) -> None:
        """A binding as read (:func:`sql_received.bindings_of`'s columns)."""
        ns, name, asset_id, first, last, seen_rank, facets_rank, facets_digest, all_rank, all_digest = row
        self.bindings[ns, name] = _Binding(
            *(asset_id, first, last, seen_rank, facets_rank, facets_digest, False, all_rank, all_digest),
            stored=tuple(row)[3:],
        )

    def _read_spellings(self, symlinks: dict[tuple[str, str], tuple[tuple[str, str, str | None], ...]]) -> None:
        """For each dataset not bound yet, the other spellings of an id the rules name it from
        (:meth:`Resolver.ids_named`), and those of them that are olbridge's own assets
        (:meth:`_named_own_asset` chooses among them); and the bound dataset it is another name
        of, if one: a dataset whose symlinks name it, or one its own symlinks name (Spark's table
        on ``hdfs://`` with its Hive table as a symlink, then Hive naming the table), read in one
        round trip for the whole group (:meth:`_binding` takes it)."""
        self.spellings: dict[tuple[str, str], list[str]] = {}
        self.named_back: dict[tuple[str, str], AssetRef] = {}  # each one's id by the rules (_choose_id's)
        unbound = [key for key, binding in self.bindings.items() if binding is None]
        for ns, name in unbound:
            reverse = self.named_back[ns, name] = self.resolver.asset_for(ns, name)
            ids = [i for i in self.resolver.ids_named(ns, name) if i != reverse.id]
            if ids:
                self.spellings[ns, name] = ids
        # the ids of olbridge's own assets their symlinks may name (Spark's table at its location,
        # its Hive table olbridge's own asset): each symlink's id by the rules, and its spellings
        self.symlink_spellings: dict[tuple[str, str], list[str]] = {}
        for key in unbound:
            for ns, name, _ in symlinks.get(key, ()):
                if ns != self.resolver.default_namespace and (ns, name) not in self.symlink_spellings:
                    ids = [self.resolver.asset_for(ns, name).id, *self.resolver.ids_named(ns, name)]
                    self.symlink_spellings[ns, name] = list(dict.fromkeys(ids))
        wanted = sorted({i for ids in (*self.spellings.values(), *self.symlink_spellings.values()) for i in ids})
        linked = sorted({(ns, name) for key in unbound for ns, name, _ in symlinks.get(key, ())} - set(self.bindings))
        self.spelled: set[str] = set()
        self.aliases: dict[tuple[str, str], tuple[str, str]] = {}  # a dataset -> the one it is a name of
        self.symlinks = symlinks
        self.kept_names: set[tuple[str, str]] = set()  # names a bound dataset's identifiers hold already
        if not (wanted or unbound):
            return
        own, named_by, linked_rows = self._read(
            self._queries(own_assets_of, wanted) if wanted else [],
            self._queries(sql_received.symlinked_bindings_of, unbound) if unbound else [],
            self._queries(sql_received.bindings_of, linked) if linked else [],
        )
        self.spelled = {asset_id for (asset_id,) in own}
        targets: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for ns, name, *row in named_by:  # a bound dataset's symlink names this one
            self.kept_names.add((ns, name))
            targets.setdefault((ns, name), set()).add((row[0], row[1]))
            if (row[0], row[1]) not in self.bindings:
                self._bound(row)
        for row in linked_rows:  # the bound datasets their symlinks name
            self._bound(row)
        for key in unbound:
            for ns, name, _ in symlinks.get(key, ()):
                if self.bindings.get((ns, name)) is not None:
                    targets.setdefault(key, set()).add((ns, name))
        for key, found in targets.items():
            found.discard(key)
            if len(found) == 1 and not self._stands_alone(key):  # of several, it is its own
                self.aliases[key] = found.pop()
        self._alias_new(unbound)

    def _alias_new(self, unbound: list[tuple[str, str]]) -> None:
        """The datasets new to the catalog that the group's symlinks make names of one dataset
        (Spark's location and its Hive table, both first named in this group): each set of them
        is the dataset of the one that stands alone (:meth:`_stands_alone`), else of the least of
        their names, whatever the order of the events."""
        free = {key for key in unbound if key not in self.aliases}
        linked: dict[tuple[str, str], set[tuple[str, str]]] = {key: set() for key in free}
        for key in free:
            for ns, name, _ in self.symlinks.get(key, ()):
                if (ns, name) in free and (ns, name) != key:
                    linked[key].add((ns, name))
                    linked[ns, name].add(key)
        done: set[tuple[str, str]] = set()
        for start in sorted(free):
            if start in done or not linked[start]:
                continue
            names, queue = {start}, [start]
            while queue:
                for other in linked[queue.pop()]:
                    if other not in names:
                        names.add(other)
                        queue.append(other)
            done |= names
            alone = [key for key in sorted(names) if self._stands_alone(key)]
            primary = alone[0] if alone else min(names)
            for key in names - {primary, *alone}:
                self.aliases[key] = primary

    # --- reads, once each --------------------------------------------------------------------

    def asset(self, asset_id: str) -> Asset | None:
        if asset_id not in self.assets:
            self.assets[asset_id] = get_asset(self.cur, asset_id)
        return self.assets[asset_id]

    def _usage_sets(self, source: str) -> dict[str, set[str]]:
        sets = self.usages.get(source)
        if sets is None:
            sets = self.usages[source] = {"input": set(), "output": set()}
        return sets

    def _choose_id(self, ds: SeenDataset, writes: tuple[str, ...] | None) -> tuple[str, dict[str, Any], str | None]:
        """The asset id for a dataset not seen before, the metadata its rule gives, and a warning
        when the id the rules give stands for another dataset already (a collision): naming that
        dataset only to a token that may write its namespace (``writes``: None, any)."""
        own = self._own_choice(ds)
        if own is not None:
            return own, {}, None
        ref = self.named_back.get((ds.namespace, ds.name)) or self.resolver.asset_for(ds.namespace, ds.name)
        candidate = ref.id
        other = self.bound_here.get(candidate)
        if other is None:
            bound = self.cur.execute(sql_received.BINDING_OF_ASSET, (candidate,)).fetchone()
            other = (bound[0], bound[1]) if bound else None
        if other is None:
            existing = self.asset(candidate)
            if existing is not None:
                named = self.resolver.dataset_for(existing.id, existing.type, existing.metadata)
                if (named.namespace, named.name) != (ds.namespace, ds.name):
                    other = (named.namespace, named.name)
        if other is None:
            return candidate, dict(ref.metadata), None
        fallback = external_rows.hashed_id(ds.namespace, ds.name)
        seen = writes_stored(writes, other[0])
        which = f"the dataset {other[0]} {other[1]}" if seen else "another dataset's, in a namespace not this token's"
        warning = f"dataset {ds.namespace} {ds.name} maps to asset id {candidate!r}, which is already {which}; "
        return fallback, {}, warning + f"kept apart as {fallback!r}"

    def _stands_alone(self, key: tuple[str, str]) -> bool:
        """Whether a dataset not bound yet has an asset of its own: one of olbridge's
        (:meth:`_own_choice`, by the symlinks the group's events give it), or one under the id the
        rules name it back as, bound to no other dataset (:meth:`_choose_id` takes either)."""
        ds = SeenDataset(None, *key, symlinks=self.symlinks.get(key, ()))
        if self._own_choice(ds) is not None:
            return True
        ref = self.named_back.get(key) or self.resolver.asset_for(*key)
        return self.asset(ref.id) is not None and ref.id not in self.bound_here and self._unbound(ref.id)

    def _unbound(self, asset_id: str) -> bool:
        return self.cur.execute(sql_received.BINDING_OF_ASSET, (asset_id,)).fetchone() is None

    def _own_choice(self, ds: SeenDataset) -> str | None:
        """One of olbridge's own assets for a dataset not bound yet: the one its olbridge symlink
        names, else one the rules name as it is under another spelling, else (no asset has the id
        the rules name it back as) one they name as one of its symlinks; None: none."""
        # one of olbridge's own assets, exported under a name a rule may name back as another
        # (a File by an absolute path: local-file's file:///...), or as none (by a relative one)
        own = self._own_asset(ds) if ds.symlinks else None
        if own is not None:
            return own
        ref = self.named_back.get((ds.namespace, ds.name)) or self.resolver.asset_for(ds.namespace, ds.name)
        named = self._named_own_asset(ds, ref.id)
        if named is not None or self.asset(ref.id) is not None:
            return named
        return self._symlinked_own_asset(ds)

    def _symlinked_own_asset(self, ds: SeenDataset) -> str | None:
        """One of olbridge's own assets that a symlink of ``ds`` names as the rules name it (Spark's
        table at its location, its Hive table olbridge's asset), the first that is so named, not
        deleted and bound to no other dataset; None: none."""
        for ns, name, _ in ds.symlinks:
            for asset_id in self.symlink_spellings.get((ns, name), ()):
                free = asset_id in self.spelled and asset_id not in self.bound_here
                if free and self._free_for(asset_id, SeenDataset(None, ns, name)):
                    return asset_id
        return None

    def _named_own_asset(self, ds: SeenDataset, reverse_id: str) -> str | None:
        """One of olbridge's own assets that the rules name as ``ds`` is named, under an id other
        than the one they name it back as (``reverse_id``, which is no asset): ``s3a://lake/x``,
        exported as ``s3://lake`` + ``x``, for Spark's event naming that (the spellings a rule
        takes: :meth:`Resolver.ids_named`, read in one statement); the first that is so named,
        not deleted and bound to no other dataset. None: the rules' own id stands."""
        bound, spelled = self.bound_here, self.spelled
        ids = [i for i in self.spellings.get((ds.namespace, ds.name), ()) if i in spelled and i not in bound]
        if not ids or self.asset(reverse_id) is not None:
            return None
        return next((asset_id for asset_id in ids if self._free_for(asset_id, ds)), None)

    def _own_asset(self, ds: SeenDataset) -> str | None:
        """The asset olbridge exported ``ds`` for, tried before any naming rule: the asset the
        first symlink identifier in olbridge's namespace names (olbridge gives a dataset one), if
        :meth:`_free_for` it."""
        name = next((n for namespace, n, _kind in ds.symlinks if namespace == self.resolver.default_namespace), None)
        return name if name is not None and name not in self.bound_here and self._free_for(name, ds) else None

    def _free_for(self, asset_id: str, ds: SeenDataset) -> bool:
        """Whether ``ds`` may be bound to the asset ``asset_id`` of the catalog: it is there, not
        deleted, olbridge names it as ``ds`` is named (an event cannot bind a dataset to an asset
        that is not its own), and no other dataset is bound to it (read to be written, as every
        binding's asset is)."""
        asset = self.asset(asset_id)
        if asset is None or asset.deleted_at is not None:
            return False
        named = self.resolver.dataset_for(asset.id, asset.type, asset.metadata)
        if (named.namespace, named.name) != (ds.namespace, ds.name):
            return False
        return self._unbound(asset.id)

    def _binding(self, ds: SeenDataset, moment: str, writes: tuple[str, ...] | None) -> tuple[_Binding, str | None]:
        key = (ds.namespace, ds.name)
        binding = self.bindings[key]
        if binding is not None:
            return binding, None
        alias = self.aliases.get(key)
        if alias is not None:  # another name of a dataset (_read_spellings): its binding
            aliased = self.bindings[alias]
            if aliased is None:  # new too, first named by this event
                aliased, warning = self._binding(
                    SeenDataset(None, *alias, symlinks=self.symlinks.get(alias, ())), moment, writes
                )
                return aliased, warning
            return aliased, None
        asset_id, base, warning = self._choose_id(ds, writes)
        binding = _Binding(asset_id, moment, moment, "", None, None, new=True, base=base)
        self.bound_here[asset_id] = key
        self.bindings[key] = binding
        return binding, warning

    # --- one event ---------------------------------------------------------------------------

    def take(self, event: IncomingEvent) -> IngestResult:
        """Take one event. A re-sent one changes nothing."""
        if event.digest in self.known:
            return _DUPLICATE
        refused = self._not_its_token(event) or self._not_its_alias(event) or self._not_its_asset(event)
        if refused is not None:
            return refused
        if event.producer.startswith(PROJECT_URL) and event.source not in self.stored_sources and self._own_run(event):
            return _OWN_RUN
        self.known.add(event.digest)
        moment = event.time_text
        source = event.source
        warnings = list(event.warnings)
        if source is not None:
            warning = self._take_source(event, source)
            if warning is not None:
                warnings.append(warning)
            if event.run_facets:
                self._take_facets(source, event.run_facets, event.rank)
        if event.job_facets:
            self._take_facets(f"job:{event.job_namespace}/{event.job_name}", event.job_facets, event.rank)
        self.received.append(
            (
                event.digest,
                event.kind,
                event.event_type,
                moment,
                source,
                event.producer,
                external_rows.json_text(warnings) if warnings else "[]",
                event.body,
                event.token,
            )
        )
        if event.forward is not None:
            self.forwards.append((external_rows.forward_key(event), event.forward, moment, event.digest))
        if source is not None:
            row = external_rows.source_row(event, moment)
            earlier = self.sources.get(source)
            self.sources[source] = row if earlier is None else external_rows.merged_source(earlier, row)
        placeholders: list[str] = []
        if event.kind == "RunEvent" and (event.event_type or "").upper() in TERMINAL:
            self.ended.add(str(source))
        inputs = 0  # the inputs before this one
        for ds in event.datasets:
            if ds.direction == "input" and (ds.described or ds.facets or ds.assertions) and self._hidden(ds, event):
                warnings.append(
                    f"{_pointer(ds, inputs)}: token {event.token!r} may not write dataset {ds.namespace} {ds.name}, an "
                    "asset of a namespace not this token's: the facets the event carries for this input were not "
                    "applied"
                )
                # bound first as its symlinks name it (olbridge's own asset), then named bare
                _, bound_warning = self._binding(ds, moment, event.writes)
                ds = SeenDataset(ds.direction, ds.namespace, ds.name)
            else:
                bound_warning = None
            asset_id, created, warning = self._take_dataset(ds, event, moment)
            warning = warning or bound_warning
            if self._aliased_away(ds, event):  # another namespace's dataset, read: named, not checked
                if ds.described or ds.facets or ds.assertions:
                    warnings.append(
                        f"{_pointer(ds, inputs)}: token {event.token!r} may not write dataset {ds.namespace} "
                        f"{ds.name}, another name of a dataset in a namespace not this token's: the facets the "
                        "event carries for this input were not applied"
                    )
                ds = SeenDataset(ds.direction, ds.namespace, ds.name)
            inputs += ds.direction == "input"
            if ds.assertions or (event.kind == "RunEvent" and ds.direction == "output"):
                self.marked.add(asset_id)
            if created:
                placeholders.append(asset_id)
            if warning:
                warnings.append(warning)
            if source is not None and ds.direction is not None:
                self._take_usage(event, ds.direction, asset_id)
            if ds.assertions:
                self._take_checks(asset_id, event, ds.assertions)
        if source is not None and event.column_edges:
            named = {(d.namespace, d.name) for d in event.datasets}
            for edge in event.column_edges:
                placeholders += self._take_column_edge(edge, event, source, named, warnings)
        if source is not None and warnings:
            kept = self.source_states[source].warnings
            kept.update(w for w in warnings if len(kept) < WARNINGS_KEPT)
        if not placeholders and not warnings:
            return _ACCEPTED
        return IngestResult("accepted", tuple(dict.fromkeys(placeholders)), tuple(warnings))

    def _not_its_token(self, event: IncomingEvent) -> IngestResult | None:
        """The refusal of an event whose token may not write the namespace of the job its run (or
        job) is already (stored, or earlier in the group) the run of: its first job, by its
        events' order (a token of another namespace cannot join, end or fail another's run by
        naming its runId; nor is the job named to it). None: not refused."""
        if event.writes is None or event.source is None:
            return None
        state = self.source_states.get(event.source)
        if state is None or writable(event.writes, state.job[0]):
            # nor the run Marquez reads its runId as, where that is another spelling's
            also = _marquez_source(event) if event.kind == "RunEvent" else None
            state = self.source_states.get(also) if also is not None else None
            if state is None or writable(event.writes, state.job[0]):
                return None
        what = f"run {event.run_id}" if event.run_id is not None else f"job {event.job_namespace}/{event.job_name}"
        message = f"token {event.token!r} may not write {what}: it is the run of a job of another namespace"
        return IngestResult("forbidden", message=message)

    def _aliased_away(self, ds: SeenDataset, event: IncomingEvent) -> bool:
        """Whether ``ds`` is another name of a dataset (:meth:`_binding`) of a namespace the
        event's token may not write."""
        key = (ds.namespace, ds.name)
        target = self.aliases.get(key) if self.bindings.get(key) is None else None
        return target is not None and not writes_stored(event.writes, target[0])

    def _not_its_alias(self, event: IncomingEvent) -> IngestResult | None:
        """The refusal of an event whose token writes a dataset (an output, a DatasetEvent's) that
        is another name of a dataset of a namespace it may not write, which its own name hid from
        the receiver's check of namespaces (nor is that dataset named to it). None: not refused."""
        return self._written_forbidden(
            event, self._aliased_away, "it is another name of a dataset in a namespace not this token's"
        )

    def _not_its_asset(self, event: IncomingEvent) -> IngestResult | None:
        """The refusal of an event whose token writes a dataset (an output, a DatasetEvent's) that
        is an asset of an olbridge namespace the token may not write (one declared with
        ``--namespace``): it would fail or freshen an asset the token cannot see. None: not
        refused. (An input is read: its facets are not applied, :meth:`take`.)"""
        return self._written_forbidden(event, self._hidden, "it is an asset of a namespace not this token's")

    @staticmethod
    def _written_forbidden(
        event: IncomingEvent, forbidden: Callable[[SeenDataset, IncomingEvent], bool], why: str
    ) -> IngestResult | None:
        """The refusal of the event at the first dataset it writes (an output, a DatasetEvent's)
        that ``forbidden`` says its token may not write, saying ``why``; None: none."""
        if event.writes is None:
            return None
        outputs = 0  # the outputs before this one (an event's datasets: its inputs, then its outputs)
        for ds in event.datasets:
            if ds.direction != "input" and forbidden(ds, event):
                message = f"token {event.token!r} may not write dataset {ds.namespace} {ds.name}: {why}"
                return IngestResult("forbidden", message=message, pointer=_pointer(ds, outputs))
            outputs += ds.direction == "output"
        return None

    def _hidden(self, ds: SeenDataset, event: IncomingEvent) -> bool:
        """Whether ``ds`` is an asset of an olbridge namespace the event's token may not write."""
        if event.writes is None:
            return False
        asset_id = self._written_asset(ds)
        namespace = self._namespace_of(asset_id) if asset_id is not None else None
        return namespace is not None and not writable(event.writes, namespace)

    def _written_asset(self, ds: SeenDataset) -> str | None:
        """The asset of the catalog that ``ds`` is, or would be bound to (:meth:`_binding`), read
        without binding it; None: a placeholder the group would make."""
        key = (ds.namespace, ds.name)
        binding = self.bindings.get(key)
        if binding is None and key in self.aliases:
            binding = self.bindings.get(self.aliases[key])
        if binding is not None:
            return binding.asset_id
        own = self._own_choice(ds)
        if own is not None:
            return own
        ref = self.named_back.get(key) or self.resolver.asset_for(*key)
        return ref.id if ref.id not in self.bound_here and self._free_for(ref.id, ds) else None

    def _namespace_of(self, asset_id: str) -> str | None:
        """An asset's olbridge namespace (None: Global, deleted, or no such asset)."""
        if asset_id in self.asset_namespaces:
            return self.asset_namespaces[asset_id]
        asset = self.asset(asset_id)
        return asset.namespace if asset is not None and asset.deleted_at is None else None

    def _own_run(self, event: IncomingEvent) -> bool:
        """Whether the event is of one of olbridge's own task runs (its producer olbridge's, its
        run id the one olbridge gives a task run of the catalog: :func:`own_run`), each run id
        looked up once a group."""
        if event.run_id is None:
            return False
        found = self.own_runs.get(event.run_id)
        if found is None:
            found = self.own_runs[event.run_id] = own_run(self.cur, event.run_id)
        return found

    def _take_source(self, event: IncomingEvent, source: str) -> str | None:
        """Note the job the event names for its run (or job): a run named under another job
        than before is said in a warning, and keeps every job named."""
        assert event.job_namespace is not None and event.job_name is not None
        job = (event.job_namespace, event.job_name)
        state = self.source_states.get(source)
        if state is None:
            self.source_states[source] = _Source(event.rank, job, {job})
            return None
        warning = None
        if job not in state.jobs:
            before = ", ".join(f"{ns}/{name}" for ns, name in sorted(state.jobs))
            warning = (
                f"run {event.run_id} was named under job {before}; this event names it under job "
                f"{job[0]}/{job[1]}: kept as one run with both jobs (olbridge runs show {event.run_id})"
            )
            state.jobs.add(job)
        if event.rank < state.rank:
            state.rank, state.job = event.rank, job
        return warning

    def _take_checks(self, asset_id: str, event: IncomingEvent, assertions: tuple[Assertion, ...]) -> None:
        """A dataset's assertions, kept as a check of its asset at the event's time, reported by
        the event's job (a dataset event: by its producer)."""
        key = (asset_id, event.time_text)
        kept = self.checks.get(key)
        if kept is None or event.rank > kept[0]:
            reporter = f"{event.job_namespace}/{event.job_name}" if event.job_name is not None else event.producer
            self.checks[key] = (event.rank, reporter, assertions)

    def _take_facets(self, owner: str, facets: tuple[tuple[str, str], ...], rank: str) -> None:
        for key, text in facets:
            kept = self.facets.get((owner, key))
            if kept is None or rank > kept[0]:
                self.facets[owner, key] = (rank, text)

    def _take_column_edge(
        self,
        edge: ReceivedColumnEdge,
        event: IncomingEvent,
        source: str,
        named: set[tuple[str, str]],
        warnings: list[str],
    ) -> list[str]:
        """One column edge, under the asset ids its datasets are bound to; a dataset that only the
        column lineage names is a sighting of it as any other (a placeholder when new). The
        placeholders it created."""
        ids, created = [], []
        for dataset in (edge.output, edge.input):
            binding = self.bindings.get(dataset)
            if dataset in named and binding is not None:
                ids.append(binding.asset_id)
                continue
            asset_id, new, warning = self._take_dataset(SeenDataset(None, *dataset), event, event.time_text)
            if new:
                created.append(asset_id)
            if warning and warning not in warnings:
                warnings.append(warning)
            ids.append(asset_id)
        self.column_edges[(ids[0], edge.column, ids[1], edge.field, edge.transformations, None, source)] = None
        return created

    def _take_dataset(self, ds: SeenDataset, event: IncomingEvent, moment: str) -> tuple[str, bool, str | None]:
        binding, warning = self._binding(ds, moment, event.writes)
        rank = event.rank
        # a dataset of a namespace the event's token may not write (an input it read) is named,
        # not described: its sightings and producer stay (a token moved another team's dataset's
        # "last seen" and producer by naming it), unless this group made it; another name of a
        # bound dataset (:meth:`_binding`) is judged on that dataset's namespace
        seen = (ds.namespace, ds.name)
        aliased = self.bindings[seen] is None
        foreign = not writes_stored(event.writes, self.aliases[seen][0] if aliased else ds.namespace)
        if aliased and seen not in self.kept_names:  # kept as a name of its asset, found by it next time
            kept = self.identifiers.get((*seen, binding.asset_id))
            if kept is None or rank > kept[0]:
                self.identifiers[(*seen, binding.asset_id)] = (rank, kept[1] if kept else None)
        if aliased and foreign:  # another namespace's dataset by another name: named, not described
            ds = SeenDataset(ds.direction, ds.namespace, ds.name)
        if not foreign or binding.new:
            binding.first, binding.last = min(binding.first, moment), max(binding.last, moment)
            if rank > binding.seen_rank:
                binding.seen_rank, binding.producer = rank, event.producer
        if ds.facets:
            self._take_dataset_facets(binding, ds, rank)
        for namespace, name, kind in ds.symlinks:
            key = (namespace, name, binding.asset_id)
            kept = self.identifiers.get(key)
            if kept is None or rank > kept[0]:
                self.identifiers[key] = (rank, kind)
        if ds.described and (binding.facets_rank is None or rank > binding.facets_rank):
            binding.facets_rank = rank
            if ds.facets_digest != binding.facets_digest:
                binding.facets, binding.facets_digest = ds, ds.facets_digest
        binding.dirty = True
        created = binding.new and not binding.reported and self.asset(binding.asset_id) is None
        binding.reported = True
        # nor is it said to the token whether it was new there (whether another team's dataset
        # exists is not its to learn)
        return binding.asset_id, created and not foreign, warning

    def _take_dataset_facets(self, b: _Binding, ds: SeenDataset, rank: str) -> None:
        """The latest of each facet of a dataset, whatever the order of the events. The facets of
        its latest event with facets are kept current (rank None) and the binding holds that
        event's rank and all its facets hashed, so that an event that repeats them, the usual
        case, writes no facet row; any other reads the rows once and merges into them."""
        if b.facet_rows is None:
            if ds.facets_text_digest == b.all_digest:  # what its latest faceted event said, again
                if b.all_rank is None or rank > b.all_rank:
                    b.all_rank = rank
                return
            rows = self.cur.execute(sql_received.FACET_ROWS_OF, (f"asset:{b.asset_id}",))
            b.facet_rows = {key: (kept, text) for key, kept, text in rows}
        facets = b.facet_rows
        if b.all_rank is None or rank > b.all_rank:  # its latest event with facets now
            if ds.facets_text_digest != b.all_digest:
                keys = {key for key, _ in ds.facets}
                for key, (kept, text) in list(facets.items()):
                    if kept is None and key not in keys:  # the former latest's, which this one leaves
                        facets[key] = (b.all_rank, text)
                        b.facet_dirty.add(key)
                for key, text in ds.facets:
                    if facets.get(key) != (None, text):
                        facets[key] = (None, text)
                        b.facet_dirty.add(key)
                b.all_digest = ds.facets_text_digest
            b.all_rank = rank
            return
        for key, text in ds.facets:  # an earlier event: its facets that nothing later repeats
            row = facets.get(key)
            if row is None or (row[0] is not None and rank > row[0]):
                facets[key] = (rank, text)
                b.facet_dirty.add(key)

    def _take_usage(self, event: IncomingEvent, direction: str, asset_id: str) -> None:
        assert event.source is not None and event.job_namespace is not None and event.job_name is not None
        sets = self._usage_sets(event.source)
        if asset_id in sets[direction]:
            return
        sets[direction].add(asset_id)
        job = (event.job_namespace, event.job_name)
        self.job_usages[(*job, direction, asset_id)] = None
        other = "output" if direction == "input" else "input"
        for peer in sorted(sets[other]):
            if peer != asset_id:
                edge = (asset_id, peer) if direction == "input" else (peer, asset_id)
                self.edges[(*edge, *job)] = None

    # --- writes, once each -------------------------------------------------------------------

    def flush(self) -> None:
        bound = [((ns, name), b) for (ns, name), b in self.bindings.items() if b is not None and b.dirty]
        changes = [(dataset, b, b.change()) for dataset, b in bound]
        whole = [(dataset, b) for dataset, b, change in changes if change == "whole"]
        seen = [(dataset, b) for dataset, b, change in changes if change == "seen"]
        # a placeholder rebuilt (new, or its facets changed: its metadata) may come to match a
        # [[freshness]] selector: marked, read or written
        self.marked.update(b.asset_id for _, b in whole)
        touched, rebuilt = [], []
        stored: dict[str, Sequence[Any]] = {}  # the placeholders' rows, read and locked (concurrent)
        job_usages, edges = list(self.job_usages), list(self.edges)
        if self.concurrent:  # the bindings and placeholders to rebuild, read (and locked) in one go, in order
            wanted = sorted({b.asset_id for _, b in whole if b.asset_id not in self.assets})
            self.assets.update(dict.fromkeys(wanted))
            again = sorted(dataset for dataset, b in whole if not b.new)
            bindings, rows, job_usages, edges = self._unknown(again, wanted, job_usages, edges)
            self._relock(bindings, again)
            stored = {row[0]: row for row in rows}
        else:  # one writer: the bindings as read are as they stand
            touched = [(b.first, b.last, b.first, b.last, b.producer, b.asset_id) for _, b in seen]
        for dataset, b in whole:
            if self.concurrent and b.asset_id in stored:
                self.assets[b.asset_id] = asset_from_row(stored[b.asset_id])
            current = self.asset(b.asset_id)
            if current is not None and current.origin is not Origin.EXTERNAL:
                continue  # the catalog's own asset: never overwritten from outside
            asset = external_rows.placeholder(
                current, b.asset_id, dataset, b.base, (b.first, b.last), b.producer, b.facets
            )
            if asset != current:
                rebuilt.append(asset_row(asset))
        rewritten = [(dataset, b) for dataset, b in (whole if self.concurrent else whole + seen) if not b.new]
        # the group's new runs and jobs, claimed first where writers run side by side
        claimed = {source for source in self.sources if source not in self.stored_sources} if self.concurrent else set()
        writes: list[tuple[str, list[tuple[Any, ...]]]] = [
            (sql_received.INSERT_RECEIVED, self.received),
            (
                sql_received.INSERT_BINDING,
                [
                    (
                        *(ns, name, b.asset_id, b.first, b.last, b.seen_rank, b.facets_rank, b.facets_digest),
                        *(b.all_rank, b.all_digest),
                    )
                    for (ns, name), b in whole
                    if b.new
                ],
            ),
            (
                sql_received.UPDATE_BINDING,
                [
                    (b.first, b.last, b.seen_rank, b.facets_rank, b.facets_digest, b.all_rank, b.all_digest, ns, name)
                    for (ns, name), b in rewritten
                ],
            ),
            (sql_received.TOUCH_PLACEHOLDER, touched),
            (sql.UPSERT_PLACEHOLDER, rebuilt),
            # each run's source row, with its inputs and outputs as they stand after the group (a
            # run this group claimed holds it already)
            (
                sql_received.UPSERT_SOURCE,
                [self._source_values(row) for source, row in self.sources.items() if source not in claimed],
            ),
            # in key order, as every writer side by side takes their row locks
            (
                sql_received.UPSERT_FACET,
                [(owner, key, rank, text) for (owner, key), (rank, text) in sorted(self.facets.items())],
            ),
            (
                sql_received.PUT_FACET,
                sorted(
                    (f"asset:{b.asset_id}", key, *(b.facet_rows or {})[key]) for _, b in whole for key in b.facet_dirty
                ),
            ),
            (
                sql_received.UPSERT_IDENTIFIER,
                [(*key, kind, rank) for key, (rank, kind) in sorted(self.identifiers.items())],
            ),
            (
                sql_received.PUT_RECEIVED_CHECKS,
                [
                    (asset_id, at, reporter, assertions_json(assertions), rank)
                    for (asset_id, at), (rank, reporter, assertions) in sorted(self.checks.items())
                ],
            ),
            (sql_received.INSERT_EXTERNAL_USAGE, job_usages),
            (sql_received.INSERT_EXTERNAL_EDGE, edges),
            (sql.INSERT_COLUMN_EDGE, list(self.column_edges)),
        ]
        if self.forwards:  # after the received events: each row refers to its event's key
            queued_at = format_time(datetime.now(UTC))
            writes.append(
                (sql_received.QUEUE_FORWARD, [(key, queued_at, text, *event) for key, text, *event in self.forwards])
            )
        writes.append((health_state.MARK, self._marks()))  # appended rows: no lock another writer waits on
        if self.concurrent:  # last: the rows of popular datasets, locked from here to the commit
            writes.append((sql_received.MOVE_SIGHTINGS, self._sightings(seen)))
        # first the group's new runs and jobs, as the group leaves them, and its new events: one
        # that another process wrote meanwhile is a Conflict (a merge into a run would lose that
        # one's inputs and outputs; an event would be kept twice)
        claims = [self._source_values(row) for source, row in self.sources.items() if source in claimed]
        (received, rows), rest = writes[0], writes[1:]
        self.write_all(self.cur, rest, new=[(sql_received.CLAIM_SOURCE, claims), (received, rows)])

    def _marks(self) -> list[tuple[str]]:
        """The rows of :data:`health_state.MARK` the group writes: none unless a health watch is
        live; else the assets whose health it may change (an input only read keeps its own)."""
        for source in self.ended:
            self.marked.update(self._usage_sets(source)["output"])
        if not self.marked or self.watch is None or not self.watch.live(self.cur):
            return []
        return [(asset_id,) for asset_id in sorted(self.marked)]

    def _unknown(
        self,
        bindings: list[tuple[str, str]],
        assets: list[str],
        usages: list[tuple[str, str, str, str]],
        edges: list[tuple[str, str, str, str]],
    ) -> tuple[list[Any], list[Any], list[tuple[str, str, str, str]], list[tuple[str, str, str, str]]]:
        """The rows of the bindings and assets given, locked in that order, and the usages and
        edges of the group that are not stored yet, read at once (recurring jobs name the same
        usages and edges group after group: an insert of each, even one that changes nothing,
        costs a statement on the server, where a read costs a row of an index)."""
        locked, rows, stored, found = self._read(
            self._queries(sql_received.locked_bindings_of, bindings) if bindings else [],
            self._queries(sql_received.locked_assets, assets) if assets else [],
            self._queries(sql_received.usages_of, sorted(set(usages))) if usages else [],
            self._queries(sql_received.edges_of, sorted(set(edges))) if edges else [],
        )
        known_usages, known_edges = {tuple(row) for row in stored}, {tuple(row) for row in found}
        return (
            locked,
            rows,
            [usage for usage in usages if usage not in known_usages],
            [edge for edge in edges if edge not in known_edges],
        )

    def _relock(self, rows: list[Any], datasets: list[tuple[str, str]]) -> None:
        """The bindings to rebuild whole, as they stand now that they are locked, merged with what
        other processes wrote since the group read them: sightings and the ranks of facets that
        say what they said (a later event describing the dataset as before), the later of each;
        a binding whose facets say something else now, or whose facets the group merged against
        ranks that moved, is a :class:`Conflict` (the group taken again)."""
        found = {(row[0], row[1]): tuple(row) for row in rows}
        for dataset in datasets:
            b = self.bindings[dataset]
            row = found.get(dataset)
            assert b is not None
            read_digest, read_all_rank, read_all_digest = b.stored[4:]
            if row is None or (row[2], row[7], row[9]) != (b.asset_id, read_digest, read_all_digest):
                raise Conflict(f"another process changed dataset {dataset[0]} {dataset[1]} meanwhile")
            first, last, seen_rank, facets_rank, _, all_rank, _ = row[3:]
            b.first, b.last = min(b.first, first), max(b.last, last)
            if seen_rank > b.seen_rank:  # a later event taken meanwhile: its producer stays
                b.seen_rank, b.producer = seen_rank, None
            if (facets_rank or "") > (b.facets_rank or ""):  # a later event described it as before
                b.facets_rank, b.facets_digest, b.facets = facets_rank, read_digest, None
            if all_rank != read_all_rank:
                if b.facet_rows is not None:  # the group merged its facet rows against the rank read
                    raise Conflict(f"another process changed dataset {dataset[0]} {dataset[1]} meanwhile")
                b.all_rank = max(b.all_rank or "", all_rank or "") or None

    @staticmethod
    def _sightings(seen: list[tuple[tuple[str, str], _Binding]]) -> list[tuple[str, int]]:
        """The parameters of :data:`sql_received.MOVE_SIGHTINGS` for the datasets only seen
        again, in key order (none: no statement)."""
        if not seen:
            return []
        rows = [
            {
                "ns": ns,
                "name": name,
                "first": b.first,
                "last": b.last,
                "seen_rank": b.seen_rank,
                "producer": b.producer,
                # the member's text as olbridge writes it, backslashes doubled for regexp_replace
                "producer_member": None
                if b.producer is None
                else ('"producer":' + external_rows.string_text(b.producer)).replace("\\", "\\\\"),
            }
            for (ns, name), b in sorted(seen, key=lambda item: item[0])
        ]
        return [(orjson.dumps(rows).decode(), len(rows))]

    def _source_values(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """A source row as it stands after the group: its run's (or job's) job, inputs, outputs,
        jobs named and warnings."""
        state, sets = self.source_states[row[0]], self._usage_sets(row[0])
        jobs = external_rows.json_text([list(job) for job in sorted(state.jobs)]) if len(state.jobs) > 1 else None
        return (
            row[0],
            *state.job,
            *row[3:],
            external_rows.json_text(sorted(sets["input"])),
            external_rows.json_text(sorted(sets["output"])),
            state.rank,
            jobs,
            external_rows.json_text(sorted(state.warnings)),
            run_day(row[0]),
        )


def _pointer(ds: SeenDataset, before: int) -> str:
    """Where a dataset is in its event: a DatasetEvent's, or the input or output with ``before``
    of its direction before it."""
    return "/dataset" if ds.direction is None else f"/{ds.direction}s/{before}"


def asset_namespaces_of(count: int) -> str:
    """The olbridge namespaces of those of ``count`` assets that have one."""
    return (
        f"SELECT id, namespace FROM assets WHERE id IN ({', '.join('?' * count)}) AND namespace IS NOT NULL "
        "AND deleted_at IS NULL"
    )


def own_assets_of(count: int) -> str:
    """The ids of the assets there are among ``count`` ids (the spellings the rules name a
    dataset from: :meth:`GroupIngest._read_spellings`): olbridge's own, or placeholders its own
    runs made of their inputs (a received placeholder has its dataset bound: not taken then,
    :meth:`GroupIngest._free_for`)."""
    marks = ", ".join("?" * count)
    return f"SELECT id FROM assets WHERE id IN ({marks}) AND deleted_at IS NULL"


# the task runs that started within a span of time (the milliseconds a run id says)
_STARTED_WITHIN = """
    SELECT flow_namespace, flow_id, task_id, execution_id, task_run_id, started_at FROM task_runs
    WHERE started_at >= ? AND started_at < ?
"""


def own_run(cur: Cursor, run_id: str) -> bool:
    """Whether ``run_id`` is the one olbridge gives one of the catalog's task runs
    (:func:`bridge.openlineage.convert.task_run_id`): a UUIDv7 whose first 48 bits are the run's
    start in milliseconds, so that the runs of that millisecond (by ``task_runs_started``) are
    the only ones it can be."""
    run_id = run_id.lower()  # olbridge writes its ids in lower case; a producer may not
    if len(run_id) != 36 or run_id[14] != "7":
        return False
    try:
        millis = int(run_id[:8] + run_id[9:13], 16)
        low = datetime.fromtimestamp((millis - 1) / 1000, UTC)  # a millisecond each side: rounding
        high = datetime.fromtimestamp((millis + 2) / 1000, UTC)
    except (ValueError, OverflowError, OSError):
        return False
    for ns, flow, task, execution, task_run, started in cur.execute(
        _STARTED_WITHIN, (format_time(low), format_time(high))
    ):
        key = TaskRunKey.create(ns, flow, task, execution, task_run)
        if task_run_id(key, parse_time(started, "started_at")) == run_id:
            return True
    return False


def ingest_events(
    cur: Cursor,
    events: Sequence[IncomingEvent],
    resolver: Resolver,
    *,
    engine: Engine | None = None,
    watch: WatchSeen | None = None,
) -> list[IngestResult]:
    """Take a group of events in the caller's transaction (``engine``: see :class:`GroupIngest`;
    ``watch``: whether a health watch is live, to mark the assets whose health the group may
    change; None: no marks)."""
    group = GroupIngest(cur, resolver, events, engine=engine, watch=watch)
    results = [group.take(event) for event in events]
    group.flush()
    return results


def _marquez_source(event: IncomingEvent) -> str | None:
    """:func:`bridge.model.received.marquez_source` of a RunEvent's runId."""
    return marquez_source(event.run_id) if event.run_id is not None else None
