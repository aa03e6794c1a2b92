"""Where the receiver's time goes, in process (no HTTP), on the events of benchmarks/ingest.py:

    python benchmarks/ingest_parts.py [--events 24000] [--group 400]

Prints CPU time per event for parsing, for the verdict with reading the event and for its
hand-over to the writer process (pickled by the worker, a request of 100 at a time, and unpickled
by the writer; the best of five rounds), and the time the catalog's write lock is held per event:
the preload, the in-memory merge, the writes and the commit (with ``synchronous=FULL``, as
``olbridge serve`` commits by default); then the same for groups of four, as single-event
requests give. The first 20% of the events warm the catalog and are not timed.
"""

from __future__ import annotations

import argparse
import gc
import json
import pickle
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ingest import event
from bridge.catalog import Catalog, external
from bridge.jsontext import parse_json
from bridge.mapping import Resolver
from bridge.model import IncomingEvent
from bridge.receiver.imports import catalog_intake
from bridge.receiver.server import GC_YOUNG
from bridge.receiver.writer import CatalogWriter


def under_lock(path: Path, prepared: list[IncomingEvent], group: int, resolver: Resolver) -> dict[str, float]:
    writer = CatalogWriter(path, resolver)  # as olbridge serve's: FULL sync, checkpoints beside the commits
    catalog = writer.catalog
    parts = {"preload": 0.0, "merge": 0.0, "writes": 0.0, "commit": 0.0}
    warm = len(prepared) // 5
    timed = 0
    for start in range(0, len(prepared), group):
        events = prepared[start : start + group]
        cur = catalog._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        t0 = time.perf_counter()
        batch = external.GroupIngest(cur, resolver, events)
        t1 = time.perf_counter()
        for item in events:
            batch.take(item)
        t2 = time.perf_counter()
        batch.flush()
        t3 = time.perf_counter()
        cur.execute("COMMIT")
        t4 = time.perf_counter()
        if start >= warm:
            timed += len(events)
            for key, spent in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                parts[key] += spent
    writer.close()
    return {key: 1e6 * spent / timed for key, spent in parts.items()}


def hand_over(events: list[IncomingEvent], request: int = 100, rounds: int = 5) -> tuple[float, float]:
    """CPU µs an event to pickle requests of ``request`` events, as a worker hands them to the
    writer process, and to unpickle them, as the writer does (the best of ``rounds``: a few
    microseconds an event, which the machine's other work blurs); with the collector's threshold
    of ``olbridge serve``'s processes."""
    requests = [events[at : at + request] for at in range(0, len(events), request)]
    before = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, 20, 50)
    pickling, unpickling = [], []
    try:
        for _ in range(rounds):
            t0 = time.process_time()
            messages = [pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL) for part in requests]
            t1 = time.process_time()
            for message in messages:
                pickle.loads(message)
            t2 = time.process_time()
            pickling.append(t1 - t0)
            unpickling.append(t2 - t1)
    finally:
        gc.set_threshold(*before)
    return 1e6 * min(pickling) / len(events), 1e6 * min(unpickling) / len(events)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=24_000)
    parser.add_argument("--group", type=int, default=400)
    args = parser.parse_args(argv)
    resolver = Resolver.load()
    bodies = [json.dumps(event(n), separators=(",", ":")).encode() for n in range(args.events)]
    with tempfile.TemporaryDirectory(prefix="olbridge-parts-") as work:
        verdicts = Catalog(Path(work) / "verdict.db")
        intake = catalog_intake(verdicts, resolver)
        t0 = time.process_time()
        parsed = [parse_json(body) for body in bodies]
        t1 = time.process_time()
        prepared = [intake.prepare(item) for item in parsed]
        t2 = time.process_time()
        verdicts.close()
        events = [p for p in prepared if isinstance(p, IncomingEvent)]
        assert len(events) == len(prepared), "every benchmark event is accepted"
        n = len(bodies)
        print(f"{n:,} events; outside the write lock, CPU per event:")
        print(f"  parse (orjson)              {1e6 * (t1 - t0) / n:6.1f} us")
        print(f"  verdict and reading         {1e6 * (t2 - t1) / n:6.1f} us   ({n / (t2 - t1):,.0f} events/s)")
        pickled, unpickled = hand_over(events)
        print(f"  hand-over: pickle           {pickled:6.1f} us")
        print(f"  hand-over: unpickle         {unpickled:6.1f} us   (in the writer)")
        for group in (args.group, 4):
            parts = under_lock(Path(work) / f"group-{group}.db", events, group, resolver)
            total = sum(parts.values())
            shown = "  ".join(f"{key} {value:5.1f}" for key, value in parts.items())
            print(f"write lock held, groups of {group}: {shown}  = {total:5.1f} us an event")


if __name__ == "__main__":
    main()
