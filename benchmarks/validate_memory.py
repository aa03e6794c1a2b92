"""``olbridge validate``'s peak memory against the size of the file: flat, as it reads a stream.

Writes OpenLineage events (about 2.8 KB each, with schema and column-lineage facets, as a large
producer's are) as JSON lines and as one JSON array, at two sizes, and runs the real CLI on each
in a child process of its own, which reports its peak RSS (``ru_maxrss``) as it exits:

    .venv/bin/python benchmarks/validate_memory.py [--events 20000 80000]

Peak memory should be the same at both sizes (within a few MB): what one event needs, not what
the file holds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
PRODUCER = "https://github.com/example/producer/tree/1.0"
SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACET = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
COLUMNS = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"
# the child: the CLI in a process of its own, its peak RSS said last on stderr whatever its exit
CHILD = """
import atexit, resource, sys
atexit.register(lambda: print(f"peak-rss-kib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr))
from bridge.cli import main
sys.argv = ["olbridge", "validate", *sys.argv[1:]]
main()
"""


def event(i: int) -> dict[str, Any]:
    fields = [{"name": f"column_{c}", "type": "VARCHAR"} for c in range(12)]
    lineage = {
        f"column_{c}": {"inputFields": [{"namespace": "s3://lake", "name": f"raw/t{i % 97}", "field": f"c{c}"}]}
        for c in range(12)
    }
    return {
        "eventType": "COMPLETE",
        "eventTime": "2025-03-01T08:00:00Z",
        "producer": PRODUCER,
        "schemaURL": SCHEMA,
        "run": {"runId": str(uuid.UUID(int=(0x0194A1B2 << 96) | (7 << 76) | (2 << 62) | i))},
        "job": {"namespace": "spark", "name": f"job_{i % 500}"},
        "inputs": [{"namespace": "s3://lake", "name": f"raw/t{i % 97}"}],
        "outputs": [
            {
                "namespace": "s3://lake",
                "name": f"mart/t{i % 89}",
                "facets": {
                    "schema": {"_producer": PRODUCER, "_schemaURL": FACET, "fields": fields},
                    "columnLineage": {"_producer": PRODUCER, "_schemaURL": COLUMNS, "fields": lineage},
                },
            }
        ],
    }


def write(path: Path, count: int, *, array: bool) -> None:
    with path.open("w") as out:
        out.write("[\n" if array else "")
        for i in range(count):
            text = json.dumps(event(i))
            out.write((",\n" if array and i else "") + text + ("" if array else "\n"))
        out.write("\n]\n" if array else "")


def measure(path: Path) -> tuple[float, float, int]:
    """Peak RSS (MiB), seconds, and the exit status of ``olbridge validate PATH``."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True)
    seconds = time.perf_counter() - began
    last = done.stderr.strip().splitlines()[-1]
    if not last.startswith("peak-rss-kib "):
        raise SystemExit(f"the child said no peak: {done.stderr[-2000:]}")
    return int(last.split()[1]) / 1024, seconds, done.returncode


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs=2, default=[20_000, 80_000], help="The two file sizes, in events.")
    args = parser.parse_args(argv)
    print(f"{'format':<8} {'events':>9} {'file MiB':>9} {'peak RSS MiB':>13} {'s':>7}  exit")
    with tempfile.TemporaryDirectory() as folder:
        for array in (False, True):
            for count in args.events:
                path = Path(folder) / f"events-{count}.{'json' if array else 'ndjson'}"
                write(path, count, array=array)
                peak, seconds, status = measure(path)
                size = path.stat().st_size / MIB
                kind = "array" if array else "ndjson"
                print(f"{kind:<8} {count:>9,} {size:>9.1f} {peak:>13.1f} {seconds:>7.1f}  {status}")
                path.unlink()


if __name__ == "__main__":
    main()
