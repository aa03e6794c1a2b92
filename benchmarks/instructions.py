"""The receiver's work an event in instructions, counted by valgrind's callgrind: the same figure
on a fast machine and a slow one, or on one whose speed moves within the hour, where the timed
benchmarks' figures move with it.

    python benchmarks/instructions.py [--events 2000] [--parts worker writer]

- ``worker``: what an HTTP worker does with an event of benchmarks/ingest.py before the writer
  has it: parsing, the verdict, reading it, pickling it (requests of 100), and the writer's
  unpickling of it.
- ``writer``: the writer taking the events in groups of 400 on SQLite (``synchronous=FULL``, as
  ``olbridge serve`` commits), SQLite's own work included, and each group's results pickled (as
  the writer answers) and unpickled (as the worker reads them); the system calls (the syncs) are
  not instructions of the process and are not counted.

Each part runs twice under callgrind, with ``--events`` events and with a fifth of them (after
the same preparation and the same warm-up; with the default 2,000 and 400, whole groups and
requests both times), and the difference is divided by the events between:
what starting Python, importing and preparing cost falls out. The collector runs as in ``olbridge
serve``'s processes (:data:`bridge.receiver.server.GC_YOUNG`, what is in hand frozen), so that it
costs each event what it costs there. ``PYTHONHASHSEED`` is fixed, so a
run gives the same count to within a quarter of a percent. Needs valgrind (Debian:
``apt-get install valgrind``); each part takes a few minutes under it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.ingest import event

PARTS = ("worker", "writer")
WARM = 800  # events taken before the counted ones: the memos and the catalog's datasets warm
REQUEST = 100  # events a request hands over, as the ingest benchmark's batches
GROUP = 400  # events a group the writer takes
_COLLECTED = re.compile(r"Collected : (\d+)")


def bodies(count: int) -> list[bytes]:
    return [json.dumps(event(n), separators=(",", ":")).encode() for n in range(count)]


def run_part(part: str, total: int, counted: int) -> None:
    """One part's work on ``counted`` events, after the same preparation of ``total`` (and the
    warm-up) whatever ``counted`` is."""
    from bridge.catalog import Catalog
    from bridge.jsontext import parse_json
    from bridge.mapping import Resolver
    from bridge.model import IncomingEvent
    from bridge.receiver.imports import catalog_intake
    from bridge.receiver.server import GC_YOUNG
    from bridge.receiver.writer import CatalogWriter

    def as_serve() -> None:
        """The collector as in olbridge serve's processes: the young generation's threshold, and
        what is in hand already (the bodies, the prepared events) kept out of its walks, so that
        a run of more events does not pay more a collection."""
        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_YOUNG, 20, 50)

    resolver = Resolver.load()
    texts = bodies(WARM + total)
    with tempfile.TemporaryDirectory(prefix="olbridge-instructions-") as work:
        with Catalog(Path(work) / "verdicts.db") as verdicts:
            intake = catalog_intake(verdicts, resolver)
            if part == "worker":
                for text in texts[:WARM]:
                    intake.prepare(parse_json(text))
                as_serve()
                events = [intake.prepare(parse_json(text)) for text in texts[WARM : WARM + counted]]
                messages = [
                    pickle.dumps(events[at : at + REQUEST], protocol=pickle.HIGHEST_PROTOCOL)
                    for at in range(0, len(events), REQUEST)
                ]
                for message in messages:
                    pickle.loads(message)
                return
            prepared = [intake.prepare(parse_json(text)) for text in texts]
        taken = [item for item in prepared if isinstance(item, IncomingEvent)]
        assert len(taken) == len(prepared), "every benchmark event is accepted"
        as_serve()
        writer = CatalogWriter(Path(work) / "catalog.db", resolver)
        try:
            for start in range(0, WARM + counted, GROUP):
                results = writer.write(taken[start : min(start + GROUP, WARM + counted)])
                pickle.loads(pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL))  # the answer, both ends
        finally:
            writer.close()


def collected(stderr: str) -> int:
    """The instructions callgrind says it collected, from its report on stderr."""
    found = _COLLECTED.findall(stderr)
    if not found:
        raise ValueError("callgrind's report has no 'Collected :' line")
    return int(found[-1])


def count(part: str, total: int, counted: int, folder: Path) -> int:
    """The instructions of a run of this file's ``--child`` under callgrind."""
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={folder / f'{part}-{counted}.out'}",
        sys.executable,
        __file__,
        "--child",
        part,
        "--events",
        str(total),
        "--counted",
        str(counted),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    if done.returncode != 0:
        raise SystemExit(f"Error: the {part} run under callgrind failed:\n{done.stderr[-2000:]}")
    return collected(done.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2_000, help="events of the larger run (the smaller: a fifth)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--child", choices=PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--counted", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.events < 10:
        parser.error("--events must be at least 10")
    if args.child is not None:
        before = gc.get_threshold()
        try:
            run_part(args.child, args.events, args.counted if args.counted is not None else args.events)
        finally:  # as it was (the tests run the parts in their own process)
            gc.set_threshold(*before)
            gc.unfreeze()
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("Error: valgrind is not installed (Debian: apt-get install valgrind)")
    small = args.events // 5
    print(f"instructions an event (callgrind; runs of {args.events:,} and {small:,} events, the difference):")
    with tempfile.TemporaryDirectory(prefix="olbridge-callgrind-") as folder:
        for part in args.parts:
            larger = count(part, args.events, args.events, Path(folder))
            smaller = count(part, args.events, small, Path(folder))
            print(f"  {part:8} {(larger - smaller) / (args.events - small):>12,.0f}", flush=True)


if __name__ == "__main__":
    main()
